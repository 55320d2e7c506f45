#!/usr/bin/env bash
# Installs, from Debian's archive, whatever Purple needs and is missing (run as root).
set -euo pipefail
packages=(g++ cmake make pkg-config libtorch-dev libgc-dev libgmp-dev doctest-dev libedit-dev
          libgloo-dev libopenblas0-openmp zlib1g-dev python3-torch dataset-fashion-mnist)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
