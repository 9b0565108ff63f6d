"""sqlanon: k-anonymous and l-diverse copies of tables, with distributed Mondrian.

The public API mirrors the ``sqlanon`` command line:

* :func:`anonymize` — publish an anonymized copy of a table;
* :func:`verify` — check k-anonymity / l-diversity of a generalized table;
* :func:`anonymize_table` — the engine on an in-memory Arrow table;
* :func:`run_job` — ``sqlanon anonymize --config job.yml``: a scheduled job's file;
* :func:`verify_job` — ``sqlanon verify --config job.yml``: that job's published output checked.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .config import AnonymizationSpec, QuasiIdentifier
    from .errors import ConfigError, HierarchyError, InputError, PrivacyError, SqlanonError, VerificationError
    from .api import RunResult, anonymize, build_spec, verify
    from .cli import run_job, verify_job
    from .domain import ColumnStats
    from .engine import EngineResult, anonymize_table, column_stats
    from .hierarchies import Hierarchy, load_hierarchy
    from .metrics import Metrics
    from .verification import Verification

__version__ = "0.1.0"

# Imported on first use: the API pulls in DuckDB, Arrow and numpy (~0.4 s),
# the engine numba on top. The CLI starts the worker pool's fork server
# before it needs them, and a worker loads the engine in its own process.
_LAZY = {
    "RunResult": "api", "anonymize": "api", "build_spec": "api", "verify": "api", "run_job": "cli", "verify_job": "cli",
    "ColumnStats": "domain",
    "EngineResult": "engine", "anonymize_table": "engine", "column_stats": "engine",
    "Hierarchy": "hierarchies", "load_hierarchy": "hierarchies",
    "Metrics": "metrics",
    "Verification": "verification",
}


# Light, but imported on first use too: the `sqlanon` script imports this
# package before its own guard against a Ctrl-C during the command line's
# imports (sqlanon._script) is in place; a Ctrl-C in these imports printed
# a Python traceback (helper-40).
_LIGHT = {
    "AnonymizationSpec": "config", "QuasiIdentifier": "config",
    **dict.fromkeys(["ConfigError", "HierarchyError", "InputError", "PrivacyError", "SqlanonError",
                     "VerificationError"], "errors"),
}


def __getattr__(name: str):
    if name in ("config", "errors"):  # sqlanon.errors.InputError, as when the package imported them itself
        return importlib.import_module(f".{name}", __name__)
    if name in _LIGHT:
        found = globals()[name] = getattr(importlib.import_module(f".{_LIGHT[name]}", __name__), name)
        return found
    if name in _LAZY:
        from . import interrupts

        # A host's timeout during these imports (a task runner's SIGALRM) is
        # raised once they are done: cut short, numpy or pandas stayed half
        # imported for the rest of the process (helper-60).
        with interrupts.watching():
            try:
                found = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
            except RuntimeError as exc:  # "can't register atexit after shutdown" (concurrent.futures)
                import threading

                if threading.main_thread().is_alive():
                    raise
                from .errors import AFTER_SHUTDOWN, ConfigError

                raise ConfigError(AFTER_SHUTDOWN) from exc
        if name in ("anonymize_table", "column_stats"):  # the engine's, with errors in the library's terms
            from .errors import in_library_terms

            found = globals()[name] = in_library_terms(found)
        return found
    raise AttributeError(f"module 'sqlanon' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public API too, not yet imported: dir(sqlanon) and a REPL's
    completion showed TYPE_CHECKING and importlib only (helper-201)."""
    return sorted({*globals(), *__all__})


__all__ = [
    "AnonymizationSpec",
    "ColumnStats",
    "ConfigError",
    "EngineResult",
    "Hierarchy",
    "HierarchyError",
    "InputError",
    "Metrics",
    "PrivacyError",
    "QuasiIdentifier",
    "RunResult",
    "SqlanonError",
    "Verification",
    "VerificationError",
    "anonymize",
    "anonymize_table",
    "build_spec",
    "column_stats",
    "load_hierarchy",
    "run_job",
    "verify",
    "verify_job",
]
