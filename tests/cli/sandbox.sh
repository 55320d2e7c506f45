#!/usr/bin/env bash
# `purple --sandbox` and the budget options: untrusted scripts from the command line, under the
# rules of Limits::sandbox() (docs/sandbox.md).
set -u
source "$(dirname "$0")/lib.sh"   # purple, tmp, check, finish
run() {   # run FILE-CONTENTS ARGS... : status in $status, stdout in $out, stderr in $err
  printf '%s\n' "$1" > "$tmp/s.purple"
  shift
  "$purple" "$@" "$tmp/s.purple" > "$tmp/out" 2> "$tmp/err"; status=$?
  out=$(cat "$tmp/out"); err=$(cat "$tmp/err")
}

run '(display (* 6 7))' --sandbox
check "a sandboxed script runs" "$([ $status = 0 ] && [ "$out" = 42 ]; echo $?)" "status $status, '$out', '$err'"
run '(display (tensor-item (tensor-sum (tensor-ones 3 3))))' --sandbox
check "... with tensors" "$([ $status = 0 ] && [ "$out" = 9.0 ]; echo $?)" "status $status, '$out', '$err'"
run '(display "a")
(open-input-file "/etc/hostname")' --sandbox
check "files are refused" "$([ $status = 1 ] && [ "$out" = a ] && echo "$err" | grep -q "open-input-file"; echo $?)" "status $status, '$err'"
check "... with the position" "$(echo "$err" | grep -q "s.purple:2:1"; echo $?)" "$err"
run '(load "/etc/hostname")' --sandbox
check "load is refused" "$([ $status = 1 ]; echo $?)" "status $status, '$err'"
run '(exit 0)' --sandbox
check "exit is refused" "$([ $status = 1 ] && echo "$err" | grep -q "exit"; echo $?)" "status $status, '$err'"
run '(get-environment-variable "HOME")' --sandbox
check "the environment is refused" "$([ $status = 1 ]; echo $?)" "status $status, '$err'"
run '(load-inline "pwned" "int f() { return 1; }" (list "f"))' --sandbox
check "load-inline is refused (it compiles and runs native code)" "$([ $status = 1 ] && echo "$err" | grep -q "load-inline: file access is disabled"; echo $?)" "status $status, '$err'"
run '(cuda-raw-kernel "k" "extern \"C\" __global__ void k() {}")' --sandbox
check "cuda-raw-kernel is refused" "$([ $status = 1 ] && echo "$err" | grep -q "cuda-raw-kernel: process access is disabled"; echo $?)" "status $status, '$err'"
run '(display (+ 1' --sandbox
check "a syntax error is reported with its position" "$([ $status = 1 ] && echo "$err" | grep -q "s.purple:1"; echo $?)" "status $status, '$err'"

ms() { date +%s%3N; }
start=$(ms)
run '(define (spin i) (spin (+ i 1)))
(spin 0)' --sandbox --max-seconds 1
elapsed=$(( $(ms) - start ))
check "--max-seconds stops an endless loop" "$([ $status = 1 ] && echo "$err" | grep -q "time budget"; echo $?)" "status $status, '$err'"
check "... within a few seconds" "$([ $elapsed -lt 8000 ]; echo $?)" "$elapsed ms"
check "... saying where" "$(echo "$err" | grep -q "in spin at .*s.purple"; echo $?)" "$err"
run '(define (f) (f)) (display "x")
(f)' --sandbox --max-seconds 2
check "the budget is for the whole script, not per form" "$([ $status = 1 ] && [ "$out" = x ]; echo $?)" "status $status, '$out'"
run '(let loop ((i 0)) (loop (+ i 1)))' --sandbox --max-steps 100000
check "--max-steps" "$([ $status = 1 ] && echo "$err" | grep -q "step budget"; echo $?)" "status $status, '$err'"
run '(display (vector-length (make-vector 100000000 0)))' --sandbox --max-memory 64M
check "--max-memory refuses a big vector" "$([ $status = 1 ] && echo "$err" | grep -q "memory-error\|heap limit"; echo $?)" "status $status, '$err'"
run '(display (vector-length (make-vector 1000 0)))' --sandbox --max-memory 64M
check "... and allows a small one" "$([ $status = 0 ] && [ "$out" = 1000 ]; echo $?)" "status $status, '$out', '$err'"
start=$(ms)
printf '(display (vector-length (make-vector 1000000000 0)))\n' > "$tmp/big.purple"
# the child's peak RSS in KB, from the resource usage python3 reads after it ends
rss=$(/usr/bin/python3 -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=open(sys.argv[-1] + ".out", "w"), stderr=open(sys.argv[-1] + ".err", "w"))
print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$purple" --sandbox --max-seconds 3 "$tmp/big.purple")
elapsed=$(( $(ms) - start ))
status=${rss% *}; rss=${rss#* }
cp "$tmp/big.purple.err" "$tmp/err"
check "a billion-slot vector under a 3 s budget is refused up front" "$([ $status = 1 ] && grep -q "time budget" "$tmp/err"; echo $?)" "status $status, $(cat "$tmp/err")"
check "... at once and small" "$([ $elapsed -lt 5000 ] && [ "$rss" -lt 1000000 ]; echo $?)" "$elapsed ms, $rss KB"
# An empty tensor of 5 * 10^16 rows: no element, but a list per row (fuzz-npy's shape)
start=$(ms)
run '(display (length (tensor->list (tensor-zeros 50888888888888850 0))))' --sandbox --max-seconds 1
elapsed=$(( $(ms) - start ))
check "tensor->list of an empty tensor with endless rows stops at the budget" "$([ $status = 1 ] && echo "$err" | grep -q "time budget" && [ $elapsed -lt 8000 ]; echo $?)" "status $status, $elapsed ms, '$err'"
run '(display (length (tensor->list (tensor-zeros 50888888888888850 0))))' --sandbox --max-memory 64M
check "... and is refused up front under a heap limit" "$([ $status = 1 ] && echo "$err" | grep -q "rows would not fit"; echo $?)" "status $status, '$err'"
run '(display (tensor-shape (tensor-zeros 1000 1000)))' --sandbox --max-tensor-bytes 1M
check "--max-tensor-bytes" "$([ $status = 1 ]; echo $?)" "status $status, '$err'"
run '(let loop ((i 0)) (if (< i 100) (loop (+ i 1)) (display i)))' --max-steps 1000000
check "budgets work without --sandbox" "$([ $status = 0 ] && [ "$out" = 100 ]; echo $?)" "status $status, '$out', '$err'"

out=$("$purple" --sandbox -e '(* 2 21)' 2>&1); status=$?
check "--sandbox -e" "$([ $status = 0 ] && [ "$out" = 42 ]; echo $?)" "status $status, '$out'"
"$purple" --sandbox < /dev/null > "$tmp/out" 2> "$tmp/err"; status=$?
check "--sandbox without a program is a usage error" "$([ $status = 2 ]; echo $?)" "status $status"
for bad in "--max-seconds -1" "--max-seconds abc" "--max-memory 12X" "--max-steps 0" "--max-tensor-bytes"; do
  "$purple" --sandbox $bad "$tmp/s.purple" > /dev/null 2> "$tmp/err"; status=$?
  check "bad option '$bad' exits 2" "$([ $status = 2 ]; echo $?)" "status $status, $(cat "$tmp/err")"
done
"$purple" --sandbox "$tmp/missing.purple" > /dev/null 2> "$tmp/err"; status=$?
check "a missing script" "$([ $status = 1 ] && grep -q "cannot read" "$tmp/err"; echo $?)" "status $status, $(cat "$tmp/err")"

finish
