// Conversions between Purple values and Python objects (docs/python.md has the table).
//
// Automatic both ways where the mapping is one to one: exact integers (bignums too) and int,
// flonums and float, exact rationals and fractions.Fraction, complex numbers, strings and str,
// symbols and purple.Symbol (a str), bytevectors and bytes, booleans, the unspecified value and
// None, lists and list, vectors and tuple, hash tables and dict, tensors and torch.Tensor (the
// same tensor), procedures and purple.Procedure. Python objects with no Purple counterpart become
// py-objects; Purple values with no Python counterpart become purple.Value. A pair whose cdr is
// not a list is a 2-tuple (so an alist becomes a list of pairs, which dict() accepts).
#include "builtins/python/bridge.hpp"
#include "builtins/core/hashtable.hpp"
#include "interp/language/numbers.hpp"
#include "interp/language/printer.hpp"

namespace purple::python {

namespace {

Ref checked(PyObject* p) {
  if (!p) throwPythonError("python");
  return Ref(p);
}

void checkDepth(int depth) {
  if (depth > 100000 || stackNearlyFull())
    throwError("error", "python: data nested too deeply (or cyclic) to convert between Purple and Python");
}

// A module from sys.modules, or nullptr when nothing imported it (borrowed).
PyObject* loadedModule(const char* name) {
  PyObject* modules = PyImport_GetModuleDict();
  return modules ? PyDict_GetItemString(modules, name) : nullptr;
}

// Cached classes of the bridge module (strong references kept for the process).
PyObject* bridgeClass(const char* name, PyObject** cache) {
  if (!*cache) *cache = bridgeAttr(name).release();
  return *cache;
}
PyObject* gSymbolClass = nullptr;
PyObject* gPairClass = nullptr;

Ref stringToPython(std::string_view s) { return checked(PyUnicode_FromStringAndSize(s.data(), Py_ssize_t(s.size()))); }

Ref toPythonAt(Interp& in, Value v, int depth);

Ref listToPython(Interp& in, Value v, int depth) {
  size_t n = listLength(v);
  Ref list = checked(PyList_New(Py_ssize_t(n)));
  size_t i = 0;
  for (Value p = v; isPair(p); p = cdr(p), i++) PyList_SET_ITEM(list.get(), Py_ssize_t(i), toPythonAt(in, car(p), depth + 1).release());
  return list;
}

Ref hashTableToPython(Interp& in, Value v, int depth) {
  auto* h = v.as<HashTable>();
  Ref dict = checked(PyDict_New());
  for (uint32_t i = 0; i < h->entryUsed; i++) {
    Value key = h->entries[2 * i];
    if (key.isUnbound()) continue;
    Ref k = toPythonAt(in, key, depth + 1);
    Ref val = toPythonAt(in, h->entries[2 * i + 1], depth + 1);
    if (PyDict_SetItem(dict.get(), k.get(), val.get()) < 0) throwPythonError("python");
  }
  return dict;
}

Ref toPythonAt(Interp& in, Value v, int depth) {
  checkDepth(depth);
  if (v.isFixnum()) return checked(PyLong_FromLongLong(v.fixnum()));
  if (v.isBool()) return Ref::borrow(v.isTrue() ? Py_True : Py_False);
  if (v.isUnspecified() || v.isMissing()) return Ref::borrow(Py_None);
  if (v.isNil()) return checked(PyList_New(0));
  if (v.isChar()) {
    std::string s;
    appendUtf8(s, v.character());
    return stringToPython(s);
  }
  if (!v.isObject()) return wrapPurpleValue(in, v);
  switch (v.obj()->kind) {
    case Kind::Flonum: return checked(PyFloat_FromDouble(flonumValue(v)));
    case Kind::Bignum: {
      std::string hex = numberToString(v, 16);
      return checked(PyLong_FromString(hex.c_str(), nullptr, 16));
    }
    case Kind::Ratnum: {
      Ref fraction = checked(PyObject_GetAttrString(importModule("fractions").get(), "Fraction"));
      Ref num = toPythonAt(in, v.as<Ratnum>()->num, depth + 1);
      Ref den = toPythonAt(in, v.as<Ratnum>()->den, depth + 1);
      return checked(PyObject_CallFunctionObjArgs(fraction.get(), num.get(), den.get(), nullptr));
    }
    case Kind::Compnum:
      return checked(PyComplex_FromDoubles(toDouble(v.as<Compnum>()->re), toDouble(v.as<Compnum>()->im)));
    case Kind::String: return stringToPython(stringView(v));
    case Kind::Symbol: {
      if (isKeyword(v)) return wrapPurpleValue(in, v);
      Ref name = stringToPython(symbolName(v));
      return checked(PyObject_CallOneArg(bridgeClass("Symbol", &gSymbolClass), name.get()));
    }
    case Kind::Bytevector:
      return checked(PyBytes_FromStringAndSize(reinterpret_cast<const char*>(v.as<Bytevector>()->bytes), Py_ssize_t(v.obj()->extra)));
    case Kind::Pair: {
      size_t n = listLength(v);
      if (n != SIZE_MAX) return listToPython(in, v, depth);
      if (!isPair(cdr(v))) {
        Ref a = toPythonAt(in, car(v), depth + 1);
        Ref b = toPythonAt(in, cdr(v), depth + 1);
        return checked(PyTuple_Pack(2, a.get(), b.get()));
      }
      return wrapPurpleValue(in, v);
    }
    case Kind::Vector: {
      auto* vec = v.as<Vector>();
      Ref t = checked(PyTuple_New(Py_ssize_t(vec->extra)));
      for (uint32_t i = 0; i < vec->extra; i++) PyTuple_SET_ITEM(t.get(), Py_ssize_t(i), toPythonAt(in, vec->items[i], depth + 1).release());
      return t;
    }
    case Kind::HashTable: return hashTableToPython(in, v, depth);
    case Kind::Tensor: {
      const at::Tensor& t = tensorOf(v);
      if (!t.defined()) throwError("tensor-error", "python: a tensor that was already freed cannot go to Python");
      return tensorToPython(t);
    }
    case Kind::Foreign:
      if (PyObject* o = objectOf(v)) return Ref::borrow(o);
      return wrapPurpleValue(in, v);
    case Kind::Module: {
      Ref proc = wrapPurpleValue(in, v);
      Ref adapter = bridgeAttr("module_adapter");
      return checked(PyObject_CallOneArg(adapter.get(), proc.get()));
    }
    default: return wrapPurpleValue(in, v);
  }
}

Value integerFromPython(PyObject* o) {
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (!overflow) {
    if (x == -1 && PyErr_Occurred()) throwPythonError("python");
    return makeInteger(int64_t(x));
  }
  Ref hex = checked(PyObject_Format(o, Ref(PyUnicode_FromString("x")).get()));
  const char* s = PyUnicode_AsUTF8(hex.get());
  if (!s) throwPythonError("python");
  auto n = parseNumber(s, 16);
  if (!n) throwError("error", std::string("python: cannot convert the integer ") + s);
  return *n;
}

Value fromPythonAt(Interp& in, PyObject* o, bool raw, int depth);

Value sequenceFromPython(Interp& in, PyObject* o, int depth, bool asVector) {
  Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  PyObject** items = PySequence_Fast_ITEMS(o);
  if (asVector) {
    Value vec = makeVector(size_t(n), Value::f());
    for (Py_ssize_t i = 0; i < n; i++) {
      Value x = fromPythonAt(in, items[i], false, depth + 1);
      vec.as<Vector>()->items[i] = x;
    }
    return vec;
  }
  Value head = Value::nil(), tail = Value::nil();
  for (Py_ssize_t i = 0; i < n; i++) {
    Value cell = cons(fromPythonAt(in, items[i], false, depth + 1), Value::nil());
    if (head.isNil()) head = cell;
    else tail.as<Pair>()->cdr = cell;
    tail = cell;
  }
  return head;
}

Value fromPythonAt(Interp& in, PyObject* o, bool raw, int depth) {
  checkDepth(depth);
  Value unwrapped;
  if (unwrapPurpleValue(o, &unwrapped)) return unwrapped;
  if (raw) return wrapObject(Ref::borrow(o).release(), true);
  if (o == Py_None) return Value::unspecified();
  if (PyBool_Check(o)) return Value::boolean(o == Py_True);
  if (PyLong_Check(o)) return integerFromPython(o);
  if (PyFloat_Check(o)) return makeFlonum(PyFloat_AS_DOUBLE(o));
  if (PyComplex_Check(o)) return makeRectangular(makeFlonum(PyComplex_RealAsDouble(o)), makeFlonum(PyComplex_ImagAsDouble(o)));
  if (PyUnicode_Check(o)) {
    Py_ssize_t n = 0;
    const char* s = PyUnicode_AsUTF8AndSize(o, &n);
    if (!s) throwPythonError("python");
    if (Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(bridgeClass("Symbol", &gSymbolClass))) return intern(std::string_view(s, size_t(n)));
    return makeString(std::string_view(s, size_t(n)));
  }
  if (PyBytes_Check(o) || PyByteArray_Check(o)) {
    const char* data = PyBytes_Check(o) ? PyBytes_AS_STRING(o) : PyByteArray_AS_STRING(o);
    Py_ssize_t n = PyBytes_Check(o) ? PyBytes_GET_SIZE(o) : PyByteArray_GET_SIZE(o);
    Value bv = makeBytevector(size_t(n));
    if (n) std::memcpy(bv.as<Bytevector>()->bytes, data, size_t(n));
    return bv;
  }
  if (Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(bridgeClass("Pair", &gPairClass)) && PyTuple_GET_SIZE(o) == 2) {
    Value a = fromPythonAt(in, PyTuple_GET_ITEM(o, 0), false, depth + 1);
    Value b = fromPythonAt(in, PyTuple_GET_ITEM(o, 1), false, depth + 1);
    return cons(a, b);
  }
  if (PyList_Check(o) || PyTuple_Check(o)) {
    // A snapshot of the items: a list that changes while it is converted cannot move them.
    Ref items = checked(PySequence_Fast(o, "python: not a sequence"));
    return sequenceFromPython(in, items.get(), depth, PyTuple_Check(o));
  }
  if (PyDict_Check(o)) {
    Value table = makeHashTable(HashEquiv::Equal, size_t(PyDict_Size(o)));
    Py_ssize_t pos = 0;
    PyObject *k, *val;
    Ref snapshot = checked(PyDict_Copy(o));
    while (PyDict_Next(snapshot.get(), &pos, &k, &val)) {
      Value key = fromPythonAt(in, k, false, depth + 1);
      Value value = fromPythonAt(in, val, false, depth + 1);
      hashTablePut(in, table, key, value);
    }
    return table;
  }
  if (isTorchTensor(o)) return wrapTensor(tensorFromPython(o));
  if (PyObject* fractions = loadedModule("fractions")) {
    Ref fraction(PyObject_GetAttrString(fractions, "Fraction"));
    if (fraction && PyObject_IsInstance(o, fraction.get()) == 1) {
      Ref num = checked(PyObject_GetAttrString(o, "numerator"));
      Ref den = checked(PyObject_GetAttrString(o, "denominator"));
      return numDiv(integerFromPython(num.get()), integerFromPython(den.get()));
    }
    PyErr_Clear();
  }
  if (PyObject* numpy = loadedModule("numpy")) {
    // A numpy scalar (np.int64, np.bool_ ...) is its number; arrays stay Python objects.
    Ref generic(PyObject_GetAttrString(numpy, "generic"));
    if (generic && PyObject_IsInstance(o, generic.get()) == 1) {
      Ref item = checked(PyObject_CallMethod(o, "item", nullptr));
      if (!PyObject_IsInstance(item.get(), generic.get())) return fromPythonAt(in, item.get(), false, depth + 1);
    }
    PyErr_Clear();
  }
  return wrapObject(Ref::borrow(o).release(), false);
}

}  // namespace

Ref toPython(Interp& in, Value v) { return toPythonAt(in, v, 0); }

Value fromPython(Interp& in, PyObject* o, bool raw) { return fromPythonAt(in, o, raw, 0); }

Value resultOf(Interp& in, Ref owned, Value source) {
  if (!owned) throwPythonError("python");
  return fromPython(in, owned.get(), isRawObject(source));
}

std::string keywordArgumentName(Value keyword) {
  std::string name(symbolName(keyword));
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

void buildArguments(Interp& in, const Value* argv, int argc, Ref* args, Ref* kwargs, std::string_view who) {
  int positional = 0;
  for (int i = 0; i < argc; i++) {
    if (isKeyword(argv[i])) {
      if (i + 1 >= argc)
        throwError("error", std::string(who) + ": the keyword argument " + toWriteString(argv[i]) + " has no value");
      i++;
    } else {
      positional++;
    }
  }
  *args = checked(PyTuple_New(positional));
  int k = 0;
  for (int i = 0; i < argc; i++) {
    if (isKeyword(argv[i])) {
      if (!*kwargs) *kwargs = checked(PyDict_New());
      Ref value = toPython(in, argv[i + 1]);
      if (PyDict_SetItemString(kwargs->get(), keywordArgumentName(argv[i]).c_str(), value.get()) < 0) throwPythonError(who);
      i++;
    } else {
      PyTuple_SET_ITEM(args->get(), k++, toPython(in, argv[i]).release());
    }
  }
}

Value callPython(Interp& in, PyObject* callable, const Value* argv, int argc, Value source, std::string_view who) {
  Ref args, kwargs;
  buildArguments(in, argv, argc, &args, &kwargs, who);
  Ref result(PyObject_Call(callable, args.get(), kwargs.get()));
  if (!result) throwPythonError(who);
  return fromPython(in, result.get(), isRawObject(source));
}

}  // namespace purple::python
