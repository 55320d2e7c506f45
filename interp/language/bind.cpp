// The machinery behind Registry::def: signatures, argument binding, conversion errors, and the
// translation of C++ / LibTorch exceptions into Purple errors.
#include "interp/language/bind.hpp"
#include "interp/core/gc.hpp"
#include "interp/language/numbers.hpp"
#include "interp/language/printer.hpp"
#include "interp/language/reader.hpp"
#include "interp/limits/sandbox.hpp"
#include <cmath>
#include <mutex>

namespace purple {

std::string primitiveName(Value prim) { return prim.as<Primitive>()->info->name; }

std::string describeValueType(Value v) {
  if (v.isFixnum() || isBignum(v)) return "integer";
  if (isFlonum(v)) return "real";
  if (isRatnum(v)) return "rational";
  if (v.isBool()) return "boolean";
  if (v.isChar()) return "character";
  if (v.isNil()) return "empty list";
  if (!v.isObject()) return "special value";
  switch (v.obj()->kind) {
    case Kind::Pair: return "pair";
    case Kind::Symbol: return isKeyword(v) ? "keyword" : "symbol";
    case Kind::String: return "string";
    case Kind::Vector: return "vector";
    case Kind::Tensor: return "tensor";
    default: return "object";
  }
}

static std::string paramName(const PrimitiveInfo* info, int index);

void throwConversionError(const PrimitiveInfo* info, int index, std::string_view expected, Value got) {
  if (got.isMissing())
    throwError("arity-error", info->name + ": missing argument " + std::to_string(index + 1) + " (" +
                                  paramName(info, index) + ")");
  std::string msg = info->name + ": argument " + std::to_string(index + 1) + " (" + paramName(info, index) +
                    ") must be " + std::string(expected) + ", got " + toWriteStringBounded(got);
  Value err = makeError(intern("type-error"), msg, Value::nil());
  err.as<ErrorObject>()->who = intern(info->name);
  if (Interp* in = Interp::current()) err.as<ErrorObject>()->backtrace = in->backtrace();
  throw PurpleException(err);
}

int64_t integerValue(Value v, const PrimitiveInfo* info, int i) {
  if (v.isFixnum()) return v.fixnum();
  if (isFlonum(v)) {
    double d = flonumValue(v);
    if (d == std::floor(d) && std::fabs(d) < 9.2e18) return int64_t(d);
  }
  if (isBignum(v)) {
    // fixnums stop short of 64 bits; a bignum in int64's range (a 64-bit seed) still converts
    auto* b = v.as<Bignum>();
    if (b->extra == 1) {
      uint64_t mag = b->limbs[0];
      if (!b->small && mag <= uint64_t(INT64_MAX)) return int64_t(mag);
      if (b->small && mag <= uint64_t(INT64_MAX) + 1) return int64_t(0 - mag);
    }
    throwConversionError(info, i, "an integer that fits in 64 bits", v);
  }
  if (isTensor(v) && tensorOf(v).defined() && tensorOf(v).numel() == 1 && !tensorOf(v).is_floating_point())
    return tensorOf(v).item<int64_t>();
  throwConversionError(info, i, "an integer", v);
}

double realValue(Value v, const PrimitiveInfo* info, int i) {
  if (isNumber(v)) return toDouble(v);
  if (isTensor(v) && tensorOf(v).defined() && tensorOf(v).numel() == 1) return tensorOf(v).item<double>();
  throwConversionError(info, i, "a real number", v);
}

IntList intListValue(Value v, const PrimitiveInfo* info, int i) {
  IntList out;
  if (v.isFixnum()) return {v.fixnum()};
  // a rest list holding one list or vector: (f '(2 3)) as well as (f 2 3)
  if (isPair(v) && cdr(v).isNil() && (isPair(car(v)) || car(v).is(Kind::Vector) || car(v).isNil())) v = car(v);
  if (v.is(Kind::Vector)) {
    auto* vec = v.as<Vector>();
    for (uint32_t k = 0; k < vec->extra; k++) out.push_back(integerValue(vec->items[k], info, i));
    return out;
  }
  if (isTensor(v) && tensorOf(v).defined() && tensorOf(v).dim() <= 1) {
    at::Tensor t = tensorOf(v).to(at::kCPU).to(at::kLong).contiguous();
    for (int64_t k = 0; k < t.numel(); k++) out.push_back(t.data_ptr<int64_t>()[k]);
    return out;
  }
  if (!isList(v)) throwConversionError(info, i, "a list of integers", v);
  for (Value p = v; isPair(p); p = cdr(p)) out.push_back(integerValue(car(p), info, i));
  return out;
}

// ---- signatures --------------------------------------------------------------------------------

namespace {
struct ParsedParam {
  std::string name;
  Value defaultValue = Value::missing();
};
}  // namespace

// Names, in C++ parameter order, kept beside the info (a builtin's lives forever, a host
// function's until its interpreter goes).
// Interpreters are made on several threads at once: the table has a lock.
static std::mutex gParamNamesLock;
static std::unordered_map<const PrimitiveInfo*, std::vector<std::string>>& paramNames() {
  static auto* m = new std::unordered_map<const PrimitiveInfo*, std::vector<std::string>>();
  return *m;
}

static std::string paramName(const PrimitiveInfo* info, int index) {
  std::lock_guard<std::mutex> g(gParamNamesLock);
  auto it = paramNames().find(info);
  if (it == paramNames().end() || index < 0 || size_t(index) >= it->second.size()) return "?";
  return it->second[size_t(index)];
}

PrimitiveInfo* Registry::makeInfo(std::string_view name, std::string_view signature, std::string_view doc,
                                  int cppParams, bool immortal) {
  auto rootMemory = immortal ? &gcAllocImmortalRoot : &gcAllocRoot;
  auto* info = new PrimitiveInfo();
  info->name = std::string(name);
  info->signature = std::string(signature);
  info->doc = std::string(doc);
  info->family = family_;
  Value sig;
  {
    // `(x . rest :key k)` is not a readable dotted list; read a lone `.` as `:rest`.
    std::string text(signature);
    for (size_t i = 0; i < text.size(); i++)
      if (text[i] == '.' && (i == 0 || text[i - 1] == '(' || text[i - 1] == ' ') &&
          (i + 1 == text.size() || text[i + 1] == ' '))
        text.replace(i, 1, ":rest");
    Reader r(text, Value::f(), nullptr);
    if (!r.read(sig) || !(isPair(sig) || sig.isNil()))
      throw std::logic_error("bad signature for " + info->name + ": " + std::string(signature));
  }
  enum { Req, Opt, Rest, Key } mode = Req;
  std::vector<ParsedParam> params;
  std::vector<Value> keys;
  Value p = sig;
  for (; isPair(p); p = cdr(p)) {
    Value x = car(p);
    if (isKeyword(x)) {
      std::string_view k = symbolName(x);
      if (k == "optional") mode = Opt;
      else if (k == "key") mode = Key;
      else if (k == "rest") mode = Rest;
      else throw std::logic_error("bad signature marker in " + info->name);
      continue;
    }
    ParsedParam pp;
    if (isPair(x)) {
      pp.name = std::string(symbolName(car(x)));
      Value d = cadr(x);
      if (isPair(d) && car(d) == intern("quote")) d = cadr(d);
      pp.defaultValue = d;
    } else {
      pp.name = std::string(symbolName(x));
    }
    if (mode == Req) info->nRequired++;
    else if (mode == Opt) info->nOptional++;
    else if (mode == Rest) {
      if (info->hasRest) throw std::logic_error("two rest parameters in " + info->name);
      info->hasRest = true;
    } else {
      info->nKeys++;
      keys.push_back(internKeyword(pp.name));
    }
    params.push_back(pp);
  }
  if (!p.isNil()) {   // dotted rest: (a b . rest)
    if (info->nKeys) throw std::logic_error("dotted rest must precede :key in " + info->name);
    info->hasRest = true;
    params.push_back(ParsedParam{std::string(symbolName(p))});
    // a :key section may follow a dotted rest only in the (. rest :key ...) spelling, which
    // the reader gives as a dotted pair; handled above
  }
  info->nParams = int(params.size());
  if (cppParams >= 0 && cppParams != info->nParams)
    throw std::logic_error("signature of " + info->name + " names " + std::to_string(info->nParams) +
                           " parameters but the C++ function takes " + std::to_string(cppParams));
  info->keys = keys.empty() ? nullptr : static_cast<Value*>(rootMemory(keys.size() * sizeof(Value)));
  for (size_t i = 0; i < keys.size(); i++) info->keys[i] = keys[i];
  if (!keys.empty()) {
    info->keyTwin = new int[keys.size()];
    int keyBase = info->nParams - info->nKeys;
    for (int k = 0; k < info->nKeys; k++) {
      info->keyTwin[k] = -1;
      for (int o = info->nRequired; o < info->nRequired + info->nOptional; o++)
        if (params[size_t(o)].name == params[size_t(keyBase + k)].name) info->keyTwin[k] = o;
    }
  }
  info->defaults = static_cast<Value*>(rootMemory((params.size() + 1) * sizeof(Value)));
  std::vector<std::string> names;
  for (size_t i = 0; i < params.size(); i++) {
    info->defaults[i] = params[i].defaultValue;
    names.push_back(params[i].name);
  }
  {
    std::lock_guard<std::mutex> g(gParamNamesLock);
    paramNames()[info] = std::move(names);
  }
  return info;
}

namespace {
std::mutex gSharedInfosLock;
std::unordered_map<std::string, PrimitiveInfo*>& sharedInfos() {
  static auto* m = new std::unordered_map<std::string, PrimitiveInfo*>();
  return *m;
}
}  // namespace

PrimitiveInfo* Registry::sharedInfo(std::string_view name, std::string_view signature, std::string_view doc,
                                    int cppParams, PrimFn entry, void (*complete)(PrimitiveInfo*, void*),
                                    void* context) {
  // The entry (one per C++ callable type) tells apart builtins of the same name and text; the
  // family, builtins that two families both define.
  std::string key = family_;
  for (std::string_view part : {name, signature, doc}) {
    key += '\0';
    key += part;
  }
  key.append(reinterpret_cast<const char*>(&entry), sizeof entry);
  std::lock_guard<std::mutex> g(gSharedInfosLock);
  PrimitiveInfo*& slot = sharedInfos()[key];
  if (!slot) {
    PrimitiveInfo* info = makeInfo(name, signature, doc, cppParams, true);
    if (complete) complete(info, context);
    slot = info;
  }
  return slot;
}

PrimitiveInfo* Registry::defHost(std::string_view name, std::string_view signature, PrimFn fn, std::string_view doc,
                                 uint8_t flags) {
  PrimitiveInfo* info = makeInfo(name, signature, doc, -1, false);
  install(info, fn, flags);
  return info;
}

void Registry::releaseHostInfo(PrimitiveInfo* info) {
  {
    std::lock_guard<std::mutex> g(gParamNamesLock);
    paramNames().erase(info);
  }
  if (info->keys) gcFreeRoot(info->keys);
  if (info->defaults) gcFreeRoot(info->defaults);
  delete[] info->keyTwin;
  delete info;
}

PrimitiveInfo* Registry::runtimeInfo(std::string_view name, std::string_view signature, std::string_view doc) {
  return makeInfo(name, signature, doc, -1, true);
}

Value Registry::makePrimitive(PrimitiveInfo* info, PrimFn fn, uint8_t flags) {
  auto* p = static_cast<Primitive*>(gcAlloc(sizeof(Primitive)));
  p->kind = Kind::Primitive;
  p->flags = flags;
  p->small = 0;
  p->extra = 0;
  p->fn = fn;
  p->info = info;
  return Value(p);
}

void Registry::install(PrimitiveInfo* info, PrimFn fn, uint8_t flags) {
  in_.defineGlobal(info->name, makePrimitive(info, fn, flags), makeString(info->doc));
}

void Registry::defRaw(std::string_view name, std::string_view signature, PrimFn fn, std::string_view doc,
                      uint8_t flags) {
  install(sharedInfo(name, signature, doc, -1, fn, nullptr, nullptr), fn, flags);
}

void Registry::alias(std::string_view newName, std::string_view existing) {
  Value v = in_.lookupGlobal(existing);
  if (v.isUnbound()) throw std::logic_error("alias of unknown builtin " + std::string(existing));
  GlobalCell* old = in_.findGlobal(intern(existing));
  in_.defineGlobal(newName, v, old ? old->doc : Value::f());
}

void Registry::inPlaceOnTemporary(std::string_view name, void (*fn)(at::Tensor&)) {
  Value v = in_.lookupGlobal(name);
  if (!v.is(Kind::Primitive) || !(v.obj()->flags & kPrimUnboxedTensor))
    throw std::logic_error("inPlaceOnTemporary: " + std::string(name) + " is not a tensor builtin");
  // Shared: only the first interpreter writes it (others may be reading it by then).
  PrimitiveInfo* info = v.as<Primitive>()->info;
  if (info->inPlace != fn) info->inPlace = fn;
}

// ---- argument binding --------------------------------------------------------------------------

static bool isDeclaredKey(const PrimitiveInfo* info, Value v) {
  if (!isKeyword(v)) return false;
  for (int k = 0; k < info->nKeys; k++)
    if (info->keys[k] == v) return true;
  return false;
}

static std::string knownKeys(const PrimitiveInfo* info) {
  std::string s;
  for (int k = 0; k < info->nKeys; k++) s += (k ? " :" : ":") + std::string(symbolName(info->keys[k]));
  return s.empty() ? "none" : s;
}

Value* bindArguments(Interp&, Value* argv, int argc, PrimitiveInfo* info, Value* slots) {
  int nreq = info->nRequired, nopt = info->nOptional;
  if (!info->hasRest && info->nKeys == 0) {
    if (argc < nreq || argc > nreq + nopt) throwArityError(info->name, argc, info->signature);
    for (int i = 0; i < argc; i++) slots[i] = argv[i];
    for (int i = argc; i < nreq + nopt; i++) slots[i] = info->defaults[i];
    return slots;
  }
  if (argc < nreq) throwArityError(info->name, argc, info->signature);
  int i = 0, s = 0;
  for (; i < nreq; i++) slots[s++] = argv[i];
  int optionalGiven = 0;
  for (int k = 0; k < nopt; k++, s++) {
    if (i < argc && !isDeclaredKey(info, argv[i])) {
      // `(tensor-sum x :dimm 0)`: an unknown keyword followed by a value, where keywords are
      // expected, is a misspelt option, not a keyword passed as the optional argument.
      if (info->nKeys && !info->hasRest && isKeyword(argv[i]) && i + 1 < argc)
        throwError("arity-error", info->name + ": unknown keyword " + toWriteString(argv[i]) + " (known: " +
                                      knownKeys(info) + ")");
      slots[s] = argv[i++];
      optionalGiven++;
    } else {
      slots[s] = info->defaults[s];
    }
  }
  if (info->hasRest) {
    int start = i;
    while (i < argc && !isDeclaredKey(info, argv[i])) i++;
    slots[s++] = listFromArray(argv + start, size_t(i - start));
  }
  int keyBase = s;
  for (int k = 0; k < info->nKeys; k++) slots[keyBase + k] = info->defaults[keyBase + k];
  uint64_t given = 0;   // keys seen (a repeated one is an error); past 64 keys, unchecked
  while (i < argc) {
    Value key = argv[i];
    if (!isKeyword(key)) {
      if (info->nKeys == 0) throwArityError(info->name, argc, info->signature);
      throwError("arity-error", info->name + ": unexpected argument " + toWriteStringBounded(key) +
                                    " where a keyword (" + knownKeys(info) + ") was expected");
    }
    int k = 0;
    while (k < info->nKeys && info->keys[k] != key) k++;
    if (k == info->nKeys)
      throwError("arity-error", info->name + ": unknown keyword " + toWriteString(key) + " (known: " +
                                    knownKeys(info) + ")");
    if (i + 1 >= argc) throwError("arity-error", info->name + ": keyword " + toWriteString(key) + " needs a value");
    if (k < 64) {
      if (given & (uint64_t(1) << k))
        throwError("arity-error", info->name + ": keyword " + toWriteString(key) + " given twice");
      given |= uint64_t(1) << k;
    }
    int twin = info->keyTwin ? info->keyTwin[k] : -1;
    if (twin >= 0 && twin - nreq < optionalGiven)
      throwError("arity-error", info->name + ": " + std::string(symbolName(key)) + " given twice, by position and as " +
                                    toWriteString(key));
    slots[keyBase + k] = argv[i + 1];
    i += 2;
  }
  return slots;
}

void rethrowForeign(const PrimitiveInfo* info) {
  // Makes the exception to throw (a lambda cannot be marked noreturn, so each catch throws it).
  auto failure = [&](std::string_view kind, std::string msg) {
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
    Value err = makeError(intern(kind), msg, Value::nil());
    err.as<ErrorObject>()->who = intern(info->name);
    if (Interp* in = Interp::current()) err.as<ErrorObject>()->backtrace = in->backtrace();
    return PurpleException(err);
  };
  try {
    throw;
  } catch (const c10::OutOfMemoryError& e) {
    throw failure("out-of-memory", e.what_without_backtrace());
  } catch (const c10::Error& e) {
    throw failure("tensor-error", e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    gcCollectNow();
    throw failure("memory-error", "out of memory");
  } catch (const std::exception& e) {
    throw failure("error", e.what());
  }
}

}  // namespace purple

// ---- sandbox rules (interp/limits/sandbox.hpp): declared beside each registration, checked here ----

namespace purple {

namespace {

// A guarded builtin's entry: a copy of its info (so help, signatures and families read the
// same), the original entry, and the rule. The original runs with its own info, so its argument
// errors name its parameters as before.
struct GuardedInfo : PrimitiveInfo {
  PrimitiveInfo* original = nullptr;
  PrimFn inner = nullptr;
  SandboxRule rule;
};

uint8_t allowedNeeds(const Interp& in) {
  return uint8_t((in.limits.allowFiles ? Needs::Files : 0) | (in.limits.allowProcess ? Needs::Process : 0) |
                 (in.limits.allowEnvironment ? Needs::Environment : 0));
}

Value guardedCall(Interp& in, Value* argv, int argc, PrimitiveInfo* info) {
  auto* g = static_cast<GuardedInfo*>(info);
  if (g->rule.needs & ~allowedNeeds(in)) checkSandboxNeeds(in, g->rule);
  return g->inner(in, argv, argc, g->original);
}

std::mutex gRulesLock;
std::vector<SandboxRule>& rules() {
  static auto* v = new std::vector<SandboxRule>();
  return *v;
}

Primitive* primitiveNamed(Registry& r, std::string_view name) {
  Value v = r.interp().lookupGlobal(name);
  if (!v.is(Kind::Primitive)) throw std::logic_error("sandbox rule for " + std::string(name) + ", which is not a builtin");
  return v.as<Primitive>();
}

void remember(SandboxRule rule) {
  std::lock_guard<std::mutex> lock(gRulesLock);
  for (const SandboxRule& known : rules())
    if (known.name == rule.name) return;   // declared by an earlier interpreter
  rules().push_back(std::move(rule));
}

// Made once per builtin, like the info it wraps, and shared by every interpreter.
GuardedInfo* guardedInfo(PrimitiveInfo* original, PrimFn inner, const SandboxRule& rule) {
  static std::mutex lock;
  static auto* made = new std::unordered_map<const PrimitiveInfo*, GuardedInfo*>();
  std::lock_guard<std::mutex> g(lock);
  GuardedInfo*& slot = (*made)[original];
  if (!slot) {
    auto* guarded = new GuardedInfo();
    static_cast<PrimitiveInfo&>(*guarded) = *original;
    guarded->original = original;
    guarded->inner = inner;
    guarded->rule = rule;
    guarded->tensorInvoke = nullptr;
    guarded->inPlace = nullptr;
    slot = guarded;
  }
  return slot;
}

void record(Registry& r, SandboxRule rule) {
  Primitive* p = primitiveNamed(r, rule.name);
  rule.family = p->info->family;
  if (rule.kind == SandboxKind::Refused) {
    if (rule.needs == 0) throw std::logic_error("sandbox rule for " + rule.name + " refuses nothing");
    if (p->fn == &guardedCall) throw std::logic_error("two sandbox rules for " + rule.name);
    p->info = guardedInfo(p->info, p->fn, rule);
    p->fn = &guardedCall;
    // The evaluator calls an unboxed-tensor builtin's tensorInvoke directly: keep it on the
    // guarded entry instead.
    p->flags &= uint8_t(~kPrimUnboxedTensor);
  }
  remember(std::move(rule));
}

}  // namespace

namespace {
SandboxRule makeRule(std::string_view name, SandboxKind kind, std::string_view touches, std::string_view how = {}) {
  SandboxRule rule;
  rule.name = std::string(name);
  rule.kind = kind;
  rule.touches = std::string(touches);
  rule.how = std::string(how);
  return rule;
}
}  // namespace

void sandbox(Registry& r, std::string_view name, uint8_t needs, std::string_view touches) {
  sandbox(r, name, needs, touches, {}, {});
}

void sandbox(Registry& r, std::string_view name, uint8_t needs, std::string_view touches,
             std::string_view errorKind, std::string_view errorText) {
  SandboxRule rule = makeRule(name, SandboxKind::Refused, touches);
  rule.needs = needs;
  rule.errorKind = std::string(errorKind);
  rule.errorText = std::string(errorText);
  record(r, std::move(rule));
}

void sandboxConditional(Registry& r, std::string_view name, std::string_view touches, std::string_view how) {
  record(r, makeRule(name, SandboxKind::Conditional, touches, how));
}

void sandboxAllowed(Registry& r, std::string_view name, std::string_view touches, std::string_view why) {
  record(r, makeRule(name, SandboxKind::Allowed, touches, why));
}

void sandboxSyntax(std::string_view name, std::string_view touches, std::string_view how) {
  SandboxRule rule = makeRule(name, SandboxKind::Conditional, touches, how);
  rule.family = "syntax";
  remember(std::move(rule));
}

std::vector<SandboxRule> sandboxRules() {
  std::lock_guard<std::mutex> lock(gRulesLock);
  return rules();
}

bool findSandboxRule(std::string_view name, SandboxRule& out) {
  std::lock_guard<std::mutex> lock(gRulesLock);
  for (const SandboxRule& r : rules())
    if (r.name == name) {
      out = r;
      return true;
    }
  return false;
}

void checkSandboxNeeds(Interp& in, const SandboxRule& rule) {
  uint8_t missing = uint8_t(rule.needs & ~allowedNeeds(in));
  if (!missing) return;
  if (!rule.errorKind.empty()) throwError(rule.errorKind, rule.errorText);
  if (missing & Needs::Files) throwError("file-error", rule.name + ": file access is disabled in this interpreter");
  if (missing & Needs::Process) throwError("error", rule.name + ": process access is disabled in this interpreter");
  throwError("error", rule.name + ": environment access is disabled in this interpreter");
}

}  // namespace purple
