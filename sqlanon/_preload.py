"""Imported once by the local worker pool's fork server
(:class:`sqlanon.executors.LocalExecutor`): workers then start with sqlanon
imported and the compiled kernel loaded."""

import atexit
import importlib.machinery
import os
import sys

# pandas too: pyarrow and DuckDB import it on their first conversion (they
# probe for it), which would cost every worker process ~0.2 s of its first task.
import pandas  # noqa: F401

from . import engine, executors, kernel, worker  # noqa: F401

kernel.load()

# multiprocessing skips importing the caller's script into a worker whose
# __main__ already is that file: mark it so, as workers run sqlanon's code
# only (see executors._forkserver_context).
_script = os.environ.get(executors.SCRIPT_ENV)
if _script:
    sys.modules["__main__"].__file__ = _script
_module = os.environ.get(executors.MODULE_ENV)  # python -m jobs.nightly
if _module:
    sys.modules["__main__"].__spec__ = importlib.machinery.ModuleSpec(_module, None)

# The fork server ends when the coordinator does. Skip the interpreter's
# teardown (with numba's JIT loaded, numba and llvmlite take ~0.2 s): until
# it has exited, the server still holds the stdout and stderr it inherited,
# and whoever reads the CLI's output to the end (a pipe, a scheduler,
# subprocess.run) would wait for it.
# Workers fork from the server but end with os._exit and never run this.
atexit.register(os._exit, 0)
