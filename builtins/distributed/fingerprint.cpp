// Checked collectives. Gloo trusts every rank to call the same collective on tensors of the same
// size: when they differ, measured on this LibTorch, all-reduce returns wrong numbers without an
// error, all-gather and reduce abort the process (gloo::EnforceNotMet on a worker thread), and
// others wait for the timeout. So when every rank is a Purple process, each collective first
// all-gathers a fixed-size fingerprint (operation, root, reduction, dtype, shape, list sizes) and
// every rank raises the same clear error when they disagree. All-to-all also exchanges its split
// sizes, and point-to-point transfers announce dtype and shape to the receiver, which answers
// before the data moves. The cost is one small extra exchange per collective; DDP's gradient
// buckets, identical on every rank by construction, skip it.
#include "builtins/distributed/comm.hpp"
#include "interp/language/printer.hpp"
#include "interp/memory/tensor_value.hpp"
#include <sstream>

namespace purple::dist {

namespace {

constexpr int kFields = 16;
constexpr int kMaxDims = 8;
constexpr int64_t kHeaderMagic = 0x50757270;   // "Purp"

enum Field { FOp, FRoot, FReduce, FDtype, FNdim, FDim0, FNumel = FDim0 + kMaxDims, FExtraCount, FExtraHash };

std::string dtypeName(int64_t code) {
  if (code < 0) return "?";
  Value v = scalarTypeToValue(at::ScalarType(code));
  return v.is(Kind::Symbol) ? std::string(symbolName(v)) : "?";
}

const char* reduceName(int64_t op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "sum";
    case c10d::ReduceOp::AVG: return "avg";
    case c10d::ReduceOp::PRODUCT: return "product";
    case c10d::ReduceOp::MIN: return "min";
    case c10d::ReduceOp::MAX: return "max";
    case c10d::ReduceOp::BAND: return "band";
    case c10d::ReduceOp::BOR: return "bor";
    case c10d::ReduceOp::BXOR: return "bxor";
    default: return "?";
  }
}

void putTensor(int64_t* f, const at::Tensor& t) {
  f[FDtype] = int64_t(t.scalar_type());
  f[FNdim] = t.dim();
  uint64_t rest = 0;   // unsigned: the hash wraps (a signed overflow is undefined behaviour)
  for (int64_t d = 0; d < t.dim(); d++) {
    if (d < kMaxDims) f[FDim0 + d] = t.size(d);
    else rest = rest * 1000003 + uint64_t(t.size(d));
  }
  f[FNumel] = t.dim() > kMaxDims ? int64_t(rest) : t.numel();
}

std::string describeTensor(const int64_t* f) {
  if (f[FDtype] < 0) return "no tensor";
  std::ostringstream s;
  s << "a " << dtypeName(f[FDtype]) << " tensor of shape (";
  for (int64_t d = 0; d < f[FNdim] && d < kMaxDims; d++) s << (d ? " " : "") << f[FDim0 + d];
  if (f[FNdim] > kMaxDims) s << " ...";
  s << ")";
  return s.str();
}

bool sameTensor(const int64_t* a, const int64_t* b) {
  for (int k = FDtype; k <= FNumel; k++)
    if (a[k] != b[k]) return false;
  return true;
}

std::string rootKey(Op op) {
  switch (op) {
    case Op::Broadcast: case Op::Scatter: case Op::BroadcastObject: case Op::ScatterObject: return ":src";
    default: return ":dst";
  }
}

// Why rank A's fingerprint and rank B's differ, in words.
std::string difference(const int64_t* a, int ra, const int64_t* b, int rb) {
  std::string A = "rank " + std::to_string(ra), B = "rank " + std::to_string(rb);
  Op opA = Op(a[FOp]), opB = Op(b[FOp]);
  if (opA != opB) return A + " calls " + opName(opA) + ", " + B + " calls " + opName(opB);
  if (a[FRoot] != b[FRoot])
    return A + " gives " + rootKey(opA) + " " + std::to_string(a[FRoot]) + ", " + B + " gives " + rootKey(opA) + " " +
           std::to_string(b[FRoot]);
  if (a[FReduce] != b[FReduce])
    return A + " reduces with " + reduceName(a[FReduce]) + ", " + B + " with " + reduceName(b[FReduce]);
  if (!sameTensor(a, b) && opA != Op::DataParallel)
    return A + " gives " + describeTensor(a) + ", " + B + " gives " + describeTensor(b);
  if (opA == Op::NewGroup) return A + " and " + B + " list different ranks";
  if (opA == Op::DataParallel) {
    return a[FNumel] != b[FNumel] ? A + "'s model has " + std::to_string(a[FNumel]) + " parameters, " + B + "'s has " +
                                        std::to_string(b[FNumel])
                                  : "the parameters of " + A + "'s and " + B + "'s models differ in shape or dtype";
  }
  if (a[FExtraCount] != b[FExtraCount] && opA != Op::AllToAll)
    return A + " gives a list of " + std::to_string(a[FExtraCount]) + " items, " + B + " a list of " +
           std::to_string(b[FExtraCount]);
  return A + " and " + B + " give lists of tensors of different shapes";
}

std::vector<at::Tensor> allGatherSmall(Group& g, const at::Tensor& mine, std::string_view who) {
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int k = 0; k < g.size; k++) outputs[0].push_back(at::empty_like(mine));
  std::vector<at::Tensor> inputs{mine};
  WorkPtr w;
  try {
    w = g.comm->allgather(outputs, inputs);
  } catch (...) {
    rethrowCommError(who);
  }
  waitWork(w, who);
  return outputs[0];
}

}  // namespace

const char* opName(Op op) {
  switch (op) {
    case Op::AllReduce: return "dist-all-reduce";
    case Op::Broadcast: return "dist-broadcast";
    case Op::Reduce: return "dist-reduce";
    case Op::AllGather: return "dist-all-gather";
    case Op::Gather: return "dist-gather";
    case Op::Scatter: return "dist-scatter";
    case Op::ReduceScatter: return "dist-reduce-scatter";
    case Op::AllToAll: return "dist-all-to-all";
    case Op::AllToAllSingle: return "dist-all-to-all-single";
    case Op::Barrier: return "dist-barrier";
    case Op::Send: return "dist-send";
    case Op::Recv: return "dist-recv";
    case Op::BroadcastObject: return "dist-broadcast-object";
    case Op::AllGatherObject: return "dist-all-gather-object";
    case Op::GatherObject: return "dist-gather-object";
    case Op::ScatterObject: return "dist-scatter-object";
    case Op::SendObject: return "dist-send-object";
    case Op::RecvObject: return "dist-recv-object";
    case Op::NewGroup: return "dist-new-group";
    case Op::DataParallel: return "distributed-data-parallel";
  }
  return "?";
}

void checkAgreement(Group& g, const Contribution& c, std::string_view who) {
  if (!g.checked || g.size < 2) return;
  at::Tensor fp = at::full({kFields}, -1, at::TensorOptions().dtype(at::kLong));
  int64_t* f = fp.data_ptr<int64_t>();
  f[FOp] = int64_t(c.op);
  f[FRoot] = c.root;
  f[FReduce] = c.reduceOp;
  if (c.tensor) putTensor(f, *c.tensor);
  if (c.op == Op::DataParallel && !c.extra.empty()) f[FNumel] = c.extra[0];   // the parameter count
  bool pairwise = c.op == Op::AllToAll || c.op == Op::AllToAllSingle;
  f[FExtraCount] = int64_t(c.extra.size());
  uint64_t h = 0;   // unsigned: the hash wraps
  if (!pairwise)
    for (int64_t x : c.extra) h = h * 1000003 + uint64_t(x) + 7;
  f[FExtraHash] = int64_t(h);

  std::vector<at::Tensor> all = allGatherSmall(g, fp, who);
  const int64_t* first = all[0].data_ptr<int64_t>();
  for (int r = 1; r < g.size; r++) {
    const int64_t* other = all[r].data_ptr<int64_t>();
    bool same = true;
    for (int k = 0; k < kFields; k++) same = same && first[k] == other[k];
    if (!same)
      throwError("dist-error", std::string(who) + ": the ranks disagree: " +
                                   difference(first, g.globalRanks[0], other, g.globalRanks[r]));
  }
  if (!pairwise) return;
  // extra = element counts sent to each rank, then received from each rank
  at::Tensor counts = at::tensor(c.extra, at::TensorOptions().dtype(at::kLong));
  std::vector<at::Tensor> allCounts = allGatherSmall(g, counts, who);
  int n = g.size;
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      int64_t sends = allCounts[i].data_ptr<int64_t>()[j];
      int64_t expects = allCounts[j].data_ptr<int64_t>()[n + i];
      if (sends != expects)
        throwError("dist-error", std::string(who) + ": the ranks disagree: rank " + std::to_string(g.globalRanks[i]) +
                                     " sends " + std::to_string(sends) + " elements to rank " +
                                     std::to_string(g.globalRanks[j]) + ", which expects " + std::to_string(expects));
    }
}

at::Tensor makeHeader(const at::Tensor& t) {
  at::Tensor hd = at::full({kFields}, -1, at::TensorOptions().dtype(at::kLong));
  int64_t* f = hd.data_ptr<int64_t>();
  f[FOp] = kHeaderMagic;
  putTensor(f, t);
  f[FExtraHash] = t.numel() * int64_t(t.element_size());   // the bytes that follow
  return hd;
}

at::Tensor emptyHeader() { return at::zeros({kFields}, at::TensorOptions().dtype(at::kLong)); }

at::Tensor receiveBufferFor(const at::Tensor& header, const at::Tensor& t, const at::Tensor& contiguous, int from,
                            const Group& g, std::string_view who, std::string& mismatch) {
  const int64_t* theirs = header.data_ptr<int64_t>();
  at::Tensor mineHd = makeHeader(t);
  const int64_t* mine = mineHd.data_ptr<int64_t>();
  std::string sender = "rank " + std::to_string(g.globalRanks.at(from));
  if (theirs[FOp] != kHeaderMagic)
    throwError("dist-error", std::string(who) + ": " + sender +
                                 " sent something other than a tensor with this tag (a different operation?)");
  if (sameTensor(theirs, mine)) return contiguous;
  mismatch = std::string(who) + ": " + sender + " sends " + describeTensor(theirs) + ", but the receiving tensor is " +
             describeTensor(mine);
  return at::empty({std::max<int64_t>(theirs[FExtraHash], 0)}, at::TensorOptions().dtype(at::kByte));
}

}  // namespace purple::dist
