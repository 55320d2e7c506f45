#!/usr/bin/env bash
# No false alarms: `purple check` over every program in examples/, every .purple file of the
# test suite and the prelude must exit 0 (nothing reported, nothing run). Usage: corpus.sh PURPLE ROOT
# The files below are left out, each for its reason: they contain errors on purpose.
purple=$1
root=$2
cd "$root" || exit 2
declare -A reason=(
  # they feed deliberate mistakes to helpers that catch the error and test its message
  [tests/purple/hardening-builtins.purple]="misspelt keywords (:dimm, :lrr) whose error messages it tests"
  [tests/purple/inline-builtins.purple]="(check (car '(1) '(2))) and others: wrong argument counts inside its check macro, whose errors it compares"
  [tests/purple/let-release.purple]="a procedure that multiplies (2 2) by (3 3) to test the error path"
  [tests/purple/nn-layers.purple]="layers applied to inputs of the wrong size, and :paddin, to test the messages"
  [tests/purple/nn.purple]="(linear 3 2) applied to a (2 4) batch to test the message"
  [tests/purple/shape-contracts.purple]="calls that break their contracts, to test the run-time errors"
  [tests/purple/tensor-creation.purple]="a (2 3) by (2 3) product whose error text it tests"
)
# tests/fuzz/ holds inputs that crashed the fuzzers (most are not even readable, on purpose) and
# tests/check/bad/ the checker's own programs with known mistakes (tests/check/expectations.py).
# tools/*.purple are one program in several files (each uses the others' definitions), which
# `purple check` reads one file at a time.
files=$(ls examples/*.purple prelude/*.purple scripts/*.purple
        find tests -name '*.purple' -not -path 'tests/fuzz/*' -not -path 'tests/check/bad/*' | sort)
status=0
checked=0
for f in $files; do
  if [ -n "${reason[$f]:-}" ]; then
    echo "left out: $f (${reason[$f]})"
    continue
  fi
  checked=$((checked + 1))
  if ! out=$("$purple" check "$f" 2>&1); then
    echo "FAIL: purple check $f reported:"
    echo "$out"
    status=1
  fi
done
# The left-out files must still give reports (so the list stays honest).
for f in "${!reason[@]}"; do
  if "$purple" check "$f" > /dev/null 2>&1; then
    echo "FAIL: $f is left out but purple check finds nothing in it now: take it off the list"
    status=1
  fi
done
echo "checked $checked files"
exit $status
