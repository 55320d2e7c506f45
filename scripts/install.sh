#!/usr/bin/env bash
# Installs the build in build/ (scripts/build.sh) under PREFIX (default /usr/local): the purple
# command, libpurple and its headers and CMake package, and, when the Python bridge was built, the
# purple Python module where /usr/bin/python3 finds it (for /usr/local:
# /usr/local/lib/python3.X/dist-packages), so that `python3 -c "import purple"` works anywhere.
# usage: bash scripts/install.sh [PREFIX]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
prefix=${1:-${PREFIX:-/usr/local}}
[ -f "$root/build/CMakeCache.txt" ] || bash "$root/scripts/build.sh"
cmake --install "$root/build" --prefix "$prefix"
command -v ldconfig > /dev/null && [ -w /etc/ld.so.cache ] && ldconfig || true
