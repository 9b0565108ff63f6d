"""Where sqlanon keeps what it compiles once and loads in every later process:
the Mondrian kernel (:mod:`sqlanon.kernel`) and the SQL templates' bytecode
(:mod:`sqlanon.sql.render`).

``$SQLANON_CACHE_DIR`` if set, else the package's ``__pycache__`` (where Python
keeps its own bytecode), else ``$XDG_CACHE_HOME/sqlanon`` (``~/.cache/sqlanon``)
when the package directory is read-only.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_dirs() -> list[Path]:
    """Where compiled things are looked for and written, in order."""
    if os.environ.get("SQLANON_CACHE_DIR"):
        return [Path(os.environ["SQLANON_CACHE_DIR"])]
    user = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sqlanon"
    return [Path(__file__).parent / "__pycache__", user]


def writable_dir() -> Path | None:
    """The first of :func:`cache_dirs` this process can write to (created if need be)."""
    for d in cache_dirs():
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(d, os.W_OK | os.X_OK):
            return d
    return None
