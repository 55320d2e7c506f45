// Collectives on tensors, torch.distributed's set: all-reduce, broadcast, reduce, all-gather,
// gather, scatter, reduce-scatter, all-to-all, barrier, send and receive. Names ending in `!`
// change their tensor argument in place, as torch's do; the others return new tensors. Every
// one takes :group (default: the world) and :async #t (returns a handle for dist-wait). :src and
// :dst are world ranks, as in torch.distributed.
//
// Gloo lacks an average reduction and (in LibTorch 1.13) reduce-scatter: an average is a sum
// divided afterwards, and reduce-scatter is an all-to-all followed by a local reduction, which
// moves the same number of bytes as a ring reduce-scatter.
#include "builtins/distributed/pending.hpp"
#include "builtins/builtins.hpp"
#include "interp/memory/tensor_value.hpp"
#include <atomic>
#include "interp/limits/sandbox.hpp"

namespace purple::dist {

namespace {

struct Reduction {
  c10d::ReduceOp::RedOpType op = c10d::ReduceOp::SUM;
  bool averageAfterwards = false;    // AVG emulated as SUM / n (Gloo)
};

Reduction reductionArg(Value v, const Group& g, std::string_view who) {
  Reduction r;
  if (v.isMissing() || v.isFalse()) return r;
  std::string s;
  if (isString(v)) s = std::string(stringView(v));
  else if (v.is(Kind::Symbol)) s = std::string(symbolName(v));
  else throwTypeError(who, 0, "a reduction ('sum, 'avg, 'product, 'min or 'max)", v);
  if (s == "sum") r.op = c10d::ReduceOp::SUM;
  else if (s == "avg" || s == "mean") r.op = c10d::ReduceOp::AVG;
  else if (s == "product" || s == "prod") r.op = c10d::ReduceOp::PRODUCT;
  else if (s == "min") r.op = c10d::ReduceOp::MIN;
  else if (s == "max") r.op = c10d::ReduceOp::MAX;
  else if (s == "band") r.op = c10d::ReduceOp::BAND;
  else if (s == "bor") r.op = c10d::ReduceOp::BOR;
  else if (s == "bxor") r.op = c10d::ReduceOp::BXOR;
  else
    throwError("dist-error", std::string(who) + ": unknown reduction " + s +
                                 " (expected sum, avg, product, min, max, band, bor or bxor)");
  if (r.op == c10d::ReduceOp::AVG && g.backend != "nccl") {
    r.op = c10d::ReduceOp::SUM;
    r.averageAfterwards = true;
  }
  return r;
}

int64_t reductionCode(const Reduction& r) { return r.averageAfterwards ? int64_t(c10d::ReduceOp::AVG) : int64_t(r.op); }

void divideInPlace(at::Tensor& t, int64_t n) {
  if (at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type())) t.div_(double(n));
  else t.div_(n, "trunc");
}

// A contiguous tensor sharing T's storage when T is contiguous, else a contiguous copy (the
// result is then copied back into T).
at::Tensor commBuffer(const at::Tensor& t) { return t.is_contiguous() ? t.detach() : t.contiguous(); }

struct Call {
  GroupPtr g;
  std::unique_ptr<Pending> p;
  Call(Value group, std::string_view who) : g(groupArg(group, who)), p(std::make_unique<Pending>(who)) {}
};

const at::Tensor& tensorIn(Value v, std::string_view who, int index) { return tensorArg(v, who, index); }

std::vector<at::Tensor> tensorsIn(Value list, std::string_view who, int index) {
  std::vector<at::Tensor> out;
  if (list.is(Kind::Vector)) {
    auto* vec = list.as<Vector>();
    for (uint32_t k = 0; k < vec->extra; k++) out.push_back(tensorArg(vec->items[k], who, index));
    return out;
  }
  if (!isList(list)) throwTypeError(who, index, "a list of tensors", list);
  for (Value p = list; isPair(p); p = cdr(p)) out.push_back(tensorArg(car(p), who, index));
  return out;
}

void requireListOf(const std::vector<at::Tensor>& ts, int n, std::string_view who, const char* what) {
  if (int(ts.size()) != n)
    throwError("dist-error", std::string(who) + ": " + what + " must hold one tensor per rank of the group (" +
                                 std::to_string(n) + "), got " + std::to_string(ts.size()));
}

void requireLike(const at::Tensor& t, const at::Tensor& like, std::string_view who, const char* what) {
  if (t.sizes() != like.sizes() || t.scalar_type() != like.scalar_type())
    throwError("dist-error", std::string(who) + ": " + what + " must all have the dtype and shape of the tensor (" +
                                 std::string(c10::toString(like.scalar_type())) + " " + c10::str(like.sizes()) +
                                 "), got " + c10::toString(t.scalar_type()) + " " + c10::str(t.sizes()));
}

// Copies BUFFERS back into TARGETS where they are not the same tensor.
std::function<void()> copyBack(std::vector<at::Tensor> targets, std::vector<at::Tensor> buffers) {
  return [targets, buffers]() mutable {
    for (size_t k = 0; k < targets.size(); k++)
      if (!targets[k].is_same(buffers[k])) targets[k].copy_(buffers[k]);
  };
}

// ---- the collectives ----------------------------------------------------------------------

Value allReduce(Interp& in, Value tv, Value op, Value group, bool async, bool inPlace, const char* who) {
  Call c(group, who);
  const at::Tensor& t = tensorIn(tv, who, 1);
  Reduction red = reductionArg(op, *c.g, who);
  checkAgreement(*c.g, {Op::AllReduce, -1, reductionCode(red), &t, {}}, who);
  at::Tensor buf = inPlace ? commBuffer(t) : t.detach().clone(at::MemoryFormat::Contiguous);
  std::vector<at::Tensor> v{buf};
  c10d::AllreduceOptions o;
  o.reduceOp = red.op;
  c.p->works.push_back(issue(who, [&] { return c.g->comm->allreduce(v, o); }));
  int64_t n = c.g->size;
  at::Tensor target = inPlace ? t.detach() : buf;
  c.p->finish = [buf, target, red, n]() mutable {
    if (red.averageAfterwards) divideInPlace(buf, n);
    if (!target.is_same(buf)) target.copy_(buf);
  };
  if (inPlace) {
    c.p->result = Pending::Result::Input;
    c.p->input = Root(tv);
  } else {
    c.p->result = Pending::Result::Tensor;
    c.p->tensors = {buf};
  }
  return finishOrDefer(in, std::move(c.p), async);
}

Value broadcast(Interp& in, Value tv, int64_t src, Value group, bool async, bool inPlace, const char* who) {
  Call c(group, who);
  const at::Tensor& t = tensorIn(tv, who, 1);
  int root = groupRankArg(*c.g, src, who, "src");
  checkAgreement(*c.g, {Op::Broadcast, src, -1, &t, {}}, who);
  at::Tensor buf = inPlace ? commBuffer(t) : t.detach().clone(at::MemoryFormat::Contiguous);
  std::vector<at::Tensor> v{buf};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  c.p->works.push_back(issue(who, [&] { return c.g->comm->broadcast(v, o); }));
  if (inPlace) {
    c.p->finish = copyBack({t.detach()}, {buf});
    c.p->result = Pending::Result::Input;
    c.p->input = Root(tv);
  } else {
    c.p->result = Pending::Result::Tensor;
    c.p->tensors = {buf};
  }
  return finishOrDefer(in, std::move(c.p), async);
}

Value reduce(Interp& in, Value tv, int64_t dst, Value op, Value group, bool async, const char* who) {
  Call c(group, who);
  const at::Tensor& t = tensorIn(tv, who, 1);
  int root = groupRankArg(*c.g, dst, who, "dst");
  Reduction red = reductionArg(op, *c.g, who);
  checkAgreement(*c.g, {Op::Reduce, dst, reductionCode(red), &t, {}}, who);
  at::Tensor buf = commBuffer(t);
  std::vector<at::Tensor> v{buf};
  c10d::ReduceOptions o;
  o.rootRank = root;
  o.reduceOp = red.op;
  c.p->works.push_back(issue(who, [&] { return c.g->comm->reduce(v, o); }));
  bool isRoot = c.g->rank == root;
  int64_t n = c.g->size;
  at::Tensor target = t.detach();
  c.p->finish = [buf, target, red, n, isRoot]() mutable {
    if (red.averageAfterwards && isRoot) divideInPlace(buf, n);
    if (!target.is_same(buf)) target.copy_(buf);
  };
  c.p->result = Pending::Result::Input;
  c.p->input = Root(tv);
  return finishOrDefer(in, std::move(c.p), async);
}

// The group-size list of tensors like T that a gather fills: FRESH ones, or the caller's OUTS,
// checked; BUFFERS are what the backend writes (OUTS' own tensors where they can take it).
void gatherTargets(bool fresh, Value outs, const at::Tensor& t, int size, const char* who,
                   std::vector<at::Tensor>& targets, std::vector<at::Tensor>& buffers) {
  if (fresh) {
    for (int k = 0; k < size; k++) buffers.push_back(at::empty(t.sizes(), t.options().requires_grad(false)));
    targets = buffers;
    return;
  }
  targets = tensorsIn(outs, who, 1);
  requireListOf(targets, size, who, "the output list");
  for (auto& o : targets) {
    requireLike(o, t, who, "the output tensors");
    buffers.push_back(commBuffer(o));
  }
}

// What a gather returns: the fresh list as FRESH_RESULT when OUTS was not given, else OUTS itself,
// once the buffers are copied back into its tensors.
void answerGather(Call& c, Value outs, const std::vector<at::Tensor>& targets, const std::vector<at::Tensor>& buffers,
                  Pending::Result freshResult) {
  if (outs.isMissing()) {
    c.p->result = freshResult;
    c.p->tensors = buffers;
    return;
  }
  std::vector<at::Tensor> plain;
  for (auto& x : targets) plain.push_back(x.detach());
  c.p->finish = copyBack(plain, buffers);
  c.p->result = Pending::Result::Input;
  c.p->input = Root(outs);
}

Value allGather(Interp& in, Value outs, Value tv, Value group, bool async, const char* who) {
  Call c(group, who);
  const at::Tensor& t = tensorIn(tv, who, outs.isMissing() ? 1 : 2);
  checkAgreement(*c.g, {Op::AllGather, -1, -1, &t, {}}, who);
  std::vector<at::Tensor> targets, buffers;
  gatherTargets(outs.isMissing(), outs, t, c.g->size, who, targets, buffers);
  std::vector<std::vector<at::Tensor>> outputs{buffers};
  std::vector<at::Tensor> inputs{commBuffer(t)};
  c.p->works.push_back(issue(who, [&] { return c.g->comm->allgather(outputs, inputs); }));
  answerGather(c, outs, targets, buffers, Pending::Result::TensorList);
  return finishOrDefer(in, std::move(c.p), async);
}

Value gather(Interp& in, Value outs, Value tv, int64_t dst, Value group, bool async, const char* who) {
  Call c(group, who);
  const at::Tensor& t = tensorIn(tv, who, outs.isMissing() ? 1 : 2);
  int root = groupRankArg(*c.g, dst, who, "dst");
  checkAgreement(*c.g, {Op::Gather, dst, -1, &t, {}}, who);
  bool isRoot = c.g->rank == root;
  std::vector<at::Tensor> targets, buffers;
  if (isRoot) gatherTargets(outs.isMissing() || outs.isFalse(), outs, t, c.g->size, who, targets, buffers);
  std::vector<std::vector<at::Tensor>> outputs;
  if (isRoot) outputs.push_back(buffers);
  std::vector<at::Tensor> inputs{commBuffer(t)};
  c10d::GatherOptions o;
  o.rootRank = root;
  c.p->works.push_back(issue(who, [&] { return c.g->comm->gather(outputs, inputs, o); }));
  answerGather(c, outs, targets, buffers, Pending::Result::TensorListOrFalse);
  return finishOrDefer(in, std::move(c.p), async);
}

Value scatter(Interp& in, Value outv, Value list, int64_t src, Value group, bool async, const char* who) {
  Call c(group, who);
  const at::Tensor& out = tensorIn(outv, who, 1);
  int root = groupRankArg(*c.g, src, who, "src");
  bool isRoot = c.g->rank == root;
  std::vector<std::vector<at::Tensor>> inputs;
  if (isRoot) {
    if (list.isMissing() || list.isFalse())
      throwError("dist-error", std::string(who) + ": rank " + std::to_string(src) +
                                   " is the source and must give the list of tensors to scatter");
    std::vector<at::Tensor> ins = tensorsIn(list, who, 2);
    requireListOf(ins, c.g->size, who, "the list to scatter");
    std::vector<at::Tensor> bufs;
    for (auto& x : ins) {
      requireLike(x, out, who, "the tensors to scatter");
      bufs.push_back(commBuffer(x));
    }
    inputs.push_back(bufs);
  }
  checkAgreement(*c.g, {Op::Scatter, src, -1, &out, {}}, who);
  at::Tensor buf = commBuffer(out);
  std::vector<at::Tensor> outputs{buf};
  c10d::ScatterOptions o;
  o.rootRank = root;
  c.p->works.push_back(issue(who, [&] { return c.g->comm->scatter(outputs, inputs, o); }));
  c.p->finish = copyBack({out.detach()}, {buf});
  c.p->result = Pending::Result::Input;
  c.p->input = Root(outv);
  return finishOrDefer(in, std::move(c.p), async);
}

// Set once a backend has said it has no reduce-scatter of its own (Gloo in LibTorch 1.13).
std::atomic<bool> gEmulateReduceScatter{false};

bool unsupported(const std::exception& e) {
  std::string m = e.what();
  return m.find("does not support") != std::string::npos || m.find("not supported") != std::string::npos;
}

at::Tensor reduceRows(const at::Tensor& rows, c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return rows.sum(0, false, rows.scalar_type());
    case c10d::ReduceOp::PRODUCT: return rows.prod(0, false, rows.scalar_type());
    case c10d::ReduceOp::MIN: return std::get<0>(rows.min(0));
    case c10d::ReduceOp::MAX: return std::get<0>(rows.max(0));
    default: {
      at::Tensor acc = rows[0].clone();
      for (int64_t k = 1; k < rows.size(0); k++) {
        if (op == c10d::ReduceOp::BAND) acc.bitwise_and_(rows[k]);
        else if (op == c10d::ReduceOp::BOR) acc.bitwise_or_(rows[k]);
        else acc.bitwise_xor_(rows[k]);
      }
      return acc;
    }
  }
}

Value reduceScatter(Interp& in, Value outv, Value list, Value op, Value group, bool async, const char* who) {
  Call c(group, who);
  std::vector<at::Tensor> ins = tensorsIn(list, who, outv.isMissing() ? 1 : 2);
  requireListOf(ins, c.g->size, who, "the input list");
  at::Tensor out = outv.isMissing() ? at::empty(ins[0].sizes(), ins[0].options().requires_grad(false))
                                    : tensorIn(outv, who, 1).detach();
  for (auto& x : ins) requireLike(x, out, who, "the input tensors");
  Reduction red = reductionArg(op, *c.g, who);
  checkAgreement(*c.g, {Op::ReduceScatter, -1, reductionCode(red), &out, {}}, who);
  at::Tensor buf = commBuffer(out);
  int64_t n = c.g->size;
  bool emulate = gEmulateReduceScatter.load();
  if (!emulate) {
    std::vector<at::Tensor> outputs{buf};
    std::vector<std::vector<at::Tensor>> inputs{std::vector<at::Tensor>()};
    for (auto& x : ins) inputs[0].push_back(commBuffer(x));
    c10d::ReduceScatterOptions o;
    o.reduceOp = red.op;
    try {
      c.p->works.push_back(c.g->comm->reduce_scatter(outputs, inputs, o));
    } catch (const std::exception& e) {
      if (!unsupported(e)) throwCommError(who, e);
      gEmulateReduceScatter = emulate = true;
    }
  }
  at::Tensor target = out;
  if (emulate) {
    // Rank j's chunk of every rank's input goes to rank j, which reduces the n chunks it receives.
    std::vector<at::Tensor> flat;
    for (auto& x : ins) flat.push_back(x.detach().reshape({-1}));
    at::Tensor sendBuf = at::cat(flat);
    at::Tensor recvBuf = at::empty_like(sendBuf);
    std::vector<int64_t> counts;   // empty: equal splits
    c.p->works.push_back(issue(who, [&] {
      return c.g->comm->alltoall_base(recvBuf, sendBuf, counts, counts, c10d::AllToAllOptions());
    }));
    auto opv = red.op;
    c.p->finish = [recvBuf, buf, target, red, n, opv]() mutable {
      at::Tensor reduced = reduceRows(recvBuf.view({n, -1}), opv).view(buf.sizes());
      buf.copy_(reduced);
      if (red.averageAfterwards) divideInPlace(buf, n);
      if (!target.is_same(buf)) target.copy_(buf);
    };
  } else {
    c.p->finish = [buf, target, red, n]() mutable {
      if (red.averageAfterwards) divideInPlace(buf, n);
      if (!target.is_same(buf)) target.copy_(buf);
    };
  }
  if (outv.isMissing()) {
    c.p->result = Pending::Result::Tensor;
    c.p->tensors = {target};
  } else {
    c.p->result = Pending::Result::Input;
    c.p->input = Root(outv);
  }
  return finishOrDefer(in, std::move(c.p), async);
}

Value allToAll(Interp& in, Value outs, Value list, Value group, bool async, const char* who) {
  Call c(group, who);
  std::vector<at::Tensor> ins = tensorsIn(list, who, outs.isMissing() ? 1 : 2);
  requireListOf(ins, c.g->size, who, "the input list");
  std::vector<at::Tensor> targets;
  if (outs.isMissing()) {
    for (auto& x : ins) targets.push_back(at::empty(x.sizes(), x.options().requires_grad(false)));
  } else {
    for (auto& o : tensorsIn(outs, who, 1)) targets.push_back(o.detach());
    requireListOf(targets, c.g->size, who, "the output list");
  }
  at::ScalarType dtype = ins[0].scalar_type();
  for (auto& x : ins)
    if (x.scalar_type() != dtype) throwError("dist-error", std::string(who) + ": the input tensors must share one dtype");
  for (auto& x : targets)
    if (x.scalar_type() != dtype)
      throwError("dist-error", std::string(who) + ": the output tensors must have the input tensors' dtype");
  std::vector<int64_t> inCounts, outCounts, extra;
  for (auto& x : ins) inCounts.push_back(x.numel());
  for (auto& x : targets) outCounts.push_back(x.numel());
  extra = inCounts;
  extra.insert(extra.end(), outCounts.begin(), outCounts.end());
  at::Tensor dtypeProbe = at::empty({0}, ins[0].options());   // sizes may differ; dtypes may not
  checkAgreement(*c.g, {Op::AllToAll, -1, -1, &dtypeProbe, extra}, who);
  std::vector<at::Tensor> flat;
  for (auto& x : ins) flat.push_back(x.detach().reshape({-1}));
  at::Tensor sendBuf = at::cat(flat);
  int64_t total = 0;
  for (int64_t k : outCounts) total += k;
  at::Tensor recvBuf = at::empty({total}, sendBuf.options());
  std::vector<int64_t> splits = outCounts;   // c10d may move from the vectors it is given
  c.p->works.push_back(issue(who, [&] {
    return c.g->comm->alltoall_base(recvBuf, sendBuf, outCounts, inCounts, c10d::AllToAllOptions());
  }));
  c.p->finish = [recvBuf, targets, splits]() mutable {
    int64_t offset = 0;
    for (size_t k = 0; k < targets.size(); k++) {
      targets[k].copy_(recvBuf.narrow(0, offset, splits[k]).view(targets[k].sizes()));
      offset += splits[k];
    }
  };
  if (outs.isMissing()) {
    c.p->result = Pending::Result::TensorList;
    c.p->tensors = targets;
  } else {
    c.p->result = Pending::Result::Input;
    c.p->input = Root(outs);
  }
  return finishOrDefer(in, std::move(c.p), async);
}

Value allToAllSingle(Interp& in, Value tv, std::optional<IntList> outSplits, std::optional<IntList> inSplits,
                     Value group, bool async, const char* who) {
  Call c(group, who);
  const at::Tensor& t = tensorIn(tv, who, 1);
  int64_t n = c.g->size;
  if (t.dim() == 0) throwError("dist-error", std::string(who) + ": the tensor needs a first dimension to split");
  int64_t rows = t.size(0), rowNumel = rows ? t.numel() / rows : 0;
  auto checkSplits = [&](const IntList& s, const char* what) {
    if (int64_t(s.size()) != n)
      throwError("dist-error", std::string(who) + ": " + what + " must have one size per rank (" + std::to_string(n) + ")");
    for (int64_t x : s)
      if (x < 0) throwError("dist-error", std::string(who) + ": " + what + " must not be negative");
  };
  IntList ins, outs;
  if (inSplits) {
    checkSplits(*inSplits, ":input-split-sizes");
    int64_t sum = 0;
    for (int64_t x : *inSplits) sum += x;
    if (sum != rows)
      throwError("dist-error", std::string(who) + ": :input-split-sizes add up to " + std::to_string(sum) +
                                   ", but the tensor has " + std::to_string(rows) + " rows");
    ins = *inSplits;
  } else {
    if (rows % n)
      throwError("dist-error", std::string(who) + ": " + std::to_string(rows) + " rows do not split evenly over " +
                                   std::to_string(n) + " ranks; give :input-split-sizes");
    ins.assign(n, rows / n);
  }
  if (outSplits) {
    checkSplits(*outSplits, ":output-split-sizes");
    outs = *outSplits;
  } else {
    if (rows % n)
      throwError("dist-error", std::string(who) + ": give :output-split-sizes for uneven splits");
    outs.assign(n, rows / n);
  }
  int64_t outRows = 0;
  for (int64_t x : outs) outRows += x;
  std::vector<int64_t> extra;
  for (int64_t x : ins) extra.push_back(x * rowNumel);
  for (int64_t x : outs) extra.push_back(x * rowNumel);
  at::Tensor rowProbe = t.narrow(0, 0, 0);   // the row counts may differ; a row's shape may not
  checkAgreement(*c.g, {Op::AllToAllSingle, -1, -1, &rowProbe, extra}, who);
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  shape[0] = outRows;
  at::Tensor out = at::empty(shape, t.options().requires_grad(false));
  at::Tensor inBuf = commBuffer(t);
  std::vector<int64_t> inCounts = ins, outCounts = outs;
  bool even = !inSplits && !outSplits;
  if (even) inCounts.clear(), outCounts.clear();
  c.p->works.push_back(issue(who, [&] {
    return c.g->comm->alltoall_base(out, inBuf, outCounts, inCounts, c10d::AllToAllOptions());
  }));
  c.p->result = Pending::Result::Tensor;
  c.p->tensors = {out};
  return finishOrDefer(in, std::move(c.p), async);
}

Value barrier(Interp& in, Value group, bool async, const char* who) {
  Call c(group, who);
  checkAgreement(*c.g, {Op::Barrier, -1, -1, nullptr, {}}, who);
  c.p->works.push_back(issue(who, [&] { return c.g->comm->barrier(c10d::BarrierOptions()); }));
  return finishOrDefer(in, std::move(c.p), async);
}

void checkTag(int64_t tag, std::string_view who) {
  if (tag < 0 || tag > 0x3fffffff) throwError("dist-error", std::string(who) + ": :tag must be in 0..2^30-1");
}

Value send(Interp& in, Value tv, int64_t dst, int64_t tag, Value group, bool async, const char* who) {
  Call c(group, who);
  const at::Tensor& t = tensorIn(tv, who, 1);
  int peer = groupRankArg(*c.g, dst, who, "dst");
  checkTag(tag, who);
  if (peer == c.g->rank) throwError("dist-error", std::string(who) + ": a rank cannot send to itself");
  if (c.g->checked) {
    std::vector<at::Tensor> hd{makeHeader(t)};
    c.p->works.push_back(issue(who, [&] { return c.g->comm->send(hd, peer, int(tag)); }));
  }
  std::vector<at::Tensor> v{commBuffer(t)};
  c.p->works.push_back(issue(who, [&] { return c.g->comm->send(v, peer, int(tag)); }));
  return finishOrDefer(in, std::move(c.p), async);
}

Value recv(Interp& in, Value tv, std::optional<int64_t> src, int64_t tag, Value group, bool async, const char* who) {
  Call c(group, who);
  const at::Tensor& t = tensorIn(tv, who, 1);
  checkTag(tag, who);
  int peer = src ? groupRankArg(*c.g, *src, who, "src") : -1;
  if (peer == c.g->rank) throwError("dist-error", std::string(who) + ": a rank cannot receive from itself");
  auto post = [c = c.g, tag, who](std::vector<at::Tensor>& v, int from) {
    return issue(who, [&] { return from >= 0 ? c->comm->recv(v, from, int(tag)) : c->comm->recvAnysource(v, int(tag)); });
  };
  at::Tensor buf = commBuffer(t);
  at::Tensor target = t.detach();
  Pending* raw = c.p.get();
  GroupPtr keep = c.g;   // the group outlives a pending receive
  if (c.g->checked) {
    // the header now; the data once the header has been checked (at dist-wait)
    std::vector<at::Tensor> hd{emptyHeader()};
    WorkPtr hw = post(hd, peer);
    c.p->works.push_back(hw);
    at::Tensor header = hd[0];
    std::string whoName(who);
    c.p->finish = [raw, hw, peer, header, buf, target, keep, post, whoName]() mutable {
      int from = peer >= 0 ? peer : hw->sourceRank();
      std::string mismatch;
      std::vector<at::Tensor> v{receiveBufferFor(header, target, buf, from, *keep, whoName, mismatch)};
      waitWork(post(v, from), whoName);
      if (!mismatch.empty()) throwError("dist-error", mismatch);
      raw->sourceRank = from;
      if (!target.is_same(buf)) target.copy_(buf);
    };
  } else {
    std::vector<at::Tensor> v{buf};
    WorkPtr w = post(v, peer);
    c.p->works.push_back(w);
    c.p->finish = [raw, w, peer, buf, target, keep]() mutable {
      raw->sourceRank = peer >= 0 ? peer : w->sourceRank();
      if (!target.is_same(buf)) target.copy_(buf);
    };
  }
  c.p->group = c.g.get();
  c.p->result = Pending::Result::SourceRank;
  c.p->completesAtWait = c.g->checked;
  return finishOrDefer(in, std::move(c.p), async);
}

}  // namespace

}  // namespace purple::dist

namespace purple {

using namespace dist;

void registerDistCollectives(Registry& r) {
  r.def("dist-all-reduce!", "(t :key op group async)",
        [](Interp& in, Value t, Value op, Value group, bool async) {
          return allReduce(in, t, op, group, async, true, "dist-all-reduce!");
        },
        "Reduces T across the ranks of :group (default: the world) and leaves the result in T on every rank; returns "
        "T. :op is 'sum (default), 'avg, 'product, 'min, 'max (or 'band 'bor 'bxor on integers). :async #t returns a "
        "handle for dist-wait instead of blocking.");
  sandbox(r, "dist-all-reduce!", Needs::Process, "network: a collective on the process's group");
  r.def("dist-all-reduce", "(t :key op group async)",
        [](Interp& in, Value t, Value op, Value group, bool async) {
          return allReduce(in, t, op, group, async, false, "dist-all-reduce");
        },
        "Like dist-all-reduce!, but returns the reduction in a new tensor and leaves T as it was.");
  sandbox(r, "dist-all-reduce", Needs::Process, "network: a collective on the process's group");
  r.def("dist-broadcast!", "(t :key (src 0) group async)",
        [](Interp& in, Value t, int64_t src, Value group, bool async) {
          return broadcast(in, t, src, group, async, true, "dist-broadcast!");
        },
        "Copies rank :src's T (default rank 0) into T on every rank of :group; returns T. Every rank passes a tensor "
        "of the same dtype and shape.");
  sandbox(r, "dist-broadcast!", Needs::Process, "network: a collective on the process's group");
  r.def("dist-broadcast", "(t :key (src 0) group async)",
        [](Interp& in, Value t, int64_t src, Value group, bool async) {
          return broadcast(in, t, src, group, async, false, "dist-broadcast");
        },
        "Like dist-broadcast!, but returns rank :src's tensor as a new tensor (T only gives the shape and dtype on "
        "the other ranks) and leaves T as it was.");
  sandbox(r, "dist-broadcast", Needs::Process, "network: a collective on the process's group");
  r.def("dist-reduce!", "(t :key (dst 0) op group async)",
        [](Interp& in, Value t, int64_t dst, Value op, Value group, bool async) {
          return reduce(in, t, dst, op, group, async, "dist-reduce!");
        },
        "Reduces T across the ranks of :group into T on rank :dst (default 0); returns T. On the other ranks T's "
        "contents are unspecified afterwards (Gloo uses them as scratch space), as with torch.distributed.reduce. "
        ":op as for dist-all-reduce!.");
  sandbox(r, "dist-reduce!", Needs::Process, "network: a collective on the process's group");
  r.def("dist-all-gather", "(t :key group async)",
        [](Interp& in, Value t, Value group, bool async) {
          return allGather(in, Value::missing(), t, group, async, "dist-all-gather");
        },
        "The list of every rank's T, in group-rank order, on every rank of :group. All ranks pass tensors of one "
        "dtype and shape; (tensor-cat (dist-all-gather t)) concatenates them.");
  sandbox(r, "dist-all-gather", Needs::Process, "network: a collective on the process's group");
  r.def("dist-all-gather!", "(outs t :key group async)",
        [](Interp& in, Value outs, Value t, Value group, bool async) {
          return allGather(in, outs, t, group, async, "dist-all-gather!");
        },
        "Fills OUTS, a list of one tensor per rank shaped like T, with every rank's T; returns OUTS.");
  sandbox(r, "dist-all-gather!", Needs::Process, "network: a collective on the process's group");
  r.def("dist-gather", "(t :key (dst 0) group async)",
        [](Interp& in, Value t, int64_t dst, Value group, bool async) {
          return gather(in, Value::missing(), t, dst, group, async, "dist-gather");
        },
        "On rank :dst (default 0), the list of every rank's T in group-rank order; #f on the other ranks.");
  sandbox(r, "dist-gather", Needs::Process, "network: a collective on the process's group");
  r.def("dist-gather!", "(outs t :key (dst 0) group async)",
        [](Interp& in, Value outs, Value t, int64_t dst, Value group, bool async) {
          return gather(in, outs, t, dst, group, async, "dist-gather!");
        },
        "Like dist-gather, into OUTS (a list of one tensor per rank) on rank :dst; the other ranks pass #f.");
  sandbox(r, "dist-gather!", Needs::Process, "network: a collective on the process's group");
  r.def("dist-scatter!", "(out tensors :key (src 0) group async)",
        [](Interp& in, Value out, Value tensors, int64_t src, Value group, bool async) {
          return scatter(in, out, tensors, src, group, async, "dist-scatter!");
        },
        "Rank :src (default 0) gives TENSORS, one per rank of :group; every rank receives its own in OUT (shaped like "
        "each of them) and gets OUT back. The other ranks pass #f for TENSORS.");
  sandbox(r, "dist-scatter!", Needs::Process, "network: a collective on the process's group");
  r.def("dist-reduce-scatter", "(tensors :key op group async)",
        [](Interp& in, Value tensors, Value op, Value group, bool async) {
          return reduceScatter(in, Value::missing(), tensors, op, group, async, "dist-reduce-scatter");
        },
        "Each rank gives TENSORS, one per rank of :group; rank k gets the reduction (:op, default 'sum) of every "
        "rank's k-th tensor, as a new tensor.");
  sandbox(r, "dist-reduce-scatter", Needs::Process, "network: a collective on the process's group");
  r.def("dist-reduce-scatter!", "(out tensors :key op group async)",
        [](Interp& in, Value out, Value tensors, Value op, Value group, bool async) {
          return reduceScatter(in, out, tensors, op, group, async, "dist-reduce-scatter!");
        },
        "Like dist-reduce-scatter, into OUT; returns OUT.");
  sandbox(r, "dist-reduce-scatter!", Needs::Process, "network: a collective on the process's group");
  r.def("dist-all-to-all", "(tensors :key group async)",
        [](Interp& in, Value tensors, Value group, bool async) {
          return allToAll(in, Value::missing(), tensors, group, async, "dist-all-to-all");
        },
        "Each rank gives TENSORS, one per rank of :group, and sends its k-th to rank k; returns the list of tensors "
        "received, in group-rank order, each shaped like the tensor this rank sent to that rank (use "
        "dist-all-to-all! when the shapes differ).");
  sandbox(r, "dist-all-to-all", Needs::Process, "network: a collective on the process's group");
  r.def("dist-all-to-all!", "(outs tensors :key group async)",
        [](Interp& in, Value outs, Value tensors, Value group, bool async) {
          return allToAll(in, outs, tensors, group, async, "dist-all-to-all!");
        },
        "Like dist-all-to-all, receiving into OUTS (one tensor per rank, any shapes with the right sizes); returns OUTS.");
  sandbox(r, "dist-all-to-all!", Needs::Process, "network: a collective on the process's group");
  r.def("dist-all-to-all-single", "(t :key output-split-sizes input-split-sizes group async)",
        [](Interp& in, Value t, std::optional<IntList> outSplits, std::optional<IntList> inSplits, Value group,
           bool async) {
          return allToAllSingle(in, t, outSplits, inSplits, group, async, "dist-all-to-all-single");
        },
        "Splits T along dim 0 into one block per rank (equal blocks, or the row counts :input-split-sizes), sends "
        "block k to rank k, and returns the blocks received concatenated along dim 0 (:output-split-sizes gives "
        "their row counts when they are uneven).");
  sandbox(r, "dist-all-to-all-single", Needs::Process, "network: a collective on the process's group");
  r.def("dist-barrier", "(:key group async)",
        [](Interp& in, Value group, bool async) { return barrier(in, group, async, "dist-barrier"); },
        "Waits until every rank of :group has reached the barrier.");
  sandbox(r, "dist-barrier", Needs::Process, "network: a collective on the process's group");
  r.def("dist-send", "(t dst :key (tag 0) group async)",
        [](Interp& in, Value t, int64_t dst, int64_t tag, Value group, bool async) {
          return send(in, t, dst, tag, group, async, "dist-send");
        },
        "Sends T to world rank DST, which receives it with dist-recv! (same :tag, default 0).");
  sandbox(r, "dist-send", Needs::Process, "network: a collective on the process's group");
  r.def("dist-recv!", "(t :key src (tag 0) group async)",
        [](Interp& in, Value t, std::optional<int64_t> src, int64_t tag, Value group, bool async) {
          return recv(in, t, src, tag, group, async, "dist-recv!");
        },
        "Receives a tensor sent with dist-send into T (same dtype and shape) from world rank :src, or from any rank "
        "when :src is not given; returns the sender's rank.");
  sandbox(r, "dist-recv!", Needs::Process, "network: a collective on the process's group");
}

}  // namespace purple
