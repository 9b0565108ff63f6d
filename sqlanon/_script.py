"""The ``sqlanon`` script's entry point, ahead of the command line's imports.

Importing :mod:`sqlanon.cli` (click, YAML, the executors) takes a tenth of a
second or two; a Ctrl-C in that time printed a Python traceback instead of
the command's one line (helper-6).
"""

from __future__ import annotations

import signal
import sys


def entry(args: list[str] | None = None, prog_name: str | None = None) -> None:
    try:
        from .cli import entry as run
    except KeyboardInterrupt:
        # Not click.echo: click may be the import the Ctrl-C cut short.
        sys.stderr.write("Interrupted; nothing was published.\n")
        sys.exit(128 + signal.SIGINT)
    run(args=args, prog_name=prog_name)
