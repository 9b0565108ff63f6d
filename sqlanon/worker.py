"""One worker task: pull a fragment with its WHERE clause, anonymize it, write it.

A task is plain data (:class:`FragmentTask`: the source, the fragment's
clause and bound parameters, the spec, the dataset-wide statistics and where
to write), so the same function runs in a local process pool or as a task of
a distributed engine: no data travels with the task, only its description.

Each task opens **its own DuckDB connection**, with a memory limit and a
thread count, reads only its fragment (``SELECT * FROM source WHERE …``), runs
the engine with the *global* statistics (so representativity and NCP mean the
same in every fragment), writes one Parquet part file and returns a
:class:`FragmentResult` with its metrics row.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import resource
import shutil
import socket
import stat
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from . import io
from .config import AnonymizationSpec
from .domain import ColumnStats
from .errors import InputError, PrivacyError, redact_chain
from .metrics import Metrics


@dataclass(frozen=True)
class FragmentTask:
    """Everything a worker needs, and nothing else (picklable)."""

    fragment_id: int
    where: str
    params: tuple[Any, ...]
    source: Any  # a FileSource or DuckDBSource
    spec: AnonymizationSpec | None
    """``None`` when they come otherwise: :attr:`shared`, or from the cluster (:func:`run_fragment`)."""
    stats: dict[str, ColumnStats] | None
    """``None`` with :attr:`spec`."""
    part_path: str
    drop: tuple[str, ...] = ()
    memory_limit: str | None = None
    threads: int | None = 1
    temp_directory: str | None = None
    """Where the worker's DuckDB spills (in the run's staging area): each
    attempt at the task makes a directory of its own named after it
    (``<temp_directory>-XXXXXXXX``), and removes it."""
    part_compression: str = "zstd"
    part_is_output: bool = True
    """Whether the part is published as it is (:func:`sqlanon.io.write_part`)."""
    as_text: tuple[str, ...] = ()
    """Columns to write to the part as text (:attr:`sqlanon.io.Staging.as_text`)."""
    arrow_fields: dict[str, pa.Field] = field(default_factory=dict)
    """:attr:`sqlanon.io.Staging.arrow_fields`."""
    crash_once: str | None = None
    """See :data:`CRASH_ONCE_ENV` (tests only)."""
    inputs: tuple[tuple[str, int, int], ...] = ()
    """A remote cluster's task: the input's files as the coordinator saw them
    (path, size, modification time), which the worker must see too."""
    shared: str | None = None
    """The run's spec and statistics, written once for every task
    (:meth:`sqlanon.io.Staging.share`): the file to load them from."""


@dataclass(frozen=True)
class FragmentResult:
    """What a worker reports back.

    ``status`` is ``ok``, or ``too_small`` when the fragment alone cannot
    satisfy k or l (the coordinator then merges it with its sibling).
    """

    fragment_id: int
    status: str
    rows: int
    metrics: Metrics | None = None
    reason: str = ""
    seconds: float = 0.0
    timings: dict[str, float] = field(default_factory=dict)
    pid: int = 0
    peak_rss_mb: float = 0.0
    """The worker process's peak resident memory so far (ru_maxrss)."""


CRASH_ONCE_ENV = "SQLANON_FAULT_CRASH_ONCE"
"""Fault injection for the test suite: when the coordinator's environment sets
it to a file path that does not exist yet, the first task to run creates the
file and kills its own process mid-task (``os._exit``), as a lost worker
would; retries then succeed. The path travels in the task (worker processes
of a pool or cluster may predate the variable)."""


def _maybe_crash(marker: str | None) -> None:
    if marker:
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        os._exit(17)


_SEEN_AS_THE_COORDINATOR: set[tuple[tuple[str, int, int], ...]] = set()
"""Input lists this process has found as the coordinator sees them: a worker checks once, not per task."""


def other_version(inputs: tuple[tuple[str, int, int], ...]) -> str:
    """The first of the coordinator's input files (path, size, modification
    time) that this host sees otherwise, described, or '': a host whose
    "shared" lake is its own copy published other rows (exit 0 when no
    column passed through to be compared; helper-12)."""
    if inputs in _SEEN_AS_THE_COORDINATOR:
        return ""
    for path, size, mtime in inputs:
        try:
            st = os.stat(path)
        except OSError:
            return f"the input file {path!r}"
        if (st.st_size, st.st_mtime_ns) != (size, mtime):
            return (f"the input file {path!r} as the coordinator sees it (this host's has another size or "
                    "modification time: another copy, or changed since the run began)")
    _SEEN_AS_THE_COORDINATOR.add(inputs)
    return ""


def probe(paths: tuple[tuple[tuple[str, int, int], ...], str]) -> str:
    """On a cluster's worker, before any fragment: what of the run's files
    it cannot reach (the input's files, as the coordinator sees them; the
    staging directory it writes its part to), or '' when it reaches them all."""
    inputs, directory = paths
    missing = other_version(inputs)
    if missing:
        return missing
    try:
        fd, name = tempfile.mkstemp(prefix=".probe-", dir=directory)
    except OSError as exc:
        return f"the staging directory {directory!r} ({exc.strerror})"
    os.close(fd)
    os.remove(name)
    return ""


@functools.lru_cache(maxsize=1)
def shared(path: str) -> tuple:
    """What :meth:`sqlanon.io.Staging.share` wrote, loaded once per process
    and run (the path is the run's own): a worker's next task takes it from memory.

    Only from a file of this user's (:func:`sqlanon.io.owned`): unpickling
    runs code, and the staging area next to the output may sit where others
    may rename (a team's folder): one could put a directory of their own,
    holding a pickle of their own, in its place (helper-115). (Not by its
    mode: made 0600, another cannot widen it; a filesystem without Unix
    modes reports 0644 or 0777 whatever was asked: helper-117.)"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise InputError(f"cannot read {path!r}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not io.owned(st.st_uid, st.st_dev) or not stat.S_ISREG(st.st_mode):
            raise InputError(f"refusing to load {path!r}: it is not the run's own file (another user's: was the "
                             "staging area replaced while the run wrote it?)")
        return pickle.load(fh)


def run_fragment(task: FragmentTask, spec_and_stats: tuple | None = None) -> FragmentResult:
    """Anonymize one fragment and write it to ``task.part_path``.

    ``spec_and_stats``: the run's spec and statistics when a cluster hands
    them over (sent to it once, :meth:`sqlanon.executors.DaskExecutor.share`)
    and the task carries none.

    Safe to retry: a rerun overwrites its own part file, so a task that a
    cluster reruns after losing its worker never duplicates rows. A failure
    leaves with URLs' passwords masked, in its chain too: a cluster keeps
    and shows a task's error (Dask's dashboard, Spark's UI; helper-71).
    """
    try:
        return _run_fragment(task, spec_and_stats)
    except BaseException as exc:
        redact_chain(exc)
        raise


def _run_fragment(task: FragmentTask, spec_and_stats: tuple | None) -> FragmentResult:
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    missing = other_version(task.inputs)
    if missing:
        # Its host named: one host of many that lacks the mount was not (helper-56).
        raise InputError(f"the worker on host {socket.gethostname()!r} cannot reach {missing}: a remote cluster needs "
                         "the input on storage that every worker mounts at the same path")
    # Its spill files hold the input's rows: a directory of this attempt's own, this user's only, gone
    # with it (DuckDB made one per fragment under the umask, readable by all in a remote cluster's
    # staging area, helper-71; and two attempts of one fragment shared it: helper-72).
    try:
        spill = tempfile.mkdtemp(prefix=f"{os.path.basename(task.temp_directory)}-",
                                 dir=os.path.dirname(task.temp_directory)) if task.temp_directory else None
    except OSError as exc:  # a full disk
        raise InputError(f"cannot make a spill directory in {os.path.dirname(task.temp_directory)!r}: "
                         f"{exc.strerror}{io.no_room_hint(exc)}") from exc
    # DuckDB spills by a name that stays this directory, which others could otherwise swap (helper-115).
    with io.held_private(spill) if spill else contextlib.nullcontext() as temp_directory:
        return _in_fragment(task, spec_and_stats, t_start, timings, spill, temp_directory)


def _in_fragment(task: FragmentTask, spec_and_stats: tuple | None, t_start: float, timings: dict[str, float],
                 spill: str | None, temp_directory: str | None) -> FragmentResult:
    """:func:`_run_fragment`'s work, DuckDB spilling into ``temp_directory``
    (``spill``, removed at the end)."""
    from .engine import anonymize_fragment  # the kernel loads in the worker, not the coordinator

    con = io.connect(memory_limit=task.memory_limit, threads=task.threads, temp_directory=temp_directory)
    try:
        t0 = time.perf_counter()
        task.source.attach(con)
        with contextlib.ExitStack() as on_failure:  # a server gone away must fail the task, not abort the process
            on_failure.callback(io.abandon_source, con)
            table = task.source.select(con, task.where, task.params)
            on_failure.pop_all()
        task.source.detach(con)
        if task.drop:  # those the source did not leave out itself
            table = table.drop_columns([c for c in task.drop if c in table.column_names])
        timings["read"] = time.perf_counter() - t0
        if table.num_rows == 0:
            # An empty fragment (the sample saw values the source lacks, or the
            # source changed): nothing to write, nothing to protect.
            return FragmentResult(
                task.fragment_id, "ok", 0, None, seconds=time.perf_counter() - t_start, pid=os.getpid(),
                peak_rss_mb=_peak_rss_mb(),
            )
        t0 = time.perf_counter()
        _maybe_crash(task.crash_once)
        try:
            if spec_and_stats is None:
                spec_and_stats = (task.spec, task.stats) if task.shared is None else shared(task.shared)
            spec, stats = spec_and_stats
            result = anonymize_fragment(table, spec, stats, narrow=True)
        except PrivacyError as exc:
            return FragmentResult(
                task.fragment_id, "too_small", table.num_rows, reason=str(exc),
                seconds=time.perf_counter() - t_start, pid=os.getpid(),
            )
        timings["anonymize"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        io.write_part(con, result.table, task.part_path, task.part_compression, task.as_text, task.arrow_fields,
                      task.part_is_output)
        timings["write"] = time.perf_counter() - t0
    finally:
        con.close()
        if spill:
            shutil.rmtree(spill, ignore_errors=True)
    rows, metrics = table.num_rows, result.metrics
    # The fragment's Arrow buffers go back to the system: a worker waiting
    # for its next task (or for the coordinator to publish) kept ~1 GB of a
    # wide 500k-row fragment (helper-33).
    del table, result
    pa.default_memory_pool().release_unused()
    return FragmentResult(
        task.fragment_id, "ok", rows, metrics, seconds=time.perf_counter() - t_start, timings=timings,
        pid=os.getpid(), peak_rss_mb=_peak_rss_mb(),
    )


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
