// fully-shard: PyTorch's FSDP2 for Purple models. Each parameter keeps its identity (the tensor
// that optimizers, cells and the module hold) but holds, between training steps, only this
// rank's part of its flattened elements, so that parameters, gradients and optimizer state take
// 1/N of their memory on each of N ranks.
//
// The model is cut into *units*: submodules whose parameters are gathered together (one
// all-gather) just before their forward, and freed again after it; gathered once more when the
// backward pass reaches them, and freed when it is done with them; their gradients reduced with
// one reduce-scatter, each rank keeping the average of its part. The root unit (the wrapper) has
// the parameters no other unit claims and stays gathered from its forward to the end of backward.
//
// Gathering is LibTorch's set_data: a parameter's data becomes the whole tensor for the unit's
// forward and backward, its shard otherwise. The whole tensor's storage is emptied rather than
// dropped after forward (what autograd saved refers to it) and refilled in place before backward.
#pragma once
#include "builtins/distributed/comm.hpp"
#include <torch/csrc/autograd/function.h>
#include <torch/nn/module.h>
#include <mutex>
#include <optional>

namespace purple::dist {

struct FsdpOptions {
  bool reshardAfterForward = true;
  std::optional<at::ScalarType> paramDtype;    // mixed precision: gathered parameters and inputs
  std::optional<at::ScalarType> reduceDtype;   // gradients are reduced in this type
  std::optional<at::ScalarType> outputDtype;   // the root's floating outputs are cast to it
  bool activationCheckpointing = false;        // units keep no activations; backward recomputes them
};

// Deferred initialisation (fully-shard-unit!): parameters that keep only this rank's part from the
// moment their layer is built, before the model is complete and sharded; fully-shard adopts
// them with their whole shapes.
struct EarlyShard {
  std::vector<int64_t> shape;        // the whole parameter's
  int64_t numel = 0;
  int groupSize = 0, groupRank = 0;
};
std::optional<EarlyShard> earlyShardOf(const at::Tensor& p);
// Keeps this rank's part of each parameter, as fully-shard divides them (a collective: the
// ranks' values are compared first, as they must have built the same ones).
void shardEarly(Group& g, const std::vector<at::Tensor>& params, std::string_view who);
void forgetEarlyShard(const at::Tensor& p);   // once fully-shard has adopted it

// The floating tensors of a unit's output (a tensor, or lists and vectors of them), in a fixed
// order (fsdp_checkpoint.cpp).
void outputTensors(Value v, std::vector<at::Tensor>& out, int depth);

// Shared by fsdp.cpp and fsdp_reduce.cpp:
// the dtype a collective moves DT in: Gloo (LibTorch 1.13) has no bfloat16, so bfloat16 travels
// as float32 there (the computation still runs in bfloat16); NCCL moves it as it is;
at::ScalarType wireDtype(const Group& g, at::ScalarType dt);
// a communication failure inside an autograd hook, as the C++ exception `backward` turns into a
// Purple error;
[[noreturn]] void failInHook(const char* what, const std::exception& e);
// a tensor's storage, emptied (the tensor keeps its shape, and whatever refers to the storage
// keeps referring to it) and its bytes given back.
void emptyStorage(const at::Tensor& t);

class FsdpState : public std::enable_shared_from_this<FsdpState> {
 public:
  struct Param {
    at::Tensor param;                // the module's parameter (its TensorImpl is what everyone holds)
    std::string name;                // its state-dict name under the root
    std::vector<int64_t> shape;
    int64_t numel = 0, chunk = 0;    // chunk: elements per rank (the last ranks' parts are padded)
    int64_t start = 0, length = 0;   // this rank's elements of the flattened tensor
    at::Tensor shard;                // those elements, 1-D, in the parameter's own dtype
    at::Tensor padded;               // the gathered tensor, chunk * ranks elements (storage emptied when sharded)
    at::Tensor full;                 // its first numel elements, in the parameter's shape
    at::Tensor stashed;              // a gradient from before this forward (accumulation), shard-shaped
    at::Tensor gradFull;             // this backward pass's gradient, whole, until it is reduced
    at::Tensor reduced;              // this backward pass's reduced gradient, shard-shaped
    bool whole = false;              // the parameter holds the gathered tensor now
    bool inUnitBuffer = false;       // padded is a slice of its unit's gathered buffer (Gloo)
    std::shared_ptr<torch::autograd::Node> accumulator;
    uintptr_t hookKey = 0;
    bool gradReady = false;
    size_t unit = 0;
  };
  struct Unit {
    std::string path;                // "" for the root
    std::weak_ptr<torch::nn::Module> module;
    std::vector<size_t> params;
    std::vector<int64_t> offsets;    // of each parameter's part in the packed shard
    int64_t packed = 0;
    bool unsharded = false;
    uint64_t preHook = 0, postHook = 0;
    // this backward pass
    bool inBackward = false;         // gathered for it (or never resharded since forward)
    int inputHooks = 0, inputsDone = 0;
    size_t gradsPending = 0;
    bool reduceLaunched = false;
    bool keepGathered = false;       // an output is a view of a parameter: not freed after forward
    // activation checkpointing: this forward runs without recording; its arguments and the
    // random state it began with, for the recomputation
    bool checkpointing = false;
    Root checkpointArgs;
    at::Tensor rngState;
    WorkPtr work;
    at::Tensor send, recv;
    // Gloo: one in-place all-reduce per parameter's whole gradient (gradients[k] for u.params[k])
    // (large parameters), the small ones packed into recv at smallOffsets[k] (-1: not there)
    // and all-reduced by `work`
    std::vector<WorkPtr> works;
    std::vector<at::Tensor> gradients;
    std::vector<int64_t> smallOffsets;
    bool gloo = false;
    // Gloo: the gathered parameters of each dtype in one buffer, every parameter's padded tensor
    // a slice of it (storage emptied when sharded)
    std::vector<std::pair<at::ScalarType, at::Tensor>> flats;
    bool flatsKept = false;          // resharded in backward, flats kept for the reduction to receive into
  };

  FsdpState(GroupPtr g, FsdpOptions o) : group(std::move(g)), options(o) {}
  ~FsdpState();

  GroupPtr group;
  FsdpOptions options;
  std::vector<Param> params;
  std::vector<Unit> units;           // units[0] is the root

  // Builds the units and shards the parameters (after rank 0's values were copied everywhere).
  void build(const std::shared_ptr<torch::nn::Module>& root, const std::vector<std::shared_ptr<torch::nn::Module>>& chosen,
             bool defaultUnits);
  // A training forward of the root begins (a backward pass may follow).
  void beginPass();
  // The forward of unit U: gathers its parameters; returns new arguments (inputs hooked for the
  // backward pass, cast for mixed precision), or #f.
  Value beforeForward(size_t u, Value args);
  void afterForward(size_t u, Value output, bool root);
  at::Tensor gatherWhole(size_t param);          // state dicts
  void scatterWhole(size_t param, const at::Tensor& full);
  void reshardAll();
  void removeHooks();
  // The recomputation of unit U's forward in the backward pass (activation checkpointing): its
  // hooks then neither checkpoint, reshard nor hook inputs and outputs again.
  int recomputing = 0;

 private:
  void unshard(Unit& u, bool inHook);
  void ensurePadded(Param& p, at::ScalarType dt);
  bool isLarge(const Param& p) const;
  // RECEIVE-INTO: a buffer of the unit's size the all-to-alls may receive into, or undefined
  void reduceInPieces(Unit& u, at::ScalarType wire, const at::Tensor& receiveInto);
  void releaseFlats(Unit& u);
  bool readyToReduce(const Unit& u) const;
  void packColumns(at::Tensor block, const at::Tensor& flat, const Param& p, int64_t from);
  void reshardParam(Param& p);
  void reshard(Unit& u);
  void hookAccumulator(size_t i);
  void hookOutputs(size_t u, Value v, int depth);
  void checkpointOutputs(size_t u, Value output);
  void onOutputGrad(size_t u);
  void onInputGrad(size_t u);
  void onParamGrad(size_t i);
  void launchReady();
  void launchReduce(Unit& u);
  void completeReduce(Unit& u);
  void maybeReshardInBackward(Unit& u);
  void queueFinal();
  void finalize();
  at::ScalarType computeDtype(const Param& p) const { return options.paramDtype.value_or(p.param.scalar_type()); }

  std::recursive_mutex mutex_;
  bool passOpen_ = false;            // a training forward ran and its backward has not ended
  bool finalQueued_ = false;
  size_t nextReduce_ = 0;            // reductions launch in a fixed order (reverse unit order)
  std::vector<size_t> reduceOrder_;
  std::optional<size_t> inflight_;   // the reduction launched last, not yet completed
  // the units whose forward ended, in order, in this training pass and in the last one
  std::vector<size_t> forwardOrder_, lastForwardOrder_;
};

}  // namespace purple::dist
