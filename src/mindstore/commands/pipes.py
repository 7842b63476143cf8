"""A reader that stops early (`mindstore tasks follow T | head`) is not an error.

Python ignores SIGPIPE, so writing to a pipe whose reader has gone raises
`BrokenPipeError`. The command stops there, quietly: no traceback, no "unexpected" line,
and the exit status a shell reports for a writer killed by SIGPIPE (128 + 13 = 141), as
`yes | head` gives. Standard output is pointed at the null device first, so the
interpreter's own flush at exit cannot raise the same error again.
"""

from __future__ import annotations

import io
import os
import sys

EXIT_CLOSED_PIPE = 141
"""128 + SIGPIPE: what a shell reports for a writer whose reader went away."""


def silence_stdout() -> None:
    """Send whatever is still buffered for standard output to the null device."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # no file descriptor (a test runner's buffer): nothing to flush to a pipe
