"""Every option `purple --help` lists is in the README's list of the `purple` command's options,
so the README cannot fall behind the command. Usage: readme_options.py ROOT PURPLE"""
import re
import subprocess
import sys


def main():
    root, purple = sys.argv[1], sys.argv[2]
    usage = subprocess.run([purple, "--help"], capture_output=True, text=True, timeout=60).stdout
    # the option words: at the start of a help line, or in [--a|--b] alternatives
    options = set()
    for line in usage.splitlines():
        if line.startswith("environment:") or line.startswith("             "):
            continue
        options.update(re.findall(r"(?:^\s+|[\[|])(--?[A-Za-z][\w-]*)", line))
    with open(f"{root}/README.md") as f:
        readme = f.read()
    section = readme.split("## The `purple` command", 1)
    if len(section) < 2:
        print("FAIL: README.md has no section '## The `purple` command'")
        return 1
    block = section[1].split("```", 2)[1]
    missing = sorted(o for o in options if not re.search(r"(?<![\w-])" + re.escape(o) + r"(?![\w-])", block))
    print(f"{len(options)} options in purple --help: {' '.join(sorted(options))}")
    if missing:
        print("FAIL: not in the README's list of options:", " ".join(missing))
        return 1
    print("all in the README")
    return 0


if __name__ == "__main__":
    sys.exit(main())
