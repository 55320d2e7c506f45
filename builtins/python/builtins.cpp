// The builtins of (purple python): Purple -> Python. Each one holds the GIL only while it is in
// Python (InPython); Python references never outlive that scope unless a py-object owns them.
// Derived forms (py-with, py-iterator, py-for-each, py-dataset ...) are in python.purple.
#include "builtins/python/bridge.hpp"
#include "interp/language/printer.hpp"
#include "interp/limits/sandbox.hpp"

namespace purple::python {

namespace {

// A script's own way into Python: refused when the interpreter may not touch the process
// (Limits::allowProcess), since Python runs with all of the process's rights. Calling a Python
// object the host handed in (object.cpp) stays allowed: the host chose to expose it.
Interp& refuseInSandbox(Interp& in) {
  if (!in.limits.allowProcess)
    throwError("error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  return in;
}
struct ScriptPython : InPython {
  explicit ScriptPython(Interp& in) : InPython(refuseInSandbox(in)) {}
};

// The Python object for a Purple argument: a py-object's own, any other value converted.
Ref pyValue(Interp& in, Value v) {
  if (PyObject* o = objectOf(v)) return Ref::borrow(o);
  return toPython(in, v);
}

std::string nameArg(Value v, const char* who, int index) {
  if (isString(v)) return std::string(stringView(v));
  if (v.is(Kind::Symbol)) return std::string(symbolName(v));
  throwTypeError(who, index, "a string or a symbol", v);
}

// obj.a.b.c: every step in Python, so a converting handle's intermediate objects are never
// converted.
Ref attributePath(PyObject* obj, const std::string& path, const char* who) {
  Ref current = Ref::borrow(obj);
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    Ref next(PyObject_GetAttrString(current.get(), part.c_str()));
    if (!next) throwPythonError(who);
    current = std::move(next);
    if (dot == std::string::npos) return current;
    start = dot + 1;
  }
}

std::string utf8(PyObject* s) {
  Py_ssize_t n = 0;
  const char* p = PyUnicode_AsUTF8AndSize(s, &n);
  if (!p) throwPythonError("python");
  return std::string(p, size_t(n));
}

Value stringResult(Ref s, const char* who) {
  if (!s) throwPythonError(who);
  return makeString(utf8(s.get()));
}

// Python code written inside a Purple string is usually indented like the Purple around it.
std::string dedented(std::string_view code) {
  Ref textwrap = importModule("textwrap");
  Ref r(PyObject_CallMethod(textwrap.get(), "dedent", "s#", code.data(), Py_ssize_t(code.size())));
  if (!r) throwPythonError("python");
  return utf8(r.get());
}

// :name value ... after the code of py-eval / py-exec, as a dict.
Ref bindings(Interp& in, const Value* argv, int argc, const char* who) {
  Ref dict(PyDict_New());
  for (int i = 0; i < argc; i += 2) {
    if (!isKeyword(argv[i]) || i + 1 >= argc)
      throwError("error", std::string(who) + ": after the code come :name value pairs, got",
                 listFromArray(&argv[i], 1));
    Ref v = pyValue(in, argv[i + 1]);
    if (PyDict_SetItemString(dict.get(), keywordArgumentName(argv[i]).c_str(), v.get()) < 0) throwPythonError(who);
  }
  return dict;
}

Value evalOrExec(Interp& in, Value* argv, int argc, PrimitiveInfo* info, bool exec) {
  checkArity(info, argc);
  const char* who = exec ? "py-exec" : "py-eval";
  if (!isString(argv[0])) throwTypeError(who, 1, "a string of Python code", argv[0]);
  ScriptPython py(in);
  std::string code = dedented(stringView(argv[0]));
  Ref names = bindings(in, argv + 1, argc - 1, who);
  PyObject* main = mainDict();
  Ref code_(Py_CompileString(code.c_str(), exec ? "<py-exec>" : "<py-eval>", exec ? Py_file_input : Py_eval_input));
  if (!code_) throwPythonError(who);
  if (exec) {
    if (PyDict_Update(main, names.get()) < 0) throwPythonError(who);
    Ref r(PyEval_EvalCode(code_.get(), main, main));
    if (!r) throwPythonError(who);
    return Value::unspecified();
  }
  // The names are bound in a copy of __main__'s namespace (not as locals: comprehensions and
  // lambdas in the expression see globals only).
  Ref scope;
  if (PyDict_Size(names.get()) > 0) {
    scope = Ref(PyDict_Copy(main));
    if (!scope || PyDict_Update(scope.get(), names.get()) < 0) throwPythonError(who);
  }
  PyObject* globals = scope ? scope.get() : main;
  return resultOf(in, Ref(PyEval_EvalCode(code_.get(), globals, globals)), Value::f());
}

Value primPyCall(Interp& in, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  ScriptPython py(in);
  Ref f = pyValue(in, argv[0]);
  if (!PyCallable_Check(f.get())) throwTypeError("py-call", 1, "a callable Python object", argv[0]);
  return callPython(in, f.get(), argv + 1, argc - 1, argv[0], "py-call");
}

Value primPyCallMethod(Interp& in, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  std::string name = nameArg(argv[1], "py-call-method", 2);
  ScriptPython py(in);
  Ref obj = pyValue(in, argv[0]);
  Ref method = attributePath(obj.get(), name, "py-call-method");
  return callPython(in, method.get(), argv + 2, argc - 2, argv[0], "py-call-method");
}

Value primPyEval(Interp& in, Value* argv, int argc, PrimitiveInfo* info) { return evalOrExec(in, argv, argc, info, false); }
Value primPyExec(Interp& in, Value* argv, int argc, PrimitiveInfo* info) { return evalOrExec(in, argv, argc, info, true); }

// Calls __exit__ for an exception leaving a py-with body; true when it suppresses it.
bool exitWithException(Interp& in, Value manager, Value exitFn) {
  ScriptPython py(in);
  setPythonErrorFromCurrent(&in);
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  Ref t(type), v(value), trace(tb);
  PyObject* none = Py_None;
  Ref r(PyObject_CallFunctionObjArgs(objectOf(exitFn), objectOf(manager), t.get() ? t.get() : none,
                                     v.get() ? v.get() : none, trace.get() ? trace.get() : none, nullptr));
  if (!r) throwPythonError("py-with");   // an exception raised by __exit__ replaces the body's
  int truth = PyObject_IsTrue(r.get());
  if (truth < 0) throwPythonError("py-with");
  return truth == 1;
}

void exitNormally(Interp& in, Value manager, Value exitFn) {
  ScriptPython py(in);
  Ref r(PyObject_CallFunctionObjArgs(objectOf(exitFn), objectOf(manager), Py_None, Py_None, Py_None, nullptr));
  if (!r) throwPythonError("py-with");
}

}  // namespace

void registerPython(Registry& r) {
  r.def("py-import", "(name :key raw)",
        [](Interp& in, std::string name, bool raw) {
          ScriptPython py(in);
          Ref m(PyImport_ImportModule(name.c_str()));
          if (!m) throwPythonError("py-import");
          return wrapObject(m.release(), raw);
        },
        "The Python module NAME (\"numpy\", \"torch.nn.functional\"), imported if needed, as a py-object. Attributes, "
        "call results and items obtained from it convert to Purple values automatically; with :raw #t they stay "
        "Python objects (convert one with py->purple).");
  sandbox(r, "py-import", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");

  r.def("py-attr", "(obj name)",
        [](Interp& in, Value obj, Value name) {
          std::string path = nameArg(name, "py-attr", 2);
          ScriptPython py(in);
          Ref o = pyValue(in, obj);
          return resultOf(in, attributePath(o.get(), path, "py-attr"), obj);
        },
        "The attribute NAME (a string or symbol) of the Python object OBJ; a dotted NAME (\"nn.functional.relu\") "
        "follows several attributes in Python. OBJ may also be a Purple value, converted first.");
  sandbox(r, "py-attr", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py-set-attr!", "(obj name value)",
        [](Interp& in, Value obj, Value name, Value value) {
          std::string attr = nameArg(name, "py-set-attr!", 2);
          ScriptPython py(in);
          Ref o = pyValue(in, obj);
          Ref v = pyValue(in, value);
          if (PyObject_SetAttrString(o.get(), attr.c_str(), v.get()) < 0) throwPythonError("py-set-attr!");
        },
        "Sets the attribute NAME of the Python object OBJ to VALUE (converted to Python).");
  sandbox(r, "py-set-attr!", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py-has-attr?", "(obj name)",
        [](Interp& in, Value obj, Value name) {
          std::string attr = nameArg(name, "py-has-attr?", 2);
          ScriptPython py(in);
          Ref o = pyValue(in, obj);
          return PyObject_HasAttrString(o.get(), attr.c_str()) == 1;
        },
        "True if the Python object OBJ has the attribute NAME.");
  sandbox(r, "py-has-attr?", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");

  r.defRaw("py-call", "(f . args)", primPyCall,
           "Calls the Python callable F with ARGS converted to Python; a keyword and the value after it are a "
           "keyword argument, with - as _ (:num-classes 10 is num_classes=10). A callable py-object can also be "
           "applied directly: (f x :dim 1).");
  sandboxConditional(r, "py-call", "Python: calls a Python object",
                   "allowed on a py-object the host handed in (the host chose to expose it); a sandboxed script cannot make one");
  r.defRaw("py-call-method", "(obj name . args)", primPyCallMethod,
           "Calls the method NAME (a string or symbol; dotted names follow attributes) of the Python object OBJ with "
           "ARGS, as py-call does.");
  sandboxConditional(r, "py-call-method", "Python: calls a Python method",
                   "as py-call");

  r.def("py-ref", "(obj key)",
        [](Interp& in, Value obj, Value key) {
          ScriptPython py(in);
          Ref o = pyValue(in, obj);
          Ref k = pyValue(in, key);
          return resultOf(in, Ref(PyObject_GetItem(o.get(), k.get())), obj);
        },
        "OBJ[KEY] in Python. KEY is converted: a vector is a tuple (several indices, as in a[0, 1]), and "
        "(py-slice start stop) a slice.");
  sandbox(r, "py-ref", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py-set-ref!", "(obj key value)",
        [](Interp& in, Value obj, Value key, Value value) {
          ScriptPython py(in);
          Ref o = pyValue(in, obj);
          Ref k = pyValue(in, key);
          Ref v = pyValue(in, value);
          if (PyObject_SetItem(o.get(), k.get(), v.get()) < 0) throwPythonError("py-set-ref!");
        },
        "OBJ[KEY] = VALUE in Python.");
  sandbox(r, "py-set-ref!", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py-delete-ref!", "(obj key)",
        [](Interp& in, Value obj, Value key) {
          ScriptPython py(in);
          Ref o = pyValue(in, obj);
          Ref k = pyValue(in, key);
          if (PyObject_DelItem(o.get(), k.get()) < 0) throwPythonError("py-delete-ref!");
        },
        "del OBJ[KEY] in Python.");
  sandbox(r, "py-delete-ref!", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py-slice", "(start stop :optional step)",
        [](Interp& in, Value start, Value stop, Value step) {
          ScriptPython py(in);
          auto part = [&](Value v) { return v.isFalse() || v.isMissing() ? Ref::borrow(Py_None) : toPython(in, v); };
          Ref a = part(start), b = part(stop), c = part(step);
          Ref s(PySlice_New(a.get(), b.get(), c.get()));
          if (!s) throwPythonError("py-slice");
          return wrapObject(s.release(), true);
        },
        "A Python slice START:STOP:STEP for py-ref; #f leaves a bound out, as an empty one does in Python.");
  sandbox(r, "py-slice", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py-len", "(obj)",
        [](Interp& in, Value obj) {
          ScriptPython py(in);
          Ref o = pyValue(in, obj);
          Py_ssize_t n = PyObject_Length(o.get());
          if (n < 0) throwPythonError("py-len");
          return int64_t(n);
        },
        "len(OBJ) in Python.");
  sandbox(r, "py-len", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py-contains?", "(obj item)",
        [](Interp& in, Value obj, Value item) {
          ScriptPython py(in);
          Ref o = pyValue(in, obj);
          Ref x = pyValue(in, item);
          int found = PySequence_Contains(o.get(), x.get());
          if (found < 0) throwPythonError("py-contains?");
          return found == 1;
        },
        "ITEM in OBJ, in Python.");
  sandbox(r, "py-contains?", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py-list", "(obj)",
        [](Interp& in, Value obj) {
          ScriptPython py(in);
          Ref o = pyValue(in, obj);
          Ref it(PyObject_GetIter(o.get()));
          if (!it) throwPythonError("py-list");
          Value head = Value::nil(), tail = Value::nil();
          bool raw = isRawObject(obj);
          while (Ref item{PyIter_Next(it.get())}) {
            Value cell = cons(fromPython(in, item.get(), raw), Value::nil());
            if (head.isNil()) head = cell;
            else tail.as<Pair>()->cdr = cell;
            tail = cell;
          }
          if (PyErr_Occurred()) throwPythonError("py-list");
          return head;
        },
        "The items of the Python iterable OBJ (a generator, a range, model.parameters() ...) as a Purple list.");
  sandbox(r, "py-list", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("%py-iter", "(obj)",
        [](Interp& in, Value obj) {
          ScriptPython py(in);
          Ref o = pyValue(in, obj);
          Ref it(PyObject_GetIter(o.get()));
          if (!it) throwPythonError("py-iterator");
          return wrapObject(it.release(), true);
        },
        "Internal: iter(OBJ) as a raw py-object.");
  sandbox(r, "%py-iter", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("%py-next", "(iterator source)",
        [](Interp& in, Value iterator, Value source) {
          PyObject* it = objectOf(iterator);
          if (!it) throwTypeError("py-iterator", 1, "a Python iterator", iterator);
          ScriptPython py(in);
          Ref item(PyIter_Next(it));
          if (!item) {
            if (PyErr_Occurred()) throwPythonError("py-iterator");
            return Value::eof();
          }
          return fromPython(in, item.get(), isRawObject(source));
        },
        "Internal: the next item of a Python iterator converted as SOURCE's results are, or the eof object.");
  sandbox(r, "%py-next", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");

  r.defRaw("py-eval", "(code . bindings)", primPyEval,
           "The value of the Python expression CODE (a string), evaluated in __main__'s namespace. BINDINGS are "
           ":name value pairs bound as Python names for the expression: (py-eval \"x @ w\" :x x :w w).");
  sandbox(r, "py-eval", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.defRaw("py-exec", "(code . bindings)", primPyExec,
           "Runs the Python statements CODE (a string; a common indentation is removed) in __main__'s namespace, "
           "after binding BINDINGS (:name value pairs) there. Names it defines stay for later py-eval / py-exec.");
  sandbox(r, "py-exec", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("%py-with", "(manager proc)",
        [](Interp& in, Value manager, Procedure proc) -> Value {
          Value mgr, exitFn, entered;
          {
            ScriptPython py(in);
            Ref m = pyValue(in, manager);
            PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(m.get()));
            Ref enter(PyObject_GetAttrString(type, "__enter__"));
            Ref exit(enter ? PyObject_GetAttrString(type, "__exit__") : nullptr);
            if (!enter || !exit) {
              PyErr_Clear();
              throwTypeError("py-with", 1, "a Python context manager (with __enter__ and __exit__)", manager);
            }
            Ref value(PyObject_CallOneArg(enter.get(), m.get()));
            if (!value) throwPythonError("py-with");
            entered = fromPython(in, value.get(), isRawObject(manager));
            mgr = wrapObject(m.release(), true);
            exitFn = wrapObject(exit.release(), true);
          }
          Value result;
          try {
            result = in.apply(proc.value, &entered, 1);
          } catch (const PurpleInterrupt&) {
            exitNormally(in, mgr, exitFn);
            throw;
          } catch (const PurpleException&) {
            if (exitWithException(in, mgr, exitFn)) return Value::unspecified();
            throw;
          } catch (...) {
            exitNormally(in, mgr, exitFn);
            throw;
          }
          exitNormally(in, mgr, exitFn);
          return result;
        },
        "Internal: runs (PROC value) inside the Python context manager MANAGER (py-with expands to it).");
  sandbox(r, "%py-with", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");

  r.def("py-object", "(x)",
        [](Interp& in, Value x) {
          if (isPyObject(x)) {
            if (isRawObject(x)) return x;
            ScriptPython py(in);
            return wrapObject(Ref::borrow(objectOf(x)).release(), true);
          }
          ScriptPython py(in);
          return wrapObject(toPython(in, x).release(), true);
        },
        "X as a raw Python object: a Purple value is converted (a list to a Python list, a vector to a tuple, a "
        "hash table to a dict ...) but the result stays a Python object, and so do the results obtained from it.");
  sandbox(r, "py-object", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py->purple", "(x)",
        [](Interp& in, Value x) {
          PyObject* o = objectOf(x);
          if (!o) return x;
          ScriptPython py(in);
          return fromPython(in, o, false);
        },
        "The Purple value of the Python object X, converted as results of converting handles are (lists, tuples, "
        "dicts, numbers, strings, tensors ...); other objects stay py-objects. X not a py-object is returned as is.");
  sandbox(r, "py->purple", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py-object?", "(x)", [](Value x) { return isPyObject(x); }, "True if X is a Python object (a py-object).");

  r.def("py-equal?", "(a b)",
        [](Interp& in, Value a, Value b) {
          ScriptPython py(in);
          Ref x = pyValue(in, a), y = pyValue(in, b);
          int eq = PyObject_RichCompareBool(x.get(), y.get(), Py_EQ);
          if (eq < 0) throwPythonError("py-equal?");
          return eq == 1;
        },
        "A == B in Python (bool() of the result); either may be a Purple value, converted first.");
  sandbox(r, "py-equal?", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py-is?", "(a b)",
        [](Interp& in, Value a, Value b) {
          ScriptPython py(in);
          Ref x = pyValue(in, a), y = pyValue(in, b);
          return x.get() == y.get();
        },
        "A is B in Python: the same Python object.");
  sandbox(r, "py-is?", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py-repr", "(x)",
        [](Interp& in, Value x) {
          ScriptPython py(in);
          Ref o = pyValue(in, x);
          return stringResult(Ref(PyObject_Repr(o.get())), "py-repr");
        },
        "repr(X) in Python, a string.");
  sandbox(r, "py-repr", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py-str", "(x)",
        [](Interp& in, Value x) {
          ScriptPython py(in);
          Ref o = pyValue(in, x);
          return stringResult(Ref(PyObject_Str(o.get())), "py-str");
        },
        "str(X) in Python, a string.");
  sandbox(r, "py-str", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py-type-name", "(x)",
        [](Interp& in, Value x) {
          ScriptPython py(in);
          Ref o = pyValue(in, x);
          return makeString(pythonTypeName(reinterpret_cast<PyObject*>(Py_TYPE(o.get()))));
        },
        "The name of X's Python type, with its module unless builtin: \"int\", \"numpy.ndarray\", "
        "\"torch.nn.modules.linear.Linear\".");
  sandbox(r, "py-type-name", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py-isinstance?", "(x class)",
        [](Interp& in, Value x, Value cls) {
          ScriptPython py(in);
          Ref o = pyValue(in, x), c = pyValue(in, cls);
          int r = PyObject_IsInstance(o.get(), c.get());
          if (r < 0) throwPythonError("py-isinstance?");
          return r == 1;
        },
        "isinstance(X, CLASS) in Python.");
  sandbox(r, "py-isinstance?", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py-callable?", "(x)",
        [](Interp& in, Value x) {
          ScriptPython py(in);
          Ref o = pyValue(in, x);
          return PyCallable_Check(o.get()) == 1;
        },
        "True if X is callable in Python.");
  sandbox(r, "py-callable?", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py-dir", "(x)",
        [](Interp& in, Value x) {
          ScriptPython py(in);
          Ref o = pyValue(in, x);
          return resultOf(in, Ref(PyObject_Dir(o.get())), Value::f());
        },
        "dir(X) in Python: the list of its attribute names.");
  sandbox(r, "py-dir", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");

  r.def("tensor->numpy", "(t)",
        [](Interp& in, const at::Tensor& t) {
          ScriptPython py(in);
          return wrapObject(numpyFromTensor(t).release(), false);
        },
        "A numpy array sharing T's memory (T must be on the CPU; autograd does not follow into numpy).");
  sandbox(r, "tensor->numpy", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("numpy->tensor", "(array)",
        [](Interp& in, Value array) -> at::Tensor {
          PyObject* a = objectOf(array);
          if (!a) throwTypeError("numpy->tensor", 1, "a numpy array (a py-object)", array);
          ScriptPython py(in);
          return tensorFromNumpy(a);
        },
        "A tensor sharing the memory of the numpy ARRAY (torch.from_numpy).");
  sandbox(r, "numpy->tensor", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("py-tensors-shared?", "()",
        [](Interp& in) {
          ScriptPython py(in);
          return tensorsShared();
        },
        "True when tensors cross to Python and back as the same at::Tensor (Python's torch runs on Purple's "
        "LibTorch): same storage and autograd graph. Otherwise they cross through DLPack (same memory, no autograd).");
  sandbox(r, "py-tensors-shared?", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");

  r.def("python-error?", "(obj)", [](Value e) { return pythonExceptionOf(e) != nullptr; },
        "True if OBJ is a Purple error made from a Python exception.");
  r.def("python-error-exception", "(err)",
        [](Interp& in, Value e) {
          PyObject* exc = pythonExceptionOf(e);
          if (!exc) throwTypeError("python-error-exception", 1, "an error from Python", e);
          ScriptPython py(in);
          return wrapObject(Ref::borrow(exc).release(), false);
        },
        "The Python exception object behind the error ERR.");
  sandbox(r, "python-error-exception", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("python-error-type", "(err)",
        [](Interp& in, Value e) {
          PyObject* exc = pythonExceptionOf(e);
          if (!exc) throwTypeError("python-error-type", 1, "an error from Python", e);
          ScriptPython py(in);
          return makeString(pythonTypeName(reinterpret_cast<PyObject*>(Py_TYPE(exc))));
        },
        "The name of the Python exception's type behind ERR: \"ValueError\", \"torch.cuda.OutOfMemoryError\" ...");
  sandbox(r, "python-error-type", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("python-error-traceback", "(err)",
        [](Interp& in, Value e) {
          PyObject* exc = pythonExceptionOf(e);
          if (!exc) throwTypeError("python-error-traceback", 1, "an error from Python", e);
          ScriptPython py(in);
          Ref tb(PyException_GetTraceback(exc));
          return makeString(pythonTraceback(tb.get()));
        },
        "The Python traceback of the exception behind ERR, as Python prints it (\"\" when it has none).");
  sandbox(r, "python-error-traceback", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");

  r.def("dataset->py", "(dataset)",
        [](Interp& in, Value ds) {
          ScriptPython py(in);
          Ref value = wrapPurpleValue(in, ds);
          Ref adapter = bridgeAttr("dataset_adapter");
          Ref r(PyObject_CallOneArg(adapter.get(), value.get()));
          if (!r) throwPythonError("dataset->py");
          return wrapObject(r.release(), false);
        },
        "A torch.utils.data.Dataset whose items are the samples of the Purple DATASET (anything dataset-ref "
        "accepts), for torch.utils.data.DataLoader; a sample's list of fields becomes a tuple.");
  sandbox(r, "dataset->py", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
  r.def("python-version", "()",
        [](Interp& in) {
          ScriptPython py(in);
          return makeString(Py_GetVersion());
        },
        "The version of the Python running inside Purple, as sys.version gives it.");
  sandbox(r, "python-version", Needs::Process, "Python: runs with all of the process rights",
        "error", "python: Python is disabled in this interpreter (its limits forbid process access)");
}

}  // namespace purple::python
