#!/usr/bin/env bash
# load-inline's cache (issue 50), and the compile of the suite's test extension that the other
# tests in this folder reuse (a CTest fixture). Into an empty cache:
#   - two processes load the same extension at once: one compiles, the other waits for it and
#     loads its library; the cache then holds one finished build and no build directory;
#   - a third process loads it without compiling (the seconds it took are printed, not checked:
#     timings belong to bench/).
# usage: cache.sh PURPLE CACHE_HOME   (CACHE_HOME: the XDG_CACHE_HOME the other tests use)
set -u
purple=$1
export XDG_CACHE_HOME=$2
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
check() {   # check NAME OK(0/1) DETAIL
  if [ "$2" = 0 ]; then echo "ok: $1"; else echo "FAIL: $1: $3"; failures=$((failures + 1)); fi
}
rm -rf "$XDG_CACHE_HOME"
mkdir -p "$XDG_CACHE_HOME"
cd "$here"

"$purple" load-once.purple > "$tmp/a" 2>&1 & a=$!
"$purple" load-once.purple > "$tmp/b" 2>&1 & b=$!
wait $a; sa=$?
wait $b; sb=$?
cat "$tmp/a" "$tmp/b"
check "both processes succeed" "$([ $sa = 0 ] && [ $sb = 0 ]; echo $?)" "status $sa and $sb"
check "both computed" "$([ "$(grep -c '((0.0 0.0))' "$tmp/a" "$tmp/b" | grep -c ':1$')" = 2 ]; echo $?)" "$(cat "$tmp/a" "$tmp/b")"
compiles=$(cat "$tmp/a" "$tmp/b" | grep -c "compiling purple_test_ext into")
check "one of them compiled" "$([ "$compiles" = 1 ]; echo $?)" "$compiles compiles"
check "the other waited and used its build" \
  "$(cat "$tmp/a" "$tmp/b" | grep -q "built by another process"; echo $?)" "$(cat "$tmp/a" "$tmp/b")"
root=$XDG_CACHE_HOME/purple/extensions
builds=$(find "$root" -maxdepth 1 -name 'purple_test_ext-*' -type d | wc -l)
check "one finished build in the cache" "$([ "$builds" = 1 ] && ls "$root"/purple_test_ext-*/purple_test_ext.so > /dev/null; echo $?)" "$(ls "$root")"
check "no build directory left" "$([ -z "$(find "$root" -maxdepth 1 -name 'build-*')" ]; echo $?)" "$(ls "$root")"

start=$(date +%s%N)
"$purple" load-once.purple > "$tmp/c" 2>&1; sc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
cat "$tmp/c"
check "a third process uses the cache" "$([ $sc = 0 ] && grep -q "(cached)" "$tmp/c" && ! grep -q compiling "$tmp/c"; echo $?)" "$(cat "$tmp/c")"
echo "a process loading the cached extension took $ms ms"

echo "$failures failures"
[ $failures = 0 ]
