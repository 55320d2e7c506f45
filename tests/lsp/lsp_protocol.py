"""JSON-RPC and the LSP lifecycle in `purple --lsp`: parse errors (-32700), invalid requests
(-32600), a message without Content-Length that must not put the stream out of step, requests
before initialize (-32002) and after shutdown, a second initialize, and the exit status (0 after
shutdown, 1 without). Usage: python3 lsp_protocol.py PURPLE"""
import json
import os
import sys
import tempfile

from lsp_common import Client, check, failed, position


def error_code(m):
    return m.get("error", {}).get("code")


def main():
    purple = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "cache"))
        uri = "file://" + os.path.join(tmp, "a.purple")

        c = Client(purple, env)
        r = c.request("textDocument/hover", position(uri, 0, 0))
        check("a request before initialize: -32002", error_code(r) == -32002, r)
        c.notify("textDocument/didOpen", dict(textDocument=dict(uri=uri, languageId="purple", version=1, text="(car)\n")))
        init = c.start("file://" + tmp)
        check("initialize after that", "capabilities" in init.get("result", {}), init)
        r = c.request("initialize", dict(processId=None, rootUri=None, capabilities={}))
        check("a second initialize: -32600", error_code(r) == -32600, r)

        body = b'{"jsonrpc": "2.0", "id": 40, "method": "textDocument/hover", "params": '
        c.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        r = c.receive()
        check("invalid JSON: -32700 with id null", error_code(r) == -32700 and r.get("id") is None, r)
        c.send(dict(id=41, params={}))
        r = c.receive()
        check("a request without a method: -32600 with its id", error_code(r) == -32600 and r.get("id") == 41, r)
        c.send(dict(id=42, method=7))
        r = c.receive()
        check("a method that is not a string: -32600", error_code(r) == -32600 and r.get("id") == 42, r)
        c.send_raw(b"[1, 2]")   # not even framed
        unframed = json.dumps(dict(jsonrpc="2.0", id=43, method="shutdown")).encode()
        c.send_raw(b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" + unframed)
        c.send(dict(id=44, method="textDocument/documentSymbol", params=dict(textDocument=dict(uri=uri))))
        seen = {}
        for _ in range(2):
            m = c.receive()
            seen[m.get("id")] = m
        check("a message without Content-Length is refused (-32600)", error_code(seen.get(43, {})) == -32600, seen)
        check("... and the next message is read as it should be (the stream is in step)",
              "result" in seen.get(44, {}), seen)
        diags_before = [m for m in c.notifications if m.get("params", {}).get("uri") == uri]
        check("a notification before initialize was ignored (no diagnostics for it)", diags_before == [], diags_before)
        r = c.request("no/such/method", {})
        check("an unknown method: -32601", error_code(r) == -32601, r)
        r = c.request("textDocument/hover", dict(textDocument=dict(uri=uri)))
        check("a request without its position: -32602", error_code(r) == -32602, r)
        r = c.request("shutdown", None)
        check("shutdown", "result" in r and r["result"] is None, r)
        r = c.request("textDocument/hover", position(uri, 0, 0))
        check("a request after shutdown: -32600", error_code(r) == -32600, r)
        c.notify("exit", None)
        check("exit after shutdown: status 0", c.proc.wait(timeout=30) == 0)

        c = Client(purple, env)
        c.start("file://" + tmp)
        c.notify("exit", None)
        check("exit without shutdown: status 1", c.proc.wait(timeout=30) == 1)
    print(f"{failed()} failed")
    return 1 if failed() else 0


if __name__ == "__main__":
    sys.exit(main())
