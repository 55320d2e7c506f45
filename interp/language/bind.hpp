// The one way to register a builtin. A builtin is a C++ callable plus a Purple signature and a
// docstring; arity checks, keyword arguments, argument conversion, result conversion and the
// translation of LibTorch errors come from here:
//
//   r.def("tensor-sum", "(x :key dim keepdim dtype)",
//         [](const at::Tensor& x, std::optional<IntList> dim, bool keepdim,
//            std::optional<at::ScalarType> dtype) { ... },
//         "Sum of the elements of X, over DIM when given.");
//
// Signature grammar: required names, then `:optional` names, then `. rest` (or `:rest name`),
// then `:key` names. A name may be `(name default)` with a literal default. When the C++
// callable's first parameter is `Interp&`, it receives the interpreter and is not in the
// signature. Flags that let the evaluator free temporaries early are derived from the types:
// a callable that returns at::Tensor returns a fresh cell, and one that takes no `Value`
// parameter cannot keep its argument cells. What the types cannot show, def's last argument
// states (kPrimFreshString, kPrimBorrowsArgs).
#pragma once
#include "interp/core/value.hpp"
#include "interp/core/error.hpp"
#include "interp/core/interp.hpp"
#include "interp/memory/tensor_value.hpp"
#include "interp/memory/device_memory.hpp"
#include <c10/util/Exception.h>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace purple {

// A builtin's metadata, made once per process and shared by every interpreter (read-only once
// made); a host function's is its interpreter's own (Registry::defHost).
struct PrimitiveInfo {
  std::string name;
  std::string signature = "";     // as written, for help
  std::string doc = "";
  std::string family = "";             // "tensor", "lists", ... for the generated reference
  int nRequired = 0;
  int nOptional = 0;
  bool hasRest = false;
  int nKeys = 0;
  Value* keys = nullptr;          // keyword symbols (interned, never collected)
  // Per key: the optional parameter of the same name (`(x :optional dim :key dim)` takes dim
  // either way), whose slot index it is, else -1. Giving both is an error.
  int* keyTwin = nullptr;
  Value* defaults = nullptr;      // per parameter: default literal or missing(); GC root
  int nParams = 0;                // required + optional + rest + keys
  void* callable = nullptr;       // the C++ callable (typed defs)
  PrimFn typedInvoke = nullptr;   // converts slots and calls `callable`
  // For callables that return at::Tensor: the same call, but the result is handed back
  // without its GC cell, for the evaluator to pass on, store or drop (kPrimUnboxedTensor).
  at::Tensor (*tensorInvoke)(Interp&, Value* argv, int argc, PrimitiveInfo* info) = nullptr;
  // For one-argument elementwise builtins: the same result computed in place, used when the
  // argument is a temporary only the evaluator holds (Registry::inPlaceOnTemporary).
  void (*inPlace)(at::Tensor&) = nullptr;
};

// A list of integers given as one list/vector, or as the rest arguments (shapes, dims).
using IntList = std::vector<int64_t>;
// A number or a tensor: elementwise builtins take either for their second operand.
struct TensorOrScalar {
  const at::Tensor* tensor = nullptr;
  at::Scalar scalar;
  bool isTensor() const { return tensor != nullptr; }
};
// The remaining positional arguments, unconverted.
struct RestArgs { Value list; };
// A value that must be applicable; kept as a Value.
struct Procedure { Value value; };

[[noreturn]] void throwConversionError(const PrimitiveInfo* info, int index, std::string_view expected, Value got);
std::string describeValueType(Value v);

// ---- argument conversion -------------------------------------------------------------------

template <class T, class Enable = void> struct Convert;

#define PURPLE_CONVERT(T, expected, body)                                                   \
  template <> struct Convert<T> {                                                           \
    static constexpr bool keepsValue = false;                                               \
    static T from(Interp& in, Value v, const PrimitiveInfo* info, int i) {                  \
      if (v.isMissing()) throwConversionError(info, i, "a value (missing argument)", v);    \
      body                                                                                  \
      throwConversionError(info, i, expected, v);                                           \
    }                                                                                       \
  };

int64_t integerValue(Value v, const PrimitiveInfo* info, int i);   // exact or integral flonum
double realValue(Value v, const PrimitiveInfo* info, int i);
IntList intListValue(Value v, const PrimitiveInfo* info, int i);

template <> struct Convert<Value> {
  static constexpr bool keepsValue = true;
  static Value from(Interp&, Value v, const PrimitiveInfo*, int) { return v; }
};
template <> struct Convert<RestArgs> {
  static constexpr bool keepsValue = true;
  static RestArgs from(Interp&, Value v, const PrimitiveInfo*, int) {
    return RestArgs{v.isMissing() ? Value::nil() : v};
  }
};
template <> struct Convert<Procedure> {
  static constexpr bool keepsValue = true;
  static Procedure from(Interp&, Value v, const PrimitiveInfo* info, int i) {
    if (!isProcedure(v)) throwConversionError(info, i, "a procedure", v);
    return Procedure{v};
  }
};
template <> struct Convert<bool> {
  static constexpr bool keepsValue = false;
  static bool from(Interp&, Value v, const PrimitiveInfo*, int) {
    return !v.isMissing() && v.isTrue();
  }
};
template <> struct Convert<int64_t> {
  static constexpr bool keepsValue = false;
  static int64_t from(Interp&, Value v, const PrimitiveInfo* info, int i) {
    if (v.isFixnum()) return v.fixnum();
    return integerValue(v, info, i);
  }
};
template <> struct Convert<int> {
  static constexpr bool keepsValue = false;
  static int from(Interp&, Value v, const PrimitiveInfo* info, int i) {
    if (v.isFixnum()) return int(v.fixnum());
    return int(integerValue(v, info, i));
  }
};
template <> struct Convert<double> {
  static constexpr bool keepsValue = false;
  static double from(Interp&, Value v, const PrimitiveInfo* info, int i) {
    if (isFlonum(v)) return flonumValue(v);
    return realValue(v, info, i);
  }
};
template <> struct Convert<std::string> {
  static constexpr bool keepsValue = false;
  static std::string from(Interp&, Value v, const PrimitiveInfo* info, int i) {
    if (isString(v)) return std::string(stringView(v));
    if (v.is(Kind::Symbol)) return std::string(symbolName(v));
    throwConversionError(info, i, "a string", v);
  }
};
template <> struct Convert<IntList> {
  static constexpr bool keepsValue = false;
  static IntList from(Interp&, Value v, const PrimitiveInfo* info, int i) { return intListValue(v, info, i); }
};
template <> struct Convert<at::Tensor> {
  static constexpr bool keepsValue = false;
  static const at::Tensor& from(Interp&, Value v, const PrimitiveInfo* info, int i) {
    if (isTensor(v)) {
      const at::Tensor& t = tensorOf(v);
      if (t.defined()) return t;
      throwError("tensor-error", info->name + ": argument " + std::to_string(i + 1) +
                                     " is a tensor that was already freed");
    }
    throwConversionError(info, i, "a tensor", v);
  }
};
template <> struct Convert<at::Scalar> {
  static constexpr bool keepsValue = false;
  static at::Scalar from(Interp&, Value v, const PrimitiveInfo* info, int i) {
    if (v.isFixnum()) return at::Scalar(int64_t(v.fixnum()));
    if (isFlonum(v)) return at::Scalar(flonumValue(v));
    if (v.isBool()) return at::Scalar(v.isTrue());
    if (isNumber(v)) return at::Scalar(realValue(v, info, i));
    if (isTensor(v) && tensorOf(v).defined() && tensorOf(v).numel() == 1) return tensorOf(v).item();
    throwConversionError(info, i, "a number", v);
  }
};
template <> struct Convert<TensorOrScalar> {
  static constexpr bool keepsValue = false;
  static TensorOrScalar from(Interp& in, Value v, const PrimitiveInfo* info, int i) {
    TensorOrScalar r;
    if (isTensor(v)) r.tensor = &Convert<at::Tensor>::from(in, v, info, i);
    else if (v.isFixnum()) r.scalar = at::Scalar(int64_t(v.fixnum()));
    else if (isFlonum(v)) r.scalar = at::Scalar(flonumValue(v));
    else if (v.isBool()) r.scalar = at::Scalar(v.isTrue());
    else if (isNumber(v)) r.scalar = at::Scalar(realValue(v, info, i));
    else throwConversionError(info, i, "a tensor or a number", v);
    return r;
  }
};
template <> struct Convert<at::ScalarType> {
  static constexpr bool keepsValue = false;
  static at::ScalarType from(Interp&, Value v, const PrimitiveInfo* info, int) {
    return scalarTypeFromValue(v, info->name);
  }
};
template <> struct Convert<at::Device> {
  static constexpr bool keepsValue = false;
  static at::Device from(Interp&, Value v, const PrimitiveInfo* info, int) {
    return deviceFromValue(v, info->name);
  }
};
template <class T> struct Convert<std::optional<T>> {
  static constexpr bool keepsValue = Convert<T>::keepsValue;
  static std::optional<T> from(Interp& in, Value v, const PrimitiveInfo* info, int i) {
    if (v.isMissing() || v.isFalse()) return std::nullopt;   // #f reads as "not given"
    return Convert<T>::from(in, v, info, i);
  }
};
template <class T> struct Convert<std::vector<T>> {
  static constexpr bool keepsValue = Convert<T>::keepsValue;
  static std::vector<T> from(Interp& in, Value v, const PrimitiveInfo* info, int i) {
    std::vector<T> out;
    if (v.is(Kind::Vector)) {
      auto* vec = v.as<Vector>();
      for (uint32_t k = 0; k < vec->extra; k++) out.push_back(Convert<T>::from(in, vec->items[k], info, i));
      return out;
    }
    if (!isList(v)) throwConversionError(info, i, "a list", v);
    for (Value p = v; isPair(p); p = cdr(p)) out.push_back(Convert<T>::from(in, car(p), info, i));
    return out;
  }
};

// ---- result conversion ---------------------------------------------------------------------

inline Value toValue(Interp&, Value v) { return v; }
inline Value toValue(Interp&, bool b) { return Value::boolean(b); }
inline Value toValue(Interp&, int i) { return Value::fixnum(i); }
inline Value toValue(Interp&, int64_t i) { return makeInteger(i); }
inline Value toValue(Interp&, uint64_t i) { return makeInteger(int64_t(i)); }
inline Value toValue(Interp&, double d) { return makeFlonum(d); }
inline Value toValue(Interp&, const std::string& s) { return makeString(s); }
inline Value toValue(Interp&, const char* s) { return makeString(s); }
inline Value toValue(Interp&, at::Tensor t) { return wrapTensor(std::move(t)); }
inline Value toValue(Interp&, const at::Scalar& s) { return scalarToValue(s); }
inline Value toValue(Interp&, at::ScalarType t) { return scalarTypeToValue(t); }
inline Value toValue(Interp&, const at::Device& d) { return deviceToValue(d); }
inline Value toValue(Interp&, Procedure p) { return p.value; }
inline Value toValue(Interp&, at::IntArrayRef a) {
  Value r = Value::nil();
  for (size_t k = a.size(); k-- > 0;) r = cons(makeInteger(a[k]), r);
  return r;
}
template <class T> Value toValue(Interp& in, const std::vector<T>& xs);
template <class T> Value toValue(Interp& in, const std::optional<T>& x) {
  return x ? toValue(in, *x) : Value::f();
}
template <class... Ts> Value toValue(Interp& in, const std::tuple<Ts...>& t) {
  Value items[sizeof...(Ts) == 0 ? 1 : sizeof...(Ts)];
  size_t k = 0;
  std::apply([&](const auto&... x) { ((items[k++] = toValue(in, x)), ...); }, t);
  return listFromArray(items, sizeof...(Ts));
}
template <class T> Value toValue(Interp& in, const std::vector<T>& xs) {
  Value r = Value::nil();
  for (size_t k = xs.size(); k-- > 0;) r = cons(toValue(in, xs[k]), r);
  return r;
}

// ---- invocation ----------------------------------------------------------------------------

// Sorts argv into one slot per parameter (defaults and missing() filled in). Returns slots.
Value* bindArguments(Interp& in, Value* argv, int argc, PrimitiveInfo* info, Value* slotBuffer);
[[noreturn]] void rethrowForeign(const PrimitiveInfo* info);   // c10::Error, std::exception...

template <class T> struct FnTraits : FnTraits<decltype(&T::operator())> {};
template <class C, class R, class... A> struct FnTraits<R (C::*)(A...) const> {
  using Result = R;
  using Args = std::tuple<A...>;
};
template <class C, class R, class... A> struct FnTraits<R (C::*)(A...)> {
  using Result = R;
  using Args = std::tuple<A...>;
};
template <class R, class... A> struct FnTraits<R (*)(A...)> {
  using Result = R;
  using Args = std::tuple<A...>;
};

template <class F, bool WithInterp, class R, class ArgsTuple> struct Invoker;
template <class F, bool WithInterp, class R, class... A>
struct Invoker<F, WithInterp, R, std::tuple<A...>> {
  static constexpr bool keepsValues = (Convert<std::decay_t<A>>::keepsValue || ... || false);
  template <size_t... I>
  static R call(Interp& in, F& f, Value* s, PrimitiveInfo* info, std::index_sequence<I...>) {
    if constexpr (WithInterp) return f(in, Convert<std::decay_t<A>>::from(in, s[I], info, int(I))...);
    else return f(Convert<std::decay_t<A>>::from(in, s[I], info, int(I))...);
  }
  // Binds argv to the parameters, calls the callable and hands its C++ result to `finish`;
  // every foreign exception becomes a Purple error naming the builtin.
  template <class Finish>
  static auto run(Interp& in, Value* argv, int argc, PrimitiveInfo* info, Finish finish) {
    Value buffer[sizeof...(A) + 1];
    Value* slots;
    if (!info->hasRest && argc == info->nRequired) {   // the common call: required arguments only
      slots = argv;
      if (argc != int(sizeof...(A))) {
        for (size_t i = 0; i < sizeof...(A); i++) buffer[i] = int(i) < argc ? argv[i] : info->defaults[i];
        slots = buffer;
      }
    } else {
      slots = bindArguments(in, argv, argc, info, buffer);
    }
    for (bool retried = false;; retried = true) {
      try {
        if constexpr (std::is_void_v<R>) {
          call(in, *static_cast<F*>(info->callable), slots, info, std::index_sequence_for<A...>{});
          return finish();
        } else {
          return finish(call(in, *static_cast<F*>(info->callable), slots, info, std::index_sequence_for<A...>{}));
        }
      } catch (const PurpleException&) {
        throw;
      } catch (const ContinuationInvoked&) {
        throw;
      } catch (const c10::OutOfMemoryError&) {
        // A GPU allocation failed: dead tensors may be holding the memory until the collector
        // runs. Collect, empty the cache, and try the builtin once more.
        if (retried || !reclaimDeviceMemory()) rethrowForeign(info);
      } catch (...) {
        rethrowForeign(info);
      }
    }
  }
  static Value invoke(Interp& in, Value* argv, int argc, PrimitiveInfo* info) {
    if constexpr (std::is_void_v<R>) return run(in, argv, argc, info, [] { return Value::unspecified(); });
    else return run(in, argv, argc, info, [&in](R&& r) { return toValue(in, std::move(r)); });
  }
  static at::Tensor invokeTensor(Interp& in, Value* argv, int argc, PrimitiveInfo* info) {
    return run(in, argv, argc, info, [](at::Tensor&& t) { return std::move(t); });
  }
};

// Result types whose Purple value is a new list of new tensor cells (kPrimReturnsFreshList).
template <class R> struct IsFreshTensorList : std::false_type {};
template <> struct IsFreshTensorList<std::vector<at::Tensor>> : std::true_type {};
template <class... Ts> struct IsFreshTensorList<std::tuple<Ts...>>
    : std::bool_constant<(std::is_same_v<std::decay_t<Ts>, at::Tensor> && ...)> {};

template <class Tuple> struct DropFirst;
template <class H, class... T> struct DropFirst<std::tuple<H, T...>> { using type = std::tuple<T...>; };

class Registry {
 public:
  Registry(Interp& in, std::string_view family) : in_(in), family_(family) {}

  // EXTRA_FLAGS states what the types cannot show: kPrimFreshString for a builtin that returns
  // a string it made, kPrimBorrowsArgs for one that takes a Value and keeps no reference to it.
  template <class F>
  void def(std::string_view name, std::string_view signature, F fn, std::string_view doc,
           uint8_t extraFlags = 0) {
    using Traits = FnTraits<std::decay_t<F>>;
    using Args = typename Traits::Args;
    using R = typename Traits::Result;
    constexpr bool withInterp = std::tuple_size_v<Args> > 0 &&
        std::is_same_v<std::tuple_element_t<0, std::conditional_t<(std::tuple_size_v<Args> > 0), Args, std::tuple<int>>>, Interp&>;
    using Params = std::conditional_t<withInterp, typename DropFirst<std::conditional_t<withInterp, Args, std::tuple<int>>>::type, Args>;
    using Inv = Invoker<std::decay_t<F>, withInterp, R, Params>;
    uint8_t flags = extraFlags;
    if (!Inv::keepsValues) flags |= kPrimBorrowsArgs;
    // A predicate answers about its arguments and keeps none of them (a builtin returning a
    // boolean that stores one says so by its name: `!`).
    if constexpr (std::is_same_v<std::decay_t<R>, bool>)
      if (name.empty() || name.back() != '!') flags |= kPrimBorrowsArgs;
    constexpr bool returnsTensor = std::is_same_v<std::decay_t<R>, at::Tensor>;
    if constexpr (returnsTensor) flags |= kPrimReturnsFresh | kPrimUnboxedTensor;
    if constexpr (IsFreshTensorList<std::decay_t<R>>::value) flags |= kPrimReturnsFreshList;
    // Only the interpreter that registers this builtin first keeps its callable: every builtin's
    // callable is the same in every interpreter (its captures are constants of the registration).
    auto complete = [](PrimitiveInfo* info, void* callable) {
      info->callable = new std::decay_t<F>(std::move(*static_cast<std::decay_t<F>*>(callable)));
      info->typedInvoke = &Inv::invoke;
      if constexpr (returnsTensor) info->tensorInvoke = &Inv::invokeTensor;
    };
    PrimitiveInfo* info = sharedInfo(name, signature, doc, int(std::tuple_size_v<Params>), &Inv::invoke, complete, &fn);
    install(info, &Inv::invoke, flags);
  }

  // For variadic procedures that look at raw arguments (+, list, apply ...). The signature is
  // still checked for arity and shown by help.
  void defRaw(std::string_view name, std::string_view signature, PrimFn fn, std::string_view doc,
              uint8_t flags = 0);
  // A host function (the embedding API's define): unlike a builtin's, its metadata is its own,
  // since each interpreter's host function has its own callable, which the caller sets. The
  // caller frees it with releaseHostInfo when the function's interpreter goes.
  PrimitiveInfo* defHost(std::string_view name, std::string_view signature, PrimFn fn, std::string_view doc,
                         uint8_t flags);
  static void releaseHostInfo(PrimitiveInfo* info);
  // A builtin made at run time and bound to no name (load-inline's functions): metadata that lives
  // as long as the process, since the code it describes (a loaded library) is never unloaded. The
  // caller sets its callable, makes one per function and as many procedures of it as it needs.
  PrimitiveInfo* runtimeInfo(std::string_view name, std::string_view signature, std::string_view doc);
  // A procedure whose entry is FN and whose metadata is INFO, bound to no name.
  static Value makePrimitive(PrimitiveInfo* info, PrimFn fn, uint8_t flags);
  void alias(std::string_view newName, std::string_view existing);
  // Lets the evaluator compute builtin NAME (one tensor argument, same dtype out as in) in place
  // when its argument is a fresh intermediate nobody else can see, as in
  // `(tensor-relu (tensor-matmul a b))`: one allocation less, as NumPy elides temporaries.
  void inPlaceOnTemporary(std::string_view name, void (*fn)(at::Tensor&));
  Interp& interp() { return in_; }

 private:
  // Builtin metadata is made once per process, by the first interpreter that registers the
  // builtin, and shared by all (it used to be made per interpreter and never freed: 790 KB per
  // interpreter made and destroyed). COMPLETE(info, context) sets the callable of a new one.
  PrimitiveInfo* sharedInfo(std::string_view name, std::string_view signature, std::string_view doc, int cppParams,
                            PrimFn entry, void (*complete)(PrimitiveInfo*, void*), void* context);
  // IMMORTAL: a shared builtin's, never released, so its keys and defaults share chunks of root
  // memory rather than being two roots of their own (a host's can be released).
  PrimitiveInfo* makeInfo(std::string_view name, std::string_view signature, std::string_view doc, int cppParams,
                          bool immortal);
  void install(PrimitiveInfo* info, PrimFn fn, uint8_t flags);
  Interp& in_;
  std::string family_;
};

// Raw primitives check their own argument counts with this.
inline void checkArity(const PrimitiveInfo* info, int argc) {
  if (argc < info->nRequired || (!info->hasRest && info->nKeys == 0 && argc > info->nRequired + info->nOptional))
    throwArityError(info->name, argc, info->signature);
}

}  // namespace purple
