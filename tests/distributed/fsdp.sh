#!/usr/bin/env bash
# fully-shard at 4 ranks (fsdp.purple), then python3's torch.load reads the state dict the
# sharded model saved: the plain model's keys, loaded strictly into the same torch.nn.Sequential,
# equal to the one-process model's file to 1e-5. Then: fully-shard never allocates the whole
# model at once, so under a 40 MB allocation budget it trains a 50 MB model that DDP cannot
# (budget.purple, which says what that budget counts and what it does not).
# Usage: fsdp.sh PURPLE-RUN [PYTHON]
set -u
run=$1
python=${2:-}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$run" --nproc-per-node 4 --prefix-output "$here/fsdp.purple" "$tmp" > "$tmp/log" 2>&1; st=$?
cat "$tmp/log"
[ $st = 0 ] || { echo "fsdp.purple at 4 ranks: FAILED (status $st)"; exit 1; }
# under purple --max-tensor-bytes 40M: DDP's 50 MB packed broadcast is refused, fully-shard trains
cat > "$tmp/purple-capped" <<EOF2
#!/bin/sh
exec "$(dirname "$run")/purple" --max-tensor-bytes 40M "\$@"
EOF2
chmod +x "$tmp/purple-capped"
"$run" --purple "$tmp/purple-capped" --nproc-per-node 4 --stop-timeout 2 "$here/budget.purple" ddp > "$tmp/ddp-budget" 2>&1; st=$?
grep -m1 'budget' "$tmp/ddp-budget"
{ [ $st != 0 ] && grep -q 'tensor memory budget exceeded' "$tmp/ddp-budget"; } ||
  { echo "FAIL: DDP should exceed the 40 MB budget (status $st)"; cat "$tmp/ddp-budget"; exit 1; }
"$run" --purple "$tmp/purple-capped" --nproc-per-node 4 "$here/budget.purple" fsdp > "$tmp/fsdp-budget" 2>&1; st=$?
cat "$tmp/fsdp-budget"
[ $st = 0 ] && grep -q 'trained 3 steps' "$tmp/fsdp-budget" ||
  { echo "FAIL: fully-shard should train within the 40 MB budget (status $st)"; exit 1; }
echo "ok: under a 40 MB allocation budget per rank, DDP's whole-model buffer is refused and fully-shard trains"
if [ -z "$python" ] || ! "$python" -c 'import torch' 2> /dev/null; then
  echo "python3 with torch not found: the torch.load check is skipped"
  exit 0
fi
"$python" - "$tmp" <<'PY'
import sys, torch
d = sys.argv[1]
sharded = torch.load(f"{d}/fsdp-mlp.pt")
ref = torch.load(f"{d}/ref-mlp.pt")
model = torch.nn.Sequential(torch.nn.Linear(24, 64), torch.nn.Tanh(), torch.nn.Linear(64, 48), torch.nn.ReLU(),
                            torch.nn.Linear(48, 32), torch.nn.ReLU(), torch.nn.Linear(32, 6))
assert list(sharded.keys()) == list(model.state_dict().keys()), list(sharded.keys())
model.load_state_dict(sharded, strict=True)
diff = max((sharded[k] - ref[k]).abs().max().item() for k in ref)
print(f"python3 torch.load: {len(sharded)} tensors with the plain model's keys; largest difference from one process {diff:.3g}")
assert diff < 1e-5
PY
