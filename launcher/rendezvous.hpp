// How the launchers of one job meet, and restart the job together (torchrun's elastic agent).
//
// One launcher hosts the *coordinator*: with --rdzv-backend static the launcher of node 0, on
// --master-addr:--master-port; with c10d the launcher that can listen on --rdzv-endpoint (the
// first to start on that machine). Every launcher, the host's included, talks to it over one
// TCP connection (the host's own over a socket pair), one line per message:
//
//   launcher -> coordinator   JOIN <run-id> <node-rank or -1> <nproc>     (again after each stop)
//                             FAILED <round> <what happened>               a local rank failed
//                             DONE <round>                                 every local rank exited 0
//                             ABORT <why>                                  Ctrl-C, SIGTERM
//   coordinator -> launcher   ROUND <round> <node-rank> <nnodes> <world> <first-rank> <restarts> <master-port> <master-addr>
//                             STOP <round> restart|regroup|final <why>     stop the ranks
//                             EXIT <status> <why>                          the job is over
//
// A round starts when its nodes have joined: all --nnodes with static node ranks; with c10d and
// --nnodes MIN:MAX, MAX nodes, or MIN once --rdzv-conf last_call_timeout has passed since MIN
// joined. Node ranks are then assigned in the order the launchers joined, the host's first (it
// serves rank 0's store, so MASTER_ADDR is its address), and ranks are numbered node by node.
// When a rank fails, its launcher says FAILED; while restarts are left (--max-restarts), the
// coordinator tells every launcher to stop its ranks and join again (a restart: the next round,
// with TORCHELASTIC_RESTART_COUNT one higher); otherwise to stop for good. A launcher that joins
// while a round runs (up to MAX) stops the round too ("regroup"), without using a restart, so
// that the next round includes it, as torchrun's agents do. A launcher whose connection drops counts as a
// failed node. A round that cannot form within --rdzv-conf join_timeout ends the job.
#pragma once
#include "launcher/options.hpp"
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace purple::launcher {

using Clock = std::chrono::steady_clock;

// A connection that carries lines: reads are non-blocking and buffered, writes are short.
class LineChannel {
 public:
  explicit LineChannel(int fd);
  ~LineChannel();
  LineChannel(const LineChannel&) = delete;
  LineChannel& operator=(const LineChannel&) = delete;
  int fd() const { return fd_; }
  bool open() const { return fd_ >= 0; }
  // Reads what has arrived and appends its complete lines to LINES; false once the peer has
  // closed the connection (or it failed), after the last lines.
  bool pump(std::vector<std::string>& lines);
  void send(const std::string& line);   // one line; a closed connection drops it
  void close();

 private:
  int fd_;
  std::string partial_;
};

// What a round gives one launcher.
struct Assignment {
  int round = 0;
  int nodeRank = 0;
  int nnodes = 1;
  int world = 1;
  int firstRank = 0;
  int restarts = 0;
  int masterPort = 0;
  std::string masterAddr;
};
// Parses "ROUND ..." (the words after ROUND); false when malformed.
bool parseAssignment(const std::vector<std::string>& words, Assignment& a);

class Coordinator {
 public:
  // LISTEN: a listening socket for other launchers, or -1 when the job is this launcher alone.
  Coordinator(const Options& o, int listen);
  ~Coordinator();
  // The host launcher's own connection (a socket pair): the other end is returned.
  int connectLocal();
  // Descriptors to poll for input, and what to do when one is ready.
  std::vector<int> fds() const;
  void ready(int fd);
  // Timers: a round that does not form, the last call for more nodes. Returns how long the
  // poll may wait (milliseconds) before tick() has work.
  int tick();

 private:
  struct Client;
  enum class State { Forming, Running, Over };
  void accept();
  void onLine(Client& c, const std::string& line);
  void onGone(Client& c);
  void tryStart();
  void stopRound(const std::string& why, bool countsAsRestart);
  void finish(int status, const std::string& why);
  void broadcast(const std::string& line, bool membersOnly);

  const Options& o_;
  int listen_;
  std::vector<std::unique_ptr<Client>> clients_;
  State state_ = State::Forming;
  int round_ = 0;
  int restarts_ = 0;
  uint64_t joinOrder_ = 0;
  Clock::time_point formingSince_, minReachedAt_;
  bool minReached_ = false;
};

// The listening socket for the coordinator at HOST:PORT, or -1 when another process already
// listens there or HOST is not an address of this machine (then this launcher is a client).
// REQUIRED: the caller must host (node 0 of a static job): failures are errors, and when HOST
// is not local it listens on every address.
int listenForLaunchers(const std::string& host, int port, bool required);
// Connects to the coordinator at HOST:PORT, trying again until DEADLINE (it may start after
// this launcher); returns -1 when WAKE (the signal pipe) has input first. Throws on timeout.
int connectToCoordinator(const std::string& host, int port, Clock::time_point deadline, int wake);
// A port nobody listens on now, on this machine.
int freePort();

}  // namespace purple::launcher
