"""Where sqlanon keeps what it compiles once and loads in every later process:
the Mondrian kernel (:mod:`sqlanon.kernel`) and the SQL templates' bytecode
(:mod:`sqlanon.sql.render`).

``$SQLANON_CACHE_DIR`` if set, else the package's ``__pycache__`` (where Python
keeps its own bytecode), else ``$XDG_CACHE_HOME/sqlanon`` (``~/.cache/sqlanon``)
when the package directory is read-only; never one every user may write to.
"""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path


def cache_dirs() -> list[Path]:
    """Where compiled things are looked for and written, in order; never a
    directory every user may write to (:func:`shared_dirs`)."""
    return [d for d in _candidates() if not _writable_by_all(d)]


def shared_dirs() -> list[Path]:
    """The cache's places left out for every user's writing there."""
    return [d for d in _candidates() if _writable_by_all(d)]


def _candidates() -> list[Path]:
    if os.environ.get("SQLANON_CACHE_DIR"):
        dirs = [Path(os.environ["SQLANON_CACHE_DIR"])]
    else:
        package = Path(__file__).parent / "__pycache__"
        if os.environ.get("XDG_CACHE_HOME"):
            dirs = [package, Path(os.environ["XDG_CACHE_HOME"]) / "sqlanon"]
        else:
            try:
                dirs = [package, Path.home() / ".cache" / "sqlanon"]
            except (RuntimeError, KeyError):  # no HOME and a uid without a passwd entry (helper-101)
                dirs = [package]
    return dirs


def _writable_by_all(d: Path) -> bool:
    """Whether every user may write into ``d`` (made so under umask 000, or
    a shared directory chosen as the cache): the compiled kernel is loaded
    as code from there, and another user's file in its place would run as
    this one (helper-165)."""
    try:
        return bool(d.stat().st_mode & stat.S_IWOTH)
    except OSError:
        return False  # not there yet: made by :func:`make_dir`, the owner's alone


def make_dir(d: Path) -> None:
    """Create the cache directory ``d`` (and its parents) if need be, the
    last one for its owner alone, whatever the umask. Raises OSError."""
    d.mkdir(mode=0o700, parents=True, exist_ok=True)


def writable_dir() -> Path | None:
    """The first of :func:`cache_dirs` this process can write to (created if need be)."""
    for d in cache_dirs():
        try:
            make_dir(d)
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
