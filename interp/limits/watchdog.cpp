#include "interp/limits/watchdog.hpp"
#include "interp/core/interp.hpp"
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace purple {

namespace {

using Clock = std::chrono::steady_clock;

struct Watchdog {
  std::mutex lock;
  std::condition_variable wake;
  std::multimap<Clock::time_point, Interp*> deadlines;
  std::unordered_map<Interp*, std::multimap<Clock::time_point, Interp*>::iterator> armed;
  bool started = false;

  void run() {
    std::unique_lock<std::mutex> g(lock);
    for (;;) {
      if (deadlines.empty()) {
        wake.wait(g);
        continue;
      }
      auto first = deadlines.begin();
      if (Clock::now() < first->first) {
        // A copy: wait_until reads the time again after waking, and while it waited (unlocked)
        // the interpreter may have disarmed, freeing the entry (AddressSanitizer found this).
        Clock::time_point when = first->first;
        wake.wait_until(g, when);
        continue;
      }
      // Under the lock, so the interpreter cannot be destroyed meanwhile (it disarms first).
      Interp* in = first->second;
      in->deadlinePassed.store(true, std::memory_order_relaxed);
      in->attention.store(true, std::memory_order_release);
      armed.erase(in);
      deadlines.erase(first);
    }
  }
};

// Never destroyed: the thread may outlive static destruction.
Watchdog& watchdog() {
  static Watchdog* w = new Watchdog();
  return *w;
}

void disarmLocked(Watchdog& w, Interp* in) {
  auto it = w.armed.find(in);
  if (it == w.armed.end()) return;
  w.deadlines.erase(it->second);
  w.armed.erase(it);
}

}  // namespace

void armDeadline(Interp* in, Clock::time_point when) {
  Watchdog& w = watchdog();
  std::lock_guard<std::mutex> g(w.lock);
  if (!w.started) {
    std::thread([&w] { w.run(); }).detach();
    w.started = true;
  }
  disarmLocked(w, in);
  w.armed[in] = w.deadlines.emplace(when, in);
  w.wake.notify_one();
}

void disarmDeadline(Interp* in) {
  Watchdog& w = watchdog();
  std::lock_guard<std::mutex> g(w.lock);
  disarmLocked(w, in);
}

}  // namespace purple
