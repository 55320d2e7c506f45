#!/usr/bin/env bash
# The example notebook executed by `jupyter nbconvert` (the command users type) with the Purple kernel, on a small subset of the data
# (PURPLE_NOTEBOOK_QUICK=1): no cell may fail, and the saved notebook must hold the pictures
# (image/png outputs) and fit's progress display, updated in place to its final state.
# usage: notebook.sh PURPLE NOTEBOOK
set -u
purple=$(readlink -f "$1")
notebook=$(readlink -f "$2")
tests=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$purple" --install-kernel --prefix "$tmp" > /dev/null || { echo "FAIL: --install-kernel"; exit 1; }
cp "$notebook" "$tmp/notebook.ipynb"
cd "$tmp"
JUPYTER_PATH="$tmp/share/jupyter" JUPYTER_RUNTIME_DIR="$tmp/runtime" PURPLE_NOTEBOOK_QUICK=1 \
  jupyter nbconvert --to notebook --execute --ExecutePreprocessor.timeout=600 \
  --output executed.ipynb notebook.ipynb || { echo "FAIL: nbconvert --execute"; exit 1; }
/usr/bin/python3 - "$tmp/executed.ipynb" "$tests" <<'PY'
import base64, sys
import nbformat
sys.path.insert(0, sys.argv[2])
from checks import check, finish
nb = nbformat.read(sys.argv[1], as_version=4)
code = [c for c in nb.cells if c.cell_type == "code"]
errors = [o for c in code for o in c.outputs if o.output_type == "error"]
check("no cell failed", not errors, str(errors[:1]))
check("every code cell ran", all(c.execution_count for c in code), str([c.execution_count for c in code]))
pngs = [base64.b64decode(o.data["image/png"]) for c in code for o in c.outputs
        if o.output_type in ("display_data", "execute_result") and "image/png" in o.get("data", {})]
check("image/png outputs: the sample grid, a picture, loss curves, predictions, a histogram", len(pngs) >= 5, str(len(pngs)))
check("every PNG is a PNG of some size", all(p[:8] == b"\x89PNG\r\n\x1a\n" and len(p) > 200 for p in pngs),
      str([len(p) for p in pngs]))
fit_cell = [c for c in code if "(fit model" in c.source][0]
progress = [o for o in fit_cell.outputs if o.output_type == "display_data" and "purple-fit" in o.data.get("text/html", "")]
check("fit shows one progress display", len(progress) == 1, str([o.output_type for o in fit_cell.outputs]))
if progress:
    html = progress[0].data["text/html"]
    check("... updated in place to the table of both epochs", html.count("<tr><td") == 2 and "val-accuracy" in html, html[:400])
    check("... with no stream output besides", not [o for o in fit_cell.outputs if o.output_type == "stream"], str(fit_cell.outputs))
tables = [o for c in code for o in c.outputs if o.output_type == "execute_result" and "<table" in o.data.get("text/html", "")]
check("a tensor shown as an HTML table", tables, "")
finish()
PY
