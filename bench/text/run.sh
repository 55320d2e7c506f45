#!/usr/bin/env bash
# Greedy generation of 200 tokens from a 15M-parameter Llama (stories15M's shape, random weights)
# at one thread: llama2.c's run.c (gcc -O3), (purple text)'s generate, and python3-torch with a
# key/value cache (generate_torch.py), interleaved, REPS times each; prints every run, the
# medians in tokens/s, and checks that the three produce the same ids.
#
#   bash bench/text/run.sh [--reps N] [--tokens N] [--purple build/purple] [--llama2c DIR]
#
# run.c is not part of this repository: the script takes it from a checkout (or a bare mirror)
# of github.com/karpathy/llama2.c given by --llama2c or $LLAMA2C_DIR, compiles it into
# bench/build/text/ with `gcc -O3 run.c -lm` (no -march=native, no OpenMP: the compiler flags the
# issue names), and uses nothing else from there: the weights and its tokenizer file are made by
# make_weights.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
reps=5
tokens=200
purple="$root/build/purple"
llama2c=${LLAMA2C_DIR:-/work/.mirror/karpathy+llama2.c/repo}
while [ $# -gt 0 ]; do
  case "$1" in
    --reps) reps=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --purple) purple=$2; shift 2 ;;
    --llama2c) llama2c=$2; shift 2 ;;
    *) echo "usage: $0 [--reps N] [--tokens N] [--purple PATH] [--llama2c DIR]" >&2; exit 2 ;;
  esac
done
work="$root/bench/build/text"
mkdir -p "$work"

if [ -f "$llama2c/run.c" ]; then
  cp "$llama2c/run.c" "$work/run.c"
elif git --git-dir="$llama2c" rev-parse HEAD >/dev/null 2>&1; then
  git --git-dir="$llama2c" show HEAD:run.c > "$work/run.c"
else
  echo "run.sh: no llama2.c at $llama2c (--llama2c DIR or LLAMA2C_DIR: a clone of github.com/karpathy/llama2.c)" >&2
  exit 2
fi
gcc -O3 -o "$work/run" "$work/run.c" -lm
[ -f "$work/weights/model.bin" ] || /usr/bin/python3 "$here/make_weights.py" "$work/weights"

export OMP_NUM_THREADS=1
declare -a c_rates p_rates t_rates
ids_of() { grep '^IDS ' | cut -d' ' -f2-; }
rate_of() { awk '/^RESULT/ { printf "%.2f", $4 / $3 }'; }
for rep in $(seq "$reps"); do
  # run.c: -n N+1 steps from BOS make N+1 forwards; its "achieved tok/s" leaves the first out,
  # so it times N tokens, as the other sides do after their warm-up.
  c_out=$("$work/run" "$work/weights/model.bin" -z "$work/weights/tokenizer.bin" -t 0 -n $((tokens + 1)) 2>"$work/run.err")
  c_rate=$(sed -n 's/achieved tok\/s: //p' "$work/run.err")
  c_ids=$(echo "$c_out" | grep -o 't[0-9]*' | tr -d t | head -n "$tokens" | tr '\n' ' ' | sed 's/ $//')
  p_out=$("$purple" "$here/generate.purple" "$work/weights/hf" "$tokens" 1)
  t_out=$(/usr/bin/python3 "$here/generate_torch.py" "$work/weights/hf" "$tokens" 1)
  c_rates+=("$c_rate"); p_rates+=("$(echo "$p_out" | rate_of)"); t_rates+=("$(echo "$t_out" | rate_of)")
  printf 'rep %d: run.c %s tok/s, purple %s tok/s, python3-torch %s tok/s\n' "$rep" "$c_rate" "${p_rates[-1]}" "${t_rates[-1]}"
  p_ids=$(echo "$p_out" | ids_of); t_ids=$(echo "$t_out" | ids_of)
  if [ "$p_ids" != "$c_ids" ] || [ "$t_ids" != "$c_ids" ]; then
    echo "the three disagree on the greedy ids:"; echo "run.c:  ${c_ids:0:120}"; echo "purple: ${p_ids:0:120}"; echo "torch:  ${t_ids:0:120}"
    exit 1
  fi
done
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
c=$(median "${c_rates[@]}"); p=$(median "${p_rates[@]}"); t=$(median "${t_rates[@]}")
echo
echo "greedy generation, $tokens tokens, 1 thread, median of $reps (same ids on all three sides):"
printf '| side | tokens/s | Purple / side |\n|---|---|---|\n'
printf '| llama2.c run.c (gcc -O3) | %s | %.2f |\n' "$c" "$(echo "$p / $c" | bc -l)"
printf '| python3-torch, KV cache | %s | %.2f |\n' "$t" "$(echo "$p / $t" | bc -l)"
printf '| Purple (purple text) | %s | 1.00 |\n' "$p"
