#!/bin/bash
# Profiles where Purple's time goes in the workloads where it falls short, side by side with the
# other implementations, and prints Markdown tables (bench/results/<date>-profile.md quotes them).
#   bash bench/profile/profile.sh [N [PARTS]]   N: dispatch loop iterations (default 200000);
#                                               PARTS: any of dispatch,interp,startup (default all)
# Needs perf (linux-perf), the Purple build in build/ and bench/build/dispatch (bash bench/run.sh
# builds both). perf records with call graphs from DWARF (the libraries have no frame pointers)
# at 2000 samples per CPU-second on every thread; bench/profile/breakdown.py sorts the samples
# into categories (see the rules there) and converts counts into CPU time per iteration, after
# subtracting a 1-iteration run of the same program (start-up, set-up and exit).
set -euo pipefail
cd "$(dirname "$0")/../.."
N=${1:-200000}
PARTS=${2:-dispatch,interp,startup}
PURPLE=build/purple
PY=/usr/bin/python3
CXX=bench/build/dispatch
OUT=bench/build/profile
mkdir -p "$OUT"
[ -x "$CXX" ] || g++ -O2 -std=c++17 -DNDEBUG bench/dispatch/dispatch.cpp -o "$CXX" -ltorch_cpu -lc10
BD="$PY bench/profile/breakdown.py"
REC="perf record -q -F 2000 --call-graph dwarf,16384"
export OMP_NUM_THREADS=1

rec() {  # rec NAME CMD...   records CMD into $OUT/NAME.data, prints its RESULT lines to stderr
  local name=$1; shift
  $REC -o "$OUT/$name.data" "$@" 2>/dev/null | grep RESULT >&2 || true
}
script() { perf script -i "$OUT/$1.data" 2>/dev/null; }

echo "## Machine"
echo
echo "$(grep -c ^processor /proc/cpuinfo) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
echo

for loop in add matmul-relu; do
  [[ $PARTS == *dispatch* ]] || break
  echo "## Tiny-tensor dispatch: $loop, $N iterations, 1 thread"
  echo
  # Each side twice: N iterations, and 1 iteration as the baseline subtracted from it.
  rec cxx-$loop "$CXX" "$N" 1 "$loop"; rec cxx-$loop-base "$CXX" 1 1 "$loop"
  rec py-$loop $PY bench/dispatch/dispatch.py "$N" 1 "$loop"; rec py-$loop-base $PY bench/dispatch/dispatch.py 1 1 "$loop"
  rec purple-$loop $PURPLE bench/dispatch/dispatch.purple "$N" 1 "$loop"; rec purple-$loop-base $PURPLE bench/dispatch/dispatch.purple 1 1 "$loop"
  for s in cxx py purple; do script $s-$loop-base > "$OUT/$s-$loop-base.txt"; done
  echo "### LibTorch C++"; echo; script cxx-$loop | $BD cxx "$N" "$OUT/cxx-$loop-base.txt"; echo
  echo "### python3-torch"; echo; script py-$loop | $BD python "$N" "$OUT/py-$loop-base.txt"; echo
  echo "### Purple"; echo; script purple-$loop | $BD purple "$N" "$OUT/purple-$loop-base.txt"; echo
  echo "### Purple, hottest functions (self time)"; echo; script purple-$loop | $BD top 15; echo
done

if [[ $PARTS == *interp* ]]; then
echo "## Interpreter: fib 32 and the 1e6-element list (Purple, hottest functions)"
echo
rec purple-fib $PURPLE bench/interp/interp.purple fib 32
rec py-fib $PY bench/interp/interp.py fib 32
echo "### Purple fib 32"; echo; script purple-fib | $BD top 15; echo
echo "### CPython fib 32"; echo; script py-fib | $BD top 8; echo
rec purple-list $PURPLE bench/interp/interp.purple list
echo "### Purple list"; echo; script purple-list | $BD top 12; echo
rec purple-symhash $PURPLE bench/interp/interp.purple symbol-hash
echo "### Purple symbol-hash"; echo; script purple-symhash | $BD top 12; echo
fi

if [[ $PARTS == *startup* ]]; then
echo "## Start-up (one run each, CPU time of all threads)"
echo
rec purple-startup $PURPLE -e 1
rec py-startup $PY -c "import torch"
echo "### purple -e 1"; echo; script purple-startup | $BD startup 1; echo
echo "### python3 -c \"import torch\""; echo; script py-startup | $BD startup 1; echo
fi

echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
rm -f "$OUT"/*.data "$OUT"/*.txt
