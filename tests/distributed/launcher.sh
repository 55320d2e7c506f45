#!/usr/bin/env bash
# purple-run and the misconfigurations dist-init must report at once: the environment, prefixed
# output, exit statuses, a rank killed mid-epoch (SIGKILL), Ctrl-C, a missing variable, a port in
# use, ranks that disagree on the world size or share a rank, a collective before dist-init.
# Usage: launcher.sh PURPLE-RUN PURPLE
set -u
# Instrumented ranks (PURPLE_SANITIZED: cmake/sanitize_tests.cmake) start and stop two to five
# times slower: every time bound below is scaled, as CTest's time limits are there.
slow=1
[ -n "${PURPLE_SANITIZED:-}" ] && slow=3
run=$1
purple=$2
here=$(cd "$(dirname "$0")" && pwd)
pass=0
fail=0
tmp=$(mktemp -d)
pids_to_kill=()
trap 'for p in "${pids_to_kill[@]}"; do kill -9 $p 2>/dev/null; done; rm -rf "$tmp"' EXIT

check() {   # check NAME CONDITION-STATUS DETAIL
  if [ "$2" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1: $3"; fi
}
has() { grep -q -- "$2" "$1"; echo $?; }
now() { date +%s.%N; }
elapsed() { awk -v a="$(now)" -v b="$1" 'BEGIN { printf "%.2f", a - b }'; }
below() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x < y) }'; echo $?; }
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# the ranks (children) of a launcher, from /proc (procps may not be installed)
ranks_of() {
  for st in /proc/[0-9]*/stat; do
    awk -v parent="$1" '{ if ($4 == parent) print $1 }' "$st" 2>/dev/null
  done
}
rank_pid() {   # rank_pid LAUNCHER-PID RANK
  for p in $(ranks_of "$1"); do
    if tr '\0' '\n' < /proc/$p/environ 2>/dev/null | grep -qx "RANK=$2"; then echo $p; return; fi
  done
}
wait_for_file() {   # wait_for_file PATH SECONDS
  for _ in $(seq 1 $(( $2 * 10 ))); do [ -e "$1" ] && return 0; sleep 0.1; done
  return 1
}

# ---- the environment, prefixed output, the `purple --nproc-per-node` form ----
"$run" --nproc-per-node 3 --prefix-output "$here/hello.purple" x > "$tmp/out" 2> "$tmp/err"; st=$?
check "three ranks run" "$([ $st = 0 ]; echo $?)" "status $st: $(cat "$tmp/err")"
for k in 0 1 2; do
  check "rank $k prefixed with its environment" "$(has "$tmp/out" "^\[rank$k\]: hello from rank $k of 3 local $k args (\"x\")$")" "$(cat "$tmp/out")"
done
"$purple" --nproc-per-node 2 "$here/hello.purple" > "$tmp/out" 2>&1; st=$?
check "purple --nproc-per-node hands over to purple-run" "$([ $st = 0 ] && [ "$(grep -c 'hello from rank' "$tmp/out")" = 2 ]; echo $?)" "status $st: $(cat "$tmp/out")"
"$run" --nproc_per_node=2 --local-ranks-filter 1 "$here/hello.purple" > "$tmp/out" 2>&1
check "--local-ranks-filter shows one rank" "$([ "$(grep -c 'hello from rank 1' "$tmp/out")" = 1 ] && ! grep -q 'rank 0' "$tmp/out"; echo $?)" "$(cat "$tmp/out")"
"$run" --nnodes 2 --node-rank 1 --master-addr 10.0.0.1 --nproc-per-node 2 --no-purple \
  sh -c 'echo "$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK $MASTER_ADDR $MASTER_PORT"' > "$tmp/out" 2>&1
check "the second machine's ranks (--no-purple runs a program as is)" \
  "$([ "$(sort "$tmp/out" | tr '\n' '|')" = "2 0 4 2 1 10.0.0.1 29500|3 1 4 2 1 10.0.0.1 29500|" ]; echo $?)" "$(cat "$tmp/out")"
# torchrun's named --nproc-per-node values
CUDA_VISIBLE_DEVICES= "$run" --nproc-per-node cpu --no-purple sh -c 'echo "$LOCAL_WORLD_SIZE"' > "$tmp/out" 2>&1
check "--nproc-per-node cpu: one rank per core" "$([ "$(sort -u "$tmp/out")" = "$(nproc)" ] && [ "$(wc -l < "$tmp/out")" = "$(nproc)" ]; echo $?)" "$(cat "$tmp/out")"
CUDA_VISIBLE_DEVICES=0,1,2 "$run" --nproc-per-node=auto --no-purple sh -c 'echo "$LOCAL_WORLD_SIZE"' > "$tmp/out" 2>&1
check "--nproc-per-node auto: one rank per visible GPU" "$([ "$(sort -u "$tmp/out")" = 3 ] && [ "$(wc -l < "$tmp/out")" = 3 ]; echo $?)" "$(cat "$tmp/out")"
CUDA_VISIBLE_DEVICES= "$run" --nproc-per-node gpu --no-purple true 2> "$tmp/err"; st=$?
check "--nproc-per-node gpu without a GPU" "$([ $st = 2 ] && grep -q 'no visible GPU' "$tmp/err"; echo $?)" "status $st: $(cat "$tmp/err")"
# two "machines" on this one: two launchers, --nnodes 2, two ranks each, one job of four ranks
port=$(free_port)
"$run" --nnodes 2 --node-rank 1 --nproc-per-node 2 --master-addr 127.0.0.1 --master-port $port "$here/groups.purple" > "$tmp/node1" 2>&1 &
node1=$!
"$run" --nnodes 2 --node-rank 0 --nproc-per-node 2 --master-addr 127.0.0.1 --master-port $port "$here/groups.purple" > "$tmp/node0" 2>&1; st0=$?
wait $node1; st1=$?
check "a job over two launchers (--nnodes 2)" "$([ $st0 = 0 ] && [ $st1 = 0 ] && [ "$(cat "$tmp/node0" "$tmp/node1" | grep -c ' 0 failed')" = 4 ]; echo $?)" "$st0 $st1: $(cat "$tmp/node0" "$tmp/node1")"
"$run" --nproc_per_node=2 --rdzv_backend=c10d --rdzv-conf timeout=60 --start_method spawn --role trainer --max_restarts 0 \
  --monitor_interval 1 --no-purple sh -c 'echo "$RANK"' > "$tmp/out" 2>&1; st=$?
check "torchrun's agent flags are accepted" "$([ $st = 0 ] && [ "$(sort "$tmp/out" | tr '\n' ' ')" = "0 1 " ]; echo $?)" "status $st: $(cat "$tmp/out")"
"$run" --nproc-per-node 2 --redirects 3 --no-purple true 2> "$tmp/err"; st=$?
check "--redirects is refused by name" "$([ $st = 2 ] && grep -q 'unknown option --redirects' "$tmp/err"; echo $?)" "status $st: $(cat "$tmp/err")"
"$run" --help > "$tmp/out"; check "--help" "$(has "$tmp/out" "nproc-per-node")" "$(cat "$tmp/out")"
"$run" --bogus x > /dev/null 2> "$tmp/err"; st=$?
check "an unknown option" "$([ $st = 2 ] && grep -q 'unknown option --bogus' "$tmp/err"; echo $?)" "status $st"

# ---- exit statuses: the first failed rank's, named ----
"$run" --nproc-per-node 2 "$here/hello.purple" a 3 > /dev/null 2> "$tmp/err"; st=$?
check "a rank's exit status becomes the launcher's" "$([ $st = 3 ]; echo $?)" "status $st"
check "the failed rank is named" "$(has "$tmp/err" "rank 1 (local rank 1, pid [0-9]*) exited with status 3")" "$(cat "$tmp/err")"
t0=$(now)
"$run" --nproc-per-node 3 "$here/wait-then-reduce.purple" > /dev/null 2> "$tmp/err"; st=$?
t=$(elapsed $t0)
check "rank 1 exits, the ranks waiting for it stop" "$([ $st = 3 ]; echo $?)" "status $st: $(cat "$tmp/err")"
check "... naming rank 1" "$(has "$tmp/err" "rank 1 .*exited with status 3")" "$(cat "$tmp/err")"
check "... within the stop timeout (5 s grace + 5 s after SIGTERM; took $t s)" "$(below "$t" $((20 * slow)))" "took $t s"

# ---- SIGKILL one of 3 ranks mid-epoch ----
marker="$tmp/epoch0"
"$run" --nproc-per-node 3 "$here/forever.purple" "$marker" > "$tmp/out" 2> "$tmp/err" &
launcher=$!
pids_to_kill+=($launcher)
if wait_for_file "$marker" $((120 * slow)); then
  victim=$(rank_pid $launcher 1)
  survivors=$(ranks_of $launcher | grep -vx "$victim")
  t0=$(now)
  kill -9 "$victim"
  wait $launcher; st=$?
  t=$(elapsed $t0)
  echo "SIGKILL of rank 1: the launcher exited with status $st after $t s"
  check "the launcher fails after a rank is killed" "$([ $st != 0 ]; echo $?)" "status $st"
  check "it names the killed rank and the signal" "$(has "$tmp/err" "rank 1 (local rank 1, pid $victim) was killed by signal 9 (SIGKILL)")" "$(cat "$tmp/err")"
  check "the survivors fail on their own (not stopped by the launcher)" "$(! grep -q 'sending SIGTERM' "$tmp/err"; echo $?)" "$(cat "$tmp/err")"
  check "the survivors exit non-zero" "$([ "$(grep -c 'rank [02] (local rank [02], pid [0-9]*) exited with status 1' "$tmp/err")" = 2 ]; echo $?)" "$(cat "$tmp/err")"
  check "the survivors' errors name the dead rank" "$([ "$(grep -c 'lost the connection to another rank: rank 1 (local rank 1, pid [0-9]*) was killed by signal 9' "$tmp/err")" = 2 ]; echo $?)" "$(cat "$tmp/err")"
  check "all within the documented timeout (10 s; took $t s)" "$(below "$t" $((10 * slow)))" "took $t s"
  alive=0; for p in $survivors; do kill -0 $p 2>/dev/null && alive=1; done
  check "no rank is left running" "$alive" "$survivors"
else
  check "the forever job started" 1 "$(cat "$tmp/err")"
fi

# ---- Ctrl-C stops every rank ----
marker="$tmp/epoch0-int"
"$run" --nproc-per-node 2 "$here/forever.purple" "$marker" > /dev/null 2> "$tmp/err" &
launcher=$!
pids_to_kill+=($launcher)
if wait_for_file "$marker" $((120 * slow)); then
  ranks=$(ranks_of $launcher)
  t0=$(now)
  kill -INT $launcher
  wait $launcher; st=$?
  t=$(elapsed $t0)
  check "Ctrl-C: exit status 130" "$([ $st = 130 ]; echo $?)" "status $st: $(cat "$tmp/err")"
  alive=0; for p in $ranks; do kill -0 $p 2>/dev/null && alive=1; done
  check "Ctrl-C stops every rank (took $t s)" "$alive" "$ranks"
else
  check "the forever job started (Ctrl-C)" 1 "$(cat "$tmp/err")"
fi

# ---- misconfiguration: one clear error, at once ----
clean_env=(env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT -u TORCHELASTIC_USE_AGENT_STORE -u PURPLE_RUN_FAILURE_FILE)
"${clean_env[@]}" "$purple" -e '(dist-init)' > /dev/null 2> "$tmp/err"; st=$?
check "no environment: an error naming the variable" "$([ $st = 1 ] && grep -q 'WORLD_SIZE is not set' "$tmp/err"; echo $?)" "$(cat "$tmp/err")"
"${clean_env[@]}" WORLD_SIZE=2 RANK=0 "$purple" -e '(dist-init)' > /dev/null 2> "$tmp/err"; st=$?
check "no MASTER_ADDR" "$([ $st = 1 ] && grep -q 'MASTER_ADDR is not set' "$tmp/err"; echo $?)" "$(cat "$tmp/err")"
"${clean_env[@]}" WORLD_SIZE=2 RANK=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 "$purple" -e '(dist-init)' > /dev/null 2> "$tmp/err"; st=$?
check "RANK outside the world" "$([ $st = 1 ] && grep -q 'RANK 2 is outside 0..1' "$tmp/err"; echo $?)" "$(cat "$tmp/err")"
"${clean_env[@]}" "$purple" -e '(dist-all-reduce (tensor-ones 1))' > /dev/null 2> "$tmp/err"; st=$?
check "a collective before dist-init" "$([ $st = 1 ] && grep -q 'not initialised; call (dist-init) first' "$tmp/err"; echo $?)" "$(cat "$tmp/err")"

# a port in use: rank 0 cannot serve the store; the launcher names it and stops the others
/usr/bin/python3 -c 'import socket,sys,time; s=socket.socket(); s.bind(("0.0.0.0",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(120)' > "$tmp/port" &
holder=$!
pids_to_kill+=($holder)
wait_for_file "$tmp/port" 10; sleep 0.3
port=$(cat "$tmp/port")
"$run" --nproc-per-node 2 --master-port "$port" --stop-timeout 2 "$here/init-barrier.purple" > /dev/null 2> "$tmp/err"; st=$?
check "a port in use: rank 0's error says so" "$([ $st = 1 ] && grep -q "cannot serve the store on port $port: the port is already in use" "$tmp/err"; echo $?)" "status $st: $(cat "$tmp/err")"
check "... and the launcher names rank 0" "$(has "$tmp/err" "rank 0 (local rank 0, pid [0-9]*) exited with status 1")" "$(cat "$tmp/err")"
kill $holder 2>/dev/null

# ranks that disagree on the world size: both fail at once, naming the sizes
port=$(free_port)
t0=$(now)
"${clean_env[@]}" MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=2 RANK=0 timeout $((60 * slow)) "$purple" -e '(dist-init)' > /dev/null 2> "$tmp/ws0" &
a=$!
"${clean_env[@]}" MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=3 RANK=1 timeout $((60 * slow)) "$purple" -e '(dist-init)' > /dev/null 2> "$tmp/ws1" &
b=$!
wait $a; sa=$?; wait $b; sb=$?
t=$(elapsed $t0)
check "mismatched world sizes: rank 0 fails" "$([ $sa = 1 ] && grep -q 'disagree on the world size' "$tmp/ws0"; echo $?)" "status $sa: $(cat "$tmp/ws0")"
check "mismatched world sizes: rank 1 fails" "$([ $sb = 1 ] && grep -q 'rank 0 has WORLD_SIZE=2\|lost the connection to the store that rank 0 serves' "$tmp/ws1"; echo $?)" "status $sb: $(cat "$tmp/ws1")"
check "... at once (took $t s, the timeout is 1800 s)" "$(below "$t" $((30 * slow)))" "took $t s"

# two processes with one RANK: the second to claim it is told so (the others are then stopped)
port=$(free_port)
for k in 0 1 1; do
  "${clean_env[@]}" MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=3 RANK=$k timeout $((10 * slow)) "$purple" -e '(dist-init)' > /dev/null 2>> "$tmp/dup" &
done
wait
check "two processes with RANK=1" "$(has "$tmp/dup" "two processes were started with RANK=1")" "$(cat "$tmp/dup")"

echo "$pass passed, $fail failed"
[ $fail = 0 ]
