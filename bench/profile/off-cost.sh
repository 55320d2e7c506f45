#!/bin/bash
# What the profiling hooks cost: a build before them (a copy of its purple and libpurple.so* in
# BASELINE_DIR) against build/purple, interleaved, 5 repetitions; and build/purple with
# --track-tensor-memory on the tensor loops. Prints the RESULT lines; take the medians.
#   bash bench/profile/off-cost.sh /tmp/baseline
set -e
base_dir=${1:?usage: off-cost.sh BASELINE_DIR}
cd "$(dirname "$0")/../.."
base="env LD_LIBRARY_PATH=$base_dir $base_dir/purple"
new="build/purple"
for rep in 1 2 3 4 5; do
  for side in before after; do
    p=$base; [ $side = after ] && p=$new
    for w in "fib 30" "tak 50"; do $p bench/interp/interp.purple $w | grep RESULT | sed "s/^/$side /"; done
    $p bench/dispatch/dispatch.purple 200000 1 both | grep RESULT | sed "s/^/$side /"
  done
  $new --track-tensor-memory bench/dispatch/dispatch.purple 200000 1 both | grep RESULT | sed "s/^/recording /"
done
