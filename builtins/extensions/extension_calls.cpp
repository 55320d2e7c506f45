#include "builtins/extensions/extension_calls.hpp"
#include "interp/language/numbers.hpp"
#include <map>
#include <mutex>
#include <vector>

namespace purple::extensions {

namespace {

std::string paramName(const abi::Function& fn, int i) {
  const char* n = fn.params[i].name;
  return n && *n ? std::string(n) : "arg" + std::to_string(i);
}

// What a parameter accepts, for the type-error: "a tensor (torch::Tensor)".
std::string expected(const abi::Param& p) {
  std::string what;
  switch (p.type) {
    case abi::Type::Tensor: what = "a tensor"; break;
    case abi::Type::Int:
      if (p.bits >= 64 && !p.isUnsigned) {
        what = "an exact integer";
      } else {
        std::string lo = p.isUnsigned ? "0" : "-" + std::to_string(uint64_t(1) << (p.bits - 1));
        std::string hi = std::to_string(p.isUnsigned ? (p.bits >= 64 ? UINT64_MAX : (uint64_t(1) << p.bits) - 1)
                                                     : (uint64_t(1) << (p.bits - 1)) - 1);
        what = "an exact integer from " + lo + " to " + hi;
      }
      break;
    case abi::Type::Double: what = "a real number"; break;
    case abi::Type::Bool: what = "a boolean"; break;
    case abi::Type::String: what = "a string"; break;
    case abi::Type::TensorList: what = "a list of tensors"; break;
    case abi::Type::IntList: what = "a list of exact integers"; break;
    case abi::Type::DoubleList: what = "a list of real numbers"; break;
    case abi::Type::BoolList: what = "a list of booleans"; break;
    case abi::Type::Scalar: what = "a number or a boolean"; break;
    case abi::Type::ScalarType: what = "a dtype"; break;
    case abi::Type::Device: what = "a device"; break;
  }
  what += std::string(" (") + (p.cppType ? p.cppType : "?") + ")";
  if (p.optional && p.type != abi::Type::Bool) what += " or #f";
  return what;
}

[[noreturn]] void refuse(const abi::Param& p, const PrimitiveInfo* info, int i, Value v) {
  throwConversionError(info, i, expected(p), v);
}

int64_t exactInteger(Value v, const abi::Param& p, const PrimitiveInfo* info, int i) {
  if (!v.isFixnum() && !isBignum(v)) refuse(p, info, i, v);
  int64_t x = v.isFixnum() ? v.fixnum() : integerValue(v, info, i);   // a bignum past 64 bits is refused there
  bool fits = true;
  if (p.isUnsigned) fits = x >= 0 && (p.bits >= 64 || uint64_t(x) < (uint64_t(1) << p.bits));
  else if (p.bits < 64) fits = x >= -(int64_t(1) << (p.bits - 1)) && x < (int64_t(1) << (p.bits - 1));
  if (!fits) refuse(p, info, i, v);
  return x;
}

// The elements of a list or vector argument, each through ELEMENT; refused when it is neither.
template <class F>
void forEachElement(Value v, const abi::Param& p, const PrimitiveInfo* info, int i, F element) {
  if (v.is(Kind::Vector)) {
    auto* vec = v.as<Vector>();
    for (uint32_t k = 0; k < vec->extra; k++) element(vec->items[k]);
  } else if (isList(v)) {
    for (Value e = v; isPair(e); e = cdr(e)) element(car(e));
  } else {
    refuse(p, info, i, v);
  }
}

c10::IValue toArgument(Value v, const abi::Param& p, const PrimitiveInfo* info, int i) {
  if (p.optional && p.type != abi::Type::Bool && v.isFalse()) return c10::IValue();
  switch (p.type) {
    case abi::Type::Tensor:
      if (!isTensor(v)) refuse(p, info, i, v);
      if (!tensorOf(v).defined())
        throwError("tensor-error", info->name + ": argument " + std::to_string(i + 1) + " is a tensor that was already freed");
      return c10::IValue(tensorOf(v));
    case abi::Type::Int: return c10::IValue(exactInteger(v, p, info, i));
    case abi::Type::Double:
      if (!isRealNumber(v)) refuse(p, info, i, v);
      return c10::IValue(toDouble(v));
    case abi::Type::Bool:
      if (!v.isBool()) refuse(p, info, i, v);
      return c10::IValue(v.isTrue());
    case abi::Type::String:
      if (!isString(v)) refuse(p, info, i, v);
      return c10::IValue(std::string(stringView(v)));
    case abi::Type::TensorList: {
      c10::List<at::Tensor> xs;
      forEachElement(v, p, info, i, [&](Value e) {
        if (!isTensor(e) || !tensorOf(e).defined()) refuse(p, info, i, v);
        xs.push_back(tensorOf(e));
      });
      return c10::IValue(xs);
    }
    case abi::Type::IntList: {
      c10::List<int64_t> xs;
      forEachElement(v, p, info, i, [&](Value e) {
        if (!e.isFixnum() && !isBignum(e)) refuse(p, info, i, v);
        xs.push_back(exactInteger(e, p, info, i));
      });
      return c10::IValue(xs);
    }
    case abi::Type::DoubleList: {
      c10::List<double> xs;
      forEachElement(v, p, info, i, [&](Value e) {
        if (!isRealNumber(e)) refuse(p, info, i, v);
        xs.push_back(toDouble(e));
      });
      return c10::IValue(xs);
    }
    case abi::Type::BoolList: {
      c10::List<bool> xs;
      forEachElement(v, p, info, i, [&](Value e) {
        if (!e.isBool()) refuse(p, info, i, v);
        xs.push_back(e.isTrue());
      });
      return c10::IValue(xs);
    }
    case abi::Type::Scalar:
      if (v.isFixnum()) return c10::IValue(int64_t(v.fixnum()));
      if (v.isBool()) return c10::IValue(v.isTrue());
      if (isBignum(v)) return c10::IValue(integerValue(v, info, i));
      if (isRealNumber(v)) return c10::IValue(toDouble(v));
      refuse(p, info, i, v);
    case abi::Type::ScalarType:
      if (!v.is(Kind::Symbol) && !isString(v)) refuse(p, info, i, v);
      return c10::IValue(scalarTypeFromValue(v, info->name));
    case abi::Type::Device:
      if (!v.is(Kind::Symbol) && !isString(v)) refuse(p, info, i, v);
      return c10::IValue(deviceFromValue(v, info->name));
  }
  refuse(p, info, i, v);
}

Value fromResult(const c10::IValue& r, const PrimitiveInfo* info, int depth = 0) {
  if (depth > 100) throwError("error", info->name + ": its result is nested too deeply");
  if (r.isNone()) return Value::f();
  if (r.isTensor()) return r.toTensor().defined() ? wrapTensor(r.toTensor()) : Value::f();
  if (r.isBool()) return Value::boolean(r.toBool());
  if (r.isInt()) return makeInteger(r.toInt());
  if (r.isDouble()) return makeFlonum(r.toDouble());
  if (r.isString()) return makeString(r.toStringRef());
  if (r.isDevice()) return deviceToValue(r.toDevice());
  if (r.isTuple() || r.isList()) {
    // a list built from the back: every value made so far is on this stack frame
    std::vector<c10::IValue> items;
    if (r.isTuple()) items = r.toTupleRef().elements().vec();
    else items = r.toListRef().vec();
    Value out = Value::nil();
    for (size_t k = items.size(); k-- > 0;) {
      Value x = fromResult(items[k], info, depth + 1);
      out = cons(x, out);
    }
    return out;
  }
  throwError("type-error", info->name + ": its C++ result (" + r.tagKind() + ") has no Purple value");
}

Value callExtension(Interp&, Value* argv, int argc, PrimitiveInfo* info) {
  checkArity(info, argc);
  auto* fn = static_cast<const abi::Function*>(info->callable);
  std::vector<c10::IValue> args;
  args.reserve(size_t(fn->nParams));
  for (int i = 0; i < fn->nParams; i++) {
    if (i < argc) args.push_back(toArgument(argv[i], fn->params[i], info, i));
    else args.push_back(*fn->params[i].defaultValue);   // checkArity: only parameters with defaults are left
  }
  c10::IValue result;
  try {
    result = fn->invoke(fn, args.data());
  } catch (const PurpleException&) {
    throw;
  } catch (...) {
    rethrowForeign(info);   // c10::Error (TORCH_CHECK), std::exception: a Purple error naming the function
  }
  args.clear();
  if (fn->returnsVoid) return Value::unspecified();
  return fromResult(result, info);
}

}  // namespace

std::string purpleSignature(const abi::Function& fn) {
  std::string s = "(";
  bool optional = false;
  for (int i = 0; i < fn.nParams; i++) {
    if (fn.params[i].defaultValue && !optional) {
      s += i ? " :optional" : ":optional";
      optional = true;
    }
    s += (i || optional ? " " : "") + paramName(fn, i);
  }
  return s + ")";
}

std::string cppSignature(const abi::Function& fn) {
  std::string s = std::string(fn.resultType) + " " + fn.name + "(";
  for (int i = 0; i < fn.nParams; i++) {
    s += (i ? ", " : "") + std::string(fn.params[i].cppType) + " " + paramName(fn, i);
    if (fn.params[i].defaultValue) s += " = " + c10::str(*fn.params[i].defaultValue);
  }
  return s + ")";
}

Value extensionProcedure(Registry& r, const abi::Function* fn, const std::string& name, const std::string& doc) {
  static std::mutex lock;
  static auto* infos = new std::map<std::tuple<const abi::Function*, std::string, std::string>, PrimitiveInfo*>();
  PrimitiveInfo* info;
  {
    std::lock_guard<std::mutex> g(lock);
    PrimitiveInfo*& slot = (*infos)[{fn, name, doc}];
    if (!slot) {
      slot = r.runtimeInfo(name, purpleSignature(*fn), doc);
      slot->callable = const_cast<abi::Function*>(fn);
    }
    info = slot;
  }
  // It keeps no argument cell (its IValues are dropped when it returns), and a tensor result is
  // in a cell of its own.
  return Registry::makePrimitive(info, &callExtension, kPrimBorrowsArgs | kPrimReturnsFresh);
}

}  // namespace purple::extensions
