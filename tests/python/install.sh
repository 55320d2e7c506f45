#!/usr/bin/env bash
# The Python bridge as installed by `cmake --install`: the purple package lands where python3
# looks for packages under the prefix (its sysconfig scheme), imports from there without
# PYTHONPATH tricks or the build tree, and the installed `purple` command finds the plugin.
# usage: install.sh BUILD_DIR PYTHON3
set -euo pipefail
build=$1
python=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
# Where this python3 puts packages under $prefix (its default scheme: /usr/local -> /usr/local/lib/python3.X/dist-packages).
site=$("$python" -c "import os, sys, sysconfig; p = sysconfig.get_paths(); print(os.path.join(sys.argv[1], os.path.relpath(p['platlib'], p['data'])))" "$prefix")
[ -f "$site/purple/__init__.py" ] || { echo "FAIL: purple/__init__.py is not in $site"; find "$prefix" -name '__init__.py'; exit 1; }
ls "$site"/purple/_purple*.so > /dev/null || { echo "FAIL: purple/_purple*.so is not in $site"; exit 1; }

# Away from the build tree, with the installed package only: the extension must find libpurple
# and the plugin in the prefix (its RUNPATH), not in the build directory.
cd "$tmp"
"$python" - "$site" "$build" <<'EOF'
import os, sys
sys.path.insert(0, sys.argv[1])   # ahead of a purple installed system-wide
import torch, purple
build = os.path.realpath(sys.argv[2])
assert os.path.realpath(purple.__file__).startswith(os.path.realpath(sys.argv[1])), purple.__file__
p = purple.Interpreter()
assert p.eval("(+ 1 2)") == 3
t = torch.arange(4.)
p["t"] = t
assert p.eval("(tensor-data-ptr t)") == t.data_ptr()
assert p.eval('(py-eval "6 * 7")') == 42
maps = open("/proc/self/maps").read()
for lib in ("libpurple.so", "libpurple_python.so"):
    paths = {line.split()[-1] for line in maps.splitlines() if os.path.basename(line.split()[-1]).startswith(lib)}
    assert paths and not any(os.path.realpath(x).startswith(build + "/") for x in paths), (lib, paths)
print("ok: import purple from", sys.argv[1])
EOF

out=$("$prefix/bin/purple" -e '(import (purple python)) (py-eval "6 * 7")')
[ "$out" = 42 ] || { echo "FAIL: the installed purple printed '$out'"; exit 1; }
echo "ok: the installed purple runs (purple python)"
