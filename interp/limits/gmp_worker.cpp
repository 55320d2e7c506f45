// Big GMP operations on a worker thread, so that polling goes on while they run (why: see the header).
#include "interp/limits/gmp_worker.hpp"
#include "interp/core/interp.hpp"
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#if defined(__linux__)
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace purple {

namespace {

// Everything a worker reads or writes. Shared by the waiting thread and the worker, so whichever
// lets go last frees the numbers.
struct GmpJob {
  mpz_t z[4];
  mpq_t q[2];
  size_t zCount = 0, qCount = 0;
  GmpCompute compute;
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  bool abandoned = false;
  long threadId = 0;   // the worker's kernel thread id, once it runs (Linux)

  GmpJob() {
    for (auto& x : z) mpz_init(x);
    for (auto& x : q) mpq_init(x);
  }
  ~GmpJob() {
    for (auto& x : z) mpz_clear(x);
    for (auto& x : q) mpq_clear(x);
  }
  GmpJob(const GmpJob&) = delete;
};

// The number of workers running, abandoned ones included, bounded by the core count.
class WorkerSlots {
 public:
  // Takes a free slot if there is one.
  bool tryAcquire() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (busy_ >= limit()) return false;
    busy_++;
    return true;
  }
  // Waits for a free slot, polling the interpreter on this thread (which may raise).
  void acquire() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (busy_ >= limit()) {
      freed_.wait_for(lock, std::chrono::milliseconds(2));
      lock.unlock();
      pollCurrentInterp();
      lock.lock();
    }
    busy_++;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      busy_--;
    }
    freed_.notify_one();
  }

 private:
  static unsigned limit() {
    static const unsigned n = std::max(2u, std::thread::hardware_concurrency());
    return n;
  }
  std::mutex mutex_;
  std::condition_variable freed_;
  unsigned busy_ = 0;
};

// Never destroyed: a worker abandoned near the end of the process may still release its slot.
WorkerSlots& slots() {
  static auto* s = new WorkerSlots;
  return *s;
}

// An abandoned worker's result is never read, so it yields the cores to work that is: on Linux a
// thread has its own nice value. Called with the job's mutex held, by whichever side learns of
// the abandonment last (the worker may not have started when it happens).
void lowerPriority(GmpJob& job) {
#if defined(__linux__)
  if (job.abandoned && job.threadId) setpriority(PRIO_PROCESS, id_t(job.threadId), 19);
#else
  (void)job;
#endif
}

void runJob(GmpJob& job) {
  mpz_ptr z[4];
  mpq_ptr q[2];
  for (size_t i = 0; i < 4; i++) z[i] = job.z[i];
  for (size_t i = 0; i < 2; i++) q[i] = job.q[i];
  job.compute(z, q);
}

}  // namespace

void runGmpOnWorker(std::initializer_list<mpz_ptr> z, std::initializer_list<mpq_ptr> q, const GmpCompute& compute,
                    bool shortEnoughToRunHere) {
  auto job = std::make_shared<GmpJob>();
  job->compute = compute;
  // Moving the operands in is a swap of GMP's headers: no copy. On a raise before the worker
  // starts, the job frees them and the caller's own variables hold empty numbers.
  for (mpz_ptr p : z) mpz_swap(job->z[job->zCount++], p);
  for (mpq_ptr p : q) mpq_swap(job->q[job->qCount++], p);
  auto moveBack = [&] {
    size_t i = 0;
    for (mpz_ptr p : z) mpz_swap(job->z[i++], p);
    i = 0;
    for (mpq_ptr p : q) mpq_swap(job->q[i++], p);
  };

  // Every slot held means abandoned work is running (or other interpreters' big operations). An
  // operation that takes at most a few tens of milliseconds then runs here: waiting for a slot
  // could take seconds, as long as an abandoned gcd has left to run.
  if (!slots().tryAcquire()) {
    if (shortEnoughToRunHere) {
      runJob(*job);
      moveBack();
      return;
    }
    slots().acquire();
  }
  try {
    std::thread([job] {
#if defined(__linux__)
      {
        std::lock_guard<std::mutex> lock(job->mutex);
        job->threadId = long(syscall(SYS_gettid));
        lowerPriority(*job);
      }
#endif
      runJob(*job);
      {
        std::lock_guard<std::mutex> lock(job->mutex);
        job->done = true;
      }
      job->finished.notify_all();
      slots().release();
    }).detach();
  } catch (const std::system_error&) {
    // No thread to be had (a host's process limit): compute here, uninterruptibly, as before.
    slots().release();
    runJob(*job);
    moveBack();
    return;
  }

  std::unique_lock<std::mutex> lock(job->mutex);
  while (!job->done) {
    if (job->finished.wait_for(lock, std::chrono::milliseconds(2), [&] { return job->done; })) break;
    lock.unlock();
    try {
      pollCurrentInterp();
    } catch (...) {
      // The raise abandons the job to the worker, which goes on at the lowest priority.
      std::lock_guard<std::mutex> abandon(job->mutex);
      job->abandoned = true;
      lowerPriority(*job);
      throw;
    }
    lock.lock();
  }
  lock.unlock();
  moveBack();
}

}  // namespace purple
