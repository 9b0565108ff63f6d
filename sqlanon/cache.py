"""Where sqlanon keeps what it compiles once and loads in every later process:
the Mondrian kernel (:mod:`sqlanon.kernel`) and the SQL templates' bytecode
(:mod:`sqlanon.sql.render`).

``$SQLANON_CACHE_DIR`` if set, else the package's ``__pycache__`` (where Python
keeps its own bytecode), else ``$XDG_CACHE_HOME/sqlanon`` (``~/.cache/sqlanon``)
when the package directory is read-only.
"""

from __future__ import annotations

import functools
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


def kernel_jit(**options):
    """``numba.njit(cache=True, **options)`` for sqlanon's kernel (:mod:`sqlanon.mondrian`).

    Its cache goes where sqlanon keeps what it compiles (:func:`writable_dir`)
    when that is not the package's ``__pycache__``, numba's first choice:
    ``$SQLANON_CACHE_DIR`` moved the compiled kernel but not numba's cache,
    which went to a directory named ``~`` of the current one when HOME was
    unset (helper-101). Set for the kernel's functions alone: a host's own
    cached functions keep numba's places (helper-103). With nowhere numba
    can write ('no locator available': a read-only install, HOME unwritable)
    every run failed at import; the function is compiled uncached then
    (:data:`UNCACHED` says so). ``$NUMBA_CACHE_DIR`` is numba's own, and wins.
    """
    import numba

    def decorate(fn):
        global UNCACHED
        ours = None if os.environ.get("NUMBA_CACHE_DIR") else _numba_dir()
        before = numba.config.CACHE_DIR
        if ours is not None:
            numba.config.CACHE_DIR = str(ours)
        try:
            return numba.njit(cache=True, **options)(fn)
        except RuntimeError as exc:
            if "no locator available" not in str(exc):
                raise
            UNCACHED = True
            return numba.njit(**options)(fn)
        finally:
            numba.config.CACHE_DIR = before

    return decorate


UNCACHED = False
"""Whether a kernel function could not be cached (compiled anew in each process)."""


@functools.lru_cache(maxsize=1)
def _numba_dir() -> Path | None:
    """numba's cache of the JIT kernel: in sqlanon's place unless that is
    the package's ``__pycache__`` (numba's own first choice) or none is
    writable (numba's own places then: the package's, ``~/.cache/numba``)."""
    d = writable_dir()
    return None if d is None or d == Path(__file__).parent / "__pycache__" else d / "numba"
