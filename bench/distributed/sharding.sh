#!/usr/bin/env bash
# Memory per rank and throughput of zero-redundancy-optimizer and fully-shard against DDP, at 4
# ranks on Gloo (bench/distributed/sharding.purple, one configuration per run). The modes
# run one after another in each repetition, in a rotating order, so that load from other work on
# the machine falls on all alike. Prints every sample, then per model the medians and the ratios
# to DDP: memory (largest rank; deterministic up to collective timing) and samples/s.
#   bash bench/distributed/sharding.sh [--reps N] [--steps N] [--nproc N] [--models "mlp transformer"]
#                                      [--modes "ddp zero fsdp"]   (also fsdp-keep: :reshard-after-forward #f; fsdp-ac: :activation-checkpointing #t)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
reps=5
steps=10
nproc=4
models="mlp transformer"
modes="ddp zero fsdp"
while [ $# -gt 0 ]; do
  case $1 in
    --reps) reps=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --nproc) nproc=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    --modes) modes=$2; shift 2 ;;
    *) echo "usage: sharding.sh [--reps N] [--steps N] [--nproc N] [--models LIST] [--modes LIST]" >&2; exit 2 ;;
  esac
done
run=$root/build/purple-run
[ -x "$run" ] || { echo "build Purple first (cmake --build build)" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//'); load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$nproc ranks (one intra-op thread each), Gloo, fp32, Adam; $steps timed steps after 3 measured ones; $reps repetitions"
read -r -a modes <<< "$modes"
nm=${#modes[@]}
for model in $models; do
  for i in $(seq 1 "$reps"); do
    for k in $(seq 0 $((nm - 1))); do
      m=${modes[$(( (i + k) % nm ))]}
      line=$("$run" --nproc-per-node "$nproc" "$here/sharding.purple" "$m" "$model" "$steps" 2>&1 | grep '^RESULT' || true)
      [ -n "$line" ] || { echo "FAILED: $m $model" >&2; exit 1; }
      echo "rep $i: $line"
      echo "$line" >> "$log"
    done
  done
done
/usr/bin/python3 - "$log" "${modes[*]}" <<'PY'
import statistics, sys
rows = [l.split()[1:] for l in open(sys.argv[1])]
modes = sys.argv[2].split()
for model in dict.fromkeys(r[1] for r in rows):
    med = {}
    for mode in modes:
        rs = [r for r in rows if r[0] == mode and r[1] == model]
        med[mode] = [max(float(r[k]) for r in rs) for k in (3, 4, 5)] + [statistics.median(float(r[6]) for r in rs)]
    print(f"\n{model}, {rows[0][2]} ranks: largest state / peak / between-steps MB per rank; median samples/s")
    print("| mode | state MB | x DDP | peak MB | x DDP | between steps MB | x DDP | samples/s | x DDP |")
    print("|---|---|---|---|---|---|---|---|---|")
    d = med["ddp"]
    for mode, v in med.items():
        print(f"| {mode} | {v[0]:.1f} | {v[0]/d[0]:.2f} | {v[1]:.1f} | {v[1]/d[1]:.2f} | {v[2]:.1f} | {v[2]/d[2]:.2f} | {v[3]:.1f} | {v[3]/d[3]:.2f} |")
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
