"""sqlanon: k-anonymous and l-diverse copies of tables, with distributed Mondrian.

The public API mirrors the ``sqlanon`` command line:

* :func:`anonymize` — publish an anonymized copy of a table;
* :func:`verify` — check k-anonymity / l-diversity of a generalized table;
* :func:`anonymize_table` — the engine on an in-memory Arrow table.
"""

from .api import RunResult, anonymize, build_spec, verify
from .config import AnonymizationSpec, QuasiIdentifier
from .domain import ColumnStats
from .errors import ConfigError, HierarchyError, InputError, PrivacyError, SqlanonError, VerificationError
from .hierarchies import Hierarchy, load_hierarchy
from .metrics import Metrics

__version__ = "0.1.0"

_LAZY = {"anonymize_table": "engine", "EngineResult": "engine"}


def __getattr__(name: str):
    # The engine loads numba; import it on first use so the CLI and the
    # coordinator start fast (workers load it in their own processes).
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module 'sqlanon' has no attribute {name!r}")

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
    "VerificationError",
    "anonymize",
    "anonymize_table",
    "build_spec",
    "load_hierarchy",
    "verify",
]
