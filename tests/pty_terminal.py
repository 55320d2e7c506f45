"""A program on a pseudo-terminal, read as a person watching it would (the REPL tests)."""
import os
import re
import select
import time


class Terminal:
    def __init__(self, fd):
        self.fd = fd
        self.transcript = b""

    def read_until(self, pattern, timeout=20.0):
        """Reads until PATTERN (a regex on the output since this call began) appears; returns that
        output, or None when it did not appear within TIMEOUT seconds or the program ended."""
        start = len(self.transcript)
        deadline = time.time() + timeout
        while time.time() < deadline:
            seen = self.transcript[start:].decode(errors="replace")
            if re.search(pattern, seen):
                return seen
            r, _, _ = select.select([self.fd], [], [], 0.1)
            if r:
                try:
                    data = os.read(self.fd, 4096)
                except OSError:
                    break
                if not data:
                    break
                self.transcript += data
        return None
