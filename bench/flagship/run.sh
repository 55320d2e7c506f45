#!/usr/bin/env bash
# The char-level GPT's fixed-time comparison: examples/char-gpt.purple and its python3-torch twin
# (bench/flagship/char-gpt.py, the same model written the usual way) started together, side by
# side, with the same options, one LibTorch thread each, both under `nice -n 5`; prints each
# side's last lines (validation loss reached, tokens/s of the training steps) and Purple's
# tokens/s divided by Python's. The two runs share the machine, so run it on an otherwise idle one
# for clean timings and say how loaded it was when reporting.
#
# usage: bash bench/flagship/run.sh [PURPLE] [-- options for both sides]
#   e.g. bash bench/flagship/run.sh build/purple -- --preset small --max-seconds 90
#        bash bench/flagship/run.sh build/purple -- --preset gpt10m --max-seconds 600 --eval-iters 2
# Each side's full output goes to $TMPDIR/flagship-<preset>-<time>.{purple,python}.log.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
purple=${1:-$root/build/purple}
shift || true
[ "${1:-}" = "--" ] && shift
args=("$@")
preset=small
for ((i = 0; i < ${#args[@]}; i++)); do [ "${args[$i]}" = "--preset" ] && preset=${args[$((i + 1))]}; done
has_threads=0
for a in "${args[@]}"; do [ "$a" = "--threads" ] && has_threads=1; done
[ $has_threads = 1 ] || args+=(--threads 1)
log="${TMPDIR:-/tmp}/flagship-$preset-$(date -u +%Y%m%dT%H%M%S)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); options: ${args[*]}"
OMP_NUM_THREADS=1 nice -n 5 "$purple" "$root/examples/char-gpt.purple" "${args[@]}" > "$log.purple.log" 2>&1 &
p1=$!
OMP_NUM_THREADS=1 nice -n 5 /usr/bin/python3 "$here/char-gpt.py" "${args[@]}" > "$log.python.log" 2>&1 &
p2=$!
rc=0
wait $p1 || rc=1
wait $p2 || rc=1
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
for side in purple python; do
  echo "== $side ($log.$side.log)"
  grep -E "parameters|^step 0|^end at" "$log.$side.log" || tail -5 "$log.$side.log"
done
tps() { sed -n 's/^end at step .*, \([0-9.]*\) tokens\/s.*/\1/p' "$1"; }
a=$(tps "$log.purple.log"); b=$(tps "$log.python.log")
if [ -n "$a" ] && [ -n "$b" ]; then
  awk -v a="$a" -v b="$b" 'BEGIN { printf "tokens/s: Purple %s, Python %s, Purple / Python = %.2f\n", a, b, a / b }'
else
  echo "a side did not finish"; rc=1
fi
exit $rc
