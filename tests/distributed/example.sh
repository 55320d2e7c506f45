#!/usr/bin/env bash
# examples/ddp-fashion-mnist.purple: one epoch on 2 ranks through the launcher reaches the test
# accuracy of the same program in one process within 2 points (issue 13; see below). Skips (exit 77) without
# Debian's dataset-fashion-mnist.
# Usage: example.sh PURPLE EXAMPLE
set -u
purple=$1
example=$2
[ -d /usr/share/datasets/fashion-mnist ] || { echo "no /usr/share/datasets/fashion-mnist: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
accuracy() { sed -n 's/^test accuracy: \([0-9.]*\) (10000.0 images)$/\1/p' "$1"; }
"$purple" "$example" > "$tmp/one" 2>&1 || { echo "FAIL: one process: $(cat "$tmp/one")"; exit 1; }
"$purple" --nproc-per-node 2 "$example" > "$tmp/two" 2>&1 || { echo "FAIL: two ranks: $(cat "$tmp/two")"; exit 1; }
cat "$tmp/one" "$tmp/two"
a1=$(accuracy "$tmp/one"); a2=$(accuracy "$tmp/two")
[ -n "$a1" ] && [ -n "$a2" ] || { echo "FAIL: no accuracy line"; exit 1; }
grep -q "training on 2 rank(s), 32 samples per rank per step, 938 steps per epoch" "$tmp/two" ||
  { echo "FAIL: the 2-rank run did not train on 2 ranks with batch 32"; exit 1; }
# One epoch's accuracy moves by about 1.5 points with the shuffle order alone (one process, same
# seed: 84.71% with a plain randperm, 83.13% with torch's RandomSampler draws), so the bound is 2.
awk -v a="$a1" -v b="$a2" 'BEGIN { d = a - b; if (d < 0) d = -d; printf "one process %.4f, two ranks %.4f, difference %.2f points\n", a, b, 100 * d;
                                  exit !(100 * d <= 2.0 && a > 0.8) }' || { echo "FAIL: not within 2 points"; exit 1; }
