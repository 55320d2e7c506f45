#!/bin/bash
# (import (purple python)) says why when the bridge cannot be loaded, and Purple goes on.
purple="$1"
out=$(PURPLE_PYTHON_PLUGIN=/nonexistent/libpurple_python.so "$purple" -e '(guard (e (#t (display (condition/report-string e)) (newline) (quote recovered))) (eval (quote (import (purple python)))))' 2>&1)
echo "$out"
grep -q "(purple python) is not available: cannot load the Python bridge /nonexistent/libpurple_python.so" <<<"$out" || { echo "FAIL: no reason given"; exit 1; }
grep -q "recovered" <<<"$out" || { echo "FAIL: the error was not catchable"; exit 1; }
# Without the import nothing of Python is loaded: Purple runs as before.
out=$(PURPLE_PYTHON_PLUGIN=/nonexistent/libpurple_python.so "$purple" -e '(+ 1 2)' 2>&1)
[ "$out" = "3" ] || { echo "FAIL: purple -e (+ 1 2) printed $out"; exit 1; }
# export-onnx needs the bridge, and says so.
out=$(PURPLE_PYTHON_PLUGIN=/nonexistent/libpurple_python.so "$purple" -e '(guard (e (#t (display (condition/report-string e)) (newline))) (export-onnx (linear 2 2) (list (tensor-ones 1 2)) "/nonexistent/m.onnx"))' 2>&1)
echo "$out"
grep -q "export-onnx needs the Python bridge.*not available" <<<"$out" || { echo "FAIL: export-onnx did not say the bridge is missing"; exit 1; }
echo "ok"
