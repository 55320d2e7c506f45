#!/bin/bash
# Side-by-side benchmarks (issue 7): Purple against LibTorch C++, python3-torch, CPython and Guile.
#   bash bench/run.sh            full run: 5 interleaved repetitions, writes bench/results/<date>.md
#                                and the README's "Benchmarks" section
#   bash bench/run.sh --quick    smoke run: small sizes, 1 repetition, bench/results/<date>-quick.md
# Other options: --reps N, --threads N, --only dispatch,mlp,cnn,counts,examples,interp,startup, --no-build,
# --readme / --no-readme. See bench/runner.py.
set -euo pipefail
cd "$(dirname "$0")/.."

# Tools the comparison needs: Debian's Guile 3 and GNU time (peak RSS).
missing=()
command -v guile >/dev/null 2>&1 || missing+=(guile-3.0)
[ -x /usr/bin/time ] || missing+=(time)
if [ ${#missing[@]} -gt 0 ]; then
  echo "bench: installing ${missing[*]}" >&2
  SUDO=; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get install -y "${missing[@]}" >/dev/null 2>&1 ||
    { $SUDO apt-get update >/dev/null 2>&1 && $SUDO apt-get install -y "${missing[@]}" >/dev/null 2>&1; } ||
    echo "bench: could not install ${missing[*]}; those columns will be missing" >&2
fi

# Debian's python3 has python3-torch; the python3 on PATH may be a pyenv without it.
if ! /usr/bin/python3 -c "import torch" >/dev/null 2>&1; then
  echo "bench: /usr/bin/python3 cannot import torch (apt-get install python3-torch)" >&2
  exit 1
fi
exec /usr/bin/python3 bench/runner.py "$@"
