"""Drives `purple --lsp` over pipes as an editor would (JSON-RPC 2.0 with Content-Length framing):
initialize, didOpen (diagnostics), completion (names and keywords, the file's own procedures'
too), hover (with docstrings), signature help (parameters, keyword arguments, brackets in
strings), definition (in the file, of record accessors and define-values names, and in the
prelude), document symbols (whose range is the whole form), didChange, shutdown and exit.
Usage: python3 lsp_client.py PURPLE"""
import os
import sys
import tempfile

from lsp_common import Client, check, failed, position

SOURCE = """(define (scale x factor)
  "Multiplies X by FACTOR."
  (* x factor))
(define model (sequential (linear 4 3) (relu)))
(display (scale 2 3))
(display (scale 2))
(display undefined-name)
(linear 4 3 :bias #f)
(tensor-matmul (tensor-zeros 2 3) (tensor-zeros 4 5))
(map scale '(1 2))
"""


OWN = """(define (train model :key (lr 0.01) (epochs 1) verbose)
  "Trains MODEL for EPOCHS epochs at learning rate LR."
  model)
(define (scale-by x factor) (* x factor))
(define-record-type point (make-point x y) point? (x point-x) (y point-y set-point-y!))
(define-values (quot rem) (floor/ 7 2))
(train x :l)
(display (scale-by ")" 2))
(display (scale-by #\\( 2)) ; a comment with a ( in it
(train x :epochs 3 :lr )
(linear 4 3 :bias )
(point-x (make-point 1 2))
(display quot)
(define (helper . args)
  (apply + args))
"""


def line_of(text, needle, nth=0):
    lines = text.split("\n")
    found = [i for i, l in enumerate(lines) if needle in l]
    return found[nth], lines[found[nth]]


def own_features(c, tmp):
    """Keyword completion of the file's own procedures, signature help (parameters, keywords,
    brackets inside strings, characters and comments), hover docstrings, record accessors and
    define-values names, and symbols whose range is the whole form."""
    uri = "file://" + os.path.join(tmp, "own.purple")
    c.open(uri, OWN)
    n, text = line_of(OWN, "(train x :l)")
    r = c.request("textDocument/completion", position(uri, n, text.index(":l") + 2))
    labels = sorted(i["label"] for i in r["result"]["items"])
    check("completion: keywords of the file's own procedure", labels == [":lr"], labels)
    r = c.request("textDocument/completion", position(uri, n, text.index(":l") + 1))
    labels = sorted(i["label"] for i in r["result"]["items"])
    check("completion: all its keywords after :", labels == [":epochs", ":lr", ":verbose"], labels)

    n, text = line_of(OWN, '(display (scale-by ")" 2))')
    r = c.request("textDocument/signatureHelp", position(uri, n, text.index("2)")))
    sig = (r.get("result") or {}).get("signatures", [{}])[0]
    check("signatureHelp: a bracket inside a string does not hide the call",
          sig.get("label") == "(scale-by x factor)", r.get("result"))
    params = sig.get("parameters")
    check("signatureHelp: a parameters array",
          isinstance(params, list) and [sig["label"][p["label"][0]:p["label"][1]] for p in params] == ["x", "factor"],
          params)
    check("signatureHelp: the second argument is active", r["result"].get("activeParameter") == 1, r["result"])
    n, text = line_of(OWN, "(display (scale-by #\\( 2))")
    r = c.request("textDocument/signatureHelp", position(uri, n, text.index(" 2)") + 1))
    check("signatureHelp: a #\\( character does not open a call",
          (r.get("result") or {}).get("signatures", [{}])[0].get("label") == "(scale-by x factor)", r.get("result"))
    r = c.request("textDocument/signatureHelp", position(uri, n + 1, 0))
    check("signatureHelp: nothing after a comment's bracket", r.get("result") is None, r.get("result"))

    n, text = line_of(OWN, "(train x :epochs 3 :lr )")
    r = c.request("textDocument/signatureHelp", position(uri, n, text.index(":lr ") + 4))
    res = r.get("result") or {}
    sig = res.get("signatures", [{}])[0]
    labels = [sig["label"][p["label"][0]:p["label"][1]] for p in sig.get("parameters", [])]
    active = res.get("activeParameter")
    check("signatureHelp: a keyword argument's value makes its keyword active",
          active is not None and active < len(labels) and labels[active].startswith("(lr"), (labels, active))
    r = c.request("textDocument/signatureHelp", position(uri, n, text.index(" 3") + 2))
    res = r.get("result") or {}
    active = res.get("activeParameter")
    check("signatureHelp: ... :epochs's value too", active is not None and active < len(labels)
          and labels[active].startswith("(epochs"), (labels, active))
    n, text = line_of(OWN, "(linear 4 3 :bias )")
    r = c.request("textDocument/signatureHelp", position(uri, n, text.index(":bias ") + 6))
    res = r["result"]
    sig = res["signatures"][0]
    labels = [sig["label"][p["label"][0]:p["label"][1]] for p in sig["parameters"]]
    check("signatureHelp: a builtin's keyword is active by name, not position",
          labels[res["activeParameter"]].startswith("(bias"), (labels, res["activeParameter"]))

    r = c.request("textDocument/hover", position(uri, 0, 10))
    value = (r.get("result") or {}).get("contents", {}).get("value", "")
    check("hover: the file's own procedure shows its docstring",
          "(train model :key (lr 0.01) (epochs 1) verbose)" in value and "Trains MODEL for EPOCHS" in value, value)
    n, text = line_of(OWN, "(point-x (make-point 1 2))")
    r = c.request("textDocument/hover", position(uri, n, 3))
    value = (r.get("result") or {}).get("contents", {}).get("value", "")
    check("hover: a record accessor", "(point-x point)" in value, value)
    r = c.request("textDocument/definition", position(uri, n, 3))
    loc = r.get("result") or {}
    rec_line, rec_text = line_of(OWN, "(define-record-type point")
    check("definition: a record accessor", loc.get("range", {}).get("start") == dict(line=rec_line, character=rec_text.index("point-x")),
          loc)
    n, text = line_of(OWN, "(display quot)")
    r = c.request("textDocument/definition", position(uri, n, text.index("quot") + 1))
    loc = r.get("result") or {}
    dv_line, dv_text = line_of(OWN, "(define-values (quot rem)")
    check("definition: a define-values name", loc.get("range", {}).get("start") == dict(line=dv_line, character=dv_text.index("quot")),
          loc)
    r = c.request("textDocument/hover", position(uri, n, text.index("quot") + 1))
    check("hover: a define-values name", "quot" in ((r.get("result") or {}).get("contents", {}).get("value", "")), r.get("result"))

    r = c.request("textDocument/documentSymbol", dict(textDocument=dict(uri=uri)))
    symbols = {s["name"]: s for s in r["result"]}
    check("documentSymbol: record names and define-values names",
          all(k in symbols for k in ("point", "make-point", "point?", "point-x", "point-y", "set-point-y!", "quot", "rem")),
          sorted(symbols))
    train = symbols.get("train", {})
    check("documentSymbol: the range covers the whole form",
          train.get("range") == dict(start=dict(line=0, character=0), end=dict(line=2, character=8)), train.get("range"))
    check("documentSymbol: the selection range is the name",
          train.get("selectionRange") == dict(start=dict(line=0, character=9), end=dict(line=0, character=14)),
          train.get("selectionRange"))
    vision = "(import (purple vision))\n(define net (resnet18 :num-classes 3))\n"
    vuri = "file://" + os.path.join(tmp, "vision.purple")
    c.open(vuri, vision)
    r = c.request("textDocument/hover", position(vuri, 1, 15))
    value = (r.get("result") or {}).get("contents", {}).get("value", "")
    check("hover: a name of a built-in library", "(resnet18 :key (num-classes 1000))" in value and "ResNet-18" in value, value)
    r = c.request("textDocument/signatureHelp", position(vuri, 1, 36))
    res = r.get("result") or {}
    sig = (res.get("signatures") or [{}])[0]
    labels = [sig["label"][p["label"][0]:p["label"][1]] for p in sig.get("parameters", [])]
    check("signatureHelp: a procedure of a built-in library, its keyword active",
          labels and res.get("activeParameter") is not None and res["activeParameter"] < len(labels)
          and labels[res["activeParameter"]].startswith("(num-classes"), (sig.get("label"), labels, res.get("activeParameter")))
    r = c.request("textDocument/completion", position(vuri, 1, 27))
    labels = [i["label"] for i in r["result"]["items"]]
    check("completion: keywords of an imported procedure", labels == [":num-classes"], labels)
    helper = symbols.get("helper", {})
    h_line, _ = line_of(OWN, "(define (helper . args)")
    check("documentSymbol: ... of a form over two lines", helper.get("range", {}).get("end") == dict(line=h_line + 1, character=17),
          helper.get("range"))


def main():
    purple = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "cache"))
        path = os.path.join(tmp, "sample.purple")
        with open(path, "w") as f:
            f.write(SOURCE)
        uri = "file://" + path
        c = Client(purple, env)
        init = c.request("initialize", dict(processId=os.getpid(), rootUri="file://" + tmp, capabilities={}))
        caps = init["result"]["capabilities"]
        check("initialize: capabilities", all(k in caps for k in (
            "completionProvider", "hoverProvider", "definitionProvider", "signatureHelpProvider",
            "documentSymbolProvider", "textDocumentSync")), caps)
        c.notify("initialized", {})
        c.notify("textDocument/didOpen", dict(textDocument=dict(uri=uri, languageId="purple", version=1, text=SOURCE)))
        diags = c.diagnostics(uri)
        got = sorted((d["range"]["start"]["line"], d["message"]) for d in diags)
        check("diagnostics: arity on line 6", any(l == 5 and "scale needs 2 arguments, got 1" in m for l, m in got), got)
        check("diagnostics: unbound variable on line 7", any(l == 6 and "unbound variable: undefined-name" in m for l, m in got), got)
        check("diagnostics: shape mismatch on line 9", any(l == 8 and "tensor-matmul" in m for l, m in got), got)
        check("diagnostics: nothing on correct lines", all(l in (5, 6, 8) for l, _ in got), got)
        unbound = [d for d in diags if "undefined-name" in d["message"]]
        check("diagnostics: range covers the name",
              unbound and unbound[0]["range"]["start"]["character"] == 9 and unbound[0]["range"]["end"]["character"] == 23, unbound)

        r = c.request("textDocument/completion", dict(textDocument=dict(uri=uri), position=dict(line=4, character=14)))
        labels = [i["label"] for i in r["result"]["items"]]
        check("completion: user definition", "scale" in labels, labels[:20])
        r = c.request("textDocument/completion", dict(textDocument=dict(uri=uri), position=dict(line=8, character=6)))
        labels = [i["label"] for i in r["result"]["items"]]
        check("completion: builtins by prefix", "tensor-matmul" in labels and "tensor-zeros" in labels, labels[:20])
        check("completion: only the prefix", all(l.startswith("tensor") for l in labels), labels[:20])
        r = c.request("textDocument/completion", dict(textDocument=dict(uri=uri), position=dict(line=7, character=13)))
        labels = [i["label"] for i in r["result"]["items"]]
        check("completion: keyword arguments of linear", labels == [":bias"], labels)

        r = c.request("textDocument/hover", dict(textDocument=dict(uri=uri), position=dict(line=8, character=3)))
        value = r["result"]["contents"]["value"]
        check("hover: builtin signature and docstring", "(tensor-matmul a b)" in value and "matrix product" in value, value)
        r = c.request("textDocument/hover", dict(textDocument=dict(uri=uri), position=dict(line=4, character=11)))
        check("hover: user definition", "(scale x factor)" in r["result"]["contents"]["value"], r)

        r = c.request("textDocument/signatureHelp", dict(textDocument=dict(uri=uri), position=dict(line=7, character=10)))
        sig = r["result"]["signatures"][0]["label"]
        check("signatureHelp: linear", sig.startswith("(linear in-features out-features"), sig)
        check("signatureHelp: active parameter", r["result"]["activeParameter"] == 1, r["result"])

        r = c.request("textDocument/definition", dict(textDocument=dict(uri=uri), position=dict(line=9, character=6)))
        loc = r["result"]
        check("definition: in the file", loc["uri"] == uri and loc["range"]["start"]["line"] == 0, loc)
        r = c.request("textDocument/definition", dict(textDocument=dict(uri=uri), position=dict(line=3, character=60)))
        check("definition: nothing for a builtin written in C++", r["result"] is None, r)
        # a prelude procedure: the server writes the prelude's text under the cache folder
        c.notify("textDocument/didChange", dict(textDocument=dict(uri=uri, version=2),
                                                contentChanges=[dict(text=SOURCE + "(fit model #f #f #f)\n")]))
        diags = c.diagnostics(uri)
        check("didChange: diagnostics again", len(diags) == 3, diags)
        r = c.request("textDocument/definition", dict(textDocument=dict(uri=uri), position=dict(line=10, character=2)))
        loc = r["result"]
        ok = False
        if loc and loc["uri"].startswith("file://"):
            target = loc["uri"][7:]
            with open(target) as f:
                lines = f.read().split("\n")
            ok = os.path.basename(target) == "40-training.purple" and "(define (fit " in lines[loc["range"]["start"]["line"]]
        check("definition: prelude procedure fit", ok, loc)

        r = c.request("textDocument/documentSymbol", dict(textDocument=dict(uri=uri)))
        names = [s["name"] for s in r["result"]]
        check("documentSymbol", names == ["scale", "model"], names)

        own_features(c, tmp)

        r = c.request("no/such/method", {})
        check("unknown request: an error", r.get("error", {}).get("code") == -32601, r)
        r = c.request("shutdown", None)
        check("shutdown", "result" in r and r["result"] is None, r)
        c.notify("exit", None)
        check("exit", c.proc.wait(timeout=30) == 0)
    print(f"{failed()} failed")
    return 1 if failed() else 0


if __name__ == "__main__":
    sys.exit(main())
