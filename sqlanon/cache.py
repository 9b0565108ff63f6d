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
    package = Path(__file__).parent / "__pycache__"
    if os.environ.get("XDG_CACHE_HOME"):
        return [package, Path(os.environ["XDG_CACHE_HOME"]) / "sqlanon"]
    try:
        home = Path.home()
    except (RuntimeError, KeyError):  # no HOME and a uid without a passwd entry (helper-101)
        return [package]
    return [package, home / ".cache" / "sqlanon"]


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


def numba_caches() -> bool:
    """Whether numba may cache the JIT kernel (:mod:`sqlanon.mondrian`,
    ``cache=True``), pointing its cache at sqlanon's own place when that is
    not the package's ``__pycache__`` (numba's first choice): with neither
    writable (a read-only install, HOME unwritable) numba found nowhere to
    cache and every run failed, where a warning promised the JIT (helper-101);
    and ``$SQLANON_CACHE_DIR`` left numba's cache where it was, or in a
    directory named ``~`` of the current one when HOME was unset. False: no
    writable place (the kernel is compiled again in each process).
    ``$NUMBA_CACHE_DIR``, numba's own setting, is left to numba."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return True
    d = writable_dir()
    if d is None:
        return False
    if d != Path(__file__).parent / "__pycache__":
        import numba

        numba.config.CACHE_DIR = str(d / "numba")
    return True
