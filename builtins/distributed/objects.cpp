// Collectives on Purple values (configs, metrics, early-stop decisions): each value is encoded
// with codec.hpp into a byte tensor, sizes travel first, and the bytes follow in one collective
// padded to the largest. As torch's *_object collectives, these are for small data; tensors are
// better sent with the tensor collectives.
#include "builtins/distributed/codec.hpp"
#include "builtins/distributed/pending.hpp"
#include "builtins/builtins.hpp"
#include "interp/memory/tensor_value.hpp"
#include <algorithm>
#include <cstring>
#include "interp/limits/sandbox.hpp"

namespace purple::dist {

namespace {

// NCCL moves only CUDA tensors: object bytes then travel on this rank's GPU.
at::TensorOptions byteOptions(const Group& g, at::ScalarType t) {
  at::TensorOptions o = at::TensorOptions().dtype(t);
  if (g.backend == "nccl") o = o.device(at::Device(at::kCUDA, int8_t(world().localRank)));
  return o;
}

void run(std::string_view who, const std::function<WorkPtr()>& call) {
  WorkPtr w = issue(who, call);
  waitWork(w, who);
}

at::Tensor bytesTensor(const Group& g, const std::string& bytes, int64_t size) {
  at::Tensor t = at::zeros({size}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t.to(byteOptions(g, at::kByte).device());
}

Value decodeTensor(const at::Tensor& t, int64_t size, std::string_view who) {
  at::Tensor c = t.to(at::kCPU).contiguous();
  return decodeValue(c.data_ptr<uint8_t>(), size_t(size), who);
}

// Encodes V; a value that cannot be sent must fail on every rank, not leave the others waiting
// in the next collective: the ranks first agree (all-reduce of a flag) that every value encoded.
struct Encoded {
  std::string bytes;
  std::exception_ptr error;
};

Encoded tryEncode(Value v, std::string_view who) {
  Encoded e;
  try {
    e.bytes = encodeValue(v, who);
  } catch (const PurpleException&) {
    e.error = std::current_exception();
  }
  return e;
}

void agreeEncoded(Group& g, const Encoded& e, std::string_view who) {
  std::vector<at::Tensor> flag{at::full({1}, e.error ? 0 : 1, byteOptions(g, at::kLong))};
  c10d::AllreduceOptions o;
  o.reduceOp = c10d::ReduceOp::MIN;
  run(who, [&] { return g.comm->allreduce(flag, o); });
  if (e.error) std::rethrow_exception(e.error);
  if (flag[0].to(at::kCPU).item<int64_t>() == 0)
    throwError("dist-error", std::string(who) + ": another rank's value cannot be sent (see that rank's error)");
}

std::vector<int64_t> allGatherSizes(Group& g, int64_t mine, std::string_view who) {
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int k = 0; k < g.size; k++) outputs[0].push_back(at::zeros({1}, byteOptions(g, at::kLong)));
  std::vector<at::Tensor> inputs{at::full({1}, mine, byteOptions(g, at::kLong))};
  run(who, [&] { return g.comm->allgather(outputs, inputs); });
  std::vector<int64_t> sizes;
  for (auto& t : outputs[0]) sizes.push_back(t.to(at::kCPU).item<int64_t>());
  return sizes;
}

}  // namespace

Value allGatherValue(Group& g, Value v, std::string_view who) {
  checkAgreement(g, {Op::AllGatherObject, -1, -1, nullptr, {}}, who);
  Encoded enc = tryEncode(v, who);
  agreeEncoded(g, enc, who);
  const std::string& bytes = enc.bytes;
  std::vector<int64_t> sizes = allGatherSizes(g, int64_t(bytes.size()), who);
  int64_t longest = *std::max_element(sizes.begin(), sizes.end());
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int k = 0; k < g.size; k++) outputs[0].push_back(at::zeros({longest}, byteOptions(g, at::kByte)));
  std::vector<at::Tensor> inputs{bytesTensor(g, bytes, longest)};
  run(who, [&] { return g.comm->allgather(outputs, inputs); });
  std::vector<Value, traceable_allocator<Value>> items;
  for (int k = 0; k < g.size; k++) items.push_back(k == g.rank ? v : decodeTensor(outputs[0][k], sizes[k], who));
  return listFromArray(items.data(), items.size());
}

namespace {

Value broadcastObject(Value v, int64_t src, Value group, const char* who) {
  GroupPtr g = groupArg(group, who);
  int root = groupRankArg(*g, src, who, "src");
  checkAgreement(*g, {Op::BroadcastObject, src, -1, nullptr, {}}, who);
  bool isRoot = g->rank == root;
  Encoded enc = isRoot ? tryEncode(v, who) : Encoded();
  agreeEncoded(*g, enc, who);
  const std::string& bytes = enc.bytes;
  std::vector<at::Tensor> size{at::full({1}, int64_t(bytes.size()), byteOptions(*g, at::kLong))};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  run(who, [&] { return g->comm->broadcast(size, o); });
  int64_t n = size[0].to(at::kCPU).item<int64_t>();
  std::vector<at::Tensor> data{isRoot ? bytesTensor(*g, bytes, n) : at::zeros({n}, byteOptions(*g, at::kByte))};
  run(who, [&] { return g->comm->broadcast(data, o); });
  return isRoot ? v : decodeTensor(data[0], n, who);
}

Value allGatherObject(Value v, Value group, const char* who) {
  GroupPtr g = groupArg(group, who);
  return allGatherValue(*g, v, who);
}

Value gatherObject(Value v, int64_t dst, Value group, const char* who) {
  GroupPtr g = groupArg(group, who);
  int root = groupRankArg(*g, dst, who, "dst");
  checkAgreement(*g, {Op::GatherObject, dst, -1, nullptr, {}}, who);
  Encoded enc = tryEncode(v, who);
  agreeEncoded(*g, enc, who);
  const std::string& bytes = enc.bytes;
  std::vector<int64_t> sizes = allGatherSizes(*g, int64_t(bytes.size()), who);
  int64_t longest = *std::max_element(sizes.begin(), sizes.end());
  bool isRoot = g->rank == root;
  std::vector<std::vector<at::Tensor>> outputs;
  if (isRoot) {
    outputs.emplace_back();
    for (int k = 0; k < g->size; k++) outputs[0].push_back(at::zeros({longest}, byteOptions(*g, at::kByte)));
  }
  std::vector<at::Tensor> inputs{bytesTensor(*g, bytes, longest)};
  c10d::GatherOptions o;
  o.rootRank = root;
  run(who, [&] { return g->comm->gather(outputs, inputs, o); });
  if (!isRoot) return Value::f();
  std::vector<Value, traceable_allocator<Value>> items;
  for (int k = 0; k < g->size; k++) items.push_back(k == g->rank ? v : decodeTensor(outputs[0][k], sizes[k], who));
  return listFromArray(items.data(), items.size());
}

Value scatterObject(Value values, int64_t src, Value group, const char* who) {
  GroupPtr g = groupArg(group, who);
  int root = groupRankArg(*g, src, who, "src");
  checkAgreement(*g, {Op::ScatterObject, src, -1, nullptr, {}}, who);
  bool isRoot = g->rank == root;
  std::vector<std::string> encoded;
  int64_t longest = 0;
  Value mine = Value::unspecified();
  Encoded problem;
  if (isRoot) {
    try {
      if (!isList(values) || int(listLength(values)) != g->size)
        throwError("dist-error", std::string(who) + ": the source rank must give a list of one value per rank (" +
                                     std::to_string(g->size) + ")");
      int k = 0;
      for (Value p = values; isPair(p); p = cdr(p), k++) {
        if (k == g->rank) mine = car(p);
        encoded.push_back(encodeValue(car(p), who));
        longest = std::max<int64_t>(longest, int64_t(encoded.back().size()));
      }
    } catch (const PurpleException&) {
      problem.error = std::current_exception();
    }
  }
  agreeEncoded(*g, problem, who);
  std::vector<at::Tensor> size{at::full({1}, longest, byteOptions(*g, at::kLong))};
  c10d::BroadcastOptions bo;
  bo.rootRank = root;
  run(who, [&] { return g->comm->broadcast(size, bo); });
  longest = size[0].to(at::kCPU).item<int64_t>();
  // each block: 8 bytes of length, then the bytes
  std::vector<std::vector<at::Tensor>> inputs;
  if (isRoot) {
    inputs.emplace_back();
    for (auto& e : encoded) {
      std::string block(8, '\0');
      uint64_t n = e.size();
      std::memcpy(&block[0], &n, 8);
      block += e;
      inputs[0].push_back(bytesTensor(*g, block, longest + 8));
    }
  }
  std::vector<at::Tensor> outputs{at::zeros({longest + 8}, byteOptions(*g, at::kByte))};
  c10d::ScatterOptions so;
  so.rootRank = root;
  run(who, [&] { return g->comm->scatter(outputs, inputs, so); });
  if (isRoot) return mine;
  at::Tensor block = outputs[0].to(at::kCPU).contiguous();
  uint64_t n;
  std::memcpy(&n, block.data_ptr<uint8_t>(), 8);
  if (n > uint64_t(longest)) decodeValue(nullptr, 0, who);   // raises: not a value
  return decodeValue(block.data_ptr<uint8_t>() + 8, size_t(n), who);
}

Value sendObject(Value v, int64_t dst, int64_t tag, Value group, const char* who) {
  GroupPtr g = groupArg(group, who);
  int peer = groupRankArg(*g, dst, who, "dst");
  if (peer == g->rank) throwError("dist-error", std::string(who) + ": a rank cannot send to itself");
  Encoded enc = tryEncode(v, who);
  const std::string& bytes = enc.bytes;
  // a size of -1 tells the receiver that nothing follows
  std::vector<at::Tensor> size{at::full({1}, enc.error ? int64_t(-1) : int64_t(bytes.size()), byteOptions(*g, at::kLong))};
  run(who, [&] { return g->comm->send(size, peer, int(tag)); });
  if (enc.error) std::rethrow_exception(enc.error);
  std::vector<at::Tensor> data{bytesTensor(*g, bytes, int64_t(bytes.size()))};
  run(who, [&] { return g->comm->send(data, peer, int(tag)); });
  return Value::unspecified();
}

Value recvObject(std::optional<int64_t> src, int64_t tag, Value group, const char* who) {
  GroupPtr g = groupArg(group, who);
  int peer = src ? groupRankArg(*g, *src, who, "src") : -1;
  if (peer == g->rank) throwError("dist-error", std::string(who) + ": a rank cannot receive from itself");
  std::vector<at::Tensor> size{at::zeros({1}, byteOptions(*g, at::kLong))};
  WorkPtr w = issue(who, [&] { return peer >= 0 ? g->comm->recv(size, peer, int(tag)) : g->comm->recvAnysource(size, int(tag)); });
  waitWork(w, who);
  if (peer < 0) peer = w->sourceRank();
  int64_t n = size[0].to(at::kCPU).item<int64_t>();
  if (n == -1)
    throwError("dist-error", std::string(who) + ": rank " + std::to_string(g->globalRanks.at(peer)) +
                                 " could not send its value (see its error)");
  if (n < 0 || n > (int64_t(1) << 40)) decodeValue(nullptr, 0, who);
  std::vector<at::Tensor> data{at::zeros({n}, byteOptions(*g, at::kByte))};
  run(who, [&] { return g->comm->recv(data, peer, int(tag)); });
  return decodeTensor(data[0], n, who);
}

}  // namespace

}  // namespace purple::dist

namespace purple {

using namespace dist;

void registerDistObjects(Registry& r) {
  r.def("dist-broadcast-object", "(value :key (src 0) group)",
        [](Value v, int64_t src, Value group) { return broadcastObject(v, src, group, "dist-broadcast-object"); },
        "Returns rank :src's VALUE (default rank 0) on every rank of :group: any data Purple can send (numbers, "
        "strings, symbols, lists, vectors, hash tables, tensors ...). The other ranks' VALUE is ignored. For "
        "configurations and decisions: (dist-broadcast-object (and (= (dist-rank) 0) (load-config)))");
  sandbox(r, "dist-broadcast-object", Needs::Process, "network: sends or receives objects");
  r.def("dist-all-gather-object", "(value :key group)",
        [](Value v, Value group) { return allGatherObject(v, group, "dist-all-gather-object"); },
        "The list of every rank's VALUE, in group-rank order, on every rank of :group: metrics, counts, "
        "early-stop votes.");
  sandbox(r, "dist-all-gather-object", Needs::Process, "network: sends or receives objects");
  r.def("dist-gather-object", "(value :key (dst 0) group)",
        [](Value v, int64_t dst, Value group) { return gatherObject(v, dst, group, "dist-gather-object"); },
        "On rank :dst (default 0), the list of every rank's VALUE in group-rank order; #f on the other ranks.");
  sandbox(r, "dist-gather-object", Needs::Process, "network: sends or receives objects");
  r.def("dist-scatter-object", "(values :key (src 0) group)",
        [](Value values, int64_t src, Value group) { return scatterObject(values, src, group, "dist-scatter-object"); },
        "Rank :src gives VALUES, a list of one value per rank of :group; every rank returns its own. The other "
        "ranks pass anything (#f).");
  sandbox(r, "dist-scatter-object", Needs::Process, "network: sends or receives objects");
  r.def("dist-send-object", "(value dst :key (tag 0) group)",
        [](Value v, int64_t dst, int64_t tag, Value group) { return sendObject(v, dst, tag, group, "dist-send-object"); },
        "Sends VALUE to world rank DST, which receives it with dist-recv-object (same :tag).");
  sandbox(r, "dist-send-object", Needs::Process, "network: sends or receives objects");
  r.def("dist-recv-object", "(:key src (tag 0) group)",
        [](std::optional<int64_t> src, int64_t tag, Value group) {
          return recvObject(src, tag, group, "dist-recv-object");
        },
        "Receives a value sent with dist-send-object from world rank :src (any rank when not given) and returns it.");
  sandbox(r, "dist-recv-object", Needs::Process, "network: sends or receives objects");
}

}  // namespace purple
