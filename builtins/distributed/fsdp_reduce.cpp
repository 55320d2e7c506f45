// fully-shard's gradient reduction (fsdp.hpp): each unit's gradients reduce-scattered once its
// backward is done with them, each rank keeping the average of its part. NCCL has the
// reduce-scatter; Gloo (LibTorch 1.13) has none, and makes one of all-to-alls or all-reduces
// (below). The hooks that launch them, in one fixed order on every rank, are fsdp.cpp's.
#include "builtins/distributed/fsdp.hpp"
#include <ATen/ATen.h>
#include <algorithm>

namespace purple::dist {

namespace {
// Gloo: a unit's gradients are reduce-scattered in all-to-alls of at most this much (reduceInPieces).
constexpr int64_t kPieceBytes = int64_t(4) << 20;
}  // namespace

void FsdpState::launchReduce(Unit& u) {
  u.reduceLaunched = true;
  bool trainable = false;
  for (size_t i : u.params) trainable = trainable || params[i].param.requires_grad();
  if (!trainable || u.packed == 0) {
    if (u.flatsKept) releaseFlats(u);
    return;
  }
  if (inflight_) {   // one reduction in flight at a time: its buffers are a unit's gradients
    completeReduce(units[*inflight_]);
    inflight_.reset();
  }
  torch::NoGradGuard noGrad;
  int64_t W = group->size, S = u.packed;
  const Param& first = params[u.params[0]];
  at::ScalarType dt = options.reduceDtype.value_or(computeDtype(first));
  if (group->backend == "gloo") {
    at::ScalarType wire = wireDtype(*group, dt);
    at::Tensor into;   // the unit's gathered buffer, kept for this (maybeReshardInBackward)
    if (u.flatsKept && u.flats.size() == 1 && u.flats[0].first == wire && u.flats[0].second.numel() == W * S)
      into = u.flats[0].second;
    bool inPieces = into.defined() || W * S * int64_t(c10::elementSize(wire)) >= 2 * kPieceBytes;
    if (inPieces) reduceInPieces(u, wire, into);
    if (u.flatsKept) releaseFlats(u);   // received into, or of no use to the reduction
    if (inPieces) return;
    // A unit smaller than two pieces, with no gathered buffer to receive into (its parameters
    // of several dtypes or in bfloat16, or gathered whole with no resharding in backward): an
    // all-reduce of each whole gradient in place, each rank keeping its part of the sum. The
    // all-to-all would take two more copies of the unit at once (packed and received: the
    // transformer's peak 29.5 -> 32.6 MB per rank), or, in pieces, as many rounds (8 pieces:
    // 0.52x DDP's samples/s against 0.73x).
    u.works.assign(u.params.size(), WorkPtr());
    u.gradients.assign(u.params.size(), at::Tensor());
    u.smallOffsets.assign(u.params.size(), -1);
    // flat, and not an autograd view (whose base would be one more holder of the storage:
    // completeReduce frees a gradient's storage once this tensor is its only holder)
    auto fullGradient = [&](Param& p) {
      at::Tensor g;
      if (!p.gradFull.defined()) {
        g = at::zeros({p.numel}, p.shard.options().dtype(wire));
      } else if (p.gradFull.is_contiguous()) {
        g = at::empty({0}, p.gradFull.options());
        g.set_(p.gradFull.storage(), p.gradFull.storage_offset(), {p.numel}, {1});
      } else {
        g = p.gradFull.reshape({-1});
      }
      p.gradFull = at::Tensor();
      return g;
    };
    try {
      // the small parameters' gradients packed, all-reduced at once
      int64_t packed = 0;
      for (size_t k = 0; k < u.params.size(); k++) {
        Param& p = params[u.params[k]];
        if (p.chunk == 0 || !p.param.requires_grad() || isLarge(p)) continue;
        u.smallOffsets[k] = packed;
        packed += p.numel;
      }
      u.recv = at::Tensor();
      if (packed > 0) {
        u.recv = at::empty({packed}, first.shard.options().dtype(wire));
        for (size_t k = 0; k < u.params.size(); k++)
          if (u.smallOffsets[k] >= 0) {
            Param& p = params[u.params[k]];
            u.recv.narrow(0, u.smallOffsets[k], p.numel).copy_(fullGradient(p));
          }
        std::vector<at::Tensor> v{u.recv};
        u.work = group->comm->allreduce(v);
      }
      // each large one in place
      for (size_t k = 0; k < u.params.size(); k++) {
        Param& p = params[u.params[k]];
        if (p.chunk == 0 || !p.param.requires_grad() || !isLarge(p)) continue;
        at::Tensor g = fullGradient(p);
        if (g.scalar_type() != wire || !g.is_contiguous()) g = g.to(wire).contiguous();
        std::vector<at::Tensor> v{g};
        u.works[k] = group->comm->allreduce(v);
        u.gradients[k] = g;
      }
    } catch (const std::exception& e) {
      failInHook("reducing gradients", e);
    }
    u.gloo = true;
    inflight_ = size_t(&u - &units[0]);
    return;
  }
  at::Tensor send = at::empty({W, S}, first.shard.options().dtype(wireDtype(*group, dt)));
  for (size_t k = 0; k < u.params.size(); k++) {
    Param& p = params[u.params[k]];
    if (p.chunk == 0) continue;
    packColumns(send.narrow(1, u.offsets[k], p.chunk), p.gradFull.defined() ? p.gradFull.reshape({-1}) : at::Tensor(), p, 0);
    p.gradFull = at::Tensor();
  }
  try {
    if (group->backend == "nccl") {
      u.recv = at::empty({S}, send.options());
      std::vector<at::Tensor> outs{u.recv};
      std::vector<std::vector<at::Tensor>> ins(1);
      for (int64_t r = 0; r < W; r++) ins[0].push_back(send.select(0, r));
      u.work = group->comm->reduce_scatter(outs, ins, c10d::ReduceScatterOptions());
    } else {
      // Gloo: rank j's block of every rank goes to rank j, which adds the blocks it receives
      u.recv = at::empty({W * S}, send.options());
      at::Tensor flatSend = send.view({-1});
      std::vector<int64_t> equal;
      u.work = group->comm->alltoall_base(u.recv, flatSend, equal, equal, c10d::AllToAllOptions());
    }
  } catch (const std::exception& e) {
    failInHook("reducing gradients", e);
  }
  u.send = send;
  inflight_ = size_t(&u - &units[0]);
}

// Gloo (LibTorch 1.13) has no reduce-scatter; its all-to-all makes one: rank r's part of
// every rank's gradients goes to rank r, which adds what it receives. Each rank sends and
// receives (W-1)/W of the unit's gradients in one round, where an all-reduce of them moves
// twice that in 2 (W-1) steps (on 4 ranks of 2 cores, the MLP trained at 0.86x DDP's samples/s
// against 0.74x). The all-to-all needs its input packed rank-major and a receive buffer: done
// whole, those are two more copies of the unit beside its gradients (the MLP's peak went 76 ->
// 108 MB). So it runs in pieces of at most kPieceBytes, one after another, each gradient freed
// once packed, and receives into the unit's gathered buffer when its backward is done with it
// (RECEIVE-INTO): the transformer's units, one piece each, then take no more memory than the
// all-reduce in place. Nothing overlaps it anyway: the next unit's backward starts with
// gathering that unit, after this.
void FsdpState::reduceInPieces(Unit& u, at::ScalarType wire, const at::Tensor& receiveInto) {
  torch::NoGradGuard noGrad;
  int64_t W = group->size, S = u.packed;
  const Param& first = params[u.params[0]];
  at::TensorOptions opts = first.shard.options().dtype(wire);
  int64_t width = std::max<int64_t>(1, std::min(S, kPieceBytes / (W * int64_t(c10::elementSize(wire)))));
  std::vector<at::Tensor> flats(u.params.size());
  for (size_t k = 0; k < u.params.size(); k++) {
    Param& p = params[u.params[k]];
    if (p.gradFull.defined()) flats[k] = p.gradFull.reshape({-1});
    p.gradFull = at::Tensor();
  }
  at::Tensor mine = at::empty({S}, opts);
  at::Tensor send = at::empty({W, width}, opts);
  at::Tensor recv = receiveInto.defined() ? receiveInto : at::empty({W * width}, opts);
  try {
    for (int64_t c0 = 0; c0 < S; c0 += width) {
      int64_t n = std::min(width, S - c0);
      at::Tensor piece = n == width ? send : at::empty({W, n}, opts);
      for (size_t k = 0; k < u.params.size(); k++) {
        Param& p = params[u.params[k]];
        int64_t a = std::max(c0, u.offsets[k]), b = std::min(c0 + n, u.offsets[k] + p.chunk);
        if (p.chunk == 0 || a >= b) continue;
        packColumns(piece.narrow(1, a - c0, b - a), flats[k], p, a - u.offsets[k]);
        if (b == u.offsets[k] + p.chunk) flats[k] = at::Tensor();   // all packed: freed now
      }
      at::Tensor into = recv.narrow(0, receiveInto.defined() ? W * c0 : 0, W * n);
      at::Tensor flatSend = piece.view({-1});
      std::vector<int64_t> equal;
      group->comm->alltoall_base(into, flatSend, equal, equal, c10d::AllToAllOptions())->wait();
      at::Tensor sum = mine.narrow(0, c0, n);
      at::sum_out(sum, into.view({W, n}), {0});
    }
  } catch (const std::exception& e) {
    failInHook("reducing gradients", e);
  }
  flats.clear();
  send = recv = at::Tensor();
  mine.div_(double(W));
  for (size_t k = 0; k < u.params.size(); k++) {
    Param& p = params[u.params[k]];
    if (p.param.requires_grad() && p.chunk > 0)
      p.reduced = mine.narrow(0, u.offsets[k], p.length).to(p.shard.scalar_type(), false, true);
  }
}

// Columns [FROM, FROM + BLOCK's width) of P's gradient FLAT laid out rank-major ([ranks, chunk]:
// row r holds the elements rank r keeps), into BLOCK; zeros past the gradient's end, and for
// a parameter that has none.
void FsdpState::packColumns(at::Tensor block, const at::Tensor& flat, const Param& p, int64_t from) {
  int64_t W = group->size, m = block.size(1);
  if (!flat.defined()) {
    block.zero_();
    return;
  }
  int64_t rows = p.numel / p.chunk, rest = p.numel - rows * p.chunk;
  if (rows > 0) block.narrow(0, 0, rows).copy_(flat.narrow(0, 0, rows * p.chunk).view({rows, p.chunk}).narrow(1, from, m));
  if (rows < W) {
    at::Tensor partial = block.select(0, rows);
    int64_t have = std::clamp<int64_t>(rest - from, 0, m);
    if (have > 0) partial.narrow(0, 0, have).copy_(flat.narrow(0, rows * p.chunk + from, have));
    if (have < m) partial.narrow(0, have, m - have).zero_();
    if (rows + 1 < W) block.narrow(0, rows + 1, W - rows - 1).zero_();
  }
}

void FsdpState::completeReduce(Unit& u) {
  if (u.gloo) {
    u.gloo = false;
    torch::NoGradGuard noGrad;
    double W = double(group->size);
    try {
      if (u.work) u.work->wait();
      for (auto& w : u.works)
        if (w) w->wait();
    } catch (const std::exception& e) {
      u.work.reset();
      u.works.clear();
      u.gradients.clear();
      u.recv = at::Tensor();
      failInHook("reducing gradients", e);
    }
    for (size_t k = 0; k < u.params.size(); k++) {
      Param& p = params[u.params[k]];
      at::Tensor whole = u.smallOffsets[k] >= 0 ? u.recv.narrow(0, u.smallOffsets[k], p.numel) : u.gradients[k];
      if (!whole.defined()) continue;
      p.reduced = whole.narrow(0, p.start, p.length).div(W).to(p.shard.scalar_type());
    }
    // Gloo's worker thread drops its reference to a finished collective's tensors a moment after
    // wait returns, so a whole gradient could outlive this by a varying time, alive beside the
    // next unit's gather (measured: a 16 MB higher peak in one step of three). Nothing else holds
    // these buffers (no other tensor shares their storage): their memory goes back now.
    for (auto& g : u.gradients)
      if (g.defined() && g.storage().use_count() == 1) emptyStorage(g);
    if (u.recv.defined() && u.recv.storage().use_count() == 1) emptyStorage(u.recv);
    u.work.reset();
    u.works.clear();
    u.gradients.clear();
    u.recv = at::Tensor();
    return;
  }
  if (!u.work) return;
  try {
    u.work->wait();
  } catch (const std::exception& e) {
    u.work.reset();
    failInHook("reducing gradients", e);
  }
  u.work.reset();
  torch::NoGradGuard noGrad;
  int64_t W = group->size, S = u.packed;
  at::Tensor sum = group->backend == "nccl" ? u.recv : u.recv.view({W, S}).sum(0);
  sum.div_(double(W));
  for (size_t k = 0; k < u.params.size(); k++) {
    Param& p = params[u.params[k]];
    if (!p.param.requires_grad()) continue;
    p.reduced = sum.narrow(0, u.offsets[k], p.length).to(p.shard.scalar_type(), false, true);
  }
  u.send = at::Tensor();
  u.recv = at::Tensor();
}

}  // namespace purple::dist
