// The checks the hardening hosts print: "ok: ..." or "FAIL: ...", each line flushed at once (a
// crash must not take the lines before it), and how many failed, for the exit status. Threads may
// check at once (gmp_threads.cpp).
#pragma once
#include <atomic>
#include <cstdio>
#include <string>

namespace hardening {

inline std::atomic<int> failures{0};

inline void check(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok) failures++;
}

}  // namespace hardening
