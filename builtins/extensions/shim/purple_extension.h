// Purple's stand-in for pybind11 in code written for torch.utils.cpp_extension.load_inline.
// load-inline compiles the user's source with this directory first on the include path, so that
// <torch/extension.h> is LibTorch's C++ API (torch/all.h) plus this file, and no Python:
//   - load-inline's FUNCTIONS list becomes m.def calls that load-inline appends to the source;
//   - a PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("name", &fn, "doc", py::arg("x") = 1); }
//     block written by hand works too (functions, lambdas; docstrings; py::arg names and defaults;
//     call guards and return-value policies are accepted and mean nothing here);
//   - every bound function's C++ signature is recorded (purple_extension_abi.h), so that Purple
//     checks each argument before the C++ code runs.
// Everything is in an unnamed namespace: two loaded libraries never share this file's state.
#pragma once
#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <torch/version.h>
#include <purple_extension_abi.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace purple_ext {
namespace {

namespace abi = ::purple_extension_abi;

template <class T> struct AlwaysFalse : std::false_type {};

// ---- which C++ types are which ----------------------------------------------------------------

// std::optional and c10::optional (the same type from LibTorch 2.x on, two before).
template <class T, class = void> struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<T, std::void_t<typename T::value_type, decltype(std::declval<const T&>().has_value()),
                                 decltype(std::declval<T&>().reset())>> : std::true_type {};

template <class T> constexpr bool isCharType =
    std::is_same_v<T, char> || std::is_same_v<T, wchar_t> || std::is_same_v<T, char16_t> || std::is_same_v<T, char32_t>;
// Integers as pybind11 sees them: not bool, not the character types (signed/unsigned char are numbers).
template <class T> constexpr bool isInteger = std::is_integral_v<T> && !std::is_same_v<T, bool> && !isCharType<T>;
template <class T> constexpr bool isStringView = std::is_same_v<T, std::string_view> || std::is_same_v<T, c10::string_view>;

template <class T> struct IsVector : std::false_type {};
template <class E, class A> struct IsVector<std::vector<E, A>> : std::true_type {};
template <class T> struct IsArrayRef : std::false_type {};
template <class E> struct IsArrayRef<c10::ArrayRef<E>> : std::true_type {};

template <class I> std::string integerName() {
  return std::string(std::is_signed_v<I> ? "int" : "uint") + std::to_string(sizeof(I) * 8) + "_t";
}

// An int64 from Purple into the C++ integer I; Purple checks the range first, this is for defaults.
template <class I> I narrowInteger(int64_t x) {
  if constexpr (std::is_signed_v<I>) {
    TORCH_CHECK(x >= int64_t(std::numeric_limits<I>::min()) && x <= int64_t(std::numeric_limits<I>::max()),
                "integer ", x, " does not fit in ", integerName<I>());
  } else {
    TORCH_CHECK(x >= 0 && uint64_t(x) <= uint64_t(std::numeric_limits<I>::max()), "integer ", x,
                " does not fit in ", integerName<I>());
  }
  return static_cast<I>(x);
}

// ---- arguments: an IValue held as the parameter's C++ type for the length of one call ----------

template <class T, class = void> struct Holder {
  static_assert(AlwaysFalse<T>::value,
                "load-inline: a parameter of this C++ type cannot be bound. Supported: torch::Tensor, "
                "integers, double, float, bool, std::string (and string_view), std::vector and "
                "c10::ArrayRef of tensors and numbers, at::Scalar, at::ScalarType, at::Device, and "
                "std::optional / c10::optional of these");
  // (enough of a holder that the assertion above is the only error the compiler reports)
  explicit Holder(c10::IValue&) {}
  T& value();
  static void describe(abi::Param&) {}
  static std::string name() { return "?"; }
};

template <> struct Holder<at::Tensor> {
  at::Tensor v;
  explicit Holder(c10::IValue& iv) : v(iv.toTensor()) {}
  at::Tensor& value() { return v; }
  static void describe(abi::Param& p) { p.type = abi::Type::Tensor; }
  static std::string name() { return "torch::Tensor"; }
};
template <class I> struct Holder<I, std::enable_if_t<isInteger<I>>> {
  I v;
  explicit Holder(c10::IValue& iv) : v(narrowInteger<I>(iv.toInt())) {}
  I& value() { return v; }
  static void describe(abi::Param& p) {
    p.type = abi::Type::Int;
    p.bits = int32_t(sizeof(I) * 8);
    p.isUnsigned = std::is_unsigned_v<I>;
  }
  static std::string name() { return integerName<I>(); }
};
template <class F> struct Holder<F, std::enable_if_t<std::is_floating_point_v<F>>> {
  F v;
  explicit Holder(c10::IValue& iv) : v(F(iv.isDouble() ? iv.toDouble() : double(iv.toInt()))) {}
  F& value() { return v; }
  static void describe(abi::Param& p) { p.type = abi::Type::Double; }
  static std::string name() { return sizeof(F) == sizeof(float) ? "float" : "double"; }
};
template <> struct Holder<bool> {
  bool v;
  explicit Holder(c10::IValue& iv) : v(iv.toBool()) {}
  bool& value() { return v; }
  static void describe(abi::Param& p) { p.type = abi::Type::Bool; }
  static std::string name() { return "bool"; }
};
template <> struct Holder<std::string> {
  std::string v;
  explicit Holder(c10::IValue& iv) : v(iv.toStringRef()) {}
  std::string& value() { return v; }
  static void describe(abi::Param& p) { p.type = abi::Type::String; }
  static std::string name() { return "std::string"; }
};
template <class S> struct Holder<S, std::enable_if_t<isStringView<S>>> {
  std::string text;
  explicit Holder(c10::IValue& iv) : text(iv.toStringRef()) {}
  S value() { return S(text.data(), text.size()); }
  static void describe(abi::Param& p) { p.type = abi::Type::String; }
  static std::string name() { return "string_view"; }
};
template <> struct Holder<at::Scalar> {
  at::Scalar v;
  explicit Holder(c10::IValue& iv) : v(iv.toScalar()) {}
  at::Scalar& value() { return v; }
  static void describe(abi::Param& p) { p.type = abi::Type::Scalar; }
  static std::string name() { return "at::Scalar"; }
};
template <> struct Holder<at::ScalarType> {
  at::ScalarType v;
  explicit Holder(c10::IValue& iv) : v(iv.toScalarType()) {}
  at::ScalarType& value() { return v; }
  static void describe(abi::Param& p) { p.type = abi::Type::ScalarType; }
  static std::string name() { return "at::ScalarType"; }
};
template <> struct Holder<at::Device> {
  at::Device v;
  explicit Holder(c10::IValue& iv) : v(iv.toDevice()) {}
  at::Device& value() { return v; }
  static void describe(abi::Param& p) { p.type = abi::Type::Device; }
  static std::string name() { return "at::Device"; }
};

// The elements of a list argument, read into a vector of E.
template <class E> std::vector<E> listElements(c10::IValue& iv) {
  std::vector<E> out;
  if constexpr (std::is_same_v<E, at::Tensor>) {
    out = iv.toTensorVector();
  } else if constexpr (std::is_same_v<E, bool>) {
    auto l = iv.toBoolList();
    for (size_t i = 0; i < l.size(); i++) out.push_back(l.get(i));
  } else if constexpr (isInteger<E>) {
    for (int64_t x : iv.toIntVector()) out.push_back(narrowInteger<E>(x));
  } else if constexpr (std::is_floating_point_v<E>) {
    for (double x : iv.toDoubleVector()) out.push_back(E(x));
  } else {
    static_assert(AlwaysFalse<E>::value,
                  "load-inline: a list parameter must hold tensors, integers, floating-point numbers or booleans");
  }
  return out;
}
template <class E> void describeList(abi::Param& p) {
  if constexpr (std::is_same_v<E, at::Tensor>) p.type = abi::Type::TensorList;
  else if constexpr (std::is_same_v<E, bool>) p.type = abi::Type::BoolList;
  else if constexpr (isInteger<E>) {
    p.type = abi::Type::IntList;
    p.bits = int32_t(sizeof(E) * 8);
    p.isUnsigned = std::is_unsigned_v<E>;
  } else p.type = abi::Type::DoubleList;
}

template <class V> struct Holder<V, std::enable_if_t<IsVector<V>::value>> {
  using E = typename V::value_type;
  V v;
  explicit Holder(c10::IValue& iv) {
    for (auto&& x : listElements<E>(iv)) v.push_back(x);
  }
  V& value() { return v; }
  static void describe(abi::Param& p) { describeList<E>(p); }
  static std::string name() { return "std::vector<" + Holder<E>::name() + ">"; }
};
template <class R> struct Holder<R, std::enable_if_t<IsArrayRef<R>::value>> {
  using E = std::remove_const_t<typename R::value_type>;
  static_assert(!std::is_same_v<E, bool>, "load-inline: c10::ArrayRef<bool> cannot be bound: use std::vector<bool>");
  std::vector<E> store;
  explicit Holder(c10::IValue& iv) : store(listElements<E>(iv)) {}
  R value() { return R(store); }
  static void describe(abi::Param& p) { describeList<E>(p); }
  static std::string name() { return "c10::ArrayRef<" + Holder<E>::name() + ">"; }
};
template <class O> struct Holder<O, std::enable_if_t<IsOptional<O>::value>> {
  using E = std::decay_t<typename O::value_type>;
  std::optional<Holder<E>> inner;
  O v;
  explicit Holder(c10::IValue& iv) {
    if (!iv.isNone()) {
      inner.emplace(iv);
      v = O(inner->value());
    }
  }
  O& value() { return v; }
  static void describe(abi::Param& p) {
    Holder<E>::describe(p);
    p.optional = 1;
  }
  static std::string name() { return "optional<" + Holder<E>::name() + ">"; }
};

// One parameter of type A (as declared: by value, const&, & or &&) from its holder.
template <class A, class H> decltype(auto) pass(H& h) {
  if constexpr (std::is_reference_v<decltype(h.value())> && !std::is_lvalue_reference_v<A>) return std::move(h.value());
  else return h.value();
}

// ---- results ----------------------------------------------------------------------------------

template <class T, class = void> struct Result {
  static_assert(AlwaysFalse<T>::value,
                "load-inline: a result of this C++ type cannot be returned to Purple. Supported: void, "
                "torch::Tensor, numbers, bool, std::string, std::vector / std::tuple / std::pair of "
                "these, at::Scalar, at::Device, and optionals");
  static c10::IValue make(const T&) { return c10::IValue(); }
  static std::string name() { return "?"; }
};
template <> struct Result<at::Tensor> {
  static c10::IValue make(at::Tensor t) { return c10::IValue(std::move(t)); }
  static std::string name() { return "torch::Tensor"; }
};
template <> struct Result<bool> {
  static c10::IValue make(bool b) { return c10::IValue(b); }
  static std::string name() { return "bool"; }
};
template <class I> struct Result<I, std::enable_if_t<isInteger<I>>> {
  static c10::IValue make(I x) {
    if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(int64_t))
      TORCH_CHECK(x <= uint64_t(std::numeric_limits<int64_t>::max()), "the result ", x, " does not fit in int64_t");
    return c10::IValue(int64_t(x));
  }
  static std::string name() { return integerName<I>(); }
};
template <class F> struct Result<F, std::enable_if_t<std::is_floating_point_v<F>>> {
  static c10::IValue make(F x) { return c10::IValue(double(x)); }
  static std::string name() { return sizeof(F) == sizeof(float) ? "float" : "double"; }
};
template <> struct Result<std::string> {
  static c10::IValue make(std::string s) { return c10::IValue(std::move(s)); }
  static std::string name() { return "std::string"; }
};
template <> struct Result<const char*> {
  static c10::IValue make(const char* s) { return c10::IValue(std::string(s)); }
  static std::string name() { return "std::string"; }
};
template <class S> struct Result<S, std::enable_if_t<isStringView<S>>> {
  static c10::IValue make(S s) { return c10::IValue(std::string(s.data(), s.size())); }
  static std::string name() { return "std::string"; }
};
template <> struct Result<at::Scalar> {
  static c10::IValue make(const at::Scalar& s) { return c10::IValue(s); }
  static std::string name() { return "at::Scalar"; }
};
template <> struct Result<at::Device> {
  static c10::IValue make(at::Device d) { return c10::IValue(d); }
  static std::string name() { return "at::Device"; }
};
// Sequences of any length come back as a tuple, which Purple reads as a list.
template <class V> struct Result<V, std::enable_if_t<IsVector<V>::value || IsArrayRef<V>::value>> {
  using E = std::decay_t<typename V::value_type>;
  static c10::IValue make(const V& xs) {
    std::vector<c10::IValue> items;
    items.reserve(xs.size());
    for (auto&& x : xs) items.push_back(Result<E>::make(E(x)));
    return c10::IValue(c10::ivalue::Tuple::create(std::move(items)));
  }
  static std::string name() { return "std::vector<" + Result<E>::name() + ">"; }
};
template <class... T> struct Result<std::tuple<T...>> {
  static c10::IValue make(std::tuple<T...> t) {
    std::vector<c10::IValue> items;
    std::apply([&](auto&... x) { (items.push_back(Result<std::decay_t<T>>::make(std::move(x))), ...); }, t);
    return c10::IValue(c10::ivalue::Tuple::create(std::move(items)));
  }
  static std::string name() {
    std::string s = "std::tuple<";
    bool first = true;
    ((s += (first ? "" : ", ") + Result<std::decay_t<T>>::name(), first = false), ...);
    return s + ">";
  }
};
template <class A, class B> struct Result<std::pair<A, B>> {
  static c10::IValue make(std::pair<A, B> p) {
    return Result<std::tuple<A, B>>::make(std::tuple<A, B>(std::move(p.first), std::move(p.second)));
  }
  static std::string name() { return Result<std::tuple<A, B>>::name(); }
};
template <class O> struct Result<O, std::enable_if_t<IsOptional<O>::value>> {
  using E = std::decay_t<typename O::value_type>;
  static c10::IValue make(O x) { return x.has_value() ? Result<E>::make(std::move(*x)) : c10::IValue(); }
  static std::string name() { return "optional<" + Result<E>::name() + ">"; }
};

// ---- the bound functions ------------------------------------------------------------------------

struct CallableBase {
  virtual ~CallableBase() = default;
  virtual c10::IValue call(c10::IValue* args) = 0;
};

template <class F, class R, class... A>
struct Callable final : CallableBase {
  F f;
  explicit Callable(F fn) : f(std::move(fn)) {}
  c10::IValue call(c10::IValue* args) override { return callWith(args, std::index_sequence_for<A...>{}); }
  template <size_t... I>
  c10::IValue callWith(c10::IValue* args, std::index_sequence<I...>) {
    (void)args;
    // Built in place: a holder may point into itself (a string_view into its string).
    std::tuple<Holder<std::decay_t<A>>...> holders(args[I]...);
    (void)holders;
    if constexpr (std::is_void_v<R>) {
      f(pass<A>(std::get<I>(holders))...);
      return c10::IValue();
    } else {
      return Result<std::decay_t<R>>::make(f(pass<A>(std::get<I>(holders))...));
    }
  }
};

struct Record {
  std::string name, doc, resultType;
  bool returnsVoid = false;
  std::vector<abi::Param> params;
  std::vector<std::string> cppTypes;
  std::vector<std::string> names;                        // from py::arg; empty when none given
  std::vector<std::shared_ptr<c10::IValue>> defaults;    // per parameter; null: required
  std::vector<std::string> parsedNames;                  // load-inline's reading of the source
  std::unique_ptr<CallableBase> callable;
};

template <class R, class... A> struct Signature {};
template <class T> struct SignatureOf : SignatureOf<decltype(&T::operator())> {};
template <class R, class... A> struct SignatureOf<R (*)(A...)> { using type = Signature<R, A...>; };
template <class R, class... A> struct SignatureOf<R (*)(A...) noexcept> { using type = Signature<R, A...>; };
template <class C, class R, class... A> struct SignatureOf<R (C::*)(A...)> { using type = Signature<R, A...>; };
template <class C, class R, class... A> struct SignatureOf<R (C::*)(A...) const> { using type = Signature<R, A...>; };
template <class C, class R, class... A> struct SignatureOf<R (C::*)(A...) noexcept> { using type = Signature<R, A...>; };
template <class C, class R, class... A> struct SignatureOf<R (C::*)(A...) const noexcept> { using type = Signature<R, A...>; };

template <class F, class R, class... A>
void bindCallable(Record& rec, F f, Signature<R, A...>) {
  rec.callable = std::make_unique<Callable<F, R, A...>>(std::move(f));
  rec.returnsVoid = std::is_void_v<R>;
  if constexpr (std::is_void_v<R>) rec.resultType = "void";
  else rec.resultType = Result<std::decay_t<R>>::name();
  abi::Param blank{};
  (void)blank;
  ((rec.params.push_back(blank), Holder<std::decay_t<A>>::describe(rec.params.back()),
    rec.cppTypes.push_back(Holder<std::decay_t<A>>::name())),
   ...);
  rec.defaults.resize(sizeof...(A));
}

std::vector<std::unique_ptr<Record>>& records() {
  static std::vector<std::unique_ptr<Record>> r;
  return r;
}

// Names load-inline read from the source for a FUNCTIONS entry: used when no py::arg says better.
struct parsed_names {
  std::vector<std::string> names;
};

}  // namespace
}  // namespace purple_ext

// ---- the pybind11 names that extension code uses --------------------------------------------------

namespace pybind11 {
namespace {

struct none {};
struct kw_only {};
struct pos_only {};
struct gil_scoped_release {};
struct gil_scoped_acquire {};
template <class... T> struct call_guard {};
enum class return_value_policy { automatic, automatic_reference, take_ownership, copy, move, reference, reference_internal };

template <class T> c10::IValue defaultValue(T&& v) {
  using D = std::decay_t<T>;
  if constexpr (std::is_same_v<D, none> || std::is_same_v<D, std::nullopt_t> ||
                std::is_same_v<D, std::decay_t<decltype(c10::nullopt)>>)
    return c10::IValue();
  else if constexpr (std::is_same_v<D, at::ScalarType>) return c10::IValue(v);
  else if constexpr (std::is_array_v<std::remove_reference_t<T>>) return c10::IValue(std::string(v));
  else return ::purple_ext::Result<D>::make(std::forward<T>(v));
}

struct arg_v;
struct arg {
  const char* name;
  explicit arg(const char* n) : name(n) {}
  template <class T> arg_v operator=(T&& value) const;
  arg& noconvert(bool = true) { return *this; }
  arg& none(bool = true) { return *this; }
};
struct arg_v : arg {
  std::shared_ptr<c10::IValue> value;
  arg_v(const arg& a, c10::IValue v) : arg(a), value(std::make_shared<c10::IValue>(std::move(v))) {}
};
template <class T> arg_v arg::operator=(T&& value) const { return arg_v(*this, defaultValue(std::forward<T>(value))); }

class module_ {
 public:
  module_() = default;
  explicit module_(const char*) {}
  // m.def("name", fn, extra...): extra is the docstring, py::arg annotations, and guards or
  // policies (which mean nothing without Python).
  template <class F, class... Extra>
  module_& def(const char* name, F&& f, const Extra&... extra) {
    auto rec = std::make_unique<::purple_ext::Record>();
    rec->name = name;
    using Fn = std::decay_t<F>;
    ::purple_ext::bindCallable(*rec, Fn(std::forward<F>(f)), typename ::purple_ext::SignatureOf<Fn>::type{});
    (apply(*rec, extra), ...);
    ::purple_ext::records().push_back(std::move(rec));
    return *this;
  }
  std::string& doc() { return doc_; }
  module_ def_submodule(const char*, const char* = nullptr) { return module_(); }

 private:
  static void apply(::purple_ext::Record& rec, const char* doc) { rec.doc = doc; }
  static void apply(::purple_ext::Record& rec, const std::string& doc) { rec.doc = doc; }
  static void apply(::purple_ext::Record& rec, const arg_v& a) {
    rec.names.push_back(a.name);
    if (rec.names.size() <= rec.defaults.size()) rec.defaults[rec.names.size() - 1] = a.value;
  }
  static void apply(::purple_ext::Record& rec, const arg& a) { rec.names.push_back(a.name); }
  static void apply(::purple_ext::Record& rec, const ::purple_ext::parsed_names& p) { rec.parsedNames = p.names; }
  template <class Other> static void apply(::purple_ext::Record&, const Other&) {}
  std::string doc_;
};
using module = module_;

}  // namespace
}  // namespace pybind11
namespace py = pybind11;

namespace purple_ext {
namespace {

using ModuleBody = void (*)(::pybind11::module_&);
std::vector<ModuleBody>& moduleBodies() {
  static std::vector<ModuleBody> bodies;
  return bodies;
}
struct Registrar {
  explicit Registrar(ModuleBody body) { moduleBodies().push_back(body); }
};

// Runs the module bodies once (in the call that loads the library, where Purple catches what they
// throw, not at dlopen) and describes what they bound.
const abi::Module* buildModule() {
  static abi::Module module{};
  static std::vector<abi::Function> functions;
  static bool built = false;
  if (built) return &module;
  ::pybind11::module_ m;
  for (ModuleBody body : moduleBodies()) body(m);
  for (auto& rec : records()) {
    for (auto& other : records())
      TORCH_CHECK(other.get() == rec.get() || other->name != rec->name, "the function ", rec->name,
                  " is bound twice (overloads are not supported)");
    size_t n = rec->params.size();
    TORCH_CHECK(rec->names.empty() || rec->names.size() == n, rec->name, ": ", rec->names.size(),
                " py::arg annotations for ", n, " parameters");
    bool sawDefault = false;
    for (size_t i = 0; i < n; i++) {
      if (rec->defaults[i]) sawDefault = true;
      else TORCH_CHECK(!sawDefault, rec->name, ": parameter ", i + 1, " has no default but one before it has");
    }
    const std::vector<std::string>& names = !rec->names.empty() ? rec->names : rec->parsedNames;
    for (size_t i = 0; i < n; i++) {
      rec->params[i].cppType = rec->cppTypes[i].c_str();
      rec->params[i].name = names.size() == n && !names[i].empty() ? names[i].c_str() : nullptr;
      rec->params[i].defaultValue = rec->defaults[i].get();
    }
    abi::Function f{};
    f.name = rec->name.c_str();
    f.doc = rec->doc.c_str();
    f.nParams = int32_t(n);
    f.params = rec->params.data();
    f.returnsVoid = rec->returnsVoid;
    f.resultType = rec->resultType.c_str();
    f.invoke = [](const abi::Function* self, c10::IValue* args) {
      return static_cast<CallableBase*>(self->target)->call(args);
    };
    f.target = rec->callable.get();
    functions.push_back(f);
  }
  module.version = abi::kVersion;
  module.nFunctions = int32_t(functions.size());
  module.functions = functions.data();
  module.torchVersion = TORCH_VERSION;
  built = true;
  return &module;
}

}  // namespace
}  // namespace purple_ext

// pybind11's module definition: the body runs when Purple loads the library.
#define PYBIND11_MODULE(name, variable, ...)                                                          \
  static void purple_ext_module_body_##name(::pybind11::module_& variable);                           \
  static const ::purple_ext::Registrar purple_ext_module_registrar_##name(&purple_ext_module_body_##name); \
  static void purple_ext_module_body_##name(::pybind11::module_& variable)

// The library's entry point; load-inline appends it (with the FUNCTIONS bindings) to the source.
#define PURPLE_EXTENSION_ENTRY                                                                         \
  extern "C" __attribute__((visibility("default"))) const ::purple_extension_abi::Module*               \
  purple_extension_module_v1() {                                                                       \
    return ::purple_ext::buildModule();                                                                \
  }

namespace torch {
// What load_inline's generated bindings wrap each function in (PyTorch 2.x): nothing to do here.
template <class F> F wrap_pybind_function(F f) { return f; }
}  // namespace torch
