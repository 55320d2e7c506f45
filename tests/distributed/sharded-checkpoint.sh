#!/usr/bin/env bash
# Sharded checkpoints across world sizes: 4 ranks train a fully-sharded model and write a
# checkpoint, each rank its part (sharded-checkpoint.purple write); 2 ranks load it and must end
# as one process trained throughout (sharded-checkpoint.purple read). Also checks that each
# rank's file holds a part only, and that python3's torch.load reads a part.
# Usage: sharded-checkpoint.sh PURPLE-RUN [PYTHON]
set -u
run=$1
python=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
"$run" --nproc-per-node 4 --prefix-output "$here/sharded-checkpoint.purple" write "$tmp" > "$tmp/write.log" 2>&1 || fail=1
cat "$tmp/write.log"
ls -l "$tmp"
"$run" --nproc-per-node 2 --prefix-output "$here/sharded-checkpoint.purple" read "$tmp" > "$tmp/read.log" 2>&1 || fail=1
cat "$tmp/read.log"
if [ -n "$python" ] && "$python" -c 'import torch' 2> /dev/null; then
  "$python" - "$tmp" <<'PY' || fail=1
import sys, torch
d = sys.argv[1]
parts = [torch.load(f"{d}/step-12.rank-{k}-of-4.pt") for k in range(4)]
whole = {"0.weight": 24 * 64, "2.weight": 64 * 48, "4.weight": 48 * 6}
for name, numel in whole.items():
    sizes = [p["model"][name].numel() for p in parts]
    assert sum(sizes) == numel and max(sizes) <= (numel + 3) // 4, (name, sizes)
    # the parts, in rank order, are the whole tensor's elements
    info = [next(i for i in p["parameters"] if i["name"] == name) for p in parts]
    assert [i["start"] for i in info] == [min(k * ((numel + 3) // 4), numel) for k in range(4)], info
m = parts[0]["optimizer"]["state"][0]["exp_avg"]
assert m.numel() == parts[0]["model"]["0.weight"].numel()
print("python3 torch.load reads the 4 parts: each holds a quarter of every parameter and of its moments")
PY
else
  echo "python3 with torch not found: the torch.load check is skipped"
fi
if [ $fail = 0 ]; then echo "sharded checkpoints: ok"; else echo "sharded checkpoints: FAILED"; fi
exit $fail
