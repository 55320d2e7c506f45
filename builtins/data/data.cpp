// Data: the C++ half of datasets and data loaders (prelude/35-data.purple is the Purple half).
//
//  * Transforms as data. `normalize`, `random-horizontal-flip` and `random-crop` (prelude) are
//    Purple procedures that carry a *spec*, a list such as ((normalize (0.5) (0.5)) (hflip 0.5)).
//    `%transform-apply` runs a spec on one sample (interpreter thread); a batcher runs the same
//    spec on whole batches on its worker thread, drawing per-sample randomness itself.
//  * Batchers. `%make-batcher` holds the tensors of a tensor-dataset and the loader's options;
//    `%batcher-iterate` starts one pass (an epoch): it draws the permutation on the interpreter
//    thread (so `manual-seed` makes shuffling reproducible) and, when prefetching, starts a
//    std::thread that cuts batches with index_select, applies the transform spec and hands
//    finished at::Tensor batches over through a bounded queue. That thread never touches a Purple
//    value or the collector: it sees only at::Tensors copied out of the cells beforehand, and
//    runs with grad mode off. `%batch-iterator-next!` wraps a finished batch into Purple values
//    on the interpreter thread.
//  * `default-collate` for Purple-defined datasets, and `terminal-output?`.
#include "builtins/builtins.hpp"
#include "builtins/tensor/util.hpp"
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <condition_variable>
#include <memory>
#include <deque>
#include <exception>
#include <mutex>
#include <random>
#include <thread>
#include <unistd.h>
#include <sched.h>
#include <sys/stat.h>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include "interp/limits/sandbox.hpp"

namespace purple {
namespace dataload {

// ---- foreign objects ---------------------------------------------------------------------------

template <class T> void destroyAs(void* p) { delete static_cast<T*>(p); }

template <class T> Value wrapForeign(T* p, const char* typeName) {
  return makeForeign(p, &destroyAs<T>, intern(typeName));
}

template <class T> T* foreignArg(Value v, const char* typeName, std::string_view who, int index) {
  if (v.is(Kind::Foreign)) {
    auto* f = v.as<Foreign>();
    if (f->typeName == intern(typeName) && f->ptr) return static_cast<T*>(f->ptr);
  }
  throwTypeError(who, index, std::string("a ") + typeName, v);
}

// ---- transform specs ---------------------------------------------------------------------------

struct TransformOp {
  enum Kind { Normalize, HFlip, Crop } kind;
  std::vector<double> mean, std;     // Normalize
  double p = 0.5;                    // HFlip
  int64_t height = 0, width = 0;     // Crop
  int64_t padding = 0;
  double fill = 0;
};
using Spec = std::vector<TransformOp>;

std::vector<double> doubleList(Value v, std::string_view who) {
  std::vector<double> out;
  if (isNumber(v)) {
    out.push_back(isFlonum(v) ? flonumValue(v) : double(v.isFixnum() ? v.fixnum() : 0));
    if (!v.isFixnum() && !isFlonum(v)) throwTypeError(who, 1, "a real number or a list of them", v);
    return out;
  }
  if (!isList(v)) throwTypeError(who, 1, "a real number or a list of them", v);   // circular too
  for (Value p = v; isPair(p); p = cdr(p)) {
    Value x = car(p);
    if (x.isFixnum()) out.push_back(double(x.fixnum()));
    else if (isFlonum(x)) out.push_back(flonumValue(x));
    else throwTypeError(who, 1, "a real number or a list of them", v);
  }
  if (out.empty()) throwTypeError(who, 1, "a real number or a non-empty list of them", v);
  return out;
}

int64_t fixnumField(Value v, std::string_view who) {
  if (!v.isFixnum()) throwTypeError(who, 1, "an exact integer in the transform spec", v);
  return v.fixnum();
}

double realField(Value v, std::string_view who) {
  if (v.isFixnum()) return double(v.fixnum());
  if (isFlonum(v)) return flonumValue(v);
  throwTypeError(who, 1, "a real number in the transform spec", v);
}

// A spec is a list of (name arg ...) entries; #f or () is the identity.
Spec parseSpec(Value spec, std::string_view who) {
  Spec ops;
  if (spec.isFalse()) return ops;
  if (!isList(spec)) throwTypeError(who, 1, "a transform spec (a list)", spec);
  for (Value p = spec; isPair(p); p = cdr(p)) {
    Value e = car(p);
    if (!isPair(e) || !isSymbol(car(e)) || !isList(e)) throwTypeError(who, 1, "a transform spec entry", e);
    std::string_view name = symbolName(car(e));
    size_t n = listLength(e);
    TransformOp op{};
    if (name == "normalize" && n == 3) {
      op.kind = TransformOp::Normalize;
      op.mean = doubleList(cadr(e), who);
      op.std = doubleList(caddr(e), who);
      if (op.mean.size() != op.std.size() && op.mean.size() != 1 && op.std.size() != 1)
        throwError("data-error", std::string(who) + ": normalize: mean and std have different lengths:",
                   cons(cadr(e), cons(caddr(e), Value::nil())));
      for (double s : op.std)
        if (s == 0) throwError("data-error", std::string(who) + ": normalize: a standard deviation is zero");
    } else if (name == "hflip" && n == 2) {
      op.kind = TransformOp::HFlip;
      op.p = realField(cadr(e), who);
    } else if (name == "crop" && n == 4) {
      op.kind = TransformOp::Crop;
      Value size = cadr(e);
      if (isPair(size)) {
        op.height = fixnumField(car(size), who);
        op.width = isPair(cdr(size)) ? fixnumField(cadr(size), who) : op.height;
      } else {
        op.height = op.width = fixnumField(size, who);
      }
      op.padding = fixnumField(caddr(e), who);
      op.fill = realField(car(cdddr(e)), who);
      if (op.height <= 0 || op.width <= 0 || op.padding < 0)
        throwError("data-error", std::string(who) + ": random-crop: bad size or padding:", cons(e, Value::nil()));
    } else {
      throwError("data-error", std::string(who) + ": unknown transform spec entry:", cons(e, Value::nil()));
    }
    ops.push_back(std::move(op));
  }
  return ops;
}

std::string shapeString(const at::Tensor& t) {
  std::string s = "(";
  for (int64_t i = 0; i < t.dim(); i++) s += (i ? " " : "") + std::to_string(t.size(i));
  return s + ")";
}

// Applies `ops` to X: one sample when `batch` is false, else a batch whose dim 0 indexes the
// samples (each sample then gets its own random draws). Pure LibTorch plus `rng`: safe on a
// worker thread. Errors are std::runtime_error (turned into Purple errors by the caller).
at::Tensor applySpec(const Spec& ops, at::Tensor x, bool batch, std::mt19937_64& rng) {
  for (const TransformOp& op : ops) {
    int64_t sampleDims = x.dim() - (batch ? 1 : 0);
    switch (op.kind) {
      case TransformOp::Normalize: {
        if (!x.is_floating_point()) x = x.to(at::kFloat);
        size_t c = std::max(op.mean.size(), op.std.size());
        auto values = [&](const std::vector<double>& v) {
          std::vector<double> full(c);
          for (size_t i = 0; i < c; i++) full[i] = v.size() == 1 ? v[0] : v[i];
          return at::tensor(full, at::TensorOptions().dtype(at::kDouble)).to(x.scalar_type());
        };
        at::Tensor mean = values(op.mean), std = values(op.std);
        if (c > 1) {
          // channels are the sample's first dim: (C H W) samples, (N C H W) batches
          if (sampleDims < 3 || x.size(batch ? 1 : 0) != int64_t(c))
            throw std::runtime_error("normalize: " + std::to_string(c) +
                                     " channel means need samples shaped (C H W) with C = " +
                                     std::to_string(c) + "; got shape " + shapeString(x));
          std::vector<int64_t> shape(size_t(x.dim()), 1);
          shape[batch ? 1 : 0] = int64_t(c);
          mean = mean.view(shape);
          std = std.view(shape);
        } else {
          mean = mean.reshape({});
          std = std.reshape({});
        }
        x = (x - mean) / std;
        break;
      }
      case TransformOp::HFlip: {
        if (sampleDims < 1) throw std::runtime_error("random-horizontal-flip: a sample needs at least one dimension");
        std::uniform_real_distribution<double> u(0.0, 1.0);
        if (!batch) {
          if (u(rng) < op.p) x = x.flip({-1});
          break;
        }
        int64_t n = x.size(0);
        std::vector<int64_t> which;
        for (int64_t i = 0; i < n; i++)
          if (u(rng) < op.p) which.push_back(i);
        if (which.empty()) break;
        x = x.clone();
        at::Tensor idx = at::tensor(which, at::TensorOptions().dtype(at::kLong));
        x.index_copy_(0, idx, x.index_select(0, idx).flip({-1}));
        break;
      }
      case TransformOp::Crop: {
        if (sampleDims < 2)
          throw std::runtime_error("random-crop: samples need at least two dimensions (H W); got shape " +
                                   shapeString(x));
        if (op.padding > 0) {
          std::vector<int64_t> pad{op.padding, op.padding, op.padding, op.padding};
          x = at::constant_pad_nd(x, pad, op.fill);
        }
        int64_t H = x.size(-2), W = x.size(-1);
        if (op.height > H || op.width > W)
          throw std::runtime_error("random-crop: crop size " + std::to_string(op.height) + "x" +
                                   std::to_string(op.width) + " is larger than the padded sample " +
                                   std::to_string(H) + "x" + std::to_string(W));
        std::uniform_int_distribution<int64_t> top(0, H - op.height), left(0, W - op.width);
        if (!batch) {
          x = x.narrow(-2, top(rng), op.height).narrow(-1, left(rng), op.width).contiguous();
          break;
        }
        int64_t n = x.size(0);
        std::vector<at::Tensor> parts;
        parts.reserve(size_t(n));
        for (int64_t i = 0; i < n; i++)
          parts.push_back(x.select(0, i).narrow(-2, top(rng), op.height).narrow(-1, left(rng), op.width));
        x = n ? at::stack(parts) : x.narrow(-2, 0, op.height).narrow(-1, 0, op.width).contiguous();
        break;
      }
    }
  }
  return x;
}

// A seed for a fresh std::mt19937_64, drawn from LibTorch's default CPU generator so that
// `manual-seed` fixes shuffling and transform randomness alike.
uint64_t drawSeed() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get<at::CPUGeneratorImpl>()->random64();
}

// ---- batchers ----------------------------------------------------------------------------------

struct Batcher {
  std::vector<at::Tensor> tensors;   // the dataset's fields, sharing dim 0
  int64_t length = 0;
  int64_t batchSize = 1;
  bool shuffle = false;
  bool dropLast = false;
  Spec spec;                         // applied to field 0
  int prefetch = 2;                  // queue depth; 0: batches are cut on the interpreter thread

  int64_t batches() const { return batchesOf(length); }
  int64_t batchesOf(int64_t samples) const {
    return dropLast ? samples / batchSize : (samples + batchSize - 1) / batchSize;
  }
};

// The worker thread cuts batches with one thread, as PyTorch's DataLoader workers do
// (torch.set_num_threads(1)): otherwise OpenMP gives this thread a team of its own, sized by
// OMP_NUM_THREADS or the core count, whose threads spin against the interpreter thread's team.
extern "C" void omp_set_num_threads(int) __attribute__((weak));
inline void runOpsSerially() {
  at::get_num_threads();   // ATen's lazy per-thread set-up first: it sets the thread's OpenMP count
  if (omp_set_num_threads) omp_set_num_threads(1);
}

// The loader's default (NUM-WORKERS -1): one background thread, but only when it has a core of
// its own. When LibTorch's threads already fill every core this process may run on, a thread
// that wakes for each batch preempts one of the OpenMP team, whose barrier then waits for it:
// measured on 2 cores at 2 threads (Fashion-MNIST MLP epoch, 938 steps), cutting batches on the
// interpreter thread took 0.29 s and the background thread 0.35 s; at 1 thread the background
// thread won (0.40 s against 0.43 s). Pinned batches for CUDA keep their thread: the pinning
// copy overlaps work the GPU does, not work of the CPU team.
inline int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return int(std::max(1u, std::thread::hardware_concurrency()));
}
inline int defaultWorkers(int prefetch, bool pinMemory) {
  if (prefetch <= 0) return 0;
  return (pinMemory || at::get_num_threads() < usableCores()) ? 1 : 0;
}

// One pass over a batcher. With W workers, W threads cut batches: batch b is worker b mod W's
// (as in torch's DataLoader), each worker keeps at most `prefetch` finished batches, and the
// interpreter thread takes them back in order, so memory stays bounded and the order is the
// sampler's whatever the timing. Each batch's random transforms use their own generator, seeded
// from the pass's base seed and the batch number: the same draws with any number of workers.
struct BatchIterator {
  std::shared_ptr<const Batcher> source;
  at::Tensor order;                  // int64 sample indices of this pass, or undefined for 0..n-1
  int64_t length = 0;                // samples in this pass
  uint64_t baseSeed = 0;
  bool pinMemory = false;
  int64_t next = 0;                  // next batch to cut (synchronous mode)
  int64_t total = 0;
  int64_t delivered = 0;

  // workers
  struct Worker {
    std::thread thread;
    std::deque<std::pair<int64_t, std::vector<at::Tensor>>> queue;
  };
  std::vector<Worker> workers;
  int prefetch = 2;
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;                 // asked to stop early
  std::string error;                 // first worker failure, reported on the interpreter thread
  int64_t failedAt = -1;             // the batch that failed

  ~BatchIterator() { shutdown(); }

  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(m);
      stop = true;
    }
    cv.notify_all();
    for (auto& w : workers)
      if (w.thread.joinable()) w.thread.join();
  }

  int64_t batches(int64_t samples) const {
    const Batcher& s = *source;
    return s.dropLast ? samples / s.batchSize : (samples + s.batchSize - 1) / s.batchSize;
  }

  std::vector<at::Tensor> cut(int64_t b) {
    const Batcher& s = *source;
    int64_t start = b * s.batchSize;
    int64_t len = std::min(s.batchSize, length - start);
    at::Tensor idx = order.defined() ? order.narrow(0, start, len)
                                     : at::arange(start, start + len, at::TensorOptions().dtype(at::kLong));
    std::mt19937_64 rng(baseSeed ^ (0x9E3779B97F4A7C15ULL * uint64_t(b + 1)));
    std::vector<at::Tensor> out;
    out.reserve(s.tensors.size());
    at::Tensor idxOnDevice;   // for a dataset already on a GPU: index_select wants the index there
    for (size_t f = 0; f < s.tensors.size(); f++) {
      const at::Tensor& field = s.tensors[f];
      const at::Tensor* index = &idx;
      if (field.device() != idx.device()) {
        if (!idxOnDevice.defined() || idxOnDevice.device() != field.device()) idxOnDevice = idx.to(field.device());
        index = &idxOnDevice;
      }
      at::Tensor t = field.index_select(0, *index);
      if (f == 0 && !s.spec.empty()) t = applySpec(s.spec, t, true, rng);
      if (pinMemory && t.is_cpu()) t = t.pin_memory();   // only host memory can be pinned
      out.push_back(std::move(t));
    }
    return out;
  }

  void run(size_t w, int64_t first) {
    at::NoGradGuard noGrad;
    runOpsSerially();
    size_t n = workers.size();
    for (int64_t b = first; b < total; b += int64_t(n)) {
      std::vector<at::Tensor> batch;
      try {
        batch = cut(b);
      } catch (const c10::Error& e) {
        fail(b, e.what_without_backtrace());
        return;
      } catch (const std::exception& e) {
        fail(b, e.what());
        return;
      }
      std::unique_lock<std::mutex> lock(m);
      cv.wait(lock, [&] { return stop || int64_t(workers[w].queue.size()) < prefetch; });
      if (stop) return;
      workers[w].queue.emplace_back(b, std::move(batch));
      lock.unlock();
      cv.notify_all();
    }
  }

  void fail(int64_t b, const std::string& msg) {
    {
      std::lock_guard<std::mutex> lock(m);
      if (failedAt < 0 || b < failedAt) failedAt = b, error = msg;
    }
    cv.notify_all();
  }

  void start(int numWorkers, int64_t firstBatch) {
    next = delivered = firstBatch;
    if (numWorkers <= 0 || total - firstBatch <= 0) return;
    workers = std::vector<Worker>(size_t(numWorkers));
    for (int w = 0; w < numWorkers; w++) {
      int64_t first = firstBatch + w;
      workers[size_t(w)].thread = std::thread([this, w, first] { run(size_t(w), first); });
    }
  }

  // The next batch, or false at the end.
  bool take(std::vector<at::Tensor>& out) {
    if (delivered >= total) return false;
    if (workers.empty()) {
      at::NoGradGuard noGrad;
      try {
        out = cut(next++);
      } catch (const c10::Error& e) {
        throwError("data-error", std::string("data-loader: ") + e.what_without_backtrace());
      } catch (const std::runtime_error& e) {
        throwError("data-error", std::string("data-loader: ") + e.what());
      }
      delivered++;
      return true;
    }
    Worker& w = workers[size_t(delivered % int64_t(workers.size()))];
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return !w.queue.empty() || (failedAt >= 0 && failedAt <= delivered); });
    if (w.queue.empty() || w.queue.front().first != delivered) {
      std::string msg = error;
      lock.unlock();
      shutdown();
      throwError("data-error", "data-loader: " + msg);
    }
    out = std::move(w.queue.front().second);
    w.queue.pop_front();
    lock.unlock();
    cv.notify_all();
    delivered++;
    if (delivered == total) shutdown();
    return true;
  }
};

struct BatcherBox {
  std::shared_ptr<const Batcher> batcher;
};

// ---- default collate -------------------------------------------------------------------------

Value collate(Value samples, const char* who);

Value collateFields(Value samples, size_t nFields, const char* who) {
  // samples: list of lists, each with nFields elements; returns a list of collated fields.
  std::vector<Value, traceable_allocator<Value>> columns(nFields, Value::nil());
  for (Value p = samples; isPair(p); p = cdr(p)) {
    Value s = car(p);
    size_t k = 0;
    for (Value q = s; isPair(q) && k < nFields; q = cdr(q), k++) columns[k] = cons(car(q), columns[k]);
  }
  Value result = Value::nil();
  for (size_t k = nFields; k-- > 0;) {
    Value col = reverseList(columns[k]);
    result = cons(collate(col, who), result);
  }
  return result;
}

// Stacks tensors, turns numbers into a tensor (int64 when all exact integers, else float32),
// and collates lists field by field. Anything else is returned as a list unchanged.
Value collate(Value samples, const char* who) {
  // fields are collated recursively: samples that contain themselves end here
  if (stackNearlyFull()) throwError("recursion-error", std::string(who) + ": samples nested too deeply (or circular)");
  if (!isList(samples)) throwTypeError(who, 1, "a list of samples", samples);
  if (samples.isNil()) return Value::nil();
  Value first = car(samples);
  if (isTensor(first)) {
    std::vector<at::Tensor> ts;
    for (Value p = samples; isPair(p); p = cdr(p)) {
      if (!isTensor(car(p))) throwError("data-error", std::string(who) + ": samples mix tensors and other values:", cons(car(p), Value::nil()));
      ts.push_back(tensorArg(car(p), who, 1));
      if (ts.back().sizes() != ts.front().sizes())
        throwError("data-error", std::string(who) + ": cannot stack samples of shapes " + shapeString(ts.front()) +
                                     " and " + shapeString(ts.back()));
    }
    return wrapTensor(at::stack(ts));
  }
  if (isNumber(first) || first.isBool()) {
    bool allInt = true, allBool = true;
    for (Value p = samples; isPair(p); p = cdr(p)) {
      Value x = car(p);
      if (!isNumber(x) && !x.isBool())
        throwError("data-error", std::string(who) + ": samples mix numbers and other values:", cons(x, Value::nil()));
      if (!x.isBool()) allBool = false;
      if (!x.isFixnum() && !x.isBool()) allInt = false;
    }
    size_t n = listLength(samples);
    if (allBool) {
      at::Tensor t = at::empty({int64_t(n)}, at::kBool);
      auto* d = t.data_ptr<bool>();
      size_t i = 0;
      for (Value p = samples; isPair(p); p = cdr(p)) d[i++] = car(p).isTrue();
      return wrapTensor(t);
    }
    if (allInt) {
      at::Tensor t = at::empty({int64_t(n)}, at::kLong);
      auto* d = t.data_ptr<int64_t>();
      size_t i = 0;
      for (Value p = samples; isPair(p); p = cdr(p)) d[i++] = car(p).isBool() ? car(p).isTrue() : car(p).fixnum();
      return wrapTensor(t);
    }
    at::Tensor t = at::empty({int64_t(n)}, at::kFloat);
    auto* d = t.data_ptr<float>();
    size_t i = 0;
    for (Value p = samples; isPair(p); p = cdr(p)) {
      Value x = car(p);
      d[i++] = x.isFixnum() ? float(x.fixnum()) : isFlonum(x) ? float(flonumValue(x)) : x.isBool() ? float(x.isTrue()) : 0.f;
      if (!x.isFixnum() && !isFlonum(x) && !x.isBool())
        throwError("data-error", std::string(who) + ": cannot collate the number", cons(x, Value::nil()));
    }
    return wrapTensor(t);
  }
  if (isPair(first) && isList(first)) {
    size_t nFields = listLength(first);
    for (Value p = samples; isPair(p); p = cdr(p))
      if (!isList(car(p)) || listLength(car(p)) != nFields)
        throwError("data-error", std::string(who) + ": samples have different numbers of fields:",
                   cons(first, cons(car(p), Value::nil())));
    return collateFields(samples, nFields, who);
  }
  if (first.is(Kind::Vector)) {
    // vectors of fields collate like lists, giving a list of fields
    Value lists = Value::nil();
    for (Value p = samples; isPair(p); p = cdr(p)) {
      Value v = car(p);
      if (!v.is(Kind::Vector)) throwError("data-error", std::string(who) + ": samples mix vectors and other values");
      auto* vec = v.as<Vector>();
      lists = cons(listFromArray(vec->items, vec->extra), lists);
    }
    return collate(reverseList(lists), who);
  }
  return samples;
}

// ---- collating ahead (datasets written in Purple) ---------------------------------------------
//
// A Purple dataset's samples come from Purple procedures, so they are read on the interpreter
// thread (an interpreter runs on one thread at a time: docs/embedding.md). What default-collate
// does with them next -- stacking each field's tensors into a batch, and pinning it -- is pure
// LibTorch: %collate-start plans it on the interpreter thread (at::Tensors only, no Purple value
// crosses over) and runs the stacking on a background thread, which the loader starts right
// before it returns the previous batch, so the stacking overlaps the caller's training step.

struct CollateNode {
  enum Kind { Stack, Ready, Fields } kind = Ready;
  std::vector<at::Tensor> parts;     // Stack: the samples' tensors
  at::Tensor tensor;                 // Stack (once run) and Ready: the batch
  std::vector<CollateNode> fields;   // Fields: one node per field
};

// Plans default-collate on SAMPLES. False when the interpreter thread must collate them itself:
// values other than tensors, numbers and lists or vectors of them, tensors that need autograd,
// or malformed samples (then collate raises its usual error when the batch is delivered).
bool planCollate(Value samples, CollateNode& node) {
  // nested too deeply or circular: default-collate on the interpreter thread says so
  if (!isList(samples) || samples.isNil() || stackNearlyFull()) return false;
  Value first = car(samples);
  if (isTensor(first)) {
    const at::Tensor& t0 = tensorOf(first);
    if (!t0.defined()) return false;
    node.kind = CollateNode::Stack;
    for (Value p = samples; isPair(p); p = cdr(p)) {
      if (!isTensor(car(p))) return false;
      const at::Tensor& t = tensorOf(car(p));
      if (!t.defined() || t.requires_grad() || t.sizes() != t0.sizes() || t.scalar_type() != t0.scalar_type() ||
          t.device() != t0.device())
        return false;
      node.parts.push_back(t);
    }
    return true;
  }
  if (isNumber(first) || first.isBool()) {
    for (Value p = samples; isPair(p); p = cdr(p))
      if (!car(p).isFixnum() && !isFlonum(car(p)) && !car(p).isBool()) return false;
    node.kind = CollateNode::Ready;
    node.tensor = tensorOf(collate(samples, "data-loader"));   // cheap: one tensor of scalars
    return true;
  }
  if (first.is(Kind::Vector)) {
    Value lists = Value::nil();
    for (Value p = samples; isPair(p); p = cdr(p)) {
      if (!car(p).is(Kind::Vector)) return false;
      auto* vec = car(p).as<Vector>();
      lists = cons(listFromArray(vec->items, vec->extra), lists);
    }
    return planCollate(reverseList(lists), node);
  }
  if (isPair(first) && isList(first)) {
    size_t nFields = listLength(first);
    std::vector<Value, traceable_allocator<Value>> columns(nFields, Value::nil());
    for (Value p = samples; isPair(p); p = cdr(p)) {
      if (!isList(car(p)) || listLength(car(p)) != nFields) return false;
      size_t k = 0;
      for (Value q = car(p); isPair(q); q = cdr(q), k++) columns[k] = cons(car(q), columns[k]);
    }
    node.kind = CollateNode::Fields;
    node.fields.resize(nFields);
    for (size_t k = 0; k < nFields; k++)
      if (!planCollate(reverseList(columns[k]), node.fields[k])) return false;
    return true;
  }
  return false;
}

void runCollate(CollateNode& node, bool pin) {
  switch (node.kind) {
    case CollateNode::Stack:
      node.tensor = at::stack(node.parts);
      node.parts.clear();
      break;
    case CollateNode::Ready:
      break;
    case CollateNode::Fields:
      for (CollateNode& f : node.fields) runCollate(f, pin);
      return;
  }
  if (pin && node.tensor.is_cpu()) node.tensor = node.tensor.pin_memory();
}

Value collatedValue(CollateNode& node) {
  if (node.kind != CollateNode::Fields) return wrapTensor(std::move(node.tensor));
  Value result = Value::nil();
  for (size_t k = node.fields.size(); k-- > 0;) result = cons(collatedValue(node.fields[k]), result);
  return result;
}

struct CollateJob {
  CollateNode plan;
  bool pin = false;
  bool taken = false;
  std::string error;
  std::thread thread;
  ~CollateJob() {
    if (thread.joinable()) thread.join();
  }
  void start() {
    thread = std::thread([this] {
      at::NoGradGuard noGrad;
      runOpsSerially();
      try {
        runCollate(plan, pin);
      } catch (const c10::Error& e) {
        error = e.what_without_backtrace();
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
  }
  Value finish() {
    if (taken) throwError("data-error", "data-loader: this batch was already delivered");
    if (thread.joinable()) thread.join();
    taken = true;
    if (!error.empty()) throwError("data-error", "data-loader: " + error);
    return collatedValue(plan);
  }
};

}  // namespace dataload

using namespace dataload;

void registerData(Registry& r) {
  r.def("%transform-apply", "(spec x)",
        [](Value spec, const at::Tensor& x) {
          Spec ops = parseSpec(spec, "transform");
          std::mt19937_64 rng(drawSeed());
          try {
            at::NoGradGuard noGrad;
            return applySpec(ops, x, false, rng);
          } catch (const std::runtime_error& e) {
            throwError("data-error", e.what());
          }
        },
        "Applies the transform SPEC (a list of (name arg ...) entries, as built by normalize, "
        "random-horizontal-flip and random-crop) to the single sample X.");
  r.def("%transform-apply-batch", "(spec x)",
        [](Value spec, const at::Tensor& x) {
          Spec ops = parseSpec(spec, "transform");
          std::mt19937_64 rng(drawSeed());
          try {
            at::NoGradGuard noGrad;
            return applySpec(ops, x, true, rng);
          } catch (const std::runtime_error& e) {
            throwError("data-error", e.what());
          }
        },
        "Applies the transform SPEC to every sample of the batch X (dim 0 indexes samples), with "
        "independent random draws per sample.");
  r.def("%transform-spec-check", "(spec)", [](Value spec) { parseSpec(spec, "transform"); return true; },
        "Checks that SPEC is a valid transform spec; raises a data-error otherwise.");

  r.def("%make-batcher", "(tensors batch-size shuffle drop-last spec prefetch)",
        [](Value tensors, int64_t batchSize, bool shuffle, bool dropLast, Value spec, int64_t prefetch) {
          auto b = std::make_shared<Batcher>();
          if (!isList(tensors) || tensors.isNil()) throwTypeError("data-loader", 1, "a non-empty list of tensors", tensors);
          for (Value p = tensors; isPair(p); p = cdr(p)) {
            const at::Tensor& t = tensorArg(car(p), "data-loader", 1);
            if (t.dim() == 0) throwError("data-error", "data-loader: dataset tensors need a first (sample) dimension");
            b->tensors.push_back(t.detach());
          }
          b->length = b->tensors[0].size(0);
          for (auto& t : b->tensors)
            if (t.size(0) != b->length)
              throwError("data-error", "data-loader: dataset tensors differ in their first dimension");
          if (batchSize < 1) throwError("range-error", "data-loader: :batch-size must be at least 1:", cons(makeInteger(batchSize), Value::nil()));
          b->batchSize = batchSize;
          b->shuffle = shuffle;
          b->dropLast = dropLast;
          b->spec = parseSpec(spec, "data-loader");
          b->prefetch = int(std::max<int64_t>(0, std::min<int64_t>(prefetch, 64)));
          return wrapForeign(new BatcherBox{b}, "tensor-batcher");
        },
        "Makes the C++ batch source behind a data loader over a tensor-dataset: TENSORS share "
        "dim 0; SPEC is the transform spec applied to the first field; PREFETCH is how many "
        "batches a background thread prepares ahead (0: none).");
  sandboxAllowed(r, "%make-batcher", "threads: data-loader :workers threads",
               "the threads only cut batches of tensors already in memory and end with their pass");
  r.def("%batcher-length", "(batcher)",
        [](Value b) { return foreignArg<BatcherBox>(b, "tensor-batcher", "%batcher-length", 1)->batcher->batches(); },
        "Number of batches one pass of BATCHER yields.");
  r.def("%batcher-iterate", "(batcher :optional order (start-batch 0) base-seed (num-workers -1) (pin-memory #f))",
        [](Value bv, std::optional<at::Tensor> order, int64_t startBatch, std::optional<int64_t> baseSeed,
           int64_t numWorkers, bool pin) {
          auto& src = foreignArg<BatcherBox>(bv, "tensor-batcher", "%batcher-iterate", 1)->batcher;
          auto* it = new BatchIterator();
          it->source = src;
          if (order) {
            at::Tensor o = order->to(at::kLong).reshape({-1}).contiguous();
            if (o.numel() > 0 && (o.min().item<int64_t>() < 0 || o.max().item<int64_t>() >= src->length))
              throwError("data-error", "data-loader: the sampler gave an index outside the dataset (0.." +
                                           std::to_string(src->length - 1) + ")");
            it->order = o;
            it->length = o.numel();
          } else {
            it->length = src->length;
            if (src->shuffle) it->order = at::randperm(src->length, at::TensorOptions().dtype(at::kLong));
          }
          it->total = it->batches(it->length);
          if (startBatch < 0 || startBatch > it->total)
            throwError("range-error", "data-loader: the pass has " + std::to_string(it->total) +
                                          " batches; cannot start at batch " + std::to_string(startBatch));
          it->baseSeed = baseSeed ? uint64_t(*baseSeed) : drawSeed();
          it->prefetch = std::max(1, src->prefetch);
          it->pinMemory = pin && at::hasCUDA();
          int workers = numWorkers >= 0 ? int(std::min<int64_t>(numWorkers, 64))
                                        : defaultWorkers(src->prefetch, it->pinMemory);
          Value v = wrapForeign(it, "batch-iterator");
          it->start(workers, startBatch);
          return v;
        },
        "Starts one pass (epoch) over BATCHER: ORDER is the pass's sample indices (an int64 tensor; "
        "default: 0..n-1, or a fresh permutation when the batcher shuffles), START-BATCH the first "
        "batch to cut, BASE-SEED seeds the random transforms (per batch), NUM-WORKERS threads cut "
        "batches ahead (-1: one when prefetching and a core is free beyond LibTorch's threads, or when "
        "pinning; 0: none), PIN-MEMORY pins them for CUDA copies. "
        "Returns a batch iterator.");
  r.def("%batch-iterator-next!", "(iterator)",
        [](Interp& in, Value iv) -> Value {
          // Evaluation loops make few closure calls per batch: notice an interrupt here.
          if (in.interruptRequested_.load(std::memory_order_relaxed)) in.checkInterrupt();
          auto* it = foreignArg<BatchIterator>(iv, "batch-iterator", "%batch-iterator-next!", 1);
          std::vector<at::Tensor> batch;
          if (!it->take(batch)) return Value::eof();
          Value result = Value::nil();
          for (size_t k = batch.size(); k-- > 0;) result = cons(wrapTensor(std::move(batch[k])), result);
          return result;
        },
        "The next batch of ITERATOR as a list of tensors (one per dataset field), or the eof "
        "object after the last one.",
        kPrimReturnsFreshList);
  r.def("%batch-iterator-close!", "(iterator)",
        [](Value iv) { foreignArg<BatchIterator>(iv, "batch-iterator", "%batch-iterator-close!", 1)->shutdown(); },
        "Stops ITERATOR's prefetch thread now (it is also stopped when the iterator is collected).");

  r.def("default-collate", "(samples)", [](Value samples) { return collate(samples, "default-collate"); },
        "Combines a list of SAMPLES into a batch: tensors are stacked along a new dim 0; numbers "
        "become a tensor (int64 when all are exact integers, bool when all booleans, else "
        "float32); samples that are lists (or vectors) of fields are collated field by field "
        "into a list; anything else is returned as the list of samples.",
        kPrimReturnsFreshList);
  r.def("%collate-start", "(samples :optional (pin-memory #f))",
        [](Value samples, bool pin) -> Value {
          auto job = std::make_unique<CollateJob>();
          if (!planCollate(samples, job->plan)) return Value::f();
          job->pin = pin && at::hasCUDA();
          job->start();
          return wrapForeign(job.release(), "collate-job");
        },
        "Starts default-collate of the list SAMPLES on a background thread (stacking their tensors, "
        "pinning the batch with PIN-MEMORY when CUDA is there) and returns the job, for "
        "%collate-finish; #f when the samples hold values only the interpreter thread can collate.");
  r.def("%collate-finish", "(job)",
        [](Value jv) { return foreignArg<CollateJob>(jv, "collate-job", "%collate-finish", 1)->finish(); },
        "Waits for the collate JOB started by %collate-start and returns its batch, as default-collate "
        "would have; a failure in the background comes back as a data-error.",
        kPrimReturnsFreshList);
  r.def("rename-file", "(old new)",
        [](std::string from, std::string to) {
          requireFileAccess("rename-file");
          if (std::rename(from.c_str(), to.c_str()) != 0)
            throwError("file-error", "rename-file: cannot rename " + from + " to " + to + " (" +
                                         std::strerror(errno) + ")");
        },
        "Renames the file OLD to NEW, replacing NEW atomically when it exists (POSIX rename). "
        "Writing a temporary file and renaming it over the real one is how fit writes its "
        "checkpoints.");
  sandbox(r, "rename-file", Needs::Files, "files: renames a path");
  r.def("create-directory", "(path :key (parents #t))",
        [](std::string path, bool parents) {
          requireFileAccess("create-directory");
          auto make = [](const std::string& p) {
            if (::mkdir(p.c_str(), 0777) != 0 && errno != EEXIST)
              throwError("file-error", "create-directory: cannot create " + p + " (" + std::strerror(errno) + ")");
          };
          if (parents)
            for (size_t i = 1; i < path.size(); i++)
              if (path[i] == '/') make(path.substr(0, i));
          make(path);
          struct stat sb;
          if (::stat(path.c_str(), &sb) != 0 || !S_ISDIR(sb.st_mode))
            throwError("file-error", "create-directory: not a directory: " + path);
        },
        "Creates the directory PATH (and, unless :parents #f, its missing parents); an existing "
        "directory is fine.");
  sandbox(r, "create-directory", Needs::Files, "files: makes directories");
  r.def("cpu-count", "()", []() { return int64_t(std::max(1u, std::thread::hardware_concurrency())); },
        "The number of processors (hardware threads) this process may use, e.g. for (set-num-threads! (cpu-count)).");
  sandboxAllowed(r, "cpu-count", "the process: the number of cores",
               "reads a number; changes nothing");
  r.def("terminal-output?", "()", []() { return bool(isatty(STDOUT_FILENO)); },
        "True when standard output is a terminal (fit shows its progress bar only then).");
  sandboxAllowed(r, "terminal-output?", "ports: whether standard output is a terminal",
               "reads a flag; changes nothing");
}

}  // namespace purple
