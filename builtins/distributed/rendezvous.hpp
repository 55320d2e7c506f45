// Forming process groups: the store every rank meets at, the world group, sub-groups, and
// taking them down. rendezvous.cpp follows the steps of Python's torch.distributed for the
// LibTorch version Purple is built against (store prefixes, group names, the store-based barrier,
// sequence numbers), so that Purple and Python ranks can be members of one group.
#pragma once
#include "builtins/distributed/comm.hpp"

namespace purple::dist {

struct InitRequest {
  std::string backend = "gloo";
  int rank = 0;
  int worldSize = 1;
  // Where the ranks meet: a TCP store (host, port; rank 0 serves it), or a shared file.
  std::string host;
  int port = 0;
  std::string filePath;              // non-empty: file:// rendezvous
  std::chrono::milliseconds timeout{std::chrono::minutes(30)};
  bool checkCollectives = true;      // allowed when every rank turns out to be a Purple process
  int localRank = 0;
  int localWorldSize = 1;
};

// Creates the world group (dist-init); raises one clear error for every misconfiguration that
// can be detected (a port in use, an unreachable store, ranks that disagree on the world size or
// share a rank) instead of waiting for the timeout.
GroupPtr initWorld(const InitRequest& r, std::string_view who);
// dist-new-group: every rank of the world calls it with the same RANKS (world ranks, sorted).
GroupPtr newGroup(std::vector<int> ranks, const std::string& backend, std::chrono::milliseconds timeout,
                  std::string_view who);
// dist-destroy: drops every group (waiting for their pending work) and the store.
void destroyAll();

}  // namespace purple::dist
