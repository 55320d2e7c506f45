#!/usr/bin/env bash
# Two machines on one: two network namespaces joined by a veth pair, 192.0.2.1 and 192.0.2.2
# (TEST-NET-1, never routed), each with its own purple-run of 2 ranks. Inside a namespace only its
# end of the pair and its own loopback exist, so the ranks of the two "machines" can reach each
# other only across the pair, as on two hosts.
#   1. DDP on 2 nodes x 2 ranks trains the same weights as one process on the same global batches
#      (ddp-equivalence.purple, to 1e-5);
#   2. --max-restarts 1 across the nodes: a rank of node 1 exits in the middle of the second epoch,
#      both launchers stop their ranks and start them again, fit :resume #t continues from the
#      last checkpoint, and the weights are those of an uninterrupted run (restart.purple);
#   3. fully-shard and zero-redundancy-optimizer on 2 nodes x 2 ranks (fsdp.purple, zero.purple:
#      one process's weights to 1e-5), and the restart of 2. with a fully-sharded model, whose
#      checkpoint every rank writes its part of.
# Skips (exit 77) with a message where namespaces cannot be made (not root, no iproute2, a
# container without the right). Usage: namespaces.sh PURPLE-RUN PURPLE
set -u
run=$1
purple=$2
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "skipped: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "making network namespaces needs root (CI runs the suite as root)"
command -v ip > /dev/null || skip "no ip command: install iproute2 (scripts/install-deps.sh does)"

tag=$$
a=purple-a-$tag b=purple-b-$tag
va=pva$tag vb=pvb$tag        # interface names: at most 15 characters
tmp=$(mktemp -d)
launchers=()
cleanup() {
  for p in "${launchers[@]}"; do kill -9 "$p" 2> /dev/null; done
  ip netns del "$a" 2> /dev/null
  ip netns del "$b" 2> /dev/null   # the veth pair goes with its namespaces
  rm -rf "$tmp"
}
trap cleanup EXIT
ip netns add "$a" 2> "$tmp/err" || skip "cannot make a network namespace: $(cat "$tmp/err")"
ip netns add "$b" 2> "$tmp/err" || skip "cannot make a network namespace: $(cat "$tmp/err")"
ip link add "$va" type veth peer name "$vb" 2> "$tmp/err" || skip "cannot make a veth pair: $(cat "$tmp/err")"
# nsenter switches only the network namespace; `ip netns exec` and `ip -n` also remount /sys
# (`mount --make-rslave /`), which a chroot (scripts/debian13.sh's root) refuses
in_ns() {
  local ns=$1; shift
  if command -v nsenter > /dev/null; then nsenter --net="/run/netns/$ns" "$@"; else ip netns exec "$ns" "$@"; fi
}
in_ns "$a" true 2> "$tmp/err" || skip "cannot enter a network namespace: $(cat "$tmp/err")"
{ ip link set "$va" netns "$a" && ip link set "$vb" netns "$b" &&
  in_ns "$a" ip addr add 192.0.2.1/24 dev "$va" && in_ns "$b" ip addr add 192.0.2.2/24 dev "$vb" &&
  in_ns "$a" ip link set lo up && in_ns "$b" ip link set lo up &&
  in_ns "$a" ip link set "$va" up && in_ns "$b" ip link set "$vb" up; } 2> "$tmp/err" ||
  { echo "FAIL: configuring the namespaces: $(cat "$tmp/err")"; exit 1; }
# Gloo binds the address of the interface named here (otherwise the one the host name resolves
# to, which is not in the namespace)
node() {   # node NS IFACE NODE-RANK OUT ARGS...
  local ns=$1 dev=$2 rank=$3 out=$4; shift 4
  in_ns "$ns" env GLOO_SOCKET_IFNAME="$dev" "$run" --nnodes 2 --node-rank "$rank" --nproc-per-node 2 \
    --master-addr 192.0.2.1 --master-port 29500 --stop-timeout 2 --prefix-output "$@" > "$out" 2>&1
}
pass=0
fail=0
check() {   # check NAME CONDITION-STATUS DETAIL
  if [ "$2" = 0 ]; then pass=$((pass + 1)); echo "ok: $1"; else fail=$((fail + 1)); echo "FAIL: $1: $3"; fi
}

# The namespaces are really apart: node 1 reaches node 0 only at 192.0.2.1
in_ns "$b" "$purple" -e '(display (get-environment-variable "GLOO_SOCKET_IFNAME"))' > /dev/null 2>&1
check "a process runs inside a namespace" $? ""

# ---- 1. DDP across the two nodes ----
node "$b" "$vb" 1 "$tmp/ddp1" "$here/ddp-equivalence.purple" &
launchers+=($!)
node "$a" "$va" 0 "$tmp/ddp0" "$here/ddp-equivalence.purple"; s0=$?
wait "${launchers[-1]}"; s1=$?
cat "$tmp/ddp0" "$tmp/ddp1"
check "DDP, 2 nodes x 2 ranks: both launchers succeed" "$([ $s0 = 0 ] && [ $s1 = 0 ]; echo $?)" "statuses $s0 $s1"
check "... every rank's checks pass (DDP = one process to 1e-5)" \
  "$([ "$(cat "$tmp/ddp0" "$tmp/ddp1" | grep -c ' 0 failed')" = 4 ]; echo $?)" "$(grep -h 'failed' "$tmp/ddp0" "$tmp/ddp1")"
check "... on a world of 4 ranks across the pair" \
  "$(grep -q '^\[rank3\]: .*largest parameter difference' "$tmp/ddp1"; echo $?)" "$(cat "$tmp/ddp1")"

# ---- 2. a restart across the nodes ----
# the reference: the same training, uninterrupted, with the same 4 ranks
node "$b" "$vb" 1 "$tmp/ref1" --max-restarts 1 "$here/restart.purple" "$tmp/ref.ck" "$tmp/ref.pt" -1 &
launchers+=($!)
node "$a" "$va" 0 "$tmp/ref0" --max-restarts 1 "$here/restart.purple" "$tmp/ref.ck" "$tmp/ref.pt" -1; s0=$?
wait "${launchers[-1]}"; s1=$?
check "uninterrupted run" "$([ $s0 = 0 ] && [ $s1 = 0 ] && [ -f "$tmp/ref.pt" ]; echo $?)" "$s0 $s1: $(cat "$tmp/ref0" "$tmp/ref1")"
# rank 3 (node 1) exits on the first attempt. Rank 0 writes fit's checkpoints and every rank
# reads them back: the directory is shared, as a network file system is across machines.
node "$b" "$vb" 1 "$tmp/die1" --max-restarts 1 "$here/restart.purple" "$tmp/ck" "$tmp/resumed.pt" 3 &
launchers+=($!)
node "$a" "$va" 0 "$tmp/die0" --max-restarts 1 "$here/restart.purple" "$tmp/ck" "$tmp/resumed.pt" 3; s0=$?
wait "${launchers[-1]}"; s1=$?
cat "$tmp/die0" "$tmp/die1"
check "a rank exits, both launchers restart the job and succeed" "$([ $s0 = 0 ] && [ $s1 = 0 ]; echo $?)" "statuses $s0 $s1"
check "... node 1's launcher names the rank" "$(grep -q 'rank 3 (local rank 1, pid [0-9]*) exited with status 3' "$tmp/die1"; echo $?)" ""
check "... node 0's launcher restarts too" "$(grep -q 'restarting every rank (restart 1 of 1): rank 3' "$tmp/die0"; echo $?)" ""
check "... every rank starts a second attempt" \
  "$([ "$(cat "$tmp/die0" "$tmp/die1" | grep -c 'of 4: attempt 2')" = 4 ]; echo $?)" ""
check "... resumes from the last checkpoint, in the middle of epoch 2" \
  "$(grep -q '^\[rank0\]: resuming from epoch 2, batch 3$' "$tmp/die0"; echo $?)" "$(cat "$tmp/die0")"
check "... and every rank finishes" \
  "$([ "$(cat "$tmp/die0" "$tmp/die1" | grep -c 'finished: 2 epochs')" = 4 ]; echo $?)" ""
"$purple" "$here/compare-weights.purple" "$tmp/ref.pt" "$tmp/resumed.pt" > "$tmp/cmp" 2>&1; st=$?
cat "$tmp/cmp"
check "the weights are those of the uninterrupted run (1e-5)" "$st" "$(cat "$tmp/cmp")"

# ---- 3. sharded training across the nodes ----
for script in fsdp zero; do
  node "$b" "$vb" 1 "$tmp/$script.1" "$here/$script.purple" "$tmp" &
  launchers+=($!)
  node "$a" "$va" 0 "$tmp/$script.0" "$here/$script.purple" "$tmp"; s0=$?
  wait "${launchers[-1]}"; s1=$?
  grep -h 'difference\|failed' "$tmp/$script.0" "$tmp/$script.1"
  check "$script, 2 nodes x 2 ranks: every rank's checks pass (= one process to 1e-5)" \
    "$([ $s0 = 0 ] && [ $s1 = 0 ] && [ "$(cat "$tmp/$script.0" "$tmp/$script.1" | grep -c ' 0 failed')" = 4 ]; echo $?)" \
    "statuses $s0 $s1: $(cat "$tmp/$script.0" "$tmp/$script.1")"
done
# a fully-sharded training restarted across the nodes: every rank writes its part of fit's
# checkpoints, every rank reads them all back; the weights of the uninterrupted DDP run
node "$b" "$vb" 1 "$tmp/fs1" --max-restarts 1 "$here/restart.purple" "$tmp/fs.ck" "$tmp/fs.pt" 3 fsdp &
launchers+=($!)
node "$a" "$va" 0 "$tmp/fs0" --max-restarts 1 "$here/restart.purple" "$tmp/fs.ck" "$tmp/fs.pt" 3 fsdp; s0=$?
wait "${launchers[-1]}"; s1=$?
check "fully-shard: a rank exits, the job restarts across the nodes and succeeds" \
  "$([ $s0 = 0 ] && [ $s1 = 0 ] && grep -q 'resuming from epoch 2, batch 3$' "$tmp/fs0"; echo $?)" "$s0 $s1: $(cat "$tmp/fs0" "$tmp/fs1")"
"$purple" "$here/compare-weights.purple" "$tmp/ref.pt" "$tmp/fs.pt" > "$tmp/cmp" 2>&1; st=$?
cat "$tmp/cmp"
check "... with the uninterrupted DDP run's weights (1e-5)" "$st" "$(cat "$tmp/cmp")"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
