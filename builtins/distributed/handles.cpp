// Async collectives: a collective called with :async #t returns a handle at once (the transfer
// runs on Gloo's or NCCL's own threads); dist-wait blocks until it is done and returns what the
// synchronous call would have returned.
#include "builtins/distributed/pending.hpp"
#include "builtins/builtins.hpp"
#include "interp/memory/tensor_value.hpp"

namespace purple::dist {

namespace {

const char* kHandleType = "dist-handle";

void destroyPending(void* p) { delete static_cast<Pending*>(p); }

Pending* handleArg(Value v, std::string_view who, int index) {
  if (v.is(Kind::Foreign)) {
    auto* f = v.as<Foreign>();
    if (f->typeName == intern(kHandleType) && f->ptr) return static_cast<Pending*>(f->ptr);
  }
  throwTypeError(who, index, "a handle from an :async collective", v);
}

Value tensorList(const std::vector<at::Tensor>& ts) {
  Value r = Value::nil();
  for (size_t k = ts.size(); k-- > 0;) r = cons(wrapTensor(ts[k]), r);
  return r;
}

}  // namespace

Value complete(Interp& in, Pending& p) {
  if (!p.done) {
    for (auto& w : p.works) waitWork(w, p.who);
    if (p.finish) {
      try {
        p.finish();
      } catch (const PurpleException&) {
        throw;
      } catch (...) {
        rethrowCommError(p.who);
      }
    }
    p.done = true;
  }
  switch (p.result) {
    case Pending::Result::Unspecified: return Value::unspecified();
    case Pending::Result::Input: return p.input.get();
    case Pending::Result::Tensor: return wrapTensor(p.tensors.at(0));
    case Pending::Result::TensorList: return tensorList(p.tensors);
    case Pending::Result::TensorListOrFalse: return p.tensors.empty() ? Value::f() : tensorList(p.tensors);
    case Pending::Result::SourceRank:
      return makeInteger(p.group && p.sourceRank >= 0 ? p.group->globalRanks.at(p.sourceRank) : p.sourceRank);
    case Pending::Result::Custom: return p.custom(in);
  }
  return Value::unspecified();
}

Value finishOrDefer(Interp& in, std::unique_ptr<Pending> p, bool async) {
  if (!async) return complete(in, *p);
  return makeForeign(p.release(), &destroyPending, intern(kHandleType));
}

}  // namespace purple::dist

namespace purple {

using namespace dist;

void registerDistHandles(Registry& r) {
  r.def("dist-wait", "(handle)",
        [](Interp& in, Value h) -> Value {
          if (isList(h) && !h.isNil()) {
            std::vector<Value, traceable_allocator<Value>> results;
            for (Value p = h; isPair(p); p = cdr(p)) results.push_back(complete(in, *handleArg(car(p), "dist-wait", 1)));
            return listFromArray(results.data(), results.size());
          }
          return complete(in, *handleArg(h, "dist-wait", 1));
        },
        "Waits for HANDLE (from a collective called with :async #t) and returns what the collective returns: the "
        "tensor it changed, the gathered list, the sender's rank ... A list of handles is waited for in order and "
        "gives the list of results. Waiting again returns the same result.");
  r.def("dist-completed?", "(handle)",
        [](Value h) {
          Pending* p = handleArg(h, "dist-completed?", 1);
          if (p->done) return true;
          if (p->completesAtWait) return false;
          for (auto& w : p->works)
            if (!w->isCompleted()) return false;
          return true;
        },
        "True when the transfer behind HANDLE has finished (dist-wait will not block). A receive in a checked group "
        "checks the sender's header before taking the data, which dist-wait does: it is not complete before.");
  r.def("dist-handle?", "(x)",
        [](Value x) { return x.is(Kind::Foreign) && x.as<Foreign>()->typeName == intern("dist-handle"); },
        "True when X is a handle returned by an :async collective.");
}

}  // namespace purple
