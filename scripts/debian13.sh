#!/usr/bin/env bash
# Runs the README's test command (scripts/test.sh) inside a Debian 13 (trixie) root, on a clean
# copy of this tree: the same sources against trixie's LibTorch 2.6, python3-torch 2.6 and
# Python 3.13. Run as root on a Debian machine; exits non-zero when anything fails.
#
#   bash scripts/debian13.sh             make or reuse the root, copy the tree, build, run CTest
#   bash scripts/debian13.sh --prepare   only make the root and install Purple's packages in it
#   bash scripts/debian13.sh --shell     a shell inside the root (the tree is at /src/purple)
#
# The root lives at $PURPLE_DEBIAN13_ROOT (default /var/lib/purple/debian13) and is kept: the
# first run debootstraps it and installs the packages, later runs reuse it. The build directory
# (/src/purple/build) and a ccache (/var/cache/purple-ccache) stay inside the root between runs,
# and the copy of the tree only rewrites files whose contents changed, so a second run rebuilds
# only what changed. Delete the directory to start over.
#
# The copy is every file git knows of in the working tree (tracked and untracked, not ignored):
# a clean clone gives exactly the commit; a working tree with uncommitted edits gives those edits.
# PURPLE_DEBIAN13_HEAD=1 copies the commit (git archive HEAD) instead.
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
target=${PURPLE_DEBIAN13_ROOT:-/var/lib/purple/debian13}
mirror=${PURPLE_DEBIAN13_MIRROR:-http://deb.debian.org/debian}
mode=${1:-test}
case "$mode" in test|--prepare|--shell) ;; *) echo "usage: $0 [--prepare|--shell]" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "debian13.sh: run as root (debootstrap, mount, chroot)" >&2; exit 2; }

# Mounts made below are private to this process and vanish with it (unshare), whatever kills it;
# the trap unmounts them in order as well.
if [ -z "${PURPLE_DEBIAN13_NS:-}" ]; then
  export PURPLE_DEBIAN13_NS=1
  exec unshare --mount --propagation private bash "$0" "$@"
fi

log() { printf '[debian13 %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
elapsed() { echo $(( $(date +%s) - $1 ))s; }

host_tools=()
command -v debootstrap >/dev/null || host_tools+=(debootstrap)
command -v rsync >/dev/null || host_tools+=(rsync)
if [ ${#host_tools[@]} -gt 0 ]; then
  log "installing on the host: ${host_tools[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${host_tools[@]}" \
    || { apt-get update -q && DEBIAN_FRONTEND=noninteractive \
           apt-get install -y -q --no-install-recommends "${host_tools[@]}"; }
fi

case "$target" in
  /*/*) ;;
  *) echo "debian13.sh: PURPLE_DEBIAN13_ROOT must be an absolute path below a directory, got '$target'" >&2; exit 2 ;;
esac
if [ -e "$target" ] && [ ! -f "$target/.purple-root" ] && [ -n "$(ls -A "$target" 2>/dev/null)" ]; then
  echo "debian13.sh: $target exists and is not a root this script made; remove it or set PURPLE_DEBIAN13_ROOT" >&2
  exit 2
fi
mkdir -p "$(dirname "$target")"
# One run at a time per root (CI and a developer on the same machine).
exec 9>"$target.lock"
flock 9

# Everything mounted under a path, deepest first.
mounts_under() { awk -v p="$1" '$2 == p || index($2, p "/") == 1 { print $2 }' /proc/mounts | sort -r; }
unmount_all() {
  local m
  for m in $(mounts_under "$1"); do umount -l "$m" 2>/dev/null || true; done
}

# --- 1. the root -------------------------------------------------------------------------------
if [ ! -f "$target/.purple-root" ]; then
  partial="$target.partial"
  unmount_all "$partial"
  if [ -n "$(mounts_under "$partial")" ]; then echo "debian13.sh: $partial still has mounts" >&2; exit 1; fi
  rm -rf --one-file-system "$partial"
  t0=$(date +%s)
  log "debootstrap trixie into $partial ($mirror)"
  debootstrap --variant=minbase --include=ca-certificates,ccache,git trixie "$partial" "$mirror"
  unmount_all "$partial"
  cat > "$partial/etc/apt/sources.list" <<EOF
deb $mirror trixie main
deb $mirror trixie-updates main
deb http://deb.debian.org/debian-security trixie-security main
EOF
  # Packages only: no documentation or man pages in the root.
  cat > "$partial/etc/dpkg/dpkg.cfg.d/01-purple-nodoc" <<'EOF'
path-exclude /usr/share/doc/*
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
EOF
  touch "$partial/.purple-root"
  [ -d "$target" ] && rmdir "$target"   # empty (checked above)
  mv "$partial" "$target"
  log "root made in $(elapsed "$t0")"
else
  log "reusing the root at $target"
fi

# --- 2. mounts ---------------------------------------------------------------------------------
# Processes a test left running inside the root (a kernel, a rank) end with the run: this
# script started them, and they would keep the root's mounts alive.
stop_leftovers() {
  local p pids=()
  for p in /proc/[0-9]*; do
    [ "$(readlink "$p/root" 2>/dev/null)" = "$target" ] && pids+=("${p#/proc/}")
  done
  [ ${#pids[@]} -eq 0 ] && return 0
  kill "${pids[@]}" 2>/dev/null || true
  sleep 1
  kill -9 "${pids[@]}" 2>/dev/null || true
}
cleanup() { stop_leftovers; unmount_all "$target"; }
trap cleanup EXIT
mount -t proc proc "$target/proc"
mount --bind /dev "$target/dev"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$target/dev/pts" 2>/dev/null \
  || mount --bind /dev/pts "$target/dev/pts"
mount -t tmpfs -o mode=1777 shm "$target/dev/shm"
mount -t sysfs -o ro sysfs "$target/sys"
mount -t tmpfs -o mode=1777 tmp "$target/tmp"
cp -L /etc/resolv.conf "$target/etc/resolv.conf" 2>/dev/null || true
cp /etc/hosts "$target/etc/hosts" 2>/dev/null || true

# A clean environment inside, but for the host's proxy settings (apt inside the root uses them).
proxies=()
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
  [ -n "${!v:-}" ] && proxies+=("$v=${!v}")
done
# A host whose egress goes through a proxy with its own certificate authority trusts it in its
# bundle; npm inside the root (tests/text's gpt-3-encoder) needs the same trust, so the root gets
# a copy of the host's bundle beside its own, named by NODE_EXTRA_CA_CERTS.
host_ca=${NODE_EXTRA_CA_CERTS:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}
if [ -f "$host_ca" ] && cp -L "$host_ca" "$target/etc/purple-host-ca.crt" 2>/dev/null; then
  proxies+=("NODE_EXTRA_CA_CERTS=/etc/purple-host-ca.crt")
fi
in_root() {
  chroot "$target" /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 ${proxies[@]+"${proxies[@]}"} \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    CCACHE_DIR=/var/cache/purple-ccache CCACHE_MAXSIZE=5G \
    CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime \
    CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache \
    PURPLE_WERROR="${PURPLE_WERROR:-OFF}" \
    "$@"
}

# --- 3. the tree -------------------------------------------------------------------------------
stage=$(mktemp -d "$target/tmp/stage.XXXXXX")
if [ "${PURPLE_DEBIAN13_HEAD:-0}" = 1 ]; then
  git -C "$src" archive --format=tar HEAD | tar -x -C "$stage"
  log "copying commit $(git -C "$src" rev-parse --short HEAD)"
else
  (cd "$src" && git ls-files -z --cached --others --exclude-standard \
     | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
     | tar --null -T - -c) | tar -x -C "$stage"
  dirty=$(git -C "$src" status --porcelain --untracked-files=no | wc -l)
  log "copying the working tree at $(git -C "$src" rev-parse --short HEAD) ($dirty files changed)"
fi
mkdir -p "$target/src/purple"
# By contents, not times: a file whose contents did not change keeps its old time, so the build
# kept in the root recompiles only what changed. The build directory is not touched.
rsync -rlp --checksum --delete --exclude=/build/ "$stage/" "$target/src/purple/"
rm -rf "$stage"

# --- 4. run ------------------------------------------------------------------------------------
if [ "$mode" = --shell ]; then
  in_root bash -c 'cd /src/purple && exec bash -i'
  exit $?
fi
if [ "$mode" = --prepare ]; then
  t0=$(date +%s)
  in_root bash /src/purple/scripts/install-deps.sh   # its list is the root's too (neovim, emacs ... for tests/editors/)
  log "packages ready in $(elapsed "$t0")"
  exit 0
fi

logfile="$target/var/log/purple-test.log"
t0=$(date +%s)
log "running scripts/test.sh inside the root (log: $logfile)"
set +e
in_root bash -c 'cd /src/purple && bash scripts/test.sh' 2>&1 | tee "$logfile"
status=${PIPESTATUS[0]}
set -e
log "scripts/test.sh in the root took $(elapsed "$t0"), exit status $status"
echo "== Debian 13: $(in_root /src/purple/build/purple --version 2>/dev/null || echo 'purple not built')"
echo "== Debian 13: CTest summary"
summary=$(grep -n '^[0-9]*% tests passed' "$logfile" | tail -1 | cut -d: -f1)
if [ -n "$summary" ]; then
  tail -n +"$summary" "$logfile"
else
  echo "(CTest did not run; see the log above)"
  [ "$status" != 0 ] || status=1
fi
exit "$status"
