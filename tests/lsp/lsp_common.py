"""A language-server client over pipes, as an editor is one (JSON-RPC 2.0, Content-Length framing),
for the tests of `purple --lsp` in this folder."""
import json
import subprocess

failures = 0


def check(name, ok, detail=""):
    global failures
    if ok:
        print("ok:", name)
    else:
        failures += 1
        print("FAIL:", name, detail)


def failed():
    return failures


class Client:
    def __init__(self, purple, env):
        self.proc = subprocess.Popen([purple, "--lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.next_id = 1
        self.notifications = []

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message):
        body = json.dumps(dict(jsonrpc="2.0", **message)).encode("utf-8")
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

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
        return self.response(rid)

    def response(self, rid):
        while True:
            m = self.receive()
            if m.get("id") == rid and "method" not in m:
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

    def start(self, root_uri, capabilities=None):
        init = self.request("initialize", dict(processId=None, rootUri=root_uri, capabilities=capabilities or {}))
        self.notify("initialized", {})
        return init

    def open(self, uri, text):
        self.notify("textDocument/didOpen", dict(textDocument=dict(uri=uri, languageId="purple", version=1, text=text)))
        return self.diagnostics(uri)

    def stop(self):
        self.request("shutdown", None)
        self.notify("exit", None)
        return self.proc.wait(timeout=30)


def position(uri, line, character):
    return dict(textDocument=dict(uri=uri), position=dict(line=line, character=character))
