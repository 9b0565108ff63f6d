"""The Mondrian kernel as the engine calls it: compiled once, loaded in milliseconds.

:mod:`sqlanon.mondrian` holds the kernel's source (numba). Loading it through
numba's JIT cache costs about a second in every process (importing numba and
building its typing context), which is most of a worker's start-up. So the
first process that needs the kernel compiles it *ahead of time* with
``numba.pycc`` into a small extension module (10-25 s, once per kernel
version); every later process imports that module, which needs numpy only.

Where the compiled module lives: :func:`sqlanon.cache.cache_dirs` (the
package's ``__pycache__``, unless that is read-only or
``$SQLANON_CACHE_DIR`` says otherwise; numba's cache of the JIT kernel
follows it: :func:`sqlanon.cache.kernel_jit`). Its file name carries a hash of the kernel source, the signatures,
the numba/numpy/Python versions and the CPU it was compiled for
(:func:`cpu_identity`), so a change to any of them compiles anew.
Concurrent processes (a worker pool's first run) take a file lock: one
compiles, the others wait and load its result.

If the ahead-of-time build fails (no C compiler, a numba without ``pycc``), a
marker file records why, a warning says so once, and the kernel runs through
numba's JIT instead: same results, a second more per process.
``SQLANON_KERNEL=jit`` forces the JIT.

Both paths compile the same functions of :mod:`sqlanon.mondrian`; the wrappers
below pin the argument types (the compiled module takes exactly these) for
both, and the test suite checks that they give identical partitions.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import warnings
from pathlib import Path

import numpy as np

from .cache import cache_dirs, make_dir
from .errors import InputError

__all__ = ["partition", "no_hierarchy", "class_ranges", "count_distinct", "class_distinct", "class_max_of",
           "shuffle_blocks", "load"]

log = logging.getLogger("sqlanon")

_MODULE = "_mondrian_aot"
_SOURCE = Path(__file__).with_name("mondrian.py")

# Exported functions and their one signature each (numba type strings). The
# code matrices are C-contiguous; a single column may be a strided view.
_X = "i4[:, ::1]"
SIGNATURES = {
    "partition": f"Tuple((i8[::1], i8[::1]))({_X}, {_X}, i8, i8, b1[::1], f8[::1], i8[::1], f8[::1], i8[::1], i8[::1], "
                 "i8[::1], i8[::1], i8[::1], i8[::1], i8[::1], i8[::1])",
    "class_ranges": f"Tuple((i8[:, ::1], i8[:, ::1], b1[:, ::1]))({_X}, i8[::1], i8[::1])",
    "count_distinct": "i8[::1](i4[:], i8[::1], i8)",
    "class_distinct": "Tuple((i8[::1], i8[::1]))(i4[:], i8[::1], i8, i8)",
    "class_max_of": "i8[::1](i4[:], i8[::1], i8[::1])",
    "shuffle_blocks": "i8[::1](i8[::1], i8[::1], i8[::1])",
}

_impl = None
_impl_lock = threading.Lock()


def load():
    """The kernel implementation (compiled module or numba JIT), loaded once per process."""
    global _impl
    if _impl is None:
        with _impl_lock:
            if _impl is None:
                impl = _load()
                if impl.__name__ == "sqlanon.mondrian":
                    impl.warm_up()  # compile or load numba's cache now, not inside the first task
                _impl = impl
    return _impl


def _codes(a: np.ndarray, name: str) -> np.ndarray:
    """A code matrix the kernel reorders in place: must be int32 and C-contiguous (no copy)."""
    if a.dtype != np.int32 or a.ndim != 2 or not a.flags.c_contiguous:
        raise TypeError(f"{name} must be a C-contiguous 2-D int32 array")
    return a


def _i8(a) -> np.ndarray:
    return np.ascontiguousarray(a, np.int64)


def _col(a: np.ndarray) -> np.ndarray:
    return a if a.dtype == np.int32 else a.astype(np.int32)


def no_hierarchy(d: int) -> tuple:
    """The ``h_*`` arrays of :func:`partition` for ``d`` columns none of which has a hierarchy."""
    none = np.full(d, -1, np.int64)
    empty = np.zeros(1, np.int64)
    return none, np.zeros(d, np.int64), empty, empty, empty, empty


def partition(X, S, k, l, is_cat, values, v_off, global_span, c_off, s_off, h_off, h_nleaves, h_leaf, h_parent,
              h_first, h_last):
    """:func:`sqlanon.mondrian.partition`: reorders ``X`` and ``S`` in place, returns ``(perm, bounds)``.
    ``h_*``: the hierarchy trees whose child boundaries the cuts prefer
    (:func:`no_hierarchy` when no column has one)."""
    return load().partition(
        _codes(X, "X"), _codes(S, "S"), int(k), int(l), np.ascontiguousarray(is_cat, np.bool_),
        np.ascontiguousarray(values, np.float64), _i8(v_off), np.ascontiguousarray(global_span, np.float64),
        _i8(c_off), _i8(s_off), _i8(h_off), _i8(h_nleaves), _i8(h_leaf), _i8(h_parent), _i8(h_first), _i8(h_last),
    )


def class_ranges(X, bounds, null_code):
    """:func:`sqlanon.mondrian.class_ranges`: per class and column, min/max code and NULL presence."""
    return load().class_ranges(_codes(X, "X"), _i8(bounds), _i8(null_code))


def count_distinct(col, bounds, dom):
    """:func:`sqlanon.mondrian.count_distinct`: distinct codes per class."""
    return load().count_distinct(_col(col), _i8(bounds), int(dom))


def class_distinct(col, bounds, dom, skip):
    """:func:`sqlanon.mondrian.class_distinct`: sorted distinct codes per class."""
    return load().class_distinct(_col(col), _i8(bounds), int(dom), int(skip))


def class_max_of(col, bounds, lookup):
    """:func:`sqlanon.mondrian.class_max_of`: per class, the maximum of ``lookup[code]``."""
    return load().class_max_of(_col(col), _i8(bounds), _i8(lookup))


def shuffle_blocks(perm, bounds, rand):
    """:func:`sqlanon.mondrian.shuffle_blocks`: each block of ``perm`` shuffled in place (``perm`` must be int64)."""
    if perm.dtype != np.int64 or perm.ndim != 1 or not perm.flags.c_contiguous:
        raise TypeError("perm must be a contiguous 1-D int64 array")
    return load().shuffle_blocks(perm, _i8(bounds), _i8(rand))


def _load():
    mode = os.environ.get("SQLANON_KERNEL", "auto")
    if mode == "jit":
        return _jit()
    if mode not in ("auto", ""):
        log.warning("SQLANON_KERNEL=%r is neither 'jit' nor 'auto': using the compiled kernel", mode)
    key = cache_key()
    dirs = cache_dirs()
    for d in dirs:
        module = _try_import(d / _file_name(key))
        if module is not None:
            return module
        if _failed_marker(d, key).exists():
            log.info("the kernel could not be compiled ahead of time before; using numba's JIT")
            return _jit()
    for d in dirs:
        try:
            make_dir(d)
            lock = open(d / f"{_MODULE}.lock", "a")
        except OSError:
            continue  # read-only: try the next place
        with lock:
            _flock(lock)
            path = d / _file_name(key)
            module = _try_import(path)  # another process may have built it while this one waited
            if module is not None:
                return module
            try:
                _build(d, path)
            except InputError:
                raise  # not the compiler's failure: no marker
            except Exception as exc:  # noqa: BLE001 - any failure leaves the JIT as the way
                why = _first_sentences(f"{type(exc).__name__}: {exc}")
                marker = _failed_marker(d, key)
                with contextlib.suppress(OSError):
                    marker.write_text(why + "\n")
                log.warning(
                    "could not compile the Mondrian kernel ahead of time (%s); using numba's JIT,"
                    " about a second more per process (delete %s to try again)", why, marker,
                )
                return _jit()
            return _import(path)
    # Nowhere to compile it: a second more in every process, which went unsaid (helper-51),
    # or, where numba cannot cache it either, its whole compilation (helper-103).
    jit = _jit()
    from .cache import UNCACHED, shared_dirs

    shared = shared_dirs()
    # A directory every user may write to is not tried: said as such, not as one that is not writable (helper-182).
    where = (f"{' or '.join(str(d) for d in dirs)} cannot be written" if dirs else "none to use") + (
        f"; {', '.join(map(str, shared))} is not used, as every user may write to it: a kernel there could be "
        "another user's code" if shared else "")
    log.warning("no directory to compile the Mondrian kernel in (%s); using numba's JIT, %s: set "
                "SQLANON_CACHE_DIR to a directory only you may write to", where,
                "which cannot cache it either: compiled again in every process, 10-40 s each" if UNCACHED
                else "about a second more per process")
    return jit


def _first_sentences(text: str) -> str:
    """The first line of ``text`` without a last sentence that leads into
    the next lines ('… present. If using conda try:', numba's words without
    a C compiler, cut there mid-advice: helper-101)."""
    line = text.splitlines()[0] if text.strip() else text
    return re.sub(r"(?<=[.!?])\s+[^.!?]*:\s*$", "", line) if line.rstrip().endswith(":") else line


def needs_build() -> bool:
    """Whether loading the kernel will compile it first (~15 s, once per machine)."""
    if os.environ.get("SQLANON_KERNEL", "auto") == "jit":
        return False
    key = cache_key()
    return not any((d / _file_name(key)).exists() or _failed_marker(d, key).exists() for d in cache_dirs())


def _failed_marker(d: Path, key: str) -> Path:
    """Where a failed ahead-of-time build is recorded (the JIT is then used)."""
    return d / f"{_MODULE}-{key}.failed"


def _try_import(path: Path):
    """The compiled module at ``path``, or None if there is none or it does not load."""
    if not path.exists():
        return None
    try:
        return _import(path)
    except ImportError as exc:  # e.g. truncated by a full disk: compiled again (under the lock)
        log.warning("ignoring the compiled kernel %s (%s)", path, exc)
        return None


def cpu_identity() -> bytes:
    """This CPU's vendor, model and instruction set features as Linux's
    ``/proc/cpuinfo`` gives them for its first processor, or ``b''`` where
    they are not known.

    When known, the kernel is compiled for this CPU (numba's ``host``
    target: 14 % faster than its generic one on poker, as fast as the JIT,
    BENCHMARKS.md section 1) and the identity goes into the cache key: a
    CPU of another model or features sharing the cache directory (the
    package on a network file system, run by a cluster's workers) compiles
    a module of its own rather than load instructions it may lack. Unknown:
    the generic target, which runs on any CPU of the architecture."""
    keys = {b"vendor_id", b"cpu family", b"model", b"model name", b"flags",  # x86
            b"CPU implementer", b"CPU architecture", b"CPU variant", b"CPU part", b"Features"}  # Arm
    lines = []
    try:
        with open("/proc/cpuinfo", "rb") as f:
            for ln in f:  # the first processor's block (a host of many cores lists each)
                if not ln.strip():
                    break
                if ln.split(b":", 1)[0].strip() in keys:
                    lines.append(ln.rstrip(b"\n"))
    except OSError:
        return b""
    known = any(ln.split(b":", 1)[0].strip() in (b"flags", b"Features") for ln in lines)
    return b"\n".join(lines) if known else b""


def cache_key() -> str:
    """Hash of everything the compiled module depends on (16 hex digits)."""
    h = hashlib.sha256(_SOURCE.read_bytes())
    h.update(cpu_identity())
    h.update(repr(sorted(SIGNATURES.items())).encode())
    try:
        numba_version = importlib.metadata.version("numba")
    except importlib.metadata.PackageNotFoundError:  # installed without its metadata
        import numba

        numba_version = numba.__version__
    h.update(numba_version.encode())
    h.update(np.__version__.encode())
    h.update(sys.implementation.cache_tag.encode())
    return h.hexdigest()[:16]


def _file_name(key: str) -> str:
    return f"{_MODULE}-{key}{importlib.machinery.EXTENSION_SUFFIXES[0]}"


def _import(path: Path):
    spec = importlib.util.spec_from_file_location(f"sqlanon.{_MODULE}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"not an extension module: {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _jit():
    from . import mondrian

    return mondrian


def _flock(f) -> None:
    try:
        import fcntl
    except ImportError:  # not POSIX: two first runs may both compile; os.replace keeps one
        return
    fcntl.flock(f.fileno(), fcntl.LOCK_EX)


def _build(directory: Path, path: Path) -> None:
    """Compile :mod:`sqlanon.mondrian` into ``path`` (written aside, then renamed into place)."""
    from . import mondrian

    if mondrian.SOURCE_DIGEST != hashlib.sha256(_SOURCE.read_bytes()).hexdigest():
        # The key names the file as it is now; this process's functions are older: compiled, they
        # were every later process's kernel under the new key (helper-129).
        raise InputError(f"the Mondrian kernel's source ({_SOURCE}) changed after this process imported it (sqlanon "
                         "upgraded or edited while it ran): restart the process")
    log.info("compiling the Mondrian kernel (once; 10-25 s, longer on a busy machine)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pycc is "pending deprecation" since numba 0.57
        from numba.pycc import CC, platform

    # Under the lock no other build runs here: another .build- is one killed mid-way (helper-201).
    for stale in directory.glob(".build-*"):
        shutil.rmtree(stale, ignore_errors=True)
    work = Path(tempfile.mkdtemp(prefix=".build-", dir=directory))
    # numba's check for a working C compiler leaves its test files in the
    # temporary directory for good: it makes them under ``work`` instead.
    mkdtemp = platform.mkdtemp
    platform.mkdtemp = lambda *args, **kwargs: tempfile.mkdtemp(*args, **{**kwargs, "dir": str(work)})
    try:
        cc = CC(_MODULE)
        cc.output_dir = str(work)
        cc.verbose = False
        cc.target_cpu = "host" if cpu_identity() else ""  # the cache key says which CPU (cpu_identity)
        for name, signature in SIGNATURES.items():
            cc.export(name, signature)(getattr(mondrian, name).py_func)
        cc.compile()
        os.replace(work / cc.output_file, path)
    finally:
        platform.mkdtemp = mkdtemp
        shutil.rmtree(work, ignore_errors=True)
