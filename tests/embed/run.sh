#!/usr/bin/env bash
# Installs the current build into a temporary prefix, then builds against the installed package,
# out of tree, what a host would build: examples/embed and every complete example program in
# docs/embedding.md (the ```cpp blocks that begin with "// example: NAME"), and runs them.
# usage: run.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
jobs=${PURPLE_EMBED_TEST_JOBS:-2}
# The hosts are built with Purple's own compiler: a sanitized libpurple (docs/hardening.md) hands
# its hosts link options only that compiler knows.
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")

echo "== cmake --install into $tmp/prefix"
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
for f in lib/libpurple.so include/purple/purple.hpp include/purple/purple.h lib/cmake/Purple/PurpleConfig.cmake \
         lib/cmake/Purple/PurpleTargets.cmake bin/purple; do
  [ -e "$tmp/prefix/$f" ] || { echo "FAIL: $f was not installed"; exit 1; }
done
out=$("$tmp/prefix/bin/purple" -e '(+ 1 2)')
[ "$out" = 3 ] || { echo "FAIL: installed purple printed '$out'"; exit 1; }

echo "== examples/embed against the installed package"
cmake -S "$src/examples/embed" -B "$tmp/host" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release ${cxx:+-DCMAKE_CXX_COMPILER="$cxx"} > "$tmp/host.log" \
  || { cat "$tmp/host.log"; exit 1; }
cmake --build "$tmp/host" -j"$jobs" > "$tmp/host-build.log" 2>&1 || { cat "$tmp/host-build.log"; exit 1; }
"$tmp/host/embed-host"

echo "== the examples in docs/embedding.md"
mkdir -p "$tmp/doc"
awk -v dir="$tmp/doc" '
  /^```cpp[ \t]*$/ { inblock = 1; first = 1; next }
  /^```/ && inblock { if (file) close(file); inblock = 0; file = ""; next }
  inblock {
    if (first && match($0, /^\/\/ example: [A-Za-z0-9_-]+/)) { file = dir "/" substr($0, 13, RLENGTH - 12) ".cpp"; print file > (dir "/list") }
    first = 0
    if (file) print > file
  }' "$src/docs/embedding.md"
[ -s "$tmp/doc/list" ] || { echo "FAIL: no examples found in docs/embedding.md"; exit 1; }
{
  echo 'cmake_minimum_required(VERSION 3.18)'
  echo 'project(PurpleDocExamples LANGUAGES CXX)'
  echo 'set(CMAKE_CXX_STANDARD 17)'
  echo 'find_package(Purple REQUIRED)'
  while read -r f; do
    n=$(basename "$f" .cpp)
    echo "add_executable($n $n.cpp)"
    echo "target_link_libraries($n PRIVATE Purple::purple)"
  done < "$tmp/doc/list"
} > "$tmp/doc/CMakeLists.txt"
cmake -S "$tmp/doc" -B "$tmp/doc/build" -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release ${cxx:+-DCMAKE_CXX_COMPILER="$cxx"} > "$tmp/doc.log" \
  || { cat "$tmp/doc.log"; exit 1; }
cmake --build "$tmp/doc/build" -j"$jobs" > "$tmp/doc-build.log" 2>&1 || { cat "$tmp/doc-build.log"; exit 1; }
fail=0
while read -r f; do
  n=$(basename "$f" .cpp)
  if (cd "$tmp/doc" && "$tmp/doc/build/$n" > "$tmp/doc/$n.out" 2>&1); then
    echo "ok: $n"
    if [ -n "${PURPLE_EMBED_TEST_VERBOSE:-}" ]; then sed 's/^/    /' "$tmp/doc/$n.out"; fi
  else
    echo "FAIL: $n"; cat "$tmp/doc/$n.out"; fail=1
  fi
done < "$tmp/doc/list"
exit $fail
