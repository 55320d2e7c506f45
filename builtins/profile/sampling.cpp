// The builtin behind `profile` (prelude/60-profile.purple): runs a thunk under the sampling
// profiler (interp/language/sampling_profiler) and hands the distinct stacks to Purple, which
// makes the tables, folded stacks and flame graph.
#include "builtins/builtins.hpp"
#include "interp/language/sampling_profiler.hpp"
#include "interp/limits/sandbox.hpp"

namespace purple {

namespace {

Value text(const std::string& s) { return s.empty() ? Value::f() : makeString(s); }

Value frameValue(const ProfiledFrame& f) {
  Value v = makeVector(7);
  Value* e = v.as<Vector>()->items;
  e[0] = makeString(f.name);
  e[1] = text(f.defFile);
  e[2] = makeInteger(f.defLine);
  e[3] = text(f.siteFile);
  e[4] = makeInteger(f.siteLine);
  e[5] = Value::boolean(f.siteInPrelude);
  e[6] = text(f.siteProcedure);
  return v;
}

Value stackValue(const ProfiledStack& s) {
  Value frames = Value::nil();
  for (size_t i = s.frames.size(); i-- > 0;) frames = cons(frameValue(s.frames[i]), frames);
  Value v = makeVector(6);
  Value* e = v.as<Vector>()->items;
  e[0] = makeInteger(s.count);
  e[1] = Value::boolean(s.truncated);
  e[2] = text(s.leafFile);
  e[3] = makeInteger(s.leafLine);
  e[4] = frames;
  e[5] = text(s.leafProcedure);
  return v;
}

}  // namespace

void registerSampling(Registry& r) {
  r.def("%profile-run", "(thunk interval)", [](Interp& in, Procedure thunk, double interval) -> Value {
    SamplingSession session(in, interval);
    Value result = in.apply(thunk.value, nullptr, 0);
    ProfileResult p = session.finish();
    Value stacks = Value::nil();
    for (size_t i = p.stacks.size(); i-- > 0;) stacks = cons(stackValue(p.stacks[i]), stacks);
    Value items[] = {result, makeInteger(p.samples), makeInteger(p.dropped), stacks};
    return listFromArray(items, 4);
  }, "Internal: calls THUNK while sampling the call stack every INTERVAL seconds; returns (VALUE\n"
     "SAMPLES DROPPED STACKS), each stack #(COUNT TRUNCATED? LEAF-FILE LEAF-LINE FRAMES\n"
     "LEAF-PROCEDURE), each frame #(NAME DEF-FILE DEF-LINE CALL-FILE CALL-LINE CALL-IN-PRELUDE?\n"
     "CALL-PROCEDURE), outermost first.");
  sandbox(r, "%profile-run", Needs::Process, "the process: a timer and its signal (SIGPROF), one profile at a time");
}

}  // namespace purple
