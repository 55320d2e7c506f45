#!/usr/bin/env bash
# Configures and builds Purple in Release mode into build/ (the project root's).
# PURPLE_WERROR=ON (CI sets it) makes every warning in Purple's own files an error.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=Release -DPURPLE_WERROR="${PURPLE_WERROR:-OFF}"
cmake --build "$root/build" -j "$(nproc)"
