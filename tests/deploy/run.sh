#!/usr/bin/env bash
# examples/deploy, a C++ program built against LibTorch alone (no Purple), runs the models that
# Purple trained, traced and saved (tests/formats/deploy.purple) and gives Purple's outputs to
# 1e-6. usage: run.sh PURPLE SOURCE_DIR TORCH_DIR [CXX]
set -euo pipefail
purple=$1
src=$2
torch_dir=$3
cxx=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/models"

echo "== Purple trains, traces and saves the models"
(cd "$src/tests/formats" && "$purple" deploy.purple "$tmp/models") > "$tmp/purple.log" 2>&1 || { cat "$tmp/purple.log"; exit 1; }
cat "$tmp/purple.log"

echo "== examples/deploy against LibTorch ($torch_dir)"
cmake -S "$src/examples/deploy" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DTorch_DIR="$torch_dir" \
  ${cxx:+-DCMAKE_CXX_COMPILER="$cxx"} > "$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/build" -j2 > "$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
if ldd "$tmp/build/deploy" | grep -q purple; then echo "FAIL: the deploy program links Purple"; exit 1; fi

fail=0
count=0
for expected in "$tmp"/models/*-expected.pt; do
  name=$(basename "$expected" -expected.pt)
  echo "-- $name"
  "$tmp/build/deploy" "$tmp/models/$name.pt" "$tmp/models/$name-inputs.pt" "$expected" || { echo "FAIL: $name"; fail=1; }
  count=$((count + 1))
done
[ "$count" -ge 8 ] || { echo "FAIL: only $count models were saved"; exit 1; }
[ "$fail" = 0 ] && echo "examples/deploy runs the $count models Purple saved: ok"
exit "$fail"
