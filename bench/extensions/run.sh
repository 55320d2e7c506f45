#!/usr/bin/env bash
# What load-inline costs (issue 50): one cold compile of the suite's test extension
# (tests/extensions/test-extension.purple) into an empty cache, then REPS fresh processes that load
# it from the cache, interleaved with REPS that start Purple and evaluate 1 (the floor any process
# pays). Prints each time and the medians.
#   bash bench/extensions/run.sh [PURPLE] [REPS]      (from the project root; default build/purple, 5)
set -eu
purple=${1:-build/purple}
reps=${2:-5}
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
export XDG_CACHE_HOME=$cache
ms() { echo $(( $(date +%s%N) / 1000000 )); }
median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(ms)
"$purple" bench/extensions/load.purple > /dev/null
echo "cold compile and load: $(( $(ms) - start )) ms"
: > "$cache/cached"
: > "$cache/floor"
for i in $(seq "$reps"); do
  start=$(ms); "$purple" bench/extensions/load.purple > /dev/null; echo $(( $(ms) - start )) >> "$cache/cached"
  start=$(ms); "$purple" -e 1 > /dev/null; echo $(( $(ms) - start )) >> "$cache/floor"
done
echo "from the cache, a whole process (ms): $(tr '\n' ' ' < "$cache/cached")-> median $(median < "$cache/cached")"
echo "purple -e 1, a whole process (ms):    $(tr '\n' ' ' < "$cache/floor")-> median $(median < "$cache/floor")"
