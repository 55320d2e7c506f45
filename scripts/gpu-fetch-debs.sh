#!/usr/bin/env bash
# Run HERE (a Debian machine with apt), in the project root, before a GPU run: downloads into
# .devdeps/ (git-ignored) the Debian packages that scripts/gpu-check.sh unpacks on the GPU
# machine, which has CUDA, a pip PyTorch, CMake and ninja but no package registry:
# the libraries Purple links (into a private prefix there) and two data packages that tests and
# benchmarks read (Fashion-MNIST, the fortunes corpus; unpacked into / there, data files only).
# The same list as ../shared/device/fetch-debs.sh, plus the data.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p .git/info
grep -qx '/.devdeps/' .git/info/exclude 2>/dev/null || echo '/.devdeps/' >> .git/info/exclude
mkdir -p .devdeps
cd .devdeps
rm -f ./*.deb
# read-image/write-png need libjpeg and libpng (with zlib's headers; libz itself is everywhere);
# pkgconf is used there only when the machine has no pkg-config of its own.
libs="libgc1 libgc-dev doctest-dev libedit2 libedit-dev libbsd0 libbsd-dev libmd0 libmd-dev
      libgmp10 libgmp-dev libgmpxx4ldbl nlohmann-json3-dev
      libjpeg62-turbo libjpeg62-turbo-dev libpng16-16 libpng-dev zlib1g-dev
      pkgconf pkgconf-bin libpkgconf3"
data="dataset-fashion-mnist fortunes fortunes-min"
# apt-get download writes as the _apt user where it can; this folder may not be writable by it.
chmod a+rwx . 2>/dev/null || true
apt-get download $libs $data ${EXTRA_DEBS:-} >/dev/null
ls -1 ./*.deb | sed 's|^\./|fetched: |'
du -sh .
