#!/usr/bin/env bash
# A 2-process DDP epoch of the Fashion-MNIST MLP: Purple (purple-run) against python3-torch
# (torchrun), the same settings, in paired interleaved runs (A B, B A, A B ...), so that load from
# other work on the machine falls on both sides alike. Prints every sample, the medians and the
# ratio Purple / Python (goal: <= 1.0). Writes nothing; the caller records the output.
#   bash bench/distributed/run.sh [--reps N] [--limit IMAGES] [--nproc N]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
reps=5
limit=
nproc=2
while [ $# -gt 0 ]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --limit) limit=$2; shift 2 ;;
    --nproc) nproc=$2; shift 2 ;;
    *) echo "usage: run.sh [--reps N] [--limit IMAGES] [--nproc N]" >&2; exit 2 ;;
  esac
done
run=$root/build/purple-run
[ -x "$run" ] || { echo "build Purple first (cmake --build build)" >&2; exit 1; }
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
purple_side() {
  "$run" --nproc-per-node "$nproc" "$here/ddp.purple" $limit | tee -a "$log" | awk '/^RESULT/ {print $3}'
}
python_side() {
  # --redirects 1 --tee 1: Debian's torchrun 1.13 fails on Python >= 3.11 with its default of 0
  # (enum.Flag no longer iterates the zero member); the tee prefixes each line with [defaultN]:
  /usr/bin/torchrun --nproc_per_node "$nproc" --master_port "$(free_port)" --redirects 1 --tee 1 "$here/ddp.py" $limit 2>/dev/null |
    sed -u 's/^\[default[0-9]*\]://' | tee -a "$log" | awk '/^RESULT/ {print $3}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
log=$(mktemp)
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "python3-torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'); $nproc ranks; ${limit:-60000} images; $reps paired repetitions"
p=(); q=()
for i in $(seq 1 "$reps"); do
  if [ $((i % 2)) = 1 ]; then a=$(purple_side); b=$(python_side); else b=$(python_side); a=$(purple_side); fi
  p+=("$a"); q+=("$b")
  echo "rep $i: purple $a s, python $b s, ratio $(ratio "$a" "$b")"
done
grep -m2 '^WORK' "$log"
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
mp=$(median "${p[@]}"); mq=$(median "${q[@]}")
echo "median: purple $mp s, python $mq s; purple / python = $(ratio "$mp" "$mq") (goal <= 1.0)"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -f "$log"
