// A sampling profiler of Purple code: a timer signals the interpreter's thread every interval,
// and the handler copies the interpreter's call records (the same ones backtraces read) into a
// table of distinct stacks. Nothing in the evaluator changes, so with no profile running it
// costs nothing.
#pragma once
#include "interp/core/interp.hpp"
#include <cstdint>
#include <string>
#include <vector>

namespace purple {

struct ProfiledFrame {
  std::string name;                  // the procedure called
  std::string defFile;               // where a closure was defined ("" for builtins)
  int defLine = 0;
  std::string siteFile;              // the call's position; the user's call that led into the
                                     // prelude when the call is the prelude's
  int siteLine = 0;
  std::string siteProcedure;         // the procedure whose body holds the call
  bool siteInPrelude = false;        // the call is written in the prelude
};

struct ProfiledStack {
  int64_t count = 0;
  bool truncated = false;            // deeper than the records copied: the outermost are missing
  std::vector<ProfiledFrame> frames; // outermost first
  std::string leafFile;              // the call whose arguments the innermost frame was evaluating, if any
  int leafLine = 0;
  std::string leafProcedure;
};

struct ProfileResult {
  std::vector<ProfiledStack> stacks;
  int64_t samples = 0;
  int64_t dropped = 0;               // samples the table had no room for
  double intervalSeconds = 0;
};

// How a module called as a procedure is named in a profile, set by the nn builtins (which know
// modules): PATH is its dotted path from the outermost module called ("ResNet.layer1.0.conv1"),
// LABEL what the profile shows ("ResNet.layer1.0.conv1 (Conv2d)"). PARENT is the nearest module
// called outside it on the stack (#f for none) and PARENT-PATH that one's path.
struct ModuleFrameName {
  std::string path, label;
};
using ModuleFrameNamer = ModuleFrameName (*)(Value module, Value parent, const std::string& parentPath);
void setModuleFrameNamer(ModuleFrameNamer namer);

// Samples IN's call stack every INTERVAL seconds of wall-clock time from construction to
// finish(), leaving out the records below the caller's. One session at a time in the process: a
// second is a Purple error (profile-error).
class SamplingSession {
 public:
  SamplingSession(Interp& in, double intervalSeconds);   // starts the timer
  ~SamplingSession();                                    // stops it
  SamplingSession(const SamplingSession&) = delete;
  SamplingSession& operator=(const SamplingSession&) = delete;
  ProfileResult finish();                                // stops and resolves the stacks
 private:
  bool stopped_ = false;
  double interval_;
  void stop();
};


}  // namespace purple
