"""Positions as LSP 3.17 counts them: `purple --lsp` negotiates positionEncoding, with UTF-16
code units (what Neovim and VS Code count) when the client offers nothing, and converts both
ways: the columns clients send (hover after an emoji) and the ones it sends (diagnostics,
symbols). Usage: python3 lsp_positions.py PURPLE"""
import os
import sys
import tempfile

from lsp_common import Client, check, failed, position

ONE = '(define s "\U0001F600")(display zz)\n'
FOUR = '(define s "\U0001F600\U0001F600\U0001F600\U0001F600")(car s)\n(define (after-emoji) s)\n'


def units(text, encoding):
    if encoding == "utf-8":
        return len(text.encode("utf-8"))
    if encoding == "utf-16":
        return len(text.encode("utf-16-le")) // 2
    return len(text)


def session(purple, env, tmp, offered, expected):
    c = Client(purple, env)
    capabilities = {} if offered is None else dict(general=dict(positionEncodings=offered))
    init = c.start("file://" + tmp, capabilities)
    got = init["result"]["capabilities"].get("positionEncoding")
    check(f"offered {offered}: the server announces {expected}", got == expected, got)
    uri = "file://" + os.path.join(tmp, "emoji.purple")
    diags = c.open(uri, ONE)
    zz = [d for d in diags if "zz" in d["message"]]
    start = units(ONE[:ONE.index("zz")], expected)
    check(f"{expected}: the diagnostic for zz starts at column {start}",
          len(zz) == 1 and zz[0]["range"]["start"] == dict(line=0, character=start)
          and zz[0]["range"]["end"] == dict(line=0, character=start + 2), zz)
    uri4 = "file://" + os.path.join(tmp, "emoji4.purple")
    c.open(uri4, FOUR)
    col = units(FOUR[:FOUR.index("car")], expected) + 1
    r = c.request("textDocument/hover", position(uri4, 0, col))
    value = (r.get("result") or {}).get("contents", {}).get("value", "")
    check(f"{expected}: a hover after four emoji answers for car", "(car pair)" in value, value[:80])
    r = c.request("textDocument/documentSymbol", dict(textDocument=dict(uri=uri4)))
    s = [x for x in r["result"] if x["name"] == "s"]
    end = units(FOUR[:FOUR.index("(car")], expected)
    check(f"{expected}: a symbol's range ends after the emoji", s and s[0]["range"]["end"] == dict(line=0, character=end),
          s and s[0]["range"])
    r = c.request("textDocument/definition", position(uri4, 0, units(FOUR[:FOUR.index("(car s)") + 5], expected)))
    check(f"{expected}: definition of s from after the emoji", (r.get("result") or {}).get("range", {}).get("start")
          == dict(line=0, character=8), r.get("result"))
    check(f"{expected}: shutdown and exit", c.stop() == 0)


def main():
    purple = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "cache"))
        session(purple, env, tmp, None, "utf-16")                 # Neovim 0.7, eglot: nothing offered
        session(purple, env, tmp, ["utf-16"], "utf-16")
        session(purple, env, tmp, ["utf-32", "utf-16"], "utf-32")
        session(purple, env, tmp, ["utf-8", "utf-16"], "utf-8")
        session(purple, env, tmp, ["latin-1"], "utf-16")          # none it speaks: the default
    print(f"{failed()} failed")
    return 1 if failed() else 0


if __name__ == "__main__":
    sys.exit(main())
