// Starting and watching the ranks of one machine.
//
// Failure: when a rank exits with a non-zero status or is killed, the launcher
//   1. writes one line naming it ("rank 1 (local rank 1, pid 4242) was killed by signal 9
//      (SIGKILL)") into the file PURPLE_RUN_FAILURE_FILE names, so the surviving ranks' errors
//      (their next collective fails when the dead rank's connections close) can quote it;
//   2. says so on its standard error;
//   3. gives the other ranks --stop-timeout seconds (default 5) to end on their own, then sends
//      them SIGTERM, and SIGKILL after as long again.
// So every rank of the machine has stopped at most 2 x stop-timeout after the failure, and the
// launcher exits with the first failed rank's status. Ctrl-C (SIGINT) and SIGTERM sent to the
// launcher are passed to every rank, with the same escalation; the exit status is then 130.
// A rank whose launcher dies is killed too (PR_SET_PDEATHSIG).
//
// With --max-restarts, --rdzv-backend c10d or --nnodes MIN:MAX the launchers of the job meet at
// a coordinator (rendezvous.hpp) before each round of ranks: a failure anywhere stops the ranks
// of every machine, and while restarts are left they all start again with
// TORCHELASTIC_RESTART_COUNT one higher and a fresh port for rank 0's store.
#pragma once
#include "launcher/options.hpp"

namespace purple::launcher {

// Runs the job; returns the launcher's exit status.
int supervise(const Options& o);

}  // namespace purple::launcher
