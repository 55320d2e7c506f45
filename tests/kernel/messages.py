"""What the kernel tests share: one request's messages, read through a jupyter_client client."""
import time


def collect(kc, msg_id, timeout=120, on_message=None):
    """The iopub messages of one request, up to its idle status."""
    out = []
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=1)
        except Exception:
            continue
        if (msg.get("parent_header") or {}).get("msg_id") != msg_id:   # null in xeus-zmq 3.1's iopub_welcome
            continue
        out.append(msg)
        if on_message:
            on_message(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return out
    raise TimeoutError(f"no idle status for {msg_id}")


def run(kc, code, timeout=120):
    """Executes CODE: the reply's content and the request's iopub messages."""
    msg_id = kc.execute(code)
    msgs = collect(kc, msg_id, timeout)
    reply = kc.get_shell_msg(timeout=timeout)
    while (reply.get("parent_header") or {}).get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=timeout)
    return reply["content"], msgs


def of_type(msgs, t):
    return [m["content"] for m in msgs if m["msg_type"] == t]
