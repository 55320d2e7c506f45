#!/usr/bin/env bash
# Purple on a GPU machine, in one run: build against the machine's CUDA LibTorch (a pip PyTorch
# 2.x), run the CUDA tests, the GPU benchmarks side by side with PyTorch, then the rest of the
# suite in the time left, and write the logs and a results table under $OUT.
#
# Here first (a Debian machine with apt), in the project root:
#     bash scripts/gpu-fetch-debs.sh          # the libraries and data, into .devdeps/
# Then on the GPU machine (the device tool's run, carrying .devdeps):
#     bash scripts/gpu-check.sh               # GPU_CHECK_SECONDS (default 450) bounds the whole run
# A shorter rerun (what is left of a session's device time) can narrow it:
#     GPU_BENCH_ONLY=dispatch,memloop         # bench/gpu/run.py --only: these workloads alone
#     GPU_REST_REGEX='data-loading'           # the rest of the suite: only the tests this matches
#     GPU_REST_SECONDS=30                     # the time kept back for the rest (default 120)
#
# What it writes under $OUT (at most 8 files come back): gpu-check.log (each step, with times),
# build.log, ctest-cuda.log, bench.log, ctest-rest.log, results.md (the table to commit as
# bench/results/DATE-gpu.md).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/gpu-out}
mkdir -p "$out"
start=$(date +%s)
deadline=$((start + ${GPU_CHECK_SECONDS:-450}))
left() { echo $((deadline - $(date +%s))); }
log() { echo "[gpu-check +$(($(date +%s) - start))s] $*" | tee -a "$out/gpu-check.log"; }
cd "$root"

# ---- the machine -------------------------------------------------------------------------------
python=$(command -v python3)
torch_dir=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))') || {
  log "no python3 with torch on this machine"; exit 1; }
site=$(dirname "$torch_dir")
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
versions=$("$python" -c 'import torch, sys; print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, Python {sys.version.split()[0]}")')
log "GPU: ${gpu:-none}; $versions; $(nproc) cores"

# ---- Purple's other dependencies: Debian packages unpacked into a private prefix ---------------
prefix=/opt/devdeps
mkdir -p "$prefix"
for f in .devdeps/*.deb; do
  case $(basename "$f") in
    dataset-fashion-mnist_*|fortunes_*|fortunes-min_*) dpkg -x "$f" / ;;   # data files only
    *) dpkg -x "$f" "$prefix" ;;
  esac
done
multi=$prefix/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$multi:${LD_LIBRARY_PATH:-}
# Absolute links in the -dev packages (zlib1g-dev: libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13)
# may point at nothing here: aim them at the prefix's copy, else at this machine's library of that
# soname (every system has a libz.so.1).
for link in "$multi"/*.so; do
  [ -L "$link" ] && [ ! -e "$link" ] || continue
  target=$(readlink "$link")
  if [ -e "$prefix$target" ]; then
    ln -sfn "$prefix$target" "$link"
  else
    soname=$(basename "$target" | sed -E 's/(\.so\.[0-9]+).*/\1/')
    mine=$({ ldconfig -p 2>/dev/null || /sbin/ldconfig -p; } | awk -v n="$soname" '$1 == n && /x86-64/ {print $NF; exit}')
    [ -n "$mine" ] && ln -sfn "$mine" "$link"
  fi
  log "relinked $(basename "$link") -> $(readlink "$link")"
done
# bdw-gc is found through pkg-config: only the carried .pc files, their /usr read as the prefix.
# The carried pkgconf serves where the machine has no pkg-config.
export PKG_CONFIG_LIBDIR=$multi/pkgconfig:$prefix/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$prefix
command -v pkg-config >/dev/null || export PATH=$PATH:$prefix/usr/bin
# The packages' pkg-config files say /usr; the compiler and linker look in the prefix as well.
export CPATH=$prefix/usr/include${CPATH:+:$CPATH}
export LIBRARY_PATH=$multi${LIBRARY_PATH:+:$LIBRARY_PATH}
# The Python bridge embeds the system libpython; torch lives in the venv's site-packages.
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}

# NCCL's header comes with the pip package nvidia-nccl-*, beside torch.
nccl_h=$(find "$site/nvidia" -name nccl.h -path '*include*' 2>/dev/null | head -1)

# ---- build ---------------------------------------------------------------------------------------
build() {
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)');$prefix/usr" \
    -DCMAKE_INCLUDE_PATH="$prefix/usr/include" -DCMAKE_LIBRARY_PATH="$multi" \
    -DPURPLE_TEST_PYTHON="$python" -DTORCH_CUDA_ARCH_LIST=9.0 \
    ${nccl_h:+-DNCCL_INCLUDE_DIR="$(dirname "$nccl_h")"} "$@" &&
  ninja -C build-gpu -k 0 -j "$(nproc)"
}
log "configure and build (build-gpu/)"
build > "$out/build.log" 2>&1
build_rc=$?
grep -E '^-- (CUDA|Distributed|Python bridge|TensorBoard|plots|purple-kernel)' "$out/build.log" | tee -a "$out/gpu-check.log"
if [ $build_rc -ne 0 ]; then
  log "BUILD FAILED (rc $build_rc); the errors:"
  grep -E 'error|FAILED|Could NOT|CMake Error' "$out/build.log" | head -40 | tee -a "$out/gpu-check.log"
  # The first device run of a LibTorch line may meet an API that moved. When the library itself
  # failed, leave out the optional parts whose files failed and build once more, so that the
  # rest still runs; the log says which part was left out.
  if [ ! -x build-gpu/purple ]; then
    failed=$(grep -E '^FAILED: ' "$out/build.log")
    without=()
    grep -q 'builtins/distributed' <<<"$failed" && without+=(-DPURPLE_DISTRIBUTED=OFF)
    grep -qi 'python' <<<"$failed" && without+=(-DPURPLE_WITH_PYTHON=OFF)
    grep -q 'device_memory' <<<"$failed" && without+=(-DPURPLE_CUDA_MEMORY=OFF)
    if [ ${#without[@]} -gt 0 ]; then
      log "building again with ${without[*]}"
      build "${without[@]}" >> "$out/build.log" 2>&1
      log "second build rc $?"
    fi
  fi
  # A failed test program need not stop the rest: go on while the interpreter itself was built.
  [ -x build-gpu/purple ] || exit 1
fi
log "built: $(build-gpu/purple --version)"

# ---- the CUDA tests ----------------------------------------------------------------------------
log "ctest -L cuda"
ctest --test-dir build-gpu -L cuda -j 8 --output-on-failure --timeout 180 > "$out/ctest-cuda.log" 2>&1
log "cuda tests: $(grep -E 'tests passed|tests failed' "$out/ctest-cuda.log" | tail -1)"
grep -E '^\s*[0-9]+/[0-9]+ Test' "$out/ctest-cuda.log" >> "$out/gpu-check.log"
# Your own kernels (issue 50): cuda/extensions above compiled a :cuda-sources extension with nvcc
# and launched cuda-raw-kernel's NVRTC kernels on the current stream; run it once more to see the
# cache reused (no nvcc), and log how long that took.
if grep -qE 'cuda/extensions .*Passed' "$out/ctest-cuda.log"; then
  ext_start=$(date +%s%N)
  (cd tests/cuda && XDG_CACHE_HOME="$root/build-gpu/tests/cuda/tmp/cache" "$root/build-gpu/purple" extensions.purple) \
    > /tmp/purple-extensions-cached.log 2>&1
  log "cuda/extensions again from load-inline's cache: rc $?, $(( ($(date +%s%N) - ext_start) / 1000000 )) ms," \
      "$(grep -c compiling /tmp/purple-extensions-cached.log) compiles"
fi

# ---- benchmarks against PyTorch on the same GPU --------------------------------------------------
bench_seconds=$(( $(left) - ${GPU_REST_SECONDS:-120} ))
[ $bench_seconds -gt 200 ] && bench_seconds=200
if [ -f bench/gpu/run.py ] && [ $bench_seconds -gt 30 ]; then
  log "benchmarks (about ${bench_seconds} s)"
  timeout $((bench_seconds + 60)) "$python" bench/gpu/run.py --purple build-gpu/purple --python "$python" \
    --device cuda --seconds "$bench_seconds" --out "$out/bench.md" ${GPU_BENCH_ONLY:+--only "$GPU_BENCH_ONLY"} \
    > "$out/bench.log" 2>&1
  log "benchmarks rc $?"
else
  log "benchmarks skipped (${bench_seconds} s left for them)"
fi

# ---- the rest of the suite in the time left -------------------------------------------------------
rest=$(( $(left) - 15 ))
if [ $rest -gt 30 ]; then
  log "ctest -LE cuda for at most ${rest} s"
  # --stop-time ends the run with CTest's own summary; timeout is the backstop.
  timeout $((rest + 20)) ctest --test-dir build-gpu -LE cuda ${GPU_REST_REGEX:+-R "$GPU_REST_REGEX"} -j 12 --timeout 150 --output-on-failure \
    --stop-time "$(date -d @$(($(date +%s) + rest)) +%H:%M:%S)" > "$out/ctest-rest.log" 2>&1
  log "rest of the suite (rc $?): $(grep -E 'tests passed|tests failed' "$out/ctest-rest.log" | tail -1)"
  grep -E '\*\*\*|Failed|Timeout|Not Run' "$out/ctest-rest.log" | grep -E '^ *[0-9]+ - |Test +#' | head -60 >> "$out/gpu-check.log"
fi

# ---- the results table --------------------------------------------------------------------------
{
  echo "# Purple on a GPU: $(date -u +%Y-%m-%d)"
  echo
  echo "- GPU: ${gpu:-none}"
  echo "- $versions"
  echo "- Purple: $(build-gpu/purple --version), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "- Machine: $(nproc) cores; command: \`bash scripts/gpu-check.sh\` (one device run)"
  echo
  echo "## Tests"
  echo
  echo "- CUDA tests (\`ctest -L cuda\`): $(grep -E 'tests passed|tests failed' "$out/ctest-cuda.log" | tail -1)"
  [ -f "$out/ctest-rest.log" ] && echo "- The rest of the suite (\`ctest -LE cuda\`): $(grep -E 'tests passed|tests failed' "$out/ctest-rest.log" | tail -1)"
  echo
  echo '```'
  grep -E 'Test +#' "$out/ctest-cuda.log"
  echo '```'
  echo
  echo "## Benchmarks (Purple ÷ Python, same GPU, same run)"
  echo
  [ -f "$out/bench.md" ] && cat "$out/bench.md" || echo "(no benchmark table)"
} > "$out/results.md"
log "done in $(($(date +%s) - start)) s"
