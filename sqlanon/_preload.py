"""Imported once by the local worker pool's fork server
(:class:`sqlanon.executors.LocalExecutor`): workers then start with sqlanon
imported and the compiled kernel loaded.

The server holds the stdout and stderr it inherited from the CLI until it
exits, and whoever reads the CLI's output to the end (a pipe, a scheduler,
``subprocess.run``) waits for that. So it must not outlive the coordinator
by more than a moment: not while it is still loading (a run that fails
early), nor in the interpreter's teardown (numba and llvmlite take ~0.2 s).
"""

import atexit
import os
import threading

_loaded = threading.Event()


def _leave_with_the_coordinator(parent: int) -> None:
    # The fork server notices the coordinator's end only once loaded (EOF on
    # its pipe); until then, a reparented server has nothing left to do.
    while not _loaded.wait(0.05):
        if os.getppid() != parent:
            os._exit(0)


_watch = threading.Thread(target=_leave_with_the_coordinator, args=(os.getppid(),), daemon=True)
_watch.start()

try:
    # pandas too: pyarrow and DuckDB import it on their first conversion (they
    # probe for it), which would cost every worker process ~0.2 s of its first task.
    import pandas  # noqa: F401

    from . import engine, mondrian, worker  # noqa: F401

    mondrian.warm_up()
finally:
    _loaded.set()
    _watch.join()  # no thread left when the server forks workers

# Workers fork from the server but end with os._exit and never run this.
atexit.register(os._exit, 0)
