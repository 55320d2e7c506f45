#!/usr/bin/env python3
"""Plots drawn by PLplot through Purple, looked at with PIL: each PNG has the size asked for and
is not blank (enough non-white pixels, the series' colours present where they should be); SVG
output is SVG with drawing in it; bad input is a Purple error, not a crash; the purple command
shows a plot as a file whose path it prints.

usage: check_plots.py PURPLE"""
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

from PIL import Image
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checks import check, finish  # noqa: E402

purple = os.path.abspath(sys.argv[1])
tmp = tempfile.mkdtemp(prefix="purple-plot-")


script = os.path.join(tmp, "plots.purple")
with open(script, "w") as f:
    f.write(r'''
(manual-seed 0)
(define xs (tensor-linspace 0 10 200))
(plot xs (tensor-sin xs) :title "sine" :x-label "x" :y-label "sin x" :file "line.png")
(plot (series xs (tensor-sin xs) :label "sin")
      (series xs (tensor-cos xs) :label "cos" :color "red")
      (series (tensor-linspace 0 10 20) (tensor-randn 20) :kind 'scatter :label "noise" :color "#2ca02c")
      :title "two lines and points" :legend 'lower-left :width 640 :height 400 :file "multi.png")
(scatter-plot (tensor-randn 300) (tensor-randn 300) :title "scatter" :file "scatter.png")
(histogram-plot (tensor-randn 5000) :bins 40 :title "histogram" :color "purple" :file "hist.png")
(plot '(1 10 100 1000) :log-y #t :title "log" :file "log.png")
(plot-images (tensor-rand 12 1 28 28) :titles (iota 12) :columns 6 :title "images" :file "grid.png")
(plot-images (tensor-rand 4 3 16 16) :columns 2 :file "rgb.png")
(define history '(((epoch . 1) (loss . 0.9) (val-loss . 1.0) (val-accuracy . 0.6) (steps . 10) (seconds . 1.) (lr . 0.1))
                  ((epoch . 2) (loss . 0.5) (val-loss . 0.7) (val-accuracy . 0.75) (steps . 10) (seconds . 1.) (lr . 0.1))
                  ((epoch . 3) (loss . 0.3) (val-loss . 0.6) (val-accuracy . 0.8) (steps . 10) (seconds . 1.) (lr . 0.1))))
(plot-history history :file "history.png")
(save-plot (plot '(3 1 2) :title "svg") "line.svg")
(subplots (list (plot '(1 2 3) :title "a") (histogram-plot '(1 2 2 3 3 3) :title "b")) :title "together" :file "subplots.png")
(define p (plot '(1 2 3)))
(display (plot? p)) (newline)
(display (bytevector? (plot->png p))) (newline)
(define (error-text thunk) (guard (e (#t (error-object-message e))) (thunk) "no error"))
(for-each (lambda (t) (display (error-text t)) (newline))
  (list (lambda () (plot '(1 2) '(1 2 3)))
        (lambda () (plot '(1 2) :color "nocolor"))
        (lambda () (plot '(1 2) :kind 'pie))
        (lambda () (save-plot p "x.jpeg"))
        (lambda () (plot '(1 2) :width 10))
        (lambda () (plot '(1 a)))
        (lambda () (plot-images (tensor-rand 2 5 5 5)))
        (lambda () (plot-history '(1 2)))
        (lambda () (plot '(1 2) :legend 'middle))
        (lambda () (plot '(1 2) :log-y #t :y-range '(0 1)))))
''')
run = subprocess.run([purple, script], cwd=tmp, capture_output=True, text=True)
check("the plotting script runs", run.returncode == 0, run.stderr)
lines = run.stdout.splitlines()
check("plot? and plot->png", lines[:2] == ["#t", "#t"], run.stdout)
errors = lines[2:]
expect = ["2 x values but 3 y values", ":color must be", ":kind is line, scatter or histogram", "must end in .png or .svg",
          ":width and :height must be between", "must be a real number", "an image is", "expected the history",
          ":legend is", "log axis must be positive"]
for want, got in zip(expect, errors):
    check(f"bad input is a clear error: {want}", want in got, got)
check("every bad input reported", len(errors) == len(expect), str(errors))


def look(name, size, colours=(), min_ink=0.01):
    path = os.path.join(tmp, name)
    if not os.path.exists(path):
        check(f"{name} written", False, "missing")
        return
    im = Image.open(path).convert("RGB")
    check(f"{name}: {size[0]}x{size[1]} pixels", im.size == size, str(im.size))
    px = im.load()
    w, h = im.size
    ink = sum(1 for x in range(0, w, 2) for y in range(0, h, 2) if px[x, y] != (255, 255, 255)) / ((w // 2) * (h // 2))
    check(f"{name}: not blank ({ink:.1%} drawn)", ink >= min_ink, f"{ink:.4f}")
    pixels = set(im.getdata())
    for c in colours:
        near = any(abs(p[0] - c[0]) + abs(p[1] - c[1]) + abs(p[2] - c[2]) < 30 for p in pixels)
        check(f"{name}: has colour {c}", near, "")


blue, orange, green, red, purple_c = (31, 119, 180), (255, 127, 14), (44, 160, 44), (214, 39, 40), (148, 103, 189)
look("line.png", (800, 500), [blue])
look("multi.png", (640, 400), [blue, red, green])
look("scatter.png", (800, 500), [blue])
look("hist.png", (800, 500), [purple_c], min_ink=0.05)
look("log.png", (800, 500), [blue])
look("grid.png", (660, 240 + 40), min_ink=0.2)
look("rgb.png", (220, 240), min_ink=0.2)
look("history.png", (920, 350), [blue, orange])
look("subplots.png", (960, 400), [blue])

svg = os.path.join(tmp, "line.svg")
try:
    root = ET.parse(svg).getroot()
    paths = [e for e in root.iter() if e.tag.endswith("path")]
    check("line.svg is SVG with drawing", root.tag.endswith("svg") and len(paths) > 5, f"{root.tag} {len(paths)}")
except Exception as e:
    check("line.svg parses", False, str(e))

# The purple command: a plot as a REPL result is written to a file whose path is printed.
env = dict(os.environ, PURPLE_FIGURE_DIR=os.path.join(tmp, "figures"))
run = subprocess.run([purple], input="(plot '(1 4 9) :title \"repl\")\n(show (plot '(2 3)))\n", cwd=tmp, env=env,
                     capture_output=True, text=True)
paths = [w for line in run.stdout.splitlines() for w in line.split() if w.endswith(".png")]
check("REPL: plot results are files whose paths are printed", run.returncode == 0 and len(paths) == 2
      and all(os.path.exists(p) and Image.open(p).size == (800, 500) for p in paths), run.stdout + run.stderr)
finish()
