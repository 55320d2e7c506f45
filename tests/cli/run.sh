#!/usr/bin/env bash
# Command-line behaviour of `purple`: exit codes, error reports with positions, deep recursion,
# long tail-recursive loops in constant memory, malformed input, the non-interactive REPL.
set -u
purple=$1
pass=0
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() {   # check NAME CONDITION-RESULT DETAIL
  if [ "$2" = 0 ]; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $1: $3"; fi
}

out=$("$purple" -e '(+ 1 2)'); check "-e prints the value" "$([ "$out" = 3 ]; echo $?)" "got '$out'"
out=$("$purple" --version); check "--version" "$(echo "$out" | grep -q "Purple .*LibTorch .*CUDA"; echo $?)" "got '$out'"
out=$("$purple" --help); check "--help" "$(echo "$out" | grep -q "usage"; echo $?)" "got '$out'"

printf '(display "ok")\n(car 5)\n(display "not reached")\n' > "$tmp/err.purple"
"$purple" "$tmp/err.purple" > "$tmp/out" 2> "$tmp/err"; status=$?
check "uncaught error exits 1" "$([ $status = 1 ]; echo $?)" "status $status"
check "stdout before the error" "$(grep -qx ok "$tmp/out"; echo $?)" "$(cat "$tmp/out")"
check "error names the position" "$(grep -q "err.purple:2:1" "$tmp/err"; echo $?)" "$(cat "$tmp/err")"
check "error message" "$(grep -q "car: argument 1 must be a pair" "$tmp/err"; echo $?)" "$(cat "$tmp/err")"

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

echo "$pass passed, $fail failed"
[ $fail = 0 ]
