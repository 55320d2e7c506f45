#!/bin/bash
# Loads a 1 GB safetensors file in Purple and reports wall time and peak resident memory, then the
# same with every value touched (tensor-sum), against the file size. The file is written by Python
# from the format's specification (256 float32 tensors of 1 M elements).
#   usage: bench/formats/safetensors-1gb.sh [build/purple]
set -euo pipefail
PURPLE=${1:-build/purple}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
/usr/bin/python3 - "$DIR/big.safetensors" <<'PY'
import json, struct, sys
import numpy as np
n, count = 1 << 20, 256
header = {"t%03d" % i: {"dtype": "F32", "shape": [n], "data_offsets": [i * 4 * n, (i + 1) * 4 * n]} for i in range(count)}
h = json.dumps(header).encode()
h += b" " * ((8 - len(h) % 8) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h)
    block = np.arange(n, dtype=np.float32).tobytes()
    for i in range(count):
        f.write(block)
PY
ls -l "$DIR/big.safetensors" | awk '{printf "file: %.0f MB\n", $5 / 1e6}'
sync
measure() {
  /usr/bin/time -f "%e s wall, %M KB max RSS" "$PURPLE" -e "$1" 2>&1 | tail -1
}
echo "start-up only:           $(measure '(+ 1 2)')"
echo "load (mapped, untouched): $(measure "(define w (load-safetensors \"$DIR/big.safetensors\")) (hash-table-count w)")"
echo "load and sum every value: $(measure "(define w (load-safetensors \"$DIR/big.safetensors\")) (hash-table-walk w (lambda (k t) (tensor-sum t)))")"
