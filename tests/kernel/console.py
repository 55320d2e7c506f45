# jupyter-console, reading a null parent header as an empty one. xeus-zmq 3.1 (Debian 13) sends
# its iopub_welcome message with "parent_header": null, where the protocol says {}; jupyter-console
# 6.6 looks up the session in every iopub message's parent header, so the first key press showed
# an AttributeError instead of the prompt (docs/jupyter.md). Older versions are unaffected.
import sys
from jupyter_console import ptshell

_from_here = ptshell.ZMQTerminalInteractiveShell.from_here
ptshell.ZMQTerminalInteractiveShell.from_here = \
    lambda self, msg: _from_here(self, dict(msg, parent_header=msg.get("parent_header") or {}))

from jupyter_console.app import main
sys.argv[0] = "jupyter-console"
sys.exit(main())
