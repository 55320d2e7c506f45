#!/usr/bin/env bash
# README command 1: install what is missing, build, install under /usr/local, and run the main job
# (the demo script).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bash "$root/scripts/install-deps.sh"
bash "$root/scripts/build.sh"
bash "$root/scripts/install.sh"   # under /usr/local: purple, libpurple, `import purple` for python3
"$root/build/purple" "$root/examples/demo.purple"
# The Jupyter kernel, for this user (built when xeus-dev is installed, which install-deps.sh does).
if [ -x "$root/build/purple-kernel" ]; then "$root/build/purple" --install-kernel; fi
