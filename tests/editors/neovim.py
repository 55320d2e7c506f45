"""The Neovim recipes of docs/editors.md, each run in `nvim --headless` (Debian's neovim) on the
versions it is for, against `purple --lsp`: tests/editors/neovim-test.lua opens Purple files and
checks filetypes, one server for all buffers, diagnostics' columns after an emoji, hover and
completion. Usage: neovim.py PURPLE ROOT"""
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

A = '''(define s "\U0001F600")(display zz)
(define (scale x factor) "Multiplies X by FACTOR." (* x factor))
(display (scale 2))
(tensor-mat'''
B = "(linear 4 3 :b"


def version():
    first = subprocess.run(["nvim", "--version"], capture_output=True, text=True, timeout=60).stdout.splitlines()[0]
    m = re.search(r"v(\d+)\.(\d+)", first)
    return (int(m.group(1)), int(m.group(2))), first


def main():
    purple, root = os.path.abspath(sys.argv[1]), sys.argv[2]
    with open(os.path.join(root, "docs", "editors.md")) as f:
        doc = f.read()
    recipes = re.findall(r"<!-- neovim-recipe (\d+)\.(\d+) -->\s*```lua\n(.*?)```", doc, re.S)
    have, banner = version()
    print(banner)
    failures = 0
    if len(recipes) != 2:
        print(f"FAIL: docs/editors.md should hold the 0.7 and the 0.8 recipe, found {len(recipes)}")
        return 1
    for major, minor, recipe in recipes:
        need = (int(major), int(minor))
        # the 0.7 recipe runs on later Neovims too (until 0.11 deprecates start_client)
        if have < need or (need == (0, 7) and have >= (0, 11)):
            print(f"skipped: the {major}.{minor} recipe on Neovim {have[0]}.{have[1]}")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            project = os.path.join(tmp, "project")
            bin_dir = os.path.join(tmp, "bin")
            os.makedirs(project)
            os.makedirs(bin_dir)
            os.symlink(purple, os.path.join(bin_dir, "purple"))
            with open(os.path.join(project, "a.purple"), "w") as f:
                f.write(A + "\n")
            with open(os.path.join(project, "b.purple"), "w") as f:
                f.write(B + "\n")
            init = os.path.join(tmp, "init.lua")
            with open(init, "w") as f:
                f.write(recipe)
            out = os.path.join(tmp, "results.txt")
            env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""),
                       PURPLE_NVIM_DIR=project, PURPLE_NVIM_OUT=out, HOME=tmp,
                       XDG_CONFIG_HOME=os.path.join(tmp, "config"), XDG_DATA_HOME=os.path.join(tmp, "data"),
                       XDG_STATE_HOME=os.path.join(tmp, "state"), XDG_CACHE_HOME=os.path.join(tmp, "cache"))
            try:
                r = subprocess.run(["nvim", "--headless", "-i", "NONE", "-u", init,
                                    "-c", "luafile " + os.path.join(HERE, "neovim-test.lua")],
                                   cwd=project, env=env, capture_output=True, text=True, timeout=240)
                log = r.stdout + r.stderr
            except subprocess.TimeoutExpired as e:
                log = f"nvim timed out: {e}"
            results = open(out).read().splitlines() if os.path.exists(out) else []
            print(f"-- the {major}.{minor} recipe on Neovim {have[0]}.{have[1]}")
            for line in results:
                print(line)
            bad = [l for l in results if not l.startswith("ok:")]
            if bad or not results:
                failures += len(bad) or 1
                print(log[-3000:])
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
