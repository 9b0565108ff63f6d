"""Imported once by the local worker pool's fork server
(:class:`sqlanon.executors.LocalExecutor`): workers then start with sqlanon
imported and the compiled kernel loaded."""

import atexit
import importlib.machinery
import logging
import os
import runpy
import signal
import sys
import traceback
import types

# The caller's environment back, for the processes this server forks (its
# own path was set, without the working directory: executors._imports_of_this_process).
from .executors import ENV_BEFORE, MODULE_ENV, SCRIPT_ENV, SERVER_LOG_ENV, restore_environment  # noqa: E402

_script = os.environ.get(SCRIPT_ENV)
_module = os.environ.get(MODULE_ENV)  # python -m jobs.nightly
_log_file = os.environ.pop(SERVER_LOG_ENV, None)  # a library call's: its logging, not its stderr
restore_environment(os.environ.get(ENV_BEFORE))

# A Ctrl-C reaches the whole process group, this server too: during these
# imports it printed a KeyboardInterrupt traceback under the CLI's one line.
# The server starts with SIGINT blocked (executors._start_server): ignoring
# it discards one held since then. The CLI stops this server on a Ctrl-C;
# the workers it forks get the handler back (multiprocessing hands them the
# one in place after this).
_interrupt = signal.signal(signal.SIGINT, signal.SIG_IGN)


class _LogFormat(logging.Formatter):
    """A warning of this server or a worker reads as the CLI's do, ``Warning: …``
    (with no handler, Python printed the bare message), a URL's password masked."""

    def format(self, record: logging.LogRecord) -> str:
        from .errors import plain_log_line

        text = record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return plain_log_line(record.levelname, text)


class _LogRecords(logging.Formatter):
    """A record as a JSON line, for the calling process to log as its own
    (:func:`sqlanon.executors.replay_server_log`), a URL's password masked."""

    def format(self, record: logging.LogRecord) -> str:
        import json

        from .errors import redact_urls

        text = record.getMessage()
        if record.exc_info:
            text += "\n" + self.formatException(record.exc_info)
        return json.dumps([record.name, record.levelno, redact_urls(text)])


# sqlanon's loggers only: the caller's own forkserver pools fork from this
# server too, and a root handler here made their workers' basicConfig a
# no-op, their INFO lines and tracebacks lost (helper-52).
_handler = logging.FileHandler(_log_file) if _log_file else logging.StreamHandler()
_handler.setFormatter(_LogRecords() if _log_file else _LogFormat())
logging.getLogger("sqlanon").addHandler(_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
try:
    # pandas too: pyarrow and DuckDB import it on their first conversion (they
    # probe for it), which would cost every worker process ~0.2 s of its first task.
    import pandas  # noqa: F401
    import pyarrow.parquet  # noqa: F401  (io.write_part writes most parts with it)

    from . import engine, executors, kernel, worker  # noqa: F401

    kernel.load()
finally:
    signal.signal(signal.SIGINT, _interrupt)


class _CallerMain(types.ModuleType):
    """The caller's main module in the fork server, run only when a worker
    looks something up in it.

    multiprocessing imports the caller's script (or ``-m`` module) into
    every worker, for the functions defined there, unless the worker's
    ``__main__`` already is that file or module. Workers of sqlanon's
    pool run sqlanon's code only: importing the script again would run a
    script without ``if __name__ == "__main__":`` (its anonymize() call) in
    every worker, and a script read from stdin cannot be imported at all.
    The caller's own forkserver pools, which fork from this same server (one
    per process), do need its functions: the first lookup of one runs the
    script as multiprocessing would have (as ``__mp_main__``).
    """

    def __init__(self, script: str | None, module: str | None) -> None:
        super().__init__("__mp_main__")
        if script:
            self.__file__ = script
        if module:
            self.__spec__ = importlib.machinery.ModuleSpec(module, None)

    def __getattr__(self, name: str):
        if name.startswith("__") or self.__dict__.get("_sqlanon_ran"):
            raise AttributeError(name)
        self.__dict__["_sqlanon_ran"] = True
        if self.__spec__ is not None:
            ran = runpy.run_module(self.__spec__.name, run_name="__mp_main__", alter_sys=True)
        else:
            ran = runpy.run_path(self.__file__, run_name="__mp_main__")
        self.__dict__.update({k: v for k, v in ran.items() if not k.startswith("__")})
        return getattr(self, name)


if _script or _module:
    sys.modules["__main__"] = sys.modules["__mp_main__"] = _CallerMain(_script, _module)

# The fork server ends when the coordinator does. Skip the interpreter's
# teardown (with numba's JIT loaded, numba and llvmlite take ~0.2 s): until
# it has exited, the server still holds the stdout and stderr it inherited,
# and whoever reads the CLI's output to the end (a pipe, a scheduler,
# subprocess.run) would wait for it.
# Workers fork from the server but end with os._exit and never run this.
atexit.register(os._exit, 0)


def _quiet_start_failure(kind, value, tb, _hook=sys.excepthook) -> None:
    """The fork server prints a worker's failure to start with
    ``sys.excepthook``. One is no failure of the run: a worker forked as the
    run ends (a refusal right after start-up) finds the pool's semaphore
    already gone (FileNotFoundError in ``SemLock.__setstate__``), and its
    traceback went under the CLI's one-line error (CI, stop 25). The run
    has reported its own outcome; every other failure is printed as before.
    Nor is a worker forked as a stopped run ends its pool, whose parent
    closed the pipe the worker reads its start from (EOFError in
    ``spawn._main``: once in 17 SIGTERMs just after the plan, helper-40)."""
    frames = [f.f_code for f, _ in traceback.walk_tb(tb)]
    last = (frames[-1].co_name, os.path.basename(frames[-1].co_filename)) if frames else None
    if issubclass(kind, FileNotFoundError) and last == ("__setstate__", "synchronize.py"):
        return
    if issubclass(kind, EOFError) and last == ("_main", "spawn.py"):
        return
    _hook(kind, value, tb)


sys.excepthook = _quiet_start_failure

