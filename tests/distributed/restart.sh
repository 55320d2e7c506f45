#!/usr/bin/env bash
# purple-run's restarts and rendezvous on one machine (namespaces.sh does the same across two
# network namespaces): --max-restarts with fit :resume #t (the weights of an uninterrupted run),
# TORCHELASTIC_RESTART_COUNT, the same with zero-redundancy-optimizer and fully-shard, restarts
# used up, two launchers restarting together, a launcher that dies and comes back, --rdzv-backend
# c10d with --nnodes MIN:MAX (a machine joining a running job), a rendezvous that never completes,
# and a launcher of another job.
# Usage: restart.sh PURPLE-RUN PURPLE
set -u
run=$1
purple=$2
here=$(cd "$(dirname "$0")" && pwd)
pass=0
fail=0
tmp=$(mktemp -d)
pids_to_kill=()
trap 'for p in "${pids_to_kill[@]}"; do kill -9 $p 2>/dev/null; done; rm -rf "$tmp"' EXIT
check() {   # check NAME CONDITION-STATUS DETAIL
  if [ "$2" = 0 ]; then pass=$((pass + 1)); echo "ok: $1"; else fail=$((fail + 1)); echo "FAIL: $1: $3"; fi
}
has() { grep -q -- "$2" "$1"; echo $?; }
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
count() { grep -c -- "$2" "$1"; }

# ---- fit resumes after a restart: the weights of an uninterrupted run ----
"$run" --nproc-per-node 2 --max-restarts 1 --stop-timeout 2 --prefix-output "$here/restart.purple" "$tmp/ref.ck" "$tmp/ref.pt" -1 > "$tmp/ref" 2>&1
check "uninterrupted training" "$([ -f "$tmp/ref.pt" ]; echo $?)" "$(cat "$tmp/ref")"
"$run" --nproc-per-node 2 --max-restarts 1 --stop-timeout 2 --prefix-output "$here/restart.purple" "$tmp/ck" "$tmp/resumed.pt" 1 > "$tmp/die" 2>&1; st=$?
cat "$tmp/die"
check "rank 1 exits on the first attempt, the job restarts and succeeds" "$st" "status $st"
check "... the launcher says so" "$(has "$tmp/die" 'restarting every rank (restart 1 of 1): rank 1 (local rank 1, pid [0-9]*) exited with status 3')" ""
check "... both ranks start again" "$([ "$(count "$tmp/die" 'of 2: attempt 2')" = 2 ]; echo $?)" ""
check "... fit resumes in the middle of epoch 2" "$(has "$tmp/die" '^\[rank0\]: resuming from epoch 2, batch 3$')" ""
"$purple" "$here/compare-weights.purple" "$tmp/ref.pt" "$tmp/resumed.pt" > "$tmp/cmp" 2>&1; st=$?
cat "$tmp/cmp"
check "... and ends with the uninterrupted run's weights" "$st" "$(cat "$tmp/cmp")"

# ---- the same with sharded training: the sharded optimizer's checkpoint is gathered (rank 0
# writes), fully-shard's written by every rank, its part; both end with DDP + Adam's weights ----
for mode in zero fsdp; do
  "$run" --nproc-per-node 2 --max-restarts 1 --stop-timeout 2 --prefix-output "$here/restart.purple" "$tmp/$mode.ck" "$tmp/$mode.pt" 1 $mode > "$tmp/$mode" 2>&1; st=$?
  check "$mode: rank 1 exits on the first attempt, the job restarts and succeeds" "$st" "status $st: $(cat "$tmp/$mode")"
  check "... fit resumes in the middle of epoch 2" "$(has "$tmp/$mode" '^\[rank0\]: resuming from epoch 2, batch 3$')" ""
  "$purple" "$here/compare-weights.purple" "$tmp/ref.pt" "$tmp/$mode.pt" > "$tmp/cmp" 2>&1; st=$?
  cat "$tmp/cmp"
  check "... and ends with the uninterrupted DDP run's weights (1e-5)" "$st" "$(cat "$tmp/cmp")"
done
[ -f "$tmp/fsdp.ck/checkpoint.scm" ] && grep -q 'rank-1-of-2' "$tmp/fsdp.ck/checkpoint.scm"
check "... fully-shard's checkpoint names every rank's part" "$?" "$(cat "$tmp/fsdp.ck/checkpoint.scm" 2>&1)"

# ---- restarts used up: the failed rank's status, after N + 1 attempts ----
"$run" --nproc-per-node 2 --max-restarts 2 --stop-timeout 1 --no-purple \
  sh -c 'echo "rank $RANK restart $TORCHELASTIC_RESTART_COUNT of $TORCHELASTIC_MAX_RESTARTS"; [ "$RANK" = 1 ] && exit 5; sleep 30' > "$tmp/out" 2> "$tmp/err"; st=$?
check "restarts used up: the failed rank's status" "$([ $st = 5 ]; echo $?)" "status $st: $(cat "$tmp/err")"
check "... every rank saw TORCHELASTIC_RESTART_COUNT 0, 1, 2" \
  "$([ "$(sort "$tmp/out" | tr '\n' '|')" = "rank 0 restart 0 of 2|rank 0 restart 1 of 2|rank 0 restart 2 of 2|rank 1 restart 0 of 2|rank 1 restart 1 of 2|rank 1 restart 2 of 2|" ]; echo $?)" "$(cat "$tmp/out")"
check "... two restarts announced" "$([ "$(count "$tmp/err" 'restarting every rank')" = 2 ]; echo $?)" "$(cat "$tmp/err")"

# ---- two launchers (static node ranks): a failure on one restarts both ----
port=$(free_port)
job='echo "rank $RANK of $WORLD_SIZE node $GROUP_RANK restart $TORCHELASTIC_RESTART_COUNT"; [ "$RANK$TORCHELASTIC_RESTART_COUNT" = 20 ] && exit 4; sleep 1'
"$run" --nnodes 2 --node-rank 1 --nproc-per-node 2 --master-port "$port" --max-restarts 1 --stop-timeout 1 --no-purple sh -c "$job" > "$tmp/n1" 2>&1 &
n1=$!; pids_to_kill+=($n1)
"$run" --nnodes 2 --node-rank 0 --nproc-per-node 2 --master-port "$port" --max-restarts 1 --stop-timeout 1 --no-purple sh -c "$job" > "$tmp/n0" 2>&1; s0=$?
wait $n1; s1=$?
check "two launchers: rank 2 fails, both restart, both succeed" "$([ $s0 = 0 ] && [ $s1 = 0 ]; echo $?)" "$s0 $s1: $(cat "$tmp/n0" "$tmp/n1")"
check "... node 0 restarts its ranks for node 1's failure" "$(has "$tmp/n0" 'restarting every rank (restart 1 of 1): rank 2 (local rank 0')" "$(cat "$tmp/n0")"
check "... every rank of both nodes ran twice" "$([ "$(cat "$tmp/n0" "$tmp/n1" | grep -c 'of 4 node . restart 1')" = 4 ]; echo $?)" "$(cat "$tmp/n0" "$tmp/n1")"

# ---- a launcher that dies counts as a failure; the job goes on when it comes back ----
port=$(free_port)
job='echo "rank $RANK restart $TORCHELASTIC_RESTART_COUNT"; [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && sleep 60; sleep 1'
"$run" --nnodes 2 --node-rank 0 --nproc-per-node 1 --master-port "$port" --max-restarts 1 --stop-timeout 1 --no-purple sh -c "$job" > "$tmp/k0" 2>&1 &
n0=$!; pids_to_kill+=($n0)
"$run" --nnodes 2 --node-rank 1 --nproc-per-node 1 --master-port "$port" --max-restarts 1 --stop-timeout 1 --no-purple sh -c "$job" > "$tmp/k1" 2>&1 &
n1=$!; pids_to_kill+=($n1)
for _ in $(seq 1 100); do grep -q 'rank 1 restart 0' "$tmp/k1" && break; sleep 0.1; done
kill -9 $n1
"$run" --nnodes 2 --node-rank 1 --nproc-per-node 1 --master-port "$port" --max-restarts 1 --stop-timeout 1 --no-purple sh -c "$job" > "$tmp/k1b" 2>&1; s1=$?
wait $n0; s0=$?
check "node 1's launcher killed: node 0 restarts, a new launcher for node 1 rejoins" "$([ $s0 = 0 ] && [ $s1 = 0 ]; echo $?)" "$s0 $s1: $(cat "$tmp/k0" "$tmp/k1b")"
check "... node 0 names what happened" "$(has "$tmp/k0" "restarting every rank (restart 1 of 1): node 1's launcher (127.0.0.1) is gone")" "$(cat "$tmp/k0")"

# ---- c10d and elastic membership: a second machine joins a running job ----
port=$(free_port)
job='echo "rank $RANK of $WORLD_SIZE node $GROUP_RANK of $GROUP_WORLD_SIZE"; [ "$WORLD_SIZE" = 3 ] || sleep 60'
"$run" --nnodes 1:2 --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" --rdzv-id elastic --rdzv-conf last_call_timeout=1 \
  --nproc-per-node 1 --stop-timeout 1 --no-purple sh -c "$job" > "$tmp/e0" 2>&1 &
e0=$!; pids_to_kill+=($e0)
for _ in $(seq 1 100); do grep -q 'rank 0 of 1' "$tmp/e0" && break; sleep 0.1; done
check "c10d, --nnodes 1:2: one machine starts alone after the last call" "$(has "$tmp/e0" 'rank 0 of 1 node 0 of 1')" "$(cat "$tmp/e0")"
"$run" --nnodes 1:2 --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" --rdzv-id elastic --nproc-per-node 2 \
  --stop-timeout 1 --no-purple sh -c "$job" > "$tmp/e1" 2>&1; s1=$?
wait $e0; s0=$?
check "... a second machine joins: both restart as one job of 3 ranks" \
  "$([ $s0 = 0 ] && [ $s1 = 0 ] && grep -q 'rank 0 of 3 node 0 of 2' "$tmp/e0" && [ "$(count "$tmp/e1" 'of 3 node 1 of 2')" = 2 ]; echo $?)" \
  "$s0 $s1: $(cat "$tmp/e0" "$tmp/e1")"
check "... without using a restart" "$(has "$tmp/e0" 'restarting every rank with new members: a new node (127.0.0.1) joins the job')" "$(cat "$tmp/e0")"

# ---- a rendezvous that never completes, and a launcher of another job ----
port=$(free_port)
"$run" --nnodes 2 --node-rank 0 --master-port "$port" --max-restarts 1 --rdzv-conf join_timeout=2 --no-purple true > /dev/null 2> "$tmp/err"; st=$?
check "a node that never joins: the rendezvous times out" "$([ $st = 1 ] && grep -q 'the rendezvous timed out: 1 node(s) joined within 2 s, the job needs 2' "$tmp/err"; echo $?)" "status $st: $(cat "$tmp/err")"
port=$(free_port)
"$run" --nnodes 2 --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" --rdzv-id one --rdzv-conf join_timeout=20 --no-purple true > /dev/null 2>&1 &
host=$!; pids_to_kill+=($host)
sleep 0.5
"$run" --nnodes 2 --rdzv-backend c10d --rdzv-endpoint "127.0.0.1:$port" --rdzv-id two --no-purple true > /dev/null 2> "$tmp/err"; st=$?
check "a launcher of another job is turned away" "$([ $st = 2 ] && grep -q 'this rendezvous is job "one", not "two"' "$tmp/err"; echo $?)" "status $st: $(cat "$tmp/err")"
kill $host 2>/dev/null
"$run" --nnodes 1:2 --nproc-per-node 1 --no-purple true 2> "$tmp/err"; st=$?
check "elastic sizes need c10d" "$([ $st = 2 ] && grep -q 'elastic membership needs --rdzv-backend c10d' "$tmp/err"; echo $?)" "status $st: $(cat "$tmp/err")"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
