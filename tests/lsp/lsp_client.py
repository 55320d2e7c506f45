"""Drives `purple --lsp` over pipes as an editor would (JSON-RPC 2.0 with Content-Length framing):
initialize, didOpen (diagnostics), completion (names and keywords), hover, signature help,
definition (in the file and in the prelude), document symbols, didChange, shutdown and exit.
Usage: python3 lsp_client.py PURPLE"""
import json
import os
import subprocess
import sys
import tempfile

failures = 0


def check(name, ok, detail=""):
    global failures
    if ok:
        print("ok:", name)
    else:
        failures += 1
        print("FAIL:", name, detail)


class Client:
    def __init__(self, purple, env):
        self.proc = subprocess.Popen([purple, "--lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.next_id = 1
        self.notifications = []

    def send(self, message):
        body = json.dumps(dict(jsonrpc="2.0", **message)).encode("utf-8")
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def receive(self):
        length = None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise EOFError("the server closed its output")
            line = line.strip()
            if not line:
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        return json.loads(self.proc.stdout.read(length).decode("utf-8"))

    def request(self, method, params):
        rid = self.next_id
        self.next_id += 1
        self.send(dict(id=rid, method=method, params=params))
        while True:
            m = self.receive()
            if m.get("id") == rid:
                return m
            self.notifications.append(m)

    def notify(self, method, params):
        self.send(dict(method=method, params=params))

    def diagnostics(self, uri):
        while True:
            for i, m in enumerate(self.notifications):
                if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri:
                    del self.notifications[i]
                    return m["params"]["diagnostics"]
            self.notifications.append(self.receive())


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

        r = c.request("no/such/method", {})
        check("unknown request: an error", r.get("error", {}).get("code") == -32601, r)
        r = c.request("shutdown", None)
        check("shutdown", "result" in r and r["result"] is None, r)
        c.notify("exit", None)
        check("exit", c.proc.wait(timeout=30) == 0)
    print(f"{failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
