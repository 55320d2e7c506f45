// Time budgets for code that makes few closure calls: a loop of big tensor operations, or one
// builtin walking a huge list, reaches the evaluator's every-1024-calls clock check too rarely.
// One thread for the process sleeps until the earliest armed deadline and raises that
// interpreter's attention flag, which every primitive call polls.
#pragma once
#include <chrono>

namespace purple {

class Interp;

void armDeadline(Interp* in, std::chrono::steady_clock::time_point when);   // replaces an armed one
void disarmDeadline(Interp* in);

}  // namespace purple
