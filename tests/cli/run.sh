#!/usr/bin/env bash
# Command-line behaviour of `purple`: exit codes, error reports with positions, deep recursion,
# long tail-recursive loops in constant memory, malformed input, the non-interactive REPL.
set -u
source "$(dirname "$0")/lib.sh"   # purple, tmp, check, finish

out=$("$purple" -e '(+ 1 2)'); check "-e prints the value" "$([ "$out" = 3 ]; echo $?)" "got '$out'"
out=$("$purple" --version); check "--version" "$(echo "$out" | grep -q "Purple .*LibTorch .*CUDA"; echo $?)" "got '$out'"
# The LibTorch named there is the one (libtorch-version) returns: the one Purple was built against.
tv=$("$purple" -e '(libtorch-version)' | tr -d '"')
check "--version names (libtorch-version)" "$(echo "$out" | grep -qF "LibTorch $tv,"; echo $?)" "got '$out' and '$tv'"
out=$("$purple" --help); check "--help" "$(echo "$out" | grep -q "usage"; echo $?)" "got '$out'"

printf '(display "ok")\n(car 5)\n(display "not reached")\n' > "$tmp/err.purple"
"$purple" "$tmp/err.purple" > "$tmp/out" 2> "$tmp/err"; status=$?
check "uncaught error exits 1" "$([ $status = 1 ]; echo $?)" "status $status"
check "stdout before the error" "$(grep -qx ok "$tmp/out"; echo $?)" "$(cat "$tmp/out")"
check "error names the position" "$(grep -q "err.purple:2:1" "$tmp/err"; echo $?)" "$(cat "$tmp/err")"
check "error message" "$(grep -q "car: argument 1 must be a pair" "$tmp/err"; echo $?)" "$(cat "$tmp/err")"

# a reference is not a call: the message itself names where the unbound name is used
printf '(define (f x)\n  (+ x (g x)))\n(define (h) (* 2 undefined-thing))\n(display (guard (e (#t 0)) (f 1)))\n(h)\n' > "$tmp/unbound.purple"
"$purple" "$tmp/unbound.purple" > "$tmp/out" 2> "$tmp/err"
check "an unbound variable names its position" "$(grep -q "unbound.purple:3:13: unbound variable: undefined-thing" "$tmp/err"; echo $?)" "$(cat "$tmp/err")"
check "... and the caller's" "$(grep -q "in h at .*unbound.purple:5:1" "$tmp/err"; echo $?)" "$(cat "$tmp/err")"
"$purple" -e '(begin (define (f x) (+ x (g x))) (f 1))' > "$tmp/out" 2> "$tmp/err"
check "an unbound operator names its position" "$(grep -q "<command line>:1:27: unbound variable: g" "$tmp/err"; echo $?)" "$(cat "$tmp/err")"

printf '#!/usr/bin/env purple\n(display (command-line))\n' > "$tmp/args.purple"
out=$("$purple" "$tmp/args.purple" a b); check "#! line and command-line" "$([ "$out" = "($tmp/args.purple a b)" ]; echo $?)" "got '$out'"

printf '(define (f n) (if (= n 0) 0 (+ 1 (f (- n 1)))))\n(display (f 1000000))\n' > "$tmp/deep.purple"
"$purple" "$tmp/deep.purple" > "$tmp/out" 2> "$tmp/err"; status=$?
check "1e6-deep recursion is a Purple error" "$([ $status = 1 ]; echo $?)" "status $status"
check "recursion error message" "$(grep -q "recursion too deep" "$tmp/err"; echo $?)" "$(head -3 "$tmp/err")"

printf '(define (f n) (if (= n 0) 0 (+ 1 (f (- n 1)))))\n(display (f 100000))\n' > "$tmp/deep2.purple"
out=$("$purple" "$tmp/deep2.purple" 2>&1); check "1e5-deep recursion works" "$([ "$out" = 100000 ]; echo $?)" "got '${out:0:200}'"

cat > "$tmp/loop.purple" <<'P'
(define before (process-rss))
(define n (let loop ((i 0)) (if (= i 10000000) i (loop (+ i 1)))))
(display n) (newline)
(display (< (- (process-rss) before) 50000000))
P
out=$("$purple" "$tmp/loop.purple"); check "10M-step named let in constant memory" "$([ "$out" = "$(printf '10000000\n#t')" ]; echo $?)" "got '$out'"

for bad in '(display 1' '"unterminated' '(1 . )' ')' '#\nosuchchar' '#(1 2' '#[1 2' "'" '#|'; do
  printf '%s' "$bad" > "$tmp/bad.purple"
  "$purple" "$tmp/bad.purple" > /dev/null 2> "$tmp/err"; status=$?
  check "malformed input: $bad" "$([ $status = 1 ] && grep -q "read-error\|bad.purple:1:" "$tmp/err"; echo $?)" "status $status: $(cat "$tmp/err")"
done

out=$(printf '(define x 20)\n(car 1)\n(+ x\n 22)\n' | "$purple" 2>/dev/null)
check "piped REPL goes on after an error" "$([ "$out" = 42 ]; echo $?)" "got '$out'"

out=$(printf '(exit 7)' > "$tmp/exit.purple"; "$purple" "$tmp/exit.purple"; echo $?)
check "exit code" "$([ "$out" = 7 ]; echo $?)" "got '$out'"

"$purple" "$tmp" > /dev/null 2> "$tmp/err"; status=$?
check "a directory as the script is an error" "$([ $status = 1 ] && grep -q "directory" "$tmp/err"; echo $?)" "status $status: $(cat "$tmp/err")"

# Backtraces (issue 11): the user's own file:line is always there, every frame of a nested call
# is shown (proper tail calls replace their caller's frame, so the outer calls here are not tail
# calls), library frames are marked [prelude], and the library's raisers (error, memq ...) are not.
trace_has() {   # trace_has NAME FILE PATTERN
  check "$1" "$(grep -q -- "$3" "$2"; echo $?)" "no /$3/ in: $(cat "$2")"
}
trace_lacks() {
  check "$1" "$(! grep -q -- "$3" "$2"; echo $?)" "/$3/ in: $(cat "$2")"
}
prelude_marked() {   # every line naming a prelude file is marked as the library's
  check "$1: prelude frames are marked" "$(! grep "prelude/" "$2" | grep -vq "\[prelude\]"; echo $?)" "$(cat "$2")"
}
cat > "$tmp/nested.purple" <<'P'
(define (inner x)
  (car x))
(define (middle x)
  (+ 1 (inner x)))
(define (outer x)
  (* 2 (middle x)))
(display (outer 5))
P
"$purple" "$tmp/nested.purple" > /dev/null 2> "$tmp/err"
for line in 2:3 4:8 6:8 7:10; do trace_has "nested call: frame at nested.purple:$line" "$tmp/err" "nested.purple:$line"; done
cat > "$tmp/mnist.purple" <<'P'
(define (load-data)
  (let ((d (mnist-dataset :dir "/nope"))) d))
(define data (vector (load-data)))
P
"$purple" "$tmp/mnist.purple" > /dev/null 2> "$tmp/err"
trace_has "mnist-dataset with a missing dir: the error names the file" "$tmp/err" "/nope"
trace_has "mnist-dataset: the user's call" "$tmp/err" "mnist.purple:2:12"
trace_has "mnist-dataset: the user's outer call" "$tmp/err" "mnist.purple:3:22"
prelude_marked "mnist-dataset" "$tmp/err"
cat > "$tmp/fit.purple" <<'P'
(define model (linear 3 1))
(define opt (sgd (parameters model) :lr 0.1))
(define data (data-loader (tensor-dataset (tensor-ones 4 5) (tensor-ones 4 1)) :batch-size 2))
(define (train)
  (let ((history (fit model opt mse-loss data :epochs 1 :verbose #f)))
    history))
(display (train))
P
"$purple" "$tmp/fit.purple" > /dev/null 2> "$tmp/err"
trace_has "fit on data of the wrong width: a shape error" "$tmp/err" "cannot be multiplied"
trace_has "fit: the user's call" "$tmp/err" "fit.purple:5:18"
trace_has "fit: the user's outer call" "$tmp/err" "fit.purple:7:10"
trace_lacks "fit: no raiser frames" "$tmp/err" "in \(error\|raise\|memq\|assq\) "
prelude_marked "fit" "$tmp/err"
sed -i 's/:epochs 1/:epoch 1/' "$tmp/fit.purple"
"$purple" "$tmp/fit.purple" > /dev/null 2> "$tmp/err"
trace_has "fit with a misspelt keyword" "$tmp/err" "unknown keyword.*:epoch"
trace_has "fit with a misspelt keyword: the user's call" "$tmp/err" "fit.purple:5:18"
trace_lacks "fit with a misspelt keyword: no raiser frames" "$tmp/err" "in \(error\|raise\|memq\|assq\) "
prelude_marked "fit with a misspelt keyword" "$tmp/err"

# Data-loader worker processes: what a dataset displays in a worker reaches stdout, and output
# still buffered in the parent when it forks (stdout is a file here) is written once, not once
# per worker.
cat > "$tmp/workers.purple" <<'P'
(display "before-fork ")
(define ds (make-dataset 4 (lambda (i) (display "in-worker ") (display i) (newline) i)))
(for-each (lambda (b) #t) (data-loader ds :batch-size 1 :num-workers 2))
(display "after")
P
"$purple" "$tmp/workers.purple" > "$tmp/out" 2> "$tmp/err"; status=$?
check "worker processes: exit 0" "$([ $status = 0 ]; echo $?)" "status $status: $(cat "$tmp/err")"
check "worker processes: buffered output written once" "$([ "$(grep -o before-fork "$tmp/out" | wc -l)" = 1 ]; echo $?)" "$(cat "$tmp/out")"
check "worker processes: each worker's display shows" "$([ "$(grep -c "in-worker [0-3]$" "$tmp/out")" = 4 ]; echo $?)" "$(cat "$tmp/out")"
check "worker processes: then the parent's" "$(tail -c 5 "$tmp/out" | grep -qx after; echo $?)" "$(cat "$tmp/out")"

finish
