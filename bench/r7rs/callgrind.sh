#!/bin/bash
# Deterministic counts for evaluator work: callgrind's instruction count (Ir) of r7rs-benchmarks
# programs on Purple, minus that of an empty program (start-up: loading LibTorch alone is about
# 2.3 G instructions). Wall time on a shared machine is noise; these counts are not.
#
#   bash bench/r7rs/callgrind.sh WORKDIR INPUTDIR [BENCH...]
#
# WORKDIR holds the assembled programs <bench>-purple.scm (bench/r7rs/run.py writes them to
# bench/build/r7rs); INPUTDIR holds <bench>.in inputs small enough for valgrind (a run is about
# 50x slower there). PURPLE (default build/purple) and LD_LIBRARY_PATH pick the build measured.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(cd "$1" && pwd); inputs=$(cd "$2" && pwd); shift 2
purple=${PURPLE:-$root/build/purple}
out=$(mktemp -d)
ir() {   # program stdin -> Ir
  valgrind --tool=callgrind --callgrind-out-file="$out/cg.out" "$purple" "$1" <"$2" >"$out/log" 2>&1
  if grep -q "INCORRECT\|ERROR" "$out/log"; then echo "failed: $1" >&2; exit 1; fi
  awk '/Collected/ {print $4}' "$out/log"
}
: >"$out/empty.scm"
empty=$(ir "$out/empty.scm" /dev/null)
echo "empty program: $empty instructions (subtracted)"
cd "$work"
for b in "$@"; do
  echo "$b $(( $(ir "$work/$b-purple.scm" "$inputs/$b.in") - empty ))"
done
rm -rf "$out"
