"""The coordinator: statistics and a sample through SQL, fragments as WHERE
clauses, workers in separate processes, verification, atomic publication and
the metrics table (paper §3–6).

The source is never loaded whole by the coordinator: it runs one aggregate
query for the dataset-wide statistics, draws a sample of the QI columns in
SQL, cuts the sample into fragments (:mod:`sqlanon.fragmentation`) whose
WHERE clauses cover the whole domain disjointly, and hands each fragment to a
worker (:mod:`sqlanon.worker`) that pulls only its rows.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import glob
import json
import logging
import math
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from pathlib import Path

import duckdb
import pyarrow as pa

from . import __version__, executors, fragmentation, interrupts, io
from .config import AnonymizationSpec, listed, missing_column, plain, strict_json, suggest
from .domain import (ColumnStats, as_text, check_type, fits_interval, interval_stats, is_text,
                     resolve_generalization)
from .errors import ConfigError, HierarchyError, InputError, PrivacyError, SqlanonError, VerificationError
from .metrics import Metrics
from .sql import fold_name, ident, literal, render
from .sql.render import Rendered, is_generic
from .verification import (
    Checksums, Verification, column_checksums, refuse_reserved, verify_as_typed, verify_relation,
    warn_null_counted,
)
from .worker import CRASH_ONCE_ENV, FragmentResult, FragmentTask, probe, run_fragment

log = logging.getLogger("sqlanon")

SAMPLE_ROWS_PER_FRAGMENT = 2_000
SAMPLE_MIN_ROWS = 20_000
SAMPLE_BUDGET_BYTES = 16 * 2**20


def default_sample_rows(n_qi: int, n_fragments: int) -> int:
    """The sample's size when ``--sample`` is not given.

    2,000 rows per fragment, at least 20,000: enough to place each cut within
    about 1% of the fragment's rows (a share estimated from n rows errs by
    ~1/sqrt(n)); the paper plans on 0.001% samples with almost no loss of
    utility (BENCHMARKS.md). Capped by :data:`SAMPLE_BUDGET_BYTES` of QI
    values (8 bytes a value: 200,000 rows of 10 QIs), so the coordinator's
    memory stays flat whatever the source's size and the fragment count.
    A bigger sample costs time, not only memory: DuckDB's reservoir draws
    200,000 rows in ~0.3 s, 20,000 in ~0.05 s.
    """
    cap = max(1, SAMPLE_BUDGET_BYTES // (8 * max(1, n_qi)))
    return min(cap, max(SAMPLE_MIN_ROWS, SAMPLE_ROWS_PER_FRAGMENT * n_fragments))


MAX_RETRIES = 100
"""The most reruns of a task ``--retries`` takes."""
DEFAULT_RETRIES = 2
"""Reruns of a failed task on Dask and Spark without ``--retries``."""

MAX_WORKERS = 65536
"""The most ``--workers`` a run takes: past a C int the process pool failed
with an internal OverflowError (more fragments are capped by k: plan_fragments)."""


def _not_int(value) -> bool:
    """Not a whole number: a float, text, or a bool (an int to Python)."""
    return isinstance(value, bool) or not isinstance(value, int)


@dataclass(frozen=True)
class RunOptions:
    """How to run: parallelism, fragmentation and sampling.

    Attributes:
        workers: worker processes (default: CPU count).
        fragments: fragments to cut (default: ``workers``, or more: :func:`fragments_for_memory`).
        fragmentation: ``mondrian`` (Fig. 5) or ``quantile`` (Fig. 4).
        sample: a fraction (``0 < x <= 1``) or a row count (``> 1``); default:
            :func:`default_sample_rows`.
        seed: the sample's seed (``REPEATABLE``).
        worker_memory: DuckDB ``memory_limit`` of each worker (e.g. ``2GB``);
            default: 80% of RAM split between the workers.
        metrics: where to write the metrics table (default: next to the output).
        explain: plan only; nothing is read beyond statistics and the sample.
        progress: called with ``(finished, total)`` fragments: ``(0, total)``
            as they start, then as each finishes.
        status: called with each step of the run as it starts ("reading
            statistics", …, "publishing"), for a progress display.
        executor: ``local`` (process pool), ``dask`` or ``spark`` (see
            :mod:`sqlanon.executors`).
        scheduler: the Dask scheduler address (default: a LocalCluster).
        spark_master: the Spark master URL (default: ``local[workers]``).
        retries: how often Dask or Spark rerun a task that failed or lost its worker.
        task_timeout: seconds a fragment may take before the run fails.
        date_order: ``DMY`` or ``MDY``: how a CSV input writes numeric dates
            (``01/02/2020``); None: DuckDB's guess, refused where the values
            read both ways (:func:`sqlanon.io.csv_date_formats`).
    """

    workers: int | None = None
    fragments: int | None = None
    fragmentation: str = "mondrian"
    sample: float | None = None
    seed: int = 0
    worker_memory: str | None = None
    metrics: str | None = None
    explain: bool = False
    progress: Callable[[int, int], None] | None = None
    status: Callable[[str], None] | None = None
    executor: str = "local"
    scheduler: str | None = None
    spark_master: str | None = None
    retries: int | None = None
    """None: :data:`DEFAULT_RETRIES` on Dask and Spark."""
    task_timeout: float | None = None
    date_order: str | None = None

    def __post_init__(self) -> None:
        if self.date_order is not None and self.date_order not in io.DATE_ORDERS:
            raise ConfigError(f"--date-order must be one of {', '.join(io.DATE_ORDERS)} (either case), "
                              f"not {self.date_order!r}")
        if self.executor not in executors.EXECUTORS:
            raise ConfigError(
                f"unknown executor {self.executor!r}{suggest(self.executor, executors.EXECUTORS)}; "
                f"choose one of {', '.join(executors.EXECUTORS)}"
            )
        for flag, url in (("--scheduler", self.scheduler), ("--spark-master", self.spark_master)):
            if url is not None and not url.strip():  # ignored, or taken for a remote cluster (helper-51)
                raise ConfigError(f"{flag} is empty: give an address, or leave it out for a local cluster")
        if self.scheduler and self.executor != "dask":
            raise ConfigError("--scheduler goes with --executor=dask")
        for flag, url in (("--scheduler", self.scheduler), ("--spark-master", self.spark_master)):
            for address in (url or "").split("://", 1)[-1].split(","):  # a standalone master's HA list too
                port = address.rpartition(":")[2].rstrip("/")
                if ":" in address and port.isdigit() and not 0 < int(port) < 65536:
                    # tcp://host:99999 waited 30 s to fail, exit 1; spark:// tried port 99999 % 65536 (helper-28)
                    raise ConfigError(f"{flag} {url!r} names port {port}: a port is 1 to 65535")
        if self.spark_master and self.executor != "spark":
            raise ConfigError("--spark-master goes with --executor=spark")
        if self.retries is not None and (_not_int(self.retries) or not 0 <= self.retries <= MAX_RETRIES):
            # 2**64 overflowed the Dask scheduler's messages, which shut a shared cluster's workers down;
            # Spark's task.maxFailures is an int (helper-12)
            raise ConfigError(f"--retries must be an integer from 0 to {MAX_RETRIES}, got {self.retries!r}")
        if self.task_timeout is not None and not 0 < self.task_timeout < 10**9:  # a wait longer overflows
            raise ConfigError(
                f"--task-timeout must be a positive number of seconds (below 1e9), got {self.task_timeout!r}"
            )
        # (True is an int to Python: workers=True failed after the statistics, naming workers for fragments.)
        if self.workers is not None and (_not_int(self.workers) or not 1 <= self.workers <= MAX_WORKERS):
            # 2**31 failed as an internal OverflowError in the process pool (helper-29)
            raise ConfigError(f"--workers must be an integer from 1 to {MAX_WORKERS}, got {self.workers!r}")
        if self.fragments is not None and (_not_int(self.fragments) or self.fragments < 1):
            raise ConfigError(f"--fragments must be a positive integer, got {self.fragments!r}")
        if self.fragmentation not in fragmentation.STRATEGIES:
            raise ConfigError(
                f"unknown fragmentation {self.fragmentation!r}{suggest(self.fragmentation, fragmentation.STRATEGIES)}; "
                f"choose one of {', '.join(fragmentation.STRATEGIES)}"
            )
        if self.worker_memory is not None:
            size = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*", str(self.worker_memory),
                                re.I)
            if not size:
                raise ConfigError(f"--worker-memory takes a size such as 2GB or 512MiB, got {self.worker_memory!r}")
            unit = size.group(2).upper()
            nbytes = float(size.group(1)) * (1024 if "I" in unit else 1000) ** "BKMGT".index(unit[0])
            if nbytes < 64 * 2**20:
                # '0GB' failed reading the input (DuckDB: "could not allocate block"), exit 1
                raise ConfigError(f"--worker-memory must be at least 64MiB, got {self.worker_memory!r}")
            if nbytes > 2**50:  # DuckDB's limit wraps past 2**64 bytes, to nothing at all (helper-26)
                raise ConfigError(f"--worker-memory must be at most 1PiB, got {self.worker_memory!r}")
        if self.sample is not None and (
            isinstance(self.sample, bool) or not isinstance(self.sample, (int, float))
            or not 0 < self.sample < math.inf or (self.sample > 1 and self.sample != int(self.sample))
        ):
            # 1.5 is neither: it used to plan from a sample of 1 row.
            shown = f"{self.sample:g}" if isinstance(self.sample, float) else repr(self.sample)
            raise ConfigError(f"--sample must be a fraction in (0, 1] or a whole row count, got {shown}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**31:
            # DuckDB's parser takes a REPEATABLE seed up to a signed 32-bit integer's largest.
            raise ConfigError(f"--seed must be an integer from 0 to {2**31 - 1}, got {self.seed!r}")

    @property
    def n_workers(self) -> int:
        return self.workers or executors.default_workers()


@dataclass(frozen=True)
class RunResult:
    """What one run did (``plan`` only, when explaining)."""

    output: str
    metrics: Metrics | None
    verification: Verification | None
    plan: fragmentation.Plan
    timings: dict[str, float] = field(default_factory=dict)
    workers: int = 1
    sample_rows: int = 0
    seed: int = 0
    run_id: str = ""
    repaired: tuple[int, ...] = ()
    metrics_location: str | None = None
    source_rows: int = 0
    worker_peak_rss_mb: dict[int, float] = field(default_factory=dict)
    """Peak resident memory of each worker process (by pid), in MiB."""
    dialect: str = "duckdb"
    """The SQL dialect the fragments' WHERE clauses are written in."""
    executor: str = "local"
    pass_through_checked: bool = False
    """Whether the pass-through columns were compared with the input by
    checksums (within one engine), not by the row count alone."""
    started_at: str = ""
    """When the run started (UTC, ISO 8601), as its metrics rows record it."""
    source: str = ""
    """The input, as the metrics record it (a local path absolute, a URL without its password)."""
    csv_copy: bool = False
    """Whether the fragments read a Parquet copy of a CSV input, parsed once
    (:meth:`sqlanon.io.Staging.parsed_copy`), not the file itself."""
    ordered_copy: bool = False
    """Whether the fragments read a copy of the input ordered by fragment
    (:meth:`sqlanon.io.Staging.clustered_copy`: of a Parquet input, a DuckDB
    or PostgreSQL table; a CSV input's parsed copy so ordered, with
    :attr:`csv_copy`), not the input itself."""

    def explain(self) -> dict:
        """The plan as ``--explain`` prints it: fragments, WHERE clauses, sizes."""
        frags = []
        for f in self.plan.fragments:
            where, params = fragmentation.where_shown(f.predicates, self.dialect)
            frags.append(
                dict(id=f.id, path=f.path, where=where, params=params,
                     estimated_rows=f.estimated_rows, sample_rows=f.sample_rows)
            )
        return plain(dict(
            source_rows=self.source_rows, sample_rows=self.sample_rows, seed=self.seed,
            strategy=self.plan.strategy, executor=self.executor, workers=self.workers, csv_copy=self.csv_copy,
            ordered_copy=self.ordered_copy, fragments=frags,
        ))

    def to_dict(self) -> dict:
        """The ``--json`` document."""
        doc = self.metrics.to_dict() if self.metrics else {}
        doc.update(
            started_at=self.started_at,
            input=self.source,
            output=self.output,
            fragments=len(self.plan.fragments),
            repaired_fragments=list(self.repaired),
            workers=self.workers,
            executor=self.executor,
            sample_rows=self.sample_rows,
            seed=self.seed,
            run_id=self.run_id,
            metrics_table=self.metrics_location,
            worker_peak_rss_mb=self.worker_peak_rss_mb,
            pass_through_checked=self.pass_through_checked,
            timings=self.timings,
        )
        return plain(doc)


# ----------------------------------------------------------------------- statistics


def _private_directory(prefix: str) -> str:
    """A new directory in TMPDIR only this user may read; if none can be
    made there, the name of one for DuckDB to make when it first spills."""
    try:
        return tempfile.mkdtemp(prefix=prefix)
    except OSError:
        return os.path.join(tempfile.gettempdir(), f"{prefix}{uuid.uuid4().hex[:12]}")


def _coordinator_memory() -> str:
    """The coordinator's DuckDB ``memory_limit``: half the machine's or its
    cgroup's memory (:func:`sqlanon.executors.total_memory`). Its queries
    over all rows (a CSV input's parsed copy, the output's assembly into one
    file, the verification's GROUP BY) run beside its own Python and the
    idle workers (~200 MB each, and the fork server); under DuckDB's default
    (80 % of the cgroup) 40M poker rows into one Parquet file in a 2 GiB
    cgroup were killed by the kernel while verifying, without a word
    (helper-123). DuckDB spills past it."""
    return f"{max(256, int(executors.total_memory() * 0.5 / 2**20))}MB"


def _spill_directory() -> str:
    """The coordinator's own spill directory (:func:`_private_directory`),
    named after its process; those of dead processes (a run killed outright:
    they may hold rows of an input) are removed first."""
    for stale in Path(tempfile.gettempdir()).glob("sqlanon-spill-*-*"):
        pid = stale.name.split("-")[2]
        with contextlib.suppress(OSError, ValueError):
            if stale.stat().st_uid == os.getuid() and not io.alive(int(pid)):
                shutil.rmtree(stale, ignore_errors=True)
    return _private_directory(f"sqlanon-spill-{os.getpid()}-")


def _refuse_signed_zeros(columns: list[str], target) -> None:
    """Refuse the first of ``columns``, which hold both -0.0 and 0.0, into a DuckDB table."""
    if columns:
        raise ConfigError(
            f"column {columns[0]!r} holds both -0.0 and 0.0, whose signs a DuckDB table "
            f"({target.describe()!r}) does not keep apart: write Parquet, drop it (--drop), or cast it to text "
            "in a view"
        )


def _render(source, template: str, **context):
    # PostgreSQL statements travel as text through postgres_query: inline literals.
    return render(template, dialect=source.dialect, inline=source.dialect == "postgres", **context)


PANDAS_INDEX = re.compile(r"__index_level_\d+__")
"""The column pandas writes an unnamed index to (``DataFrame.to_parquet``
of a frame whose index is not 0..n-1: a filtered or sorted one)."""


def check_columns(schema: pa.Schema, spec: AnonymizationSpec, drop: tuple[str, ...], where: str,
                  names: list[str] | None = None, keep: tuple[str, ...] | None = None) -> None:
    """Refuse columns the job names that the input lacks or that cannot
    play their part; ``names``: all the input's columns, where ``schema``
    leaves the dropped ones out. ``keep``, when given, lists every column
    to publish unchanged: any other that is neither a QI, sensitive nor
    dropped is refused (a column new in the source is not published raw)."""
    names = names or schema.names
    if "" in names and "" not in drop:
        raise ConfigError(f"{where} has a column without a name: give it one in a view")
    refuse_reserved([*spec.qi_names, *spec.sensitive])
    if len(names) == 1 and io.looks_delimited(names[0]) and names[0] not in [*spec.qi_names, *spec.sensitive]:
        raise InputError(io.read_as_one_column(where, names[0]))
    named = [("--qi", spec.qi_names), ("--sensitive", spec.sensitive), ("--drop", drop), ("--keep", keep or ())]
    for option, columns in named:
        for c in columns:
            if c not in names:
                raise ConfigError(missing_column(c, where, names, option))
    for option, listed in (("--drop", drop), ("--keep", keep or ())):
        for c in listed:
            if c in spec.qi_names or c in spec.sensitive:
                raise ConfigError(f"{option} names {c!r}, which is a "
                                  f"{'quasi-identifier' if c in spec.qi_names else 'sensitive column'}")
    if keep is not None:
        both = [c for c in keep if c in drop]
        if both:
            raise ConfigError(f"--keep and --drop both name {', '.join(map(repr, both))}")
        unlisted = [c for c in names if c not in (*spec.qi_names, *spec.sensitive, *drop, *keep)]
        if unlisted:
            it, a_column, is_ = ("it", "a column", "is") if len(unlisted) == 1 else ("them", "columns", "are")
            more = f" and {len(unlisted) - 10} more" if len(unlisted) > 10 else ""
            raise ConfigError(
                f"--keep leaves out {', '.join(map(repr, unlisted[:10]))}{more}, {a_column} of {where} that {is_} "
                f"neither a quasi-identifier nor sensitive: list {it} in --keep to publish {it} unchanged, or in "
                f"--drop to leave {it} out"
            )
    index = next((c for c in names if PANDAS_INDEX.fullmatch(c)
                  and c not in (*spec.qi_names, *spec.sensitive, *drop, *(keep or ()))), None)
    if index is not None:
        raise ConfigError(
            f"column {index!r} of {where} is the index pandas wrote with the rows (their positions in the frame, "
            "which would undo the shuffle within each class): drop it (--drop), or write the file with index=False"
        )


def check_column_types(schema: pa.Schema, spec: AnonymizationSpec, drop: tuple[str, ...],
                       names: list[str] | None = None, where: str | None = None,
                       server_types: dict[str, str] | None = None) -> None:
    """Refuse QIs and sensitive columns whose type cannot play their part
    (after :func:`check_columns` found them all), and output columns of
    ``--interval-format bounds`` the input already has. A QI pinned to
    intervals that reads as text is named with the input (``where``) and its
    type there (``server_types``: a database's), not Arrow's 'string' alone:
    a nightly job's column turned text upstream (helper-158)."""
    names = names or schema.names
    for c in spec.qi_names:
        check_type(c, schema.field(c).type, "quasi-identifier")
    for q in spec.quasi_identifiers:
        typ = schema.field(q.name).type
        if q.generalization == "interval" and not fits_interval(typ) and where:
            shown = (server_types or {}).get(q.name) or str(typ)
            raise ConfigError(f"quasi-identifier {q.name!r} of {where} reads as {shown}, and 'interval', asked for "
                              "it, needs numbers, dates or timestamps: cast it in a view, or use set or prefix")
    for c in spec.sensitive:
        check_type(c, schema.field(c).type, "sensitive column")
    # DuckDB (and so Parquet, CSV and DuckDB targets) matches names case-insensitively.
    kept = {fold_name(c): c for c in names if c not in drop}
    for q in spec.quasi_identifiers:
        if resolve_generalization(q, schema.field(q.name).type) == "interval" and spec.interval_format == "bounds":
            for out in (f"{q.name}_lo", f"{q.name}_hi"):
                if fold_name(out) in kept:
                    raise ConfigError(
                        f"--interval-format=bounds would write column {out!r}, which the input already has "
                        f"(as {kept[fold_name(out)]!r}); drop or rename it"
                    )


def domain_stats(
    con: duckdb.DuckDBPyConnection, source: io.Source, spec: AnonymizationSpec, schema: pa.Schema,
    checksum: list[str] | tuple[str, ...] = (), signed_zeros: list[str] | tuple[str, ...] = (),
    loose: list[str] | tuple[str, ...] = (), nul: list[str] | tuple[str, ...] = (),
    widths: Sequence[str] = (), jsonb: dict[str, str] | None = None,
) -> tuple[int, dict[str, ColumnStats], dict[str, int | tuple[int, int]], Checksums, list[str], dict[str, float]]:
    """Row count, per-QI :class:`ColumnStats`, per-sensitive distinct counts,
    the checksum of each ``checksum`` column (``_checksum.sql``), the
    ``signed_zeros`` columns that hold both -0.0 and 0.0 (``_signed_zeros.sql``,
    DuckDB and PostgreSQL) and the bytes a value of each ``widths`` column
    holds on average (text or binary ones, where :func:`measures_widths`:
    :func:`value_widths`), in one pass.

    A ``loose`` sensitive column (PostgreSQL, :func:`_loose_sensitive`) is
    counted by its text and by the server's equality (a ``jsonb`` one, a
    json without equality, as its jsonb); its entry is the pair ``(text,
    equal)`` of counts.

    Raises:
        ConfigError: a PostgreSQL timestamp column (of those the run reads:
            the schema's) holds a time DuckDB cannot; a ``nul`` text column
            (:func:`_nul_columns`, into a PostgreSQL table) holds a NUL byte.
    """
    kinds = {q.name: resolve_generalization(q, schema.field(q.name).type) for q in spec.quasi_identifiers}
    interval = [c for c, k in kinds.items() if k == "interval"]
    floats = [c for c in interval if pa.types.is_floating(schema.field(c).type)]
    # Float QIs generalized otherwise: their min is NaN only where every value is (NaN sorts last)
    nan_sets = [c for c in spec.qi_names if c not in interval and pa.types.is_floating(schema.field(c).type)]
    stamps = [c for c in interval if pa.types.is_timestamp(schema.field(c).type)]
    texts = [c for c in [*spec.qi_names, *spec.sensitive]
             if pa.types.is_string(schema.field(c).type) or pa.types.is_large_string(schema.field(c).type)]
    decimals = {c: (schema.field(c).type.precision, schema.field(c).type.scale) for c in interval
                if pa.types.is_decimal(schema.field(c).type)}
    far = [(f.name, f.type.tz is not None) for f in schema if pa.types.is_timestamp(f.type)
           ] if source.dialect == "postgres" else []
    # A list, map, fixed-size array or enum is searched as its text (a NUL byte is written there as it is)
    cast = [c for c in nul if not (pa.types.is_string(t := schema.field(c).type) or pa.types.is_large_string(t))]
    q = _render(source, "domain_stats.sql", relation=source.relation, qi=spec.qi_names, interval=interval, floats=floats,
                nan_sets=nan_sets, stamps=stamps, texts=texts, sensitive=list(spec.sensitive), checksum=list(checksum),
                signed_zeros=list(signed_zeros), loose=list(loose), jsonb=jsonb or {}, decimals=decimals, far=far,
                nul=list(nul), nul_cast=cast, widths=list(widths),
                binary=[c for c, kind in variable_width(schema).items() if kind == "binary" and c in widths])
    # SQLite's timestamps come back as text (`stamps`), typed below
    typed = {f"{m}{i}": schema.field(c) for i, c in enumerate(spec.qi_names)
             if c in interval and c not in stamps for m in ("min", "max")}
    row = source.fetch(con, q, typed)
    for i, (c, _) in enumerate(far):
        if row.column(f"__sqlanon_far{i}")[0].as_py():
            raise ConfigError(
                f"column {c!r} holds timestamps after 294247-01-10, past the last one DuckDB can hold, which it "
                "would read as times 290,000 years BC: make them NULL or 'infinity', or cast the column to text, "
                "in a view"
            )
    held = [c for i, c in enumerate(nul) if row.column(f"__sqlanon_nul{i}")[0].as_py()]
    if held:
        c, typ = ident(held[0]), schema.field(held[0]).type
        zero = "char(0)" if source.dialect == "sqla:sqlite" else "chr(0)"
        if pa.types.is_string(typ) or pa.types.is_large_string(typ) or pa.types.is_dictionary(typ):
            fix = f"replace({c}, {zero}, '')"
        elif (pa.types.is_list(typ) or pa.types.is_large_list(typ)) and pa.types.is_string(typ.value_type):
            fix = f"list_transform({c}, x -> replace(x, {zero}, ''))"
        else:  # a map, a list of lists: as text
            fix = f"replace(CAST({c} AS VARCHAR), {zero}, '')"
        raise ConfigError(
            f"column {held[0]!r} holds text with a NUL byte, which a PostgreSQL table cannot hold: remove it in a "
            f"view ({fix}), or write a file"
        )
    total = row.column("n_rows")[0].as_py()
    stats: dict[str, ColumnStats] = {}
    unmatched: list[str] = []
    for i, qi in enumerate(spec.quasi_identifiers):
        kind = kinds[qi.name]
        nulls = row.column(f"nulls{i}")[0].as_py()
        has_null = 1 if nulls else 0
        if total and nulls == total:  # a nightly source's column gone empty (helper-100)
            log.warning("quasi-identifier %r is NULL in every row: it is published as NULL, as it is", qi.name)
        if kind == "interval":
            # Mondrian and NCP need only the span of an interval column.
            # In the column's own type (SQLite, say, returns dates as text, and
            # an int min with a float max from a NUMERIC column).
            field = schema.field(qi.name)
            lo_hi = pa.concat_arrays([_as_type(row.column(f"{m}{i}").chunk(0), field) for m in ("min", "max")])
            stats[qi.name] = interval_stats(0, lo_hi, qi.name)
            nan_only = stats[qi.name].min is None  # (NaN is no number of the span)
        else:  # a set's (helper-106)
            nan_only = qi.name in nan_sets and math.isnan(row.column(f"min{i}")[0].as_py() or 0.0)
        if nan_only and nulls < total:
            log.warning("quasi-identifier %r is NULL or NaN in every row: it is published as it is", qi.name)
        if kind == "interval":
            continue
        distinct = row.column(f"d{i}")[0].as_py() + has_null
        domain = present = None
        if kind in ("prefix", "hierarchy"):
            values = _distinct_values(con, source, qi.name, schema.field(qi.name))
            if kind == "hierarchy":  # as the engine matches them: by text
                try:
                    _check_leaves(qi, values)
                except HierarchyError as exc:  # every column's, in one error (one at a time: helper-66)
                    unmatched.append(str(exc))
                    continue
                present = frozenset(as_text(values).to_pylist())
                if why := _header_row(qi, present):  # ARX's format has none
                    log.warning("hierarchy %s starts with a leaf %r, no value of the data (%s): a header row? It is "
                                "read as a leaf (NCP counts it); remove it", qi.hierarchy.source,
                                qi.hierarchy.leaves[0], why)
            else:
                domain = tuple(sorted(set(as_text(values).to_pylist())))
        stats[qi.name] = ColumnStats(distinct, domain=domain, present=present)
    if unmatched:
        raise HierarchyError("; and ".join(unmatched))
    sens = {s: (row.column(f"s{j}")[0].as_py(), row.column(f"e{j}")[0].as_py()) if s in loose
            else row.column(f"s{j}")[0].as_py() for j, s in enumerate(spec.sensitive)}
    # Only the checksum columns as Python values: a min/max of a date column
    # may be 'infinity' or BC, which Python's dates cannot hold.
    names = [n for n in row.column_names if n.startswith("__sqlanon_h")]
    sums = Checksums.from_row(names, [row.column(n)[0].as_py() for n in names], list(checksum))
    mixed = [c for i, c in enumerate(signed_zeros) if row.column(f"__sqlanon_z{i}")[0].as_py()]
    return total, stats, sens, sums, mixed, _widths_of(row, widths, total)


def _input_files(source) -> list[str]:
    """The files a run reads, to tell whether one changed during the run (a
    server's table is read in one snapshot instead)."""
    if isinstance(source, io.FileSource):
        return source.files()
    root = None if source.dialect == "postgres" else source.root  # a DuckDB or SQLite database file
    if not root or not os.path.isfile(root):
        return []
    views_read = source.files_read() if isinstance(source, io.DuckDBSource) else []
    return [root, root + ".wal", root + "-wal", *views_read]  # DuckDB's and SQLite's write-ahead logs


def _probe_cluster(pool, files: tuple[tuple[str, int, int], ...], staging) -> None:
    """A remote cluster's worker must reach the input's files and the staging
    directory (shared storage): otherwise every task read or anonymized its
    fragment and failed writing it, after its retries too. Before any
    fragment, a probe task on every Dask worker, at once (one host without
    the mount failed the fragments sent there, and Dask retried them there),
    and one Spark task (Spark has no call on every executor), or one Dask
    task while the cluster has no worker (an adaptive one scaled down while
    the run sampled: one starts for the task). Tasks, each within
    :data:`PROBE_SECONDS`: a probe on Dask's ``Client.run`` ran on the
    worker's event loop, where a hung mount stopped the run (helper-75)."""
    name = pool.name.capitalize()
    arg = (files, str(staging.parts_dir))
    asked = pool.submit_to_each(probe, arg) if hasattr(pool, "submit_to_each") else {}
    worker_of = {fut: worker for worker, fut in (asked or {"": pool.submit(probe, arg)}).items()}
    deadline = time.monotonic() + PROBE_SECONDS
    pending = set(worker_of)
    gone = 0  # asked workers that left the cluster unasked
    try:
        while pending:
            if time.monotonic() > deadline:
                late = sorted(worker_of[fut] for fut in pending)
                who = (f"the {name} worker{'s' if len(late) > 1 else ''} {', '.join(late)}" if late[0]
                       else f"the {name} cluster")
                raise InputError(f"{who} did not run a first probe task in {PROBE_SECONDS:g} s")
            done, pending = _wait_or_stop(list(pending), HEALTH_CHECK_SECONDS)
            for fut in sorted(done, key=worker_of.get):
                _check_probe(pool, worker_of[fut], fut)
            # Its workers all gone: say so, not wait (Dask's check returns the workers it has now).
            here = pool.check_health() if pending and hasattr(pool, "check_health") else None
            # A worker that left (scaled down, restarted) runs no probe: held to it, it waited for ever, named late.
            if pending and asked:
                for fut in [f for f in pending if worker_of[f] and worker_of[f] not in here]:
                    log.info("the %s worker %s left the cluster before its probe ran", name, worker_of[fut])
                    fut.cancel()
                    pending.discard(fut)
                    gone += 1
                if gone == len(asked):  # every one left: one task asks the worker that starts for it
                    fut = pool.submit(probe, arg)
                    worker_of[fut], pending, gone = "", {fut}, 0
    finally:
        for fut in pending:  # one worker's answer fails the run: the others' are not awaited
            fut.cancel()


def _check_probe(pool, worker: str, fut: Future) -> None:
    """Fail the run on a probe task that failed, or names what its worker cannot reach."""
    who = f"the {pool.name.capitalize()} worker {worker}" if worker else f"a {pool.name.capitalize()} worker"
    try:
        missing = fut.result()
    except Exception as exc:  # noqa: BLE001 - the cluster's own failure, whatever its kind
        raise InputError(f"{who} did not run the probe: {pool.describe_error(exc)}") from exc
    if missing:
        raise InputError(f"{who} cannot reach {missing}: a remote cluster needs the input and the output's "
                         "directory on storage that every worker mounts at the same path")


PROBE_SECONDS = 120.0
"""How long the probe task of a remote cluster may take (a worker starting)."""


_COPIED_AS_THEY_ARE = frozenset({"VARCHAR", "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "FLOAT", "DOUBLE"})
"""DuckDB types whose values DuckDB's postgres extension writes as their
bytes (text) or as a fixed-width big-endian copy: the generalized bounds
not read back."""


def _check_bounds_written(con, staging, target, qi_out: list[str], step) -> None:
    """The generalized QI columns of a PostgreSQL target that are not text
    (``--interval-format bounds``: numbers, dates, timestamps), read back
    through DuckDB and compared with the workers' parts by checksums: they
    travel in DuckDB's postgres extension's binary COPY, whose encoding is
    per type, and its fault with some decimals published wrong bounds, exit
    0 (helper-131): k and l, the row count and the pass-through checksums
    could not see it. Text travels as its bytes, and integers and floats
    as fixed-width big-endian copies: not read again (poker's 20 smallint
    bounds cost 1.6 s of a 7.3 s run read back, BENCHMARKS section 5)."""
    parts = staging.parts_relation()
    types = dict(con.execute(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM {parts})").fetchall())
    bounds = [c for c in qi_out if types.get(c, "VARCHAR") not in _COPIED_AS_THEY_ARE]
    if not bounds:
        return
    step("comparing the generalized bounds with what the workers wrote")
    # Hashed as they are, the server's read back at the parts' types: half the time of their text.
    back = target.bounds_relation(con, staging, {c: types[c] for c in bounds})
    doing = "compare the generalized bounds with what the workers wrote"
    changed = column_checksums(con, parts, bounds, native=True, doing=doing).differences(
        column_checksums(con, back, bounds, native=True, doing=doing))
    if changed:
        raise VerificationError(
            f"refusing to publish {target.describe()!r}: the generalized values of {', '.join(changed)} did not "
            "reach the server as the workers wrote them (their checksums differ): their type does not travel "
            "exactly into PostgreSQL here; publish the QI as text (--interval-format=text)")


def _checksum_dialect(source, target) -> str | None:
    """Where the pass-through columns of the input and the output can be
    compared value for value (by checksums, ``_checksum.sql``): within one
    engine. DuckDB for lakes and DuckDB files, and for those into a
    PostgreSQL table (read back through DuckDB's postgres extension: what it
    changed on the way in shows); PostgreSQL for a table to a table on the
    same server. From PostgreSQL into a file or another server values print
    and hash differently: there the row count is what is checked (and the
    server types that cannot travel are refused up front)."""
    dialect = getattr(target, "dialect", None)
    if source.dialect == "duckdb" and dialect == "postgres":
        return "duckdb"
    if source.dialect != dialect:
        return None
    if dialect == "postgres":
        from .warehouse import same_server

        return dialect if same_server(source.conn, target.conn) else None
    return dialect if dialect == "duckdb" else None


def _check_leaves(qi, values: pa.Array) -> None:
    """Every value of a hierarchy QI must be a leaf, matched by its text; a
    column not read as text (a CSV column DuckDB took for dates: '01/02/2020'
    is matched as '2020-02-01') says so, or the values the error lists appear
    in neither file."""
    try:
        qi.hierarchy.leaf_codes(as_text(values), column=qi.name)
    except HierarchyError as exc:
        if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
            raise
        raise HierarchyError(f"{exc} (the column is read as {values.type}: leaves name its values as listed, "
                             "in that type's text)") from None


def _distinct_values(con, source, column: str, field: pa.Field) -> pa.Array:
    text = pa.types.is_string(field.type) or pa.types.is_large_string(field.type)
    q = _render(source, "distinct_values.sql", relation=source.relation, column=column, text=text,
                float=pa.types.is_floating(field.type))
    return _as_type(source.fetch(con, q, {column: field}).column(0).combine_chunks(), field)


def _as_type(values: pa.Array, field: pa.Field) -> pa.Array:
    """Values a database returned, in their column's type (a no-op for DuckDB
    and PostgreSQL; SQLite returns dates as text, say)."""
    if values.type == field.type:
        return values
    try:
        return values.cast(field.type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise ConfigError(f"column {field.name!r}: cannot read its values as {field.type}: {io.first_line(exc)}"
                          ) from None  # the data's, every retry's: exit 2 (as sqla._column's)


def _portable_sample_hash(seed: int, rows: int, total: int) -> dict[str, int]:
    """The constants of the portable sample (sql_templates/sqlalchemy/sample.sql):
    a row is kept when ``((rn mod 2^32) * multiplier + offset) mod 2^32 < limit``.
    The multiplier is odd (a permutation of 32-bit values) and below 2^31 (the
    product fits a signed 64-bit integer); both it and the offset come from the
    seed through splitmix64, so another seed keeps other rows, not the same
    rows moved by one."""
    h = (seed * 0x9E3779B97F4A7C15 + 0x632BE59BD9B4E5F5) % 2**64
    h = ((h ^ (h >> 30)) * 0xBF58476D1CE4E5B9) % 2**64
    h = ((h ^ (h >> 27)) * 0x94D049BB133111EB) % 2**64
    h ^= h >> 31
    return {
        "hash_multiplier": (h % 2**30) | 2**30 | 1,
        "hash_offset": (h >> 32) % 2**32,
        "hash_limit": min(2**32, round(2**32 * rows / max(total, 1))),
    }


def draw_sample(
    con: duckdb.DuckDBPyConnection, source: io.Source, spec: AnonymizationSpec, schema: pa.Schema, total: int,
    sample: float | None, seed: int, n_fragments: int = 1,
) -> tuple[pa.Table, dict[str, pa.ChunkedArray]]:
    """A repeatable sample of the QI columns, drawn where the data lives
    (DuckDB, or the database server), in the columns' own types; and per
    text QI of a table (not a file: a table's column may have a collation),
    each sample row's rank in the database's own order of the column
    (``ranked_sample.sql``; :func:`~sqlanon.fragmentation.plan_fragments`'s
    ``order``)."""
    if sample is None:
        rows = default_sample_rows(len(spec.qi_names), n_fragments)
    elif sample <= 1:
        rows = max(1, round(total * sample))
    else:
        rows = int(sample)
    rows = min(rows, total)
    ranked = [] if isinstance(source, io.FileSource) else [
        q.name for q in spec.quasi_identifiers
        if q.hierarchy is None and is_text(schema.field(q.name).type)]
    names = [f"__sqlanon_rank_{i}" for i in range(len(ranked))]
    q = _render(
        source, "ranked_sample.sql", relation=source.relation, columns=spec.qi_names, rows=rows, seed=seed,
        whole=rows >= total, pct=min(100.0, 100.0 * rows / max(total, 1)),
        samplable=source.samplable() if source.dialect == "postgres" and rows < total else True,
        ranked=list(zip(ranked, names)), **_portable_sample_hash(seed, rows, total),
    )
    if source.dialect != "duckdb":
        drawn = source.fetch(con, q, {c: schema.field(c) for c in spec.qi_names})  # drawn by the server
        qis = pa.table([_as_type(drawn.column(c).combine_chunks(), schema.field(c)) for c in spec.qi_names],
                       names=spec.qi_names)
    else:
        # A seeded DuckDB sample is repeatable only single-threaded.
        con.execute("SET threads = 1")
        try:
            drawn = source.fetch(con, q)
        finally:
            con.execute("RESET threads")
        qis = drawn.select(spec.qi_names)
    return qis, {c: drawn.column(name) for c, name in zip(ranked, names)}  # (names reserved: refuse_reserved)


# ----------------------------------------------------------------------- the run


def _task(plan_fragment, source, spec, stats, staging, drop, memory, threads, target, compression: str,
          inputs=(), shared=None, handed_on=False) -> FragmentTask:
    """``compression``: the part's (the target's ``part_compression_for``
    the plan's fragments); ``shared``: the file the spec and statistics are
    in; ``handed_on``: the executor hands them to the worker
    (:meth:`sqlanon.executors.DaskExecutor.share`). Either way the task
    leaves them out."""
    where, params = fragmentation.where_sql(plan_fragment.predicates, source.dialect)
    apart = shared is not None or handed_on
    return FragmentTask(
        fragment_id=plan_fragment.id, where=where, params=tuple(params), source=source,
        spec=None if apart else spec, stats=None if apart else stats, shared=shared,
        part_path=staging.part_path(plan_fragment.id), drop=drop, memory_limit=memory, threads=threads,
        temp_directory=staging.spill_dir(str(plan_fragment.id)),
        part_compression=compression, part_is_output=target.parts_are_output,
        as_text=tuple(staging.as_text), arrow_fields=staging.arrow_fields,
        crash_once=os.environ.get(CRASH_ONCE_ENV), inputs=inputs,
    )


def _parse_once(source, slots: int, remote: bool, fragments: int) -> bool:
    """Whether the fragments read a CSV source from one copy of it parsed
    into the staging area (:meth:`sqlanon.io.Staging.parsed_copy`): where
    some of the executor's task ``slots`` would parse the file more than once
    (more fragments than slots; with as many, each parses it once at the
    same time, as fast as the copy), and on this host only (not for a
    ``remote`` cluster: its staging area is its group's to read, and the
    copy holds the input's rows)."""
    return isinstance(source, io.FileSource) and source.fmt == "csv" and fragments > slots and not remote


CLUSTER_PER_SLOT = 8
"""A Parquet source, a DuckDB or PostgreSQL table (or a CSV source's parsed
copy) is copied ordered by fragment
(:func:`_cluster_once`) from this many fragments per task slot: each
fragment then reads a few row groups, not the whole input (~0.05 s per 1M
rows of Parquet), against one copy of it (~0.6 s per 1M rows). Poker, 2
workers: the copy gained from 6 fragments per slot at 10M rows and from
6-8 at 1M (8 under load), lost ~0.1 s at 2-4 at 1M (BENCHMARKS.md,
helper-173); both costs grow with the rows, so the threshold is by
fragments only."""

CLUSTER_PER_SLOT_SERVER = 4
""":data:`CLUSTER_PER_SLOT` of a PostgreSQL table, whose every fragment is a
scan of the table on the server (~0.35 s per 1M rows, 7x a Parquet
file's): poker 1M, 2 workers, alternating runs, the copy as fast at 1-2
fragments per slot, 1.8 s faster at 4 (BENCHMARKS.md)."""


_UNCOPIED_TYPES = re.compile(r"\b(U?HUGEINT|TIMESTAMP_M?S|ENUM|BIGNUM|VARINT|INTERVAL|TIME_NS|BIT|UNION)\b|\[\d+\]")
"""DuckDB types (in DESCRIBE's words, nested too) that a Parquet copy reads
back as others: HUGEINT as DOUBLE, TIMESTAMP_S as TIMESTAMP, an ENUM, a
BIGNUM, a TIME_NS or a BIT as VARCHAR, a UNION as a STRUCT, an ARRAY
(``INTEGER[3]``) as a LIST (helper-176); or cut: an INTERVAL to the
millisecond, in the same type, which the copy's check of the types cannot
see (a DuckDB table output refused its pass-through values). A false match
only costs the copy; a type missing here that reads back as another is
still caught once copied (:meth:`sqlanon.io.Staging.clustered_copy`
compares the types)."""


def _orderable(con: duckdb.DuckDBPyConnection, source, spec: AnonymizationSpec,
               described: list[tuple[str, str]], drop: Sequence[str]) -> bool:
    """Whether the fragments may read ``source`` from one Parquet copy of it
    ordered by fragment (:func:`_may_cluster`): a file (a CSV file's parsed
    copy is ordered so), a PostgreSQL table (:func:`_server_orderable`), or
    a DuckDB table whose kept columns' types a
    Parquet file keeps (:data:`_UNCOPIED_TYPES`: else the copy was made,
    then dropped, and --explain said it would be used) and whose text QIs
    compare byte by byte: a fragment's clause over the copy compares as
    its plain VARCHAR does, so a QI declared COLLATE NOCASE would be cut
    elsewhere than in the table (DuckDB's DESCRIBE shows no collation,
    so the copy's types cannot tell)."""
    if isinstance(source, io.FileSource):
        return True
    if source.dialect == "postgres":
        return _server_orderable(con, source, spec, described)
    if not isinstance(source, io.DuckDBSource):
        return False
    if any(_UNCOPIED_TYPES.search(t) for name, t in described if name not in drop):
        return False
    types = dict(described)
    return not _collated(con, source, [q for q in spec.qi_names if types.get(q) == "VARCHAR"])


_SERVER_COMPARED = re.compile(r"(smallint|integer|bigint|real|double precision|boolean|date"
                              r"|timestamp(\(\d\))? with(out)? time zone|(?P<text>text|character varying(\(\d+\))?))"
                              r"( COLLATE .+)?")
"""A PostgreSQL QI's types (server_columns.sql's words) whose values DuckDB
compares as the server does, a text under a collation :func:`_server_orderable`
tells. Not numeric (an unconstrained one reads as DOUBLE), char(n) (the
server ignores its trailing blanks), an enum (in its declared order), a
domain (by its name here), nor any other: a false miss only costs speed."""


def _server_orderable(con: duckdb.DuckDBPyConnection, source, spec: AnonymizationSpec,
                      described: list[tuple[str, str]]) -> bool:
    """Whether a PostgreSQL ``source``'s fragments may read one Parquet copy
    of it (:func:`_orderable`): each fragment's clause, there run by DuckDB,
    must take the rows the server would. So every QI is of a type both
    compare alike (:data:`_SERVER_COMPARED`), a text one cut by its order
    under a collation that orders its UTF-8 bytes (C or POSIX, or the
    database's own when it is), a hierarchy's text, only matched in lists,
    under a deterministic collation (equal texts are equal bytes;
    ``postgres/text_order.sql``); and no column reads back from Parquet
    otherwise (:data:`_UNCOPIED_TYPES`, asked of DuckDB's reading of the
    server's rows). What cannot be told is a no: a false miss only costs
    speed."""
    types = dict(described)
    compared = [(q, _SERVER_COMPARED.fullmatch(types[q.name])) for q in spec.quasi_identifiers]
    if any(m is None for _, m in compared):
        return False
    try:
        texts = [q for q, m in compared if m.group("text")]
        if texts:
            order = {r["name"]: r for r in source.fetch(con, render(
                "text_order.sql", dialect="postgres", inline=True, relation=source.relation)).to_pylist()}
            if any(not order.get(q.name, {}).get("deterministic" if q.hierarchy else "bytewise") for q in texts):
                return False
        read = con.execute(f"DESCRIBE {source.rows_sql()}").fetchall()
    except (InputError, duckdb.Error):
        return False
    return not any(_UNCOPIED_TYPES.search(row[1]) for row in read)


TEXT_BYTES = 64
"""A variable-width value's bytes in :func:`fragments_for_memory`'s estimate
(its type tells nothing of its length)."""


WIDTH_ROWS = 1_000
"""The first rows :func:`value_widths` measures a column the statistics do not read over."""


def variable_width(schema: pa.Schema) -> dict[str, str]:
    """``schema``'s columns whose values' bytes :func:`value_widths` measures: "text" or "binary" each."""
    kinds = {}
    for f in schema:
        if is_text(f.type) or pa.types.is_string_view(f.type):
            kinds[f.name] = "text"
        elif pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type) or pa.types.is_binary_view(f.type):
            kinds[f.name] = "binary"
    return kinds


def measures_widths(dialect: str) -> bool:
    """Whether ``_widths.sql`` knows how ``dialect`` counts a value's bytes."""
    return dialect in ("duckdb", "postgres") or dialect.startswith(("sqla:sqlite", "sqla:mysql", "sqla:mariadb"))


def _widths_of(row: pa.Table, columns: Sequence[str], rows: int) -> dict[str, float]:
    """Each column's bytes a value, from the sums of ``_widths.sql`` over ``rows`` rows."""
    return {c: float(row.column(f"__sqlanon_width{i}")[0].as_py() or 0) / max(1, rows) for i, c in enumerate(columns)}


def value_widths(con: duckdb.DuckDBPyConnection, source, schema: pa.Schema,
                 known: dict[str, float] | None = None) -> dict[str, float]:
    """Bytes a value of each of ``schema``'s text and binary columns holds,
    on average: ``known`` (the statistics' pass measured those over every
    row, :func:`domain_stats`), the others over the first :data:`WIDTH_ROWS`
    rows of ``source`` (one statement where the data lives, which reads no
    further), no fewer than :data:`TEXT_BYTES` with the offset (the first
    rows' may be NULL or short where later ones are not). A column of long
    text (notes, documents) counted at
    :data:`TEXT_BYTES` made the default fragments too few for a worker's
    memory. A column is left out (counted so) where nothing measured it: a
    database whose SQL :func:`measures_widths` does not know, a failed read
    (the fragments' own reads say what fails)."""
    known = dict(known or {})
    kinds = variable_width(schema)
    columns = [c for c in kinds if c not in known]
    if not columns or not measures_widths(source.dialect):
        return known
    stmt = _render(source, "value_widths.sql", relation=source.relation, widths=columns, rows=WIDTH_ROWS,
                   binary=[c for c in columns if kinds[c] == "binary"])
    try:
        row = source.fetch(con, stmt)
    except (SqlanonError, duckdb.Error) as exc:
        log.debug("text counted at %d bytes a value: its width was not read (%s)", TEXT_BYTES, io.first_line(exc))
        return known
    # Never below the type's figure from a look at the first rows: a column NULL or short there may not be later
    firsts = _widths_of(row, columns, row.column("n_rows")[0].as_py())
    return {**known, **{c: max(w, TEXT_BYTES - 4) for c, w in firsts.items()}}


def fragments_for_memory(rows: int, schema: pa.Schema, n_qi: int, slot_memory: float, workers: int,
                         widths: dict[str, float] | None = None) -> int:
    """The fewest fragments, a multiple of ``workers``, whose rows a worker
    holds within ``slot_memory`` bytes: a fragment is held whole, as Arrow,
    with the engine's arrays beside it, about twice a row's width plus 12
    bytes per QI (poker, 22 bytes and 10 QIs a row: 188 bytes estimated,
    ~160 measured, BENCHMARKS section 4), after ~200 MB of the interpreter's
    own. A variable-width value counts its bytes in ``widths``
    (:func:`value_widths`) and a 4-byte offset, or :data:`TEXT_BYTES` (with its offset)."""
    widths = widths or {}
    per_row = 2 * sum(4 + widths[f.name] if f.name in widths else _value_bytes(f.type) for f in schema)
    per_row += 12 * n_qi + 24
    room = max(slot_memory - 200 * 2**20, 64 * 2**20)
    needed = math.ceil(rows * per_row / room)
    return max(1, workers) * max(1, math.ceil(needed / max(1, workers)))


def _value_bytes(t: pa.DataType) -> int:
    try:
        return max(1, t.bit_width // 8)
    except ValueError:  # of variable width: text, bytes, lists, structs
        return TEXT_BYTES


def _may_cluster(orderable: bool, slots: int, remote: bool, fragments: int, server: bool) -> bool:
    """Whether ``fragments`` fragments read an ``orderable`` source
    (:func:`_orderable`) from one copy of it ordered by fragment: at least
    :data:`CLUSTER_PER_SLOT` per slot (:data:`CLUSTER_PER_SLOT_SERVER` of a
    ``server``'s table), on this host only (as :func:`_parse_once`)."""
    per_slot = CLUSTER_PER_SLOT_SERVER if server else CLUSTER_PER_SLOT
    return orderable and not remote and fragments >= per_slot * max(1, slots)


def _cluster_once(orderable: bool, slots: int, remote: bool, plan: fragmentation.Plan,
                  server: bool) -> tuple[str, list] | None:
    """The order (:func:`sqlanon.fragmentation.cluster_key`) of the one copy
    of an ``orderable`` source the fragments read, its rows ordered by
    fragment (:meth:`sqlanon.io.Staging.clustered_copy`), or None (they
    read the source; :func:`_may_cluster`)."""
    if _may_cluster(orderable, slots, remote, len(plan.fragments), server):
        return fragmentation.cluster_key(plan)
    return None


def _slot_memory(pool, workers: int = 1) -> float:
    """Bytes one task may hold: the executor's per slot, or without one (a
    run in this process, a plan) 80 % of this host's memory over ``workers``."""
    return pool.memory_per_slot if pool is not None else executors.total_memory() * 0.8 / max(1, workers)


def _task_resources(options: RunOptions, pool) -> tuple[str, int]:
    """DuckDB ``memory_limit`` and ``threads`` of one task, from the executor's
    slots, so that the tasks running at once on a host never oversubscribe it."""
    threads = (os.cpu_count() or 1) // (1 if pool is None else max(1, pool.host_slots))
    return options.worker_memory or f"{max(256, int(_slot_memory(pool) / 2**20))}MB", max(1, threads)


def execute(
    plan: fragmentation.Plan,
    make_task: Callable,
    options: RunOptions,
    pool,
) -> tuple[fragmentation.Plan, dict[int, FragmentResult], list[int]]:
    """Run every fragment; repair a fragment too small for k or l by merging it
    with its sibling subtree and running the merged fragment instead.

    ``mondrian`` repairs a fragment as soon as it fails: going up the cut tree,
    the merges end in the same nodes in any order. ``quantile`` merges with
    the smaller neighbour as the plan stands, which earlier merges change: its
    failures wait for the round's last result and are repaired in the plan's
    order, so the output does not depend on which worker finished first."""
    done: dict[int, FragmentResult] = {}
    repaired: list[int] = []
    failed: list[tuple[int, FragmentResult]] = []  # quantile: repaired when nothing is pending
    pending: dict[Future, int] = {}  # in submission order
    started: dict[Future, float] = {}  # when a task could start running
    slots = getattr(pool, "slots", 1)
    total = len(plan.fragments)

    def start_clocks() -> None:
        # The executor runs the oldest `slots` pending tasks: their clocks run.
        now = time.monotonic()
        for fut in list(pending)[:slots]:
            started.setdefault(fut, now)

    def submit(fid: int) -> None:
        task = make_task(plan.fragment(fid))
        if pool is None:
            fut: Future = Future()
            fut.set_result(run_fragment(task))
        else:
            try:
                fut = pool.submit(run_fragment, task, *make_task.handles)
            except BrokenProcessPool as exc:
                # The pool broke: a worker died (killed, out of memory) running
                # an earlier task; this one is merely the first refused.
                raise InputError(
                    f"a worker process died (killed, or out of memory?) before fragment {fid} of {total} was "
                    "handed out; nothing was published"
                ) from exc
        pending[fut] = fid

    def repair(fid: int, res: FragmentResult) -> None:
        nonlocal plan, total
        current = {f.id for f in plan.fragments}
        if fid not in current:
            return  # merged with a fragment repaired before it
        siblings = plan.sibling_of(fid)
        if not siblings:
            raise PrivacyError(f"cannot anonymize the data: {res.reason}")
        log.info("fragment %d is too small (%s): merging with %s", fid, res.reason, siblings)
        for sid in siblings:
            if sid in done:
                _discard_part(make_task, done.pop(sid))
        plan = fragmentation.merge(plan, [fid, *siblings])
        merged = [f.id for f in plan.fragments if f.id not in current]
        repaired.extend(merged)
        for mid in merged:
            submit(mid)
        total = len(plan.fragments)

    if options.progress:
        options.progress(0, total)
    for f in plan.fragments:
        submit(f.id)
    check_health = getattr(pool, "check_health", None)
    while pending or failed:
        if not pending:
            order = {f.id: i for i, f in enumerate(plan.fragments)}
            for fid, res in sorted(failed, key=lambda x: order[x[0]]):
                repair(fid, res)
            failed.clear()
            continue
        start_clocks()
        timeout = _next_deadline(started, options)
        if check_health is not None:  # a cluster whose workers all went away would be waited on for ever
            timeout = HEALTH_CHECK_SECONDS if timeout is None else min(timeout, HEALTH_CHECK_SECONDS)
        finished, _ = _wait_or_stop(list(pending), timeout)
        if check_health is not None and not finished:
            check_health()
        if not finished and options.task_timeout and _next_deadline(started, options) == 0:
            late = min((f for f in started if f in pending), key=started.get)
            raise InputError(
                f"fragment {pending[late]} did not finish within {options.task_timeout:g} s (--task-timeout); "
                "nothing was published"
            )
        for fut in finished:
            fid = pending.pop(fut)
            started.pop(fut, None)
            try:
                res = fut.result()
            except BrokenProcessPool as exc:
                raise InputError(f"a worker process died (killed, or out of memory?) while anonymizing fragment "
                                 f"{fid}; nothing was published") from exc
            except SqlanonError as exc:  # the worker's own error (a read or a write that failed)
                if getattr(pool, "name", "local") == "local":
                    raise
                raise type(exc)(f"fragment {fid}: {exc}") from exc  # on a cluster: which task, as its other failures
            except Exception as exc:  # a task failed on Dask or Spark after its retries
                name = getattr(pool, "name", "local")
                why = getattr(pool, "describe_error", io.first_line)(exc)
                raise InputError(f"fragment {fid} failed on the {name} executor: {why}; nothing was published") from exc
            if fid not in {f.id for f in plan.fragments}:
                _discard_part(make_task, res)  # merged away while running
                continue
            if res.status == "too_small":
                if plan.strategy == "quantile":
                    failed.append((fid, res))
                else:
                    repair(fid, res)
                continue
            done[fid] = res
            phases = ", ".join(f"{name} {s:.2f}s" for name, s in res.timings.items())
            log.info("fragment %d done: %d rows in %.2fs%s (pid %d)", fid, res.rows, res.seconds,
                     f" ({phases})" if phases else "", res.pid)
            if options.progress:
                options.progress(len(done), total)
    # Those that ran: a merge merged again (quantile's nested repairs) is no fragment of the plan (helper-23).
    ran = {f.id for f in plan.fragments}
    return plan, done, [fid for fid in repaired if fid in ran]


def _wait_or_stop(futures: list[Future], timeout: float | None) -> tuple[set, set]:
    """``wait(futures, timeout, FIRST_COMPLETED)``, stopped by a stop signal
    that something swallowed (py4j, DuckDB): one that cut an import short
    left its lock held, a Spark task's thread then waited on it for good, and
    the run, SIGTERM'd, with it (found under load: helper-25's session)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        interrupts.check()
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        step = STOP_POLL_SECONDS if left is None else min(left, STOP_POLL_SECONDS)
        done, pending = wait(futures, timeout=step, return_when=FIRST_COMPLETED)
        if done or (left is not None and left <= step):
            return done, pending


STOP_POLL_SECONDS = 0.5
"""How often a run waiting on its tasks looks for a stop signal."""

HEALTH_CHECK_SECONDS = 5.0
"""How often a cluster executor is asked whether it still has workers while
no fragment finishes."""


def _next_deadline(started: dict, options: RunOptions) -> float | None:
    if not options.task_timeout or not started:
        return None
    return max(0.0, min(started.values()) + options.task_timeout - time.monotonic())


def _discard_part(make_task: Callable, res: FragmentResult) -> None:
    part = make_task.part_path(res.fragment_id)
    if os.path.exists(part):
        os.unlink(part)


def run(
    source: io.Source,
    target: io.Target,
    spec: AnonymizationSpec,
    drop: tuple[str, ...] = (),
    options: RunOptions = RunOptions(),
    output_qi: Callable[[pa.Schema], list[str]] | None = None,
    keep: tuple[str, ...] | None = None,
) -> RunResult:
    """Anonymize ``source`` into ``target`` (see :func:`sqlanon.api.anonymize`)."""
    t_start = time.perf_counter()
    run_id = uuid.uuid4().hex[:16]
    started = dt.datetime.now(dt.timezone.utc)
    timings: dict[str, float] = {}
    workers = options.n_workers
    in_process = executors.in_process(options.executor, workers, options.explain)
    if in_process and options.task_timeout and not options.explain:
        log.warning("the task timeout applies to worker processes; with one worker the run is in this process, untimed")
    if options.retries and options.executor == "local":  # taken and ignored (helper-42); 0 is what it does (188)
        log.warning("--retries applies to Dask and Spark: the local pool reruns no task (a failed one fails the run)")
    # A cluster (Dask, Spark) starts once the job's columns are checked: a
    # typo waited ~30 s for Spark's JVM before its one-line error.
    cluster = not in_process and options.executor != "local"

    def start_executor():
        return executors.make_executor(
            options.executor, workers, scheduler=options.scheduler, spark_master=options.spark_master,
            retries=DEFAULT_RETRIES if options.retries is None else options.retries,
        )

    def step(text: str) -> None:
        interrupts.check()  # each step begins with a look for a stop (a host's timeout between queries)
        log.info("%s", text)  # -v: the log said nothing through the statistics of a large table (helper-42)
        if options.status is not None:
            options.status(text)

    pool = None if in_process or cluster else start_executor()
    if pool is not None:
        # Starting the local pool blocks until its fork server has imported
        # sqlanon and loaded the kernel (about a second): do it while the
        # coordinator reads statistics and plans.
        warm = threading.Thread(target=pool.warm, daemon=True)
    elif cluster:  # its workers are running already
        warm = threading.Thread(target=lambda: None, daemon=True)
    else:
        # In-process run: load the compiled kernel while DuckDB reads (on the
        # first run: compile it).
        from . import kernel

        warm = threading.Thread(target=kernel.load, daemon=True)
    if not options.explain:
        warm.start()
    # Its statistics and sample may spill before the run has a staging area:
    # into a directory of its own in the temporary directory (TMPDIR), not
    # into ./.tmp; made here, private (DuckDB makes it readable by all, and
    # its files hold the input's rows), and removed after.
    spill = _spill_directory()
    with contextlib.ExitStack() as on_failure:
        on_failure.callback(shutil.rmtree, spill, True)
        con = io.connect(memory_limit=_coordinator_memory(), temp_directory=spill)
        on_failure.pop_all()
    staging = None
    succeeded = False
    snapshot_holder = None
    unchanged: dict = {}
    reading = True  # the input is read (a failure then may be a file changing under the run)
    try:
        t0 = time.perf_counter()
        # One consistent view of a live table for every reader of this run.
        source, snapshot_holder = source.export_snapshot()
        # Files have no snapshot: a change is found before publishing. (A
        # DuckDB file that is the output's too is this run's to write.)
        ours = os.path.realpath(target.path) if isinstance(target, io.DuckDBTarget) else None
        inputs = [f for f in _input_files(source) if os.path.realpath(f) not in (ours, f"{ours}.wal")]
        unchanged = io.fingerprint(inputs)
        if isinstance(source, io.FileSource) and any(unchanged.get(f) is None for f in inputs):
            # A lake's file listed when the run opened it and gone already (a directory
            # swapped in by another run's --overwrite): every read would fail as
            # 'No files found that match the pattern', the change told nowhere (helper-170).
            raise _input_changed(target, next(f for f in inputs if unchanged.get(f) is None))
        source.attach(con)
        read = source.server_columns(declared=True) if source.dialect == "postgres" else []
        columns = [(n, t) for n, t, *_ in read]
        declared = {n: d for n, _, d, *_ in read}  # a domain's name, where `columns` has its base type
        bases = {n: b for n, _, _, b, _ in read}  # every domain as its base type
        unreadable = [n for n, *_, readable in read if not readable and n not in drop]
        if unreadable:  # the schema's probe failed as 'permission denied for table people' (helper-61)
            raise InputError(  # a privilege, as the target's: exit 1
                f"the role may not read column(s) {', '.join(map(repr, unreadable[:10]))} of {source.describe()} (a "
                "column grant): GRANT SELECT on them, or leave them out with --drop"
            )
        if columns and drop:  # never read, not even by the schema's probe (a column grant may leave them out)
            source = replace(source, columns=tuple(n for n, _ in columns if n not in drop))
        schema = source.arrow_schema(con)
        try:
            check_columns(schema, spec, drop, repr(source.describe()), names=[n for n, _ in columns] or None,
                          keep=keep)
        except InputError as exc:
            if not (isinstance(source, io.FileSource) and source.fmt == "csv" and len(schema.names) == 1
                    and "reads as one column" in str(exc)):
                raise
            raise InputError(f"{exc}{io.csv_break(source.files(), schema.names[0], source.encoding)}") from None
        try:
            check_column_types(schema, spec, drop, names=[n for n, _ in columns] or None, where=repr(source.describe()),
                               server_types=dict(columns))
        except ConfigError:
            # A CSV file of a header only reads as text in every column, which
            # a pinned interval (or bounds) refused as a job's mistake, exit 2:
            # an empty night's input is a run's failure, as it is from Parquet (helper-80).
            # (A column the job names that the file lacks stays the job's mistake: helper-85.)
            if isinstance(source, io.FileSource) and source.fmt == "csv" and _has_no_rows(con, source):
                raise _no_rows(source) from None
            raise
        out_names = [*(output_qi(schema) if output_qi else spec.qi_names),
                     *(c for c in schema.names if c not in spec.qi_names and c not in drop)]
        if getattr(target, "dialect", None) == "postgres":  # it would cut a longer name (a QI's _lo/_hi too)
            target.fits(out_names, "output column", " (rename it in a view)")
            target.check_swappable(out_names)
        if isinstance(target, io.FileTarget) and target.fmt == "csv":
            _refuse_trimmed_csv_names(out_names, target)
        _warn_of_changes_since_last_run(con, target, options.metrics, spec, schema, keep,
                                        [c for c in schema.names if c not in (*spec.qi_names, *spec.sensitive, *drop)])
        if cluster:
            step(f"starting {'Spark' if options.executor == 'spark' else 'the Dask cluster'}")
            t_cluster = time.perf_counter()
            pool = start_executor()
            # Its own timing: a JVM's start (10-120 s) read as the statistics' (helper-56).
            timings["cluster"] = time.perf_counter() - t_cluster
            if pool.remote:  # the cluster's own task slots, not --workers (or this host's CPUs)
                workers = pool.slots
        elif options.explain and executors.remote_cluster(options.executor, options.scheduler, options.spark_master):
            # The plan of a run on the cluster: of its task slots (the plan of
            # --workers' fragments was not the plan that ran: helper-23).
            step(f"asking the {'Spark' if options.executor == 'spark' else 'Dask'} cluster for its task slots")
            asked = start_executor()
            try:
                workers = asked.slots
            finally:
                asked.shutdown()
        n_fragments = options.fragments or workers
        if columns:
            _check_postgres_source(source, spec, columns, drop, target, schema, snapshot_holder)
        elif isinstance(source, io.DuckDBSource):  # a generated column passed through (helper-17)
            _refuse_generated_from_qis(source.generated_reads(), spec, drop, schema.names, key=fold_name)
        elif getattr(source, "generated", ()):  # SQLite's, MySQL's (helper-197)
            _refuse_generated_from_qis(source.generated, spec, drop, schema.names, key=str.casefold)
        passthrough = [c for c in schema.names if c not in spec.qi_names and c not in drop]
        coarse = [(c, f) for c in getattr(source, "coarse", ()) if c not in drop  # read to tell: only those kept
                  for f in [io.finer_than_microseconds(source.files(), c)] if f]
        if coarse:
            # As a QI too: its interval's upper bound fell below its rows' values ('.000000999' cut).
            c, where = coarse[0]
            of = f" of {where!r}" if len(source.files()) > 1 else ""  # the file of a lake (helper-58)
            field_type = schema.field(c).type
            kind = ("times" if pa.types.is_time(field_type) else
                    "timestamps with a time zone" if getattr(field_type, "tz", None) else "timestamps (INT96)")
            role = ("cannot pass through unchanged" if c in passthrough else
                    "cannot be generalized truthfully as a quasi-identifier" if c in spec.qi_names else
                    "cannot be counted exactly as a sensitive column (two values would read as one)")
            raise ConfigError(
                f"column {c!r}{of} holds nanosecond {kind}, which DuckDB reads to microseconds: it {role}; drop it "
                "(--drop), or write it as text" + (" or as TIMESTAMP_NS" if kind.startswith("timestamps") else "")
            )
        if passthrough and io.csv_to_csv(source, target):
            # Pass the text through, not DuckDB's guess of its type ("yes" would come out as true).
            source = replace(source, text_columns=tuple(passthrough))
            schema = source.arrow_schema(con)
        if isinstance(source, io.FileSource):
            io.refuse_altered_hive_values(source, schema, drop)
        if isinstance(source, io.FileSource) and source.fmt == "csv":  # CSV to CSV: its pass-through is text now
            # A pass over the file's text: ~0.6 s per million rows, nothing shown for 50 s of 40M (helper-123)
            step("checking the CSV input's text")
            worded = [q.name for q in spec.quasi_identifiers
                      if q.by_type and pa.types.is_string(schema.field(q.name).type)]  # text, a set by default
            _refuse_lossy_csv_reads(con, source, schema, passthrough, [c for c in schema.names if c not in drop],
                                    worded)
            typed = [c for c in schema.names if c not in drop and c not in source.text_columns]
            source = replace(source, date_formats=io.csv_date_formats(con, source, schema, typed, options.date_order))
        elif options.date_order:
            log.warning("the date order %s applies to CSV inputs only; %s is not one", options.date_order,
                        source.describe())
        # The input's DuckDB types, for the checks by type (the server's for a PostgreSQL source).
        try:
            described = ([tuple(row[:2]) for row in con.execute(f"DESCRIBE SELECT * FROM {source.relation}").fetchall()]
                         if source.dialect == "duckdb" else columns)
        except duckdb.Error as exc:  # a lake's file gone: said below, not an 'internal error' (helper-170)
            raise InputError(f"cannot read {source.describe()!r}: {io.first_line(exc)}") from exc
        _refuse_zoned_times(spec, schema, described)
        _refuse_untravelling_types(con, source, described, drop, passthrough if source.dialect == "duckdb" else [])
        if source.dialect == "duckdb" and getattr(target, "dialect", None) == "postgres":
            _check_postgres_bound_types(described, passthrough)
            _refuse_nanoseconds_into_postgres(con, source, described, passthrough, spec.qi_names,
                                              output_qi(schema) if output_qi else spec.qi_names)
        compare_on = _checksum_dialect(source, target) if passthrough else None
        # A DuckDB table's storage does not keep -0.0 and 0.0 of one column
        # apart (it compresses them as equal at a checkpoint, after the checksums).
        # Other databases' SQL cannot tell -0.0 (SQLite prints it as 0.0): their parts are asked instead.
        floats = [f.name for f in schema if f.name in passthrough and pa.types.is_floating(f.type)] if isinstance(
            target, io.DuckDBTarget) else []
        zeros, late_zeros = (floats, []) if source.dialect in ("duckdb", "postgres") else ([], floats)
        # A CSV source's Parquet copy for its fragments (Staging.parsed_copy) needs to know too, of every column,
        # and an ordered copy (Staging.clustered_copy) where the plan may have fragments enough.
        server = source.dialect == "postgres"
        orderable = _may_cluster(True, 1, False, n_fragments, server) and _orderable(
            con, source, spec, described, drop)  # probed where a plan may be cut for a copy (on one slot, the fewest)
        copied_zeros = [f.name for f in schema if pa.types.is_floating(f.type) and f.name not in drop] if (
            isinstance(source, io.FileSource) and source.fmt == "csv") or _may_cluster(
            orderable, getattr(pool, "slots", 1), getattr(pool, "remote", False), n_fragments, server) else []
        step("reading statistics")
        into_postgres = getattr(target, "dialect", None) == "postgres"
        loose = _loose_sensitive(columns, spec, None if into_postgres else (
            lambda c: _groupable(snapshot_holder, source, c)))
        # A DuckDB table's text sensitive column declared COLLATE NOCASE (NOACCENT): counted both ways
        collated = _collated(con, source, [s for s in spec.sensitive if dict(described)[s] == "VARCHAR"]
                             ) if isinstance(source, io.DuckDBSource) else []
        summed = passthrough if compare_on == "duckdb" else ()
        # The default fragments' estimate: the widths of the columns the pass reads anyway (value_widths)
        read = {*spec.qi_names, *spec.sensitive, *summed} if options.fragments is None and measures_widths(
            source.dialect) else set()
        total, stats, sens_distinct, in_sums, mixed_zeros, widths = domain_stats(
            con, source, spec, schema, summed, list(dict.fromkeys([*zeros, *copied_zeros])), [*loose, *collated],
            _nul_columns(source, schema, described, drop) if into_postgres else (),
            [c for c in variable_width(schema) if c in read], _json_sensitive(columns, spec))
        copy_plain = any(c in mixed_zeros for c in copied_zeros) or any(  # (a list's -0.0: helper-179)
            io.nests_floats(f.type) for f in schema if f.name not in drop)
        mixed_zeros = [c for c in mixed_zeros if c in zeros]
        for s in collated:
            written, equal = sens_distinct[s]
            sens_distinct[s] = written
            if equal < written:  # counted as written, as the output (plain VARCHAR) is read (helper-159)
                log.warning("sensitive column %r of %r holds %d distinct values that its collation (such as "
                            "NOCASE) holds as %d: l counts them as written ('Flu' and 'flu' two), but a class whose "
                            "l rests on such spellings may hold one value to the source's readers; give the run the "
                            "values as they compare (lower(%s) in a view) if they are one", s, source.describe(),
                            written, equal, ident(s))
        _refuse_equal_values_written_apart(sens_distinct, target)
        sens_distinct = {s: d[1] if s in loose else d for s, d in sens_distinct.items()}
        _refuse_signed_zeros(mixed_zeros, target)
        if compare_on == "postgres":  # in the run's snapshot, on the server
            in_sums = column_checksums(snapshot_holder, source.relation, passthrough, "postgres")
        if total == 0:
            raise _no_rows(source)
        if total < spec.k:
            raise PrivacyError(f"cannot reach k={spec.k}: the input has only {total} row{'' if total == 1 else 's'}")
        for s, d in sens_distinct.items():
            if d < spec.l:
                held = (f"is NULL in every row of {source.describe()!r}" if d == 1 and _all_null(con, source, s)
                        else f"has only {d} distinct value(s)")
                raise PrivacyError(f"cannot reach l={spec.l}: sensitive column {s!r} {held}")
        timings["read"] = time.perf_counter() - t0 - timings.get("cluster", 0.0)

        t0 = time.perf_counter()
        if options.fragments is None:  # the default: one per worker, or more where one would not fit
            slot = _slot_memory(pool, workers)
            held = pa.schema([f for f in schema if f.name not in drop])  # the fragments never read --drop's
            fitting = fragments_for_memory(total, held, len(spec.qi_names), slot, workers,
                                           value_widths(con, source, held, widths))
            if fitting > n_fragments:
                log.info("planning %d fragments, not %d: %d rows in %d would not fit a worker's ~%d MB (--fragments "
                         "sets them)", fitting, n_fragments, total, n_fragments, slot // 2**20)
                n_fragments = fitting
        # At most one fragment per k rows: a smaller one cannot be anonymized
        # on its own and is only merged again, at the cost of a task each
        # (100,000 fragments of 32,561 rows ran for minutes).
        most = max(1, total // spec.k)
        if n_fragments > most:
            if options.fragments is not None:  # asked for; the default (one per worker) is capped silently
                log.warning("%d fragments of %d rows would hold fewer than k=%d rows each: planning at most %d",
                            n_fragments, total, spec.k, most)
            n_fragments = most
        step("sampling and planning fragments")
        sample, order = draw_sample(con, source, spec, schema, total, options.sample, options.seed, n_fragments)
        plan = fragmentation.plan_fragments(sample, spec, n_fragments, options.fragmentation, total_rows=total,
                                            stats=stats, bytewise=_compared_bytewise(source, spec, columns),
                                            text_order=isinstance(source, io.FileSource), order=order)
        stats = {name: replace(s, present=None) for name, s in stats.items()}  # the plan's: not for every task
        timings["fragmentation"] = time.perf_counter() - t0
        log.info("plan: %d fragments from a sample of %d rows", len(plan.fragments), sample.num_rows)
        if options.fragments is not None and len(plan.fragments) < n_fragments:
            # Fragments are asked for to bound a worker's memory: 3 of ~333,000 rows for 64 asked,
            # without a word, when --sample left 3 rows to cut (helper-164).
            log.warning("%d fragments asked for, %d planned (about %d rows each): %s", options.fragments,
                        len(plan.fragments), -(-total // len(plan.fragments)),
                        f"the sample holds only {sample.num_rows} rows to cut; a larger --sample plans more"
                        if sample.num_rows < n_fragments else
                        "the sample's QI values allow no more cuts (few distinct values, or one holding most rows)")
        t0 = time.perf_counter()
        planned = source  # (a plan's checks end below, on what the workers would read)
        if drop and (is_generic(source.dialect) or source.dialect == "duckdb"):
            source = source.leave_out(drop)
        pulled: tuple[str, ...] = ()
        if source.dialect == "postgres":
            into_postgres = getattr(target, "dialect", None) == "postgres"
            source, pulled = _text_pulls(source, spec, columns, drop, into_postgres)
            if into_postgres:
                # A domain by its name only in the source's own database: another
                # database's domain of that name may be another type (numeric(12,0)
                # for numeric(12,2): every value rounded; real for integer), unchecked
                # across databases. There every domain is its base type.
                same_database = compare_on == "postgres"
                target.column_types = _server_types(columns, spec, drop, output_qi(schema) if output_qi else [],
                                                    declared if same_database else bases,
                                                    {} if same_database else bases)
                # (pass-through columns only: a generalized QI is text, whatever the old target had)
                target.base_types = {n: t for n, t in columns if n not in spec.qi_names} if same_database else {}
                target.text_columns = pulled
                target.check_types(None if same_database else snapshot_holder)
        text, cast = _restored_types(described, passthrough, into_postgres=getattr(target, "dialect", None) == "postgres"
                                     ) if source.dialect == "duckdb" else ({}, {})
        if isinstance(source, io.FileSource) and source.fmt == "parquet":
            _warn_duration_qis(source.files(), schema, spec)
        if not target.exact_parts or getattr(target, "dialect", None) == "postgres":  # Parquet on the way (helper-14)
            _check_decimal_hugeints(con, source, [c for c, t in text.items() if t == "HUGEINT"], target)
            if not target.exact_parts:
                _check_negative_intervals(con, source, [f.name for f in schema if f.name in passthrough
                                                        and pa.types.is_interval(f.type)], target)
        else:
            _check_hugeint_minimum(con, source, [c for c, t in text.items() if t == "HUGEINT"], target)
        if source.dialect == "duckdb" and not (isinstance(target, io.FileTarget) and target.fmt == "csv"):
            _check_nested_hugeints(con, source, described, passthrough)
        if spec.interval_format == "bounds" and source.dialect == "duckdb":
            _check_hugeint_bounds(con, source, spec, schema, described)
        if options.explain:
            timings["total"] = time.perf_counter() - t_start
            # What the run would do, on its executor's slots (a remote cluster's asked above: `workers`).
            slots = executors.planned_slots(options.executor, workers, options.spark_master)
            remote = executors.remote_cluster(options.executor, options.scheduler, options.spark_master)
            return RunResult(
                target.describe(), None, None, plan, timings, _at_once(workers, plan), sample.num_rows, options.seed,
                run_id,
                source_rows=total, dialect=source.dialect, executor=options.executor,
                csv_copy=_parse_once(planned, slots, remote, len(plan.fragments)),
                ordered_copy=_cluster_once(orderable, slots, remote, plan, server) is not None,
                started_at=started.isoformat(), source=_recorded(planned),  # a dry run's input was '' (helper-90)
            )

        out_schema = _empty_schema(schema, spec, drop)
        staging = target.new_staging(shared=getattr(pool, "remote", False))
        # A remote cluster's workers must see the input's files as they are here (not a host's own copy).
        seen = tuple((os.path.abspath(f), fp[1], fp[2]) for f, fp in unchanged.items() if fp is not None
                     ) if getattr(pool, "remote", False) else ()
        if getattr(pool, "remote", False):
            _probe_cluster(pool, seen, staging)
        if target.exact_parts:
            staging.as_text = {f.name: "INTERVAL" for f in out_schema if pa.types.is_interval(f.type)}
            if isinstance(target, io.DuckDBTarget):
                staging.as_text.update(text)
                staging.cast_back = cast
        elif isinstance(source, io.FileSource) and source.fmt == "parquet":
            staging.arrow_fields = io.restorable_fields(source.files(), schema, passthrough)
        pulled_from = source
        key = _cluster_once(orderable, getattr(pool, "slots", 1), getattr(pool, "remote", False), plan, server)
        row_group = min(max(4 * max(1, total // len(plan.fragments)), 2048), 122_880)  # ~4 fragments' rows
        if _parse_once(source, getattr(pool, "slots", 1), getattr(pool, "remote", False), len(plan.fragments)):
            step("parsing the CSV input once for the fragments" + (", its rows ordered by fragment" if key else ""))
            pulled_from = staging.parsed_copy(con, source, copy_plain, key, row_group if key else None)
        elif key:
            step("copying the input once, its rows ordered by fragment")
            pulled_from = staging.clustered_copy(con, source, key, row_group, copy_plain) or source
        memory, threads = _task_resources(options, pool)
        # Workers in other processes get the spec and statistics once, not with each task: a cluster
        # by its own means (never through its staging area, which is its group's to write: helper-71),
        # a local pool from a file in the run's private staging area.
        handle = pool.share(spec, stats) if pool is not None else None
        shared = staging.share(spec, stats) if pool is not None and handle is None else None

        compression = target.part_compression_for(total / len(plan.fragments))

        def make_task(frag):
            return _task(frag, pulled_from, spec, stats, staging, drop, memory, threads, target, compression, seen,
                         shared, handle is not None)

        make_task.part_path = staging.part_path
        make_task.handles = () if handle is None else (handle,)
        while warm.is_alive():  # a stop signal must not wait for a worker start that may never end
            warm.join(timeout=0.1)
            interrupts.check()
        step("anonymizing")
        plan, results, repaired = execute(plan, make_task, options, pool)
        if pulled_from is not source:
            staging.drop_parsed_copy()
        interrupts.check()
        if snapshot_holder is not None:  # its locks and snapshot would hold the server up while publishing
            snapshot_holder.close()
            snapshot_holder = None
        # The input is read no more. A file of it that changed meanwhile may
        # have given fragments rows of two versions (whose row count and
        # checksums agree when the new version only moved QI values).
        _refuse_changed_input(unchanged, target)
        reading = False
        timings["anonymize"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        source.detach(con)
        if late_zeros and staging.has_parts():
            row = con.execute(render("signed_zeros.sql", relation=staging.parts_relation(), signed_zeros=late_zeros,
                                     dialect="duckdb").sql).fetchone()
            _refuse_signed_zeros([c for c, both in zip(late_zeros, row[1:]) if both], target)
        step("writing the output")
        relation = target.assemble(con, staging, out_schema)
        timings["write"] = time.perf_counter() - t0

        qi_out = output_qi(schema) if output_qi else spec.qi_names
        # Those whose NaN the workers counted as NULL (domain.as_compared): the floats they read as floats.
        nan_null = [s for s in spec.sensitive if s not in pulled and pa.types.is_floating(schema.field(s).type)]

        def check_output(relation: str):
            server = target.verifier()
            vcon, dialect = server if server is not None else (con, "duckdb")
            with contextlib.closing(vcon) if server is not None else contextlib.nullcontext():
                step(f"checking k={spec.k} l={spec.l} of the output")
                check = verify_relation(vcon, relation, qi_out, spec.k, spec.l, spec.sensitive, dialect=dialect,
                                        nan_null=nan_null)
                if not check.ok:
                    merged = _merged_on_server(vcon, relation, columns, spec) if dialect == "postgres" else ()
                    raise VerificationError(
                        f"refusing to publish {target.describe()!r}: {check.describe_failure()}"
                        + _collation_hint(columns, spec, merged) + _csv_empty_hint(target, spec, schema, check)
                    )
                typed = None
                if isinstance(target, io.FileTarget) and target.fmt == "csv" and spec.l > 1:
                    typed = _check_csv_as_typed(vcon, functools.partial(target.read_back_relation, staging), qi_out,
                                                spec, target, schema)
                warn_null_counted(typed or check)  # a CSV file's 'nan' and 'NA' are missing values to its readers
                if check.rows != total:
                    raise VerificationError(
                        f"refusing to publish {target.describe()!r}: {check.rows} rows written, {total} in the source"
                        + (_qi_collation_hint(columns, spec) if source.dialect == "postgres"
                           else " (did the input change during the run?)")
                    )
                if getattr(target, "dialect", None) == "postgres" and staging.has_parts():
                    _check_bounds_written(con, staging, target, qi_out, step)
                if compare_on:
                    if compare_on != dialect:  # a lake into PostgreSQL: the server's table read back through DuckDB
                        sums_con, typed = con, target.attached_relation(staging)
                    else:
                        sums_con, typed = vcon, target.typed_relation(staging, relation)
                    if compare_on == "duckdb" and not isinstance(target, io.DuckDBTarget):
                        typed = io.cast_columns(typed, cast)  # a fixed-size array comes out of Parquet as a list
                    step("comparing the pass-through columns with the input")
                    out_sums = column_checksums(sums_con, typed, passthrough, compare_on)
                    changed = in_sums.differences(out_sums)
                    if changed:
                        # A list's string 'NULL' arrives in PostgreSQL as NULL (README): said, not "rerun" (helper-193)
                        lists = [c for c in passthrough if repr(c) in changed and pa.types.is_list(
                            schema.field(c).type)] if getattr(target, "dialect", None) == "postgres" else []
                        raise VerificationError(
                            f"refusing to publish {target.describe()!r}: the pass-through values of "
                            f"{', '.join(changed)} did not come through unchanged (their checksums differ from the "
                            "input's): " + (f"a list of {listed(lists)} holding the string 'NULL' reaches PostgreSQL "
                                            "as NULL; " if lists else "")
                            + "the input may have changed during the run (rerun then), or the column's values "
                            "cannot travel exactly (TIME WITH TIME ZONE, UHUGEINT, BIT; an INTERVAL with a fraction "
                            "of a millisecond into Parquet: drop it (--drop) or cast it to text in a view)"
                        )
                    log.info("pass-through columns unchanged (checksums of %d column(s) match)", len(passthrough))
            return check

        def check_read_back(relation: str):
            """:func:`check_output`; a CSV output's line past DuckDB's 2 MB
            (a long text value passing through) read with a larger limit:
            it failed after all the work, with DuckDB's words."""
            def read(line_size: int | None):
                if line_size == staging.line_size:
                    return check_output(relation)
                staging.line_size = line_size
                return check_output(target.staged_relation(staging))

            csv = isinstance(target, io.FileTarget) and target.fmt == "csv"
            return io.with_longer_lines(read, staging.line_size, "the output", whose=lambda exc: csv)

        t0 = time.perf_counter()
        staging.check_ours()  # the run's own parts and output are what it checks (helper-115)
        check = check_read_back(relation)
        timings["verify"] = time.perf_counter() - t0
        # In fragment order, not completion order: float sums then do not
        # depend on which worker finished first (same NCP on every executor).
        parts = [results[fid].metrics for fid in sorted(results) if results[fid].metrics is not None]
        summed = Metrics.combine(parts)
        if summed.classes > check.classes:
            # Fragments published classes with the same values (one hierarchy
            # node, one interval): each fragment's rows of such a class came
            # as a block, which told which side of the plan's cut each row
            # lies on (helper-47). The class's rows are shuffled together.
            log.info("%d published class(es) span fragments: regrouping the output",
                     summed.classes - check.classes)
            t0 = time.perf_counter()
            staging.regroup(con, qi_out)
            target.unassemble(con, staging)
            relation = target.assemble(con, staging, out_schema)
            timings["write"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            check = check_read_back(relation)
            timings["verify"] += time.perf_counter() - t0

        # Classes and DP of what was published (fragments may share generalized
        # values); NCP is per row, so the fragments' sum is exact.
        metrics = replace(
            summed, classes=check.classes, dp=check.dp, min_class_size=check.min_class_size,
            max_class_size=check.max_class_size, achieved_l=check.achieved_l,
        )
        t0 = time.perf_counter()
        metrics_rows = _metrics_rows(
            run_id, started, plan, results, repaired, metrics, spec, options, source, target, sample.num_rows,
            workers, time.perf_counter() - t_start, schema, drop, keep, n_fragments,
        )
        # The point of no return: refused after a Ctrl-C (even one DuckDB
        # swallowed), and not cut short by one (output and metrics together).
        step("publishing")
        with interrupts.deferred():
            location = target.publish_with_metrics(con, staging, metrics_rows, options.metrics)
            staging = None  # published: nothing to roll back
            interrupts.published()  # a signal from now on stops nothing, and is told as after publishing
        timings["write"] += time.perf_counter() - t0
        succeeded = True
    except InputError as exc:
        # A file replaced, rewritten or removed while DuckDB read it fails
        # the read ("TProtocolException: Invalid data", "No such file"),
        # naming the input's directory only: say what happened (helper-80).
        if reading and not isinstance(exc, _InputChanged):
            _refuse_changed_input(unchanged, target, exc)
        raise
    finally:
        # Any failure, Ctrl-C included, before publication: drop what was staged.
        if staging is not None:
            target.rollback(con, staging)
            staging.discard()
        if not succeeded:
            io.abandon_source(con)
        con.close()
        shutil.rmtree(spill, ignore_errors=True)
        if snapshot_holder is not None:
            snapshot_holder.close()
        if pool is not None:
            pool.shutdown(abort=not succeeded)
            if staging is not None:
                # A worker that started a fragment as the staging area was removed
                # made its spill directory in it (a --task-timeout; helper-82): what
                # the stopped workers left goes too. (Removed first all the same: a
                # cluster's stop takes seconds, in which a SIGKILL would leave it.)
                staging.discard()
    timings["total"] = time.perf_counter() - t_start
    rss: dict[int, float] = {}
    for r in results.values():
        rss[r.pid] = max(rss.get(r.pid, 0.0), r.peak_rss_mb)
    # Local paths absolute, as the input's (helper-56: 'out/x.parquet' beside '/abs/in.parquet' in --json).
    return RunResult(
        _recorded(target), metrics, check, plan, timings, _at_once(workers, plan), sample.num_rows, options.seed,
        run_id,
        tuple(repaired), _absolute(location, options.metrics, getattr(target, "path", None)), total, rss,
        source.dialect, options.executor, compare_on is not None,
        started_at=started.isoformat(), source=_recorded(source),
        csv_copy=pulled_from is not source and getattr(source, "fmt", None) == "csv",
        ordered_copy=pulled_from is not source and key is not None,
    )


def _at_once(workers: int, plan: fragmentation.Plan) -> int:
    """The workers a run's fragments ran on: no more than there are fragments
    ('2 fragments on 65536 workers', of --workers 65536: two ran; helper-188)."""
    return max(1, min(workers, len(plan.fragments)))


def _no_rows(source) -> InputError:
    return InputError(f"the input {source.describe()!r} has no rows")


def _has_no_rows(con: duckdb.DuckDBPyConnection, source) -> bool:
    """Whether ``source`` has no row (False when that cannot be read: the caller's error stands)."""
    try:
        return con.execute(f"SELECT count(*) FROM (SELECT 1 FROM {source.relation} LIMIT 1)").fetchone()[0] == 0
    except duckdb.Error:
        return False


_PROBES = ("A", "a", "\u00e9", "e\u0301", "e")
"""Texts apart byte by byte that a collation may hold equal: case, accents,
the Unicode form (NFC holds the two spellings of é equal)."""


def _collated(con: duckdb.DuckDBPyConnection, source, columns: list[str]) -> list[str]:
    """The text ``columns`` of a DuckDB table ``source`` whose collation
    holds different texts equal (NOCASE, NOACCENT, NFC), asked of
    :data:`_PROBES` under each column's collation, which a UNION takes
    from its first side: no row of the table is read (counting every text
    sensitive column twice cost 2.4 s on 10M rows: helper-161)."""
    probes = " UNION ALL ".join(f"SELECT {literal(p)}" for p in _PROBES)
    found = []
    for c in columns:
        groups = con.execute(f"SELECT count(*) FROM (SELECT x FROM ((SELECT {ident(c)} AS x FROM {source.relation} "
                             f"LIMIT 0) UNION ALL ({probes})) GROUP BY x)").fetchone()[0]
        if groups < len(_PROBES):
            found.append(c)
    return found


def _all_null(con: duckdb.DuckDBPyConnection, source, column: str) -> bool:
    """Whether ``column`` of ``source`` is NULL in every row, to say so (a
    sensitive column gone NULL upstream was 'only 1 distinct value(s)';
    helper-158). False when that cannot be read (the caller's message stands)
    or told here (a database's by SQLAlchemy, which quotes its own way)."""
    if source.dialect not in ("duckdb", "postgres"):
        return False
    try:
        counted = source.fetch(con, Rendered(f"SELECT count({ident(column)}) AS n FROM {source.relation}"))
    except SqlanonError:
        return False
    return counted.column(0)[0].as_py() == 0


class _InputChanged(InputError):
    """:func:`_refuse_changed_input`'s."""


def _refuse_changed_input(unchanged: dict, target, failure: InputError | None = None) -> None:
    """Refuse to publish after an input file changed since the run fingerprinted
    it (``unchanged``, :func:`sqlanon.io.fingerprint`): fragments may hold rows of
    two versions (whose row count and checksums agree when the new version
    only moved QI values), and a read may have failed on it (``failure``)."""
    changed = [f for f, seen in io.fingerprint(list(unchanged)).items() if seen != unchanged[f]]
    if changed:
        raise _input_changed(target, changed[0], failure) from failure


def _input_changed(target, path: str, failure: InputError | None = None) -> _InputChanged:
    """The refusal of a run whose input file ``path`` changed during it."""
    return _InputChanged(
        f"refusing to publish {target.describe()!r}: {io.changed_during_run(path)}"
        + (f", and reading it failed ({io.first_line(failure)})" if failure is not None else "")
        + "; rerun once it is complete"
    )


def _refuse_lossy_csv_reads(con: duckdb.DuckDBPyConnection, source: io.FileSource, schema: pa.Schema,
                            passthrough: list[str], columns: list[str], worded: list[str] = ()) -> None:
    """Values DuckDB's typed reading of a CSV file would change, refused by
    column after one pass over the file's text (``csv_lossy_reads.sql``); the
    checksums, which read both sides typed, agreed with both:

    * a column DuckDB guesses to be DOUBLE (numbers too long for an integer
      type) holding more than 15 significant digits: 30-digit account
      numbers were published as one 1.2345678901234568e+29, and a QI's
      interval missed its rows' values (CSV to CSV too: only the
      pass-through columns travel as text there);
    * a timestamp or time with more than six decimals of a second:
      published cut to microseconds;
    * past the rows DuckDB sniffs a column's type from, a number with a
      fraction in a column it guessed to hold integers (112.03 published
      as 112) or one written with leading zeros, a base prefix or digit
      separators (ZIP code 02134 published as 2134, 0x10 as 16: helper-58),
      a truth value written two ways in a column it guessed to hold
      booleans ('yes' beside 'true': published as true, helper-142),
      a time of day in a column it guessed to hold dates, or other text
      after a date ('0044-03-15 BC', PostgreSQL's text of 44 BC, published
      as 0044-03-15, 44 AD: helper-140), a UTC
      offset in one it guessed to hold timestamps without a time zone, or
      times (``10:00:00+05:00`` published as 10:00);
    * a date or timestamp written with a two-digit year ('12/25/45', as
      spreadsheets export US dates), which DuckDB reads as 2045: published
      100 years off (helper-107). (A value that reading
      cannot take at all, 'n/a' among numbers, fails it: :meth:`io.DuckDBReadable.unreadable`.)

    Of ``columns`` (QI, sensitive and pass-through ones; a pass-through
    column read as text is not in ``schema`` as a number or time).

    And, in the same pass, a warning for each QI of ``worded`` (text, its
    generalization left to its type: a set) whose values are numbers, or
    ISO dates, but for a few (at least 90 %): an 'n/a' among the rows DuckDB
    guesses the type from made a nightly job's ages text, published as sets
    instead of intervals, exit 0 (helper-67), and so did a few dates in
    another format (helper-107); a pass of its own where no column is
    typed as numbers or times (a file of text columns: it went unsaid,
    helper-105, helper-107).
    """
    doubles = [c for c in columns if pa.types.is_floating(schema.field(c).type)]
    times = [c for c in columns if pa.types.is_timestamp(schema.field(c).type) or pa.types.is_time(schema.field(c).type)]
    integers = [c for c in columns if pa.types.is_integer(schema.field(c).type)]
    dates = [c for c in columns if pa.types.is_date(schema.field(c).type)]
    booleans = [c for c in columns if pa.types.is_boolean(schema.field(c).type)]
    naive = [c for c in times if getattr(schema.field(c).type, "tz", None) is None]
    yeared = [*dates, *(c for c in times if pa.types.is_timestamp(schema.field(c).type))]
    if not doubles and not times and not integers and not dates and not booleans and not worded:
        return
    text = io.csv_text(source)
    checks = dict(doubles=doubles, times=times, integers=integers, dates=dates, naive=naive, yeared=yeared,
                  booleans=booleans)
    row = text.fetch(con, render("csv_lossy_reads.sql", relation=text.relation, worded=worded, **checks))

    def holding(key: str, i: int) -> str:
        """The lake, or its first file whose text has it (a refusal's: helper-107)."""
        files = source.files()
        for f in files if len(files) > 1 else ():
            one = replace(text, globs=(glob.escape(f),))
            if one.fetch(con, render("csv_lossy_reads.sql", relation=one.relation, worded=[], **checks)
                         ).column(f"{key}{i}")[0].as_py():
                return f
        return source.describe()
    for i, c in enumerate(yeared):
        example = row.column(f"y{i}")[0].as_py()
        if example is not None:  # published 100 years off, as a QI and passed through alike (helper-107)
            what = "dates" if pa.types.is_date(schema.field(c).type) else "timestamps"
            raise ConfigError(
                f"column {c!r} of {holding('y', i)!r} holds {what} with two-digit years such as {example!r}, which "
                "DuckDB reads as 2000-2068 (00-68) or 1969-1999: write the years with four digits, or drop the "
                "column (--drop)")
    for i, c in enumerate(worded):
        values = row.column(f"v{i}")[0].as_py()
        for key, what, odd, fix in (
                ("w", "numbers", "an 'n/a', a decimal comma?", "write those as numbers or empty (NULL)"),
                ("wd", "ISO dates or timestamps", "another date format?", "write every date one way (YYYY-MM-DD)")):
            read = row.column(f"{key}{i}")[0].as_py()
            if values and read < values <= read * 10 / 9:  # (dates: helper-107)
                log.warning("quasi-identifier %r of %r reads as text, so it is generalized as a set, not by "
                            "intervals: %s of its %s values are %s, %s %s not (%s); %s, or pin its generalization "
                            "(--generalization %s=interval refuses such a file)", c, source.describe(), f"{read:,}",
                            f"{values:,}", what, f"{values - read:,}", "is" if values - read == 1 else "are", odd,
                            fix, c)
    past = (" (it guesses a column's type from the first 20,480 rows): convert the file with that column typed (e.g. "
            "to Parquet), drop it (--drop), or, as a pass-through column, write CSV (its text passes through)")
    keys = {fold_name(k) for k in source.hive_keys}
    for key, found, what, advice in (
        ("i", integers, "numbers with a fraction, which DuckDB reads from CSV as integers, rounded", past),
        ("l", integers, "numbers written with leading zeros, a base prefix or digit separators ('0123', '0x10', "
                        "'1_000'), which DuckDB reads from CSV as integers, their text lost", past),
        ("a", dates, "timestamps with a time of day, which DuckDB reads from CSV as dates, without it", past),
        ("b", dates, "dates followed by other text ('0044-03-15 BC', as PostgreSQL writes dates before year 1; "
                     "'12:00 PM'), which DuckDB reads from CSV as dates without it (44 BC as 44 AD)", past),
        ("o", booleans, "truth values written more than one way ('true' and 'yes', 'false' and '0'), which "
                        "DuckDB reads from CSV as one, their text lost",
         ": write each one way, convert the file with that column as VARCHAR (e.g. to Parquet), drop it (--drop), "
         "or, as a pass-through column, write CSV (its text passes through)"),
        ("z", naive, "times with a UTC offset, which DuckDB reads from CSV into a column without a time zone, "
                     "the offset dropped", past),
        ("d", doubles, "numbers of more than 15 significant digits, which DuckDB reads from CSV as DOUBLE (rounded)",
         ": convert the file with that column as VARCHAR or DECIMAL (e.g. to Parquet), drop it (--drop), or, as a "
         "pass-through column, write CSV (its text passes through)"),
        ("t", times, "times finer than microseconds, which DuckDB reads from CSV cut to microseconds",
         ": convert the file with that column as VARCHAR or TIMESTAMP_NS (e.g. to Parquet), drop it (--drop), or, "
         "as a pass-through column, write CSV (its text passes through)"),
    ):
        for i, c in enumerate(found):
            if not row.column(f"{key}{i}")[0].as_py():
                continue
            if fold_name(c) in keys:  # the names of its directories: no file to convert
                raise ConfigError(f"partition key {c!r} of {holding(key, i)!r} holds, in its directory names, "
                                 f"{what}: rename those directories, or drop the key (--drop)")
            raise ConfigError(f"column {c!r} of {holding(key, i)!r} holds {what}{advice}")


def _header_row(qi, present: frozenset) -> str | None:
    """Why the first leaf of ``qi``'s CSV hierarchy looks like a header row
    read as a leaf, or None. It is no value of the data, and: named as the
    column (in any case); or a row of its own above the file's root (its
    last cell, 'top', unlike every other row's '*': the tree got a root,
    '*' too, above both); or a word over leaves that are all numbers ('years' over
    ages). A header other than the column's exact name went unsaid
    (helper-113); a lone first group's leaf ('?;Unknown;*', no value of
    the data) is no header (helper-114). A JSON tree has no header row."""
    h = qi.hierarchy
    first = h.leaves[0]
    if first in present or len(h.leaves) < 2 or not str(h.source).lower().endswith(".csv"):
        return None
    if first.casefold() == qi.name.casefold():
        return "named as its column"
    root = int((h.parent == -1).argmax())
    kids = (h.parent == root).nonzero()[0]
    # The file's own root ('*') under the one added above it and the first row's last cell
    if len(kids) == 2 and int(h.last_leaf[kids[0]]) == 0 and h.names[int(kids[1])] == h.names[root]:
        return "a row of its own above the file's root"

    def number(text: str) -> bool:
        try:
            float(text)
        except ValueError:
            return False
        return True

    if not number(first) and all(number(leaf) for leaf in h.leaves[1:]):
        return "a word over leaves that are numbers"
    return None


_ZONED_TIME = re.compile(r"time(\(\d+\))? with time zone", re.IGNORECASE)
"""DuckDB's TIME WITH TIME ZONE; PostgreSQL's timetz, written time(3) with time zone with a precision."""


_UNITS = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}


def _warn_duration_qis(files: list[str], schema: pa.Schema, spec: AnonymizationSpec) -> None:
    """A QI that pyarrow wrote as a duration (pandas' timedelta) reaches
    DuckDB as its integer count: its intervals are counts of the unit, which
    the published text does not name (``[207000000, 2187000000]`` for
    minutes to half an hour). Said, from the first file's footer, read only
    for a QI that DuckDB gives as BIGINT (a text QI's run read it for nothing)."""
    counts = [q for q in spec.qi_names if pa.types.is_int64(schema.field(q).type)]
    for name, field in io.restorable_fields(files[:1], schema, counts).items():
        if pa.types.is_duration(field.type):
            log.warning("quasi-identifier %r is a duration that DuckDB reads as its count of %s: its generalized "
                        "values are such counts", name, _UNITS.get(field.type.unit, field.type.unit))


def _refuse_zoned_times(spec: AnonymizationSpec, schema: pa.Schema, described: list[tuple[str, str]]) -> None:
    """A TIME WITH TIME ZONE reaches Arrow without its offset (a plain
    time64): as a QI, 12:00+05:30 and 12:00+00 would be published as one
    time. Refused by name as a QI or sensitive column (as a pass-through
    one, the checksums or the server's type refuse it)."""
    times = [c for c in [*spec.qi_names, *spec.sensitive] if pa.types.is_time(schema.field(c).type)]
    if not times:
        return
    for name, typ in described:
        if (name in spec.qi_names or name in spec.sensitive) and _ZONED_TIME.match(typ):
            role = "quasi-identifier" if name in spec.qi_names else "sensitive column"
            raise ConfigError(
                f"column {name!r} is TIME WITH TIME ZONE, whose offset does not reach the anonymizer (two times "
                f"would read as one) and cannot be a {role}: cast it to text, or to a time in one zone, in a view"
            )


_UNION = re.compile(r"(?<![A-Z_])UNION\(")
_NO_ARROW_TYPE = re.compile(r"(?<![A-Z_])(UHUGEINT|BIT|TIME WITH TIME ZONE)(?![A-Z_])")
"""DuckDB types Arrow does not carry exactly: a 16-byte opaque value, bytes,
a time without its offset."""


def _refuse_untravelling_types(con: duckdb.DuckDBPyConnection, source, described: list[tuple[str, str]],
                               drop: tuple[str, ...], passthrough: Sequence[str] = ()) -> None:
    """A DuckDB UNION (a tagged value) reaches Arrow and Parquet as a struct
    of its members: into any output it failed after all the work (the
    checksums, or 'a table cannot be created from an unnamed struct').
    So did a ``passthrough`` column of UHUGEINT, BIT or TIME WITH TIME ZONE
    (a DuckDB source's; a Parquet time adjusted to UTC reads as the
    latter) holding a value, exit 1, its advice to rerun (helper-108); one
    of NULLs only passes (helper-112: counted, such a column only).
    Refused by name up front, as a column or inside one."""
    keep = set(passthrough)
    for name, typ in described:
        bare = re.sub(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"", "''", typ)  # not an ENUM's labels, a struct's fields
        if name not in drop and _UNION.search(bare):
            raise ConfigError(
                f"column {name!r} is {typ}: a UNION cannot travel to any output exactly (Arrow and Parquet "
                "have no such type); drop it (--drop) or cast it to text in a view"
            )
        found = _NO_ARROW_TYPE.search(bare) if name in keep else None
        if found and con.execute(f"SELECT count({ident(name)}) FROM {source.relation}").fetchone()[0]:
            raise ConfigError(
                f"column {name!r} is {typ}: a {found.group(1)} cannot travel to any output exactly (Arrow and "
                "Parquet have no such type); drop it (--drop) or make it text (a view's cast, a file's rewrite)"
            )


def _restored_types(described: list[tuple[str, str]], passthrough: list[str], into_postgres: bool = False):
    """Pass-through columns whose DuckDB type Arrow and Parquet parts do not
    keep, for a DuckDB table output to keep the input's types: UUID, ENUM
    and HUGEINT (VARCHAR, VARCHAR, DECIMAL(38,0) on the way) travel as their
    exact text; a fixed-size array (a list on the way), a JSON (VARCHAR) and
    a TIMESTAMP_S or _MS (microseconds) are only cast back.
    Two maps, name → type: :attr:`io.Staging.as_text` and ``cast_back``
    (also how the output is read for its checksums). ``into_postgres``: a
    JSON inside a list or struct comes back from the server as VARCHAR,
    which prints it quoted: cast back too, or its checksum differs."""
    keep = set(passthrough)
    text, cast = {}, {}
    for name, typ in described:
        if name not in keep:
            continue
        if typ in ("UUID", "HUGEINT") or typ.startswith("ENUM("):
            text[name] = typ
        elif (re.search(r"\[\d+\]$", typ) or typ in ("JSON", "TIMESTAMP_S", "TIMESTAMP_MS")
              or (into_postgres and "JSON" in typ)):
            cast[name] = typ
    return text, cast


def _has_39_digits(con: duckdb.DuckDBPyConnection, source, column: str) -> bool:
    """Whether a HUGEINT ``column`` holds a value DECIMAL(38,0) cannot."""
    limit = "99999999999999999999999999999999999999::HUGEINT"
    c = ident(column)
    return bool(con.execute(f"SELECT count(*) FROM {source.relation} WHERE {c} > {limit} OR {c} < -{limit}")
                .fetchone()[0])


def _check_hugeint_bounds(
    con: duckdb.DuckDBPyConnection, source, spec: AnonymizationSpec, schema: pa.Schema, described: list[tuple[str, str]]
) -> None:
    """A HUGEINT QI's ``_lo``/``_hi`` bounds travel as DECIMAL(38,0) (its
    Arrow form): a value of 39 digits was written into a DuckDB table as an
    invalid decimal that no query could read. Refused by column."""
    wide = [q for q in spec.qi_names if schema.field(q).type == pa.decimal128(38, 0)]
    if not wide:
        return
    types = dict(described)
    for c in wide:
        if types.get(c) == "HUGEINT" and _has_39_digits(con, source, c):
            raise ConfigError(
                f"column {c!r} is a HUGEINT holding values of 39 digits, which its --interval-format=bounds "
                "columns (DECIMAL(38,0) on the way) cannot hold: use --interval-format=text, or cast it in a view"
            )


def _check_decimal_hugeints(con: duckdb.DuckDBPyConnection, source, columns: list[str], target) -> None:
    """A HUGEINT goes into Parquet, and through Parquet parts into
    PostgreSQL, as DECIMAL(38,0): a value of 39 digits would be written as
    an invalid decimal (or fail the load). Refused by column."""
    where = "PostgreSQL" if getattr(target, "dialect", None) == "postgres" else "Parquet"
    for c in columns:
        if _has_39_digits(con, source, c):
            raise ConfigError(
                f"column {c!r} is a HUGEINT holding values of 39 digits, which {where} ({target.describe()!r}) "
                "cannot take (DECIMAL(38,0) at most on the way): write to a DuckDB table, cast it to text in a view, "
                "or drop it (--drop)"
            )


def _check_negative_intervals(con: duckdb.DuckDBPyConnection, source, columns: list[str], target) -> None:
    """Parquet's INTERVAL holds no negative months, days or microseconds: a
    negative one failed the run after all its work, on a staging part file
    ("Parquet files do not support negative intervals", no column named;
    helper-27). Refused by column."""
    for c in columns:
        parts = ", ".join(f"datepart('{p}', {ident(c)}) < 0"
                          for p in ("year", "month", "day", "hour", "minute", "microseconds"))
        if con.execute(f"SELECT count(*) FROM {source.relation} WHERE greatest({parts})").fetchone()[0]:
            raise ConfigError(
                f"column {c!r} holds negative INTERVALs, which a Parquet output ({target.describe()!r}) cannot hold: "
                "write CSV, a DuckDB table or PostgreSQL, cast it to text in a view, or drop it (--drop)"
            )


def _check_hugeint_minimum(con: duckdb.DuckDBPyConnection, source, columns: list[str], target) -> None:
    """Into CSV or a DuckDB table a HUGEINT of 39 digits travels exactly
    (Arrow's decimal128 holds it), but for its smallest value, -2**127:
    DuckDB cannot negate it, and the run failed after all its work ("Out of
    Range Error: Negation of HUGEINT is out of range!", no column named;
    helper-27). Refused by column."""
    for c in columns:
        if con.execute(f"SELECT count(*) FROM {source.relation} WHERE {ident(c)} = "
                       "-170141183460469231731687303715884105727::HUGEINT - 1").fetchone()[0]:
            raise ConfigError(
                f"column {c!r} holds -170141183460469231731687303715884105728, the smallest HUGEINT, which cannot "
                f"travel to {target.describe()!r} on the way sqlanon writes it: cast it to text in a view, or drop it "
                "(--drop)"
            )


_NO_POSTGRES_TYPE = re.compile(r"(?<![A-Z])(UHUGEINT|BIT|TIME WITH TIME ZONE|STRUCT|UNION)(?![A-Z_])")
"""DuckDB types DuckDB's postgres extension cannot write into a PostgreSQL
table as they are: a double, bytea, a time without its offset, or no type
at all (an unnamed composite)."""


def _check_postgres_bound_types(described: list[tuple[str, str]], passthrough: list[str]) -> None:
    """Lake into PostgreSQL: pass-through types the server's table cannot
    take as they are, refused by name before any work (the checksums, or
    the load into the staging table, refused them only after every
    fragment, the latter without naming the column)."""
    keep = set(passthrough)
    for name, typ in described:
        found = _NO_POSTGRES_TYPE.search(typ) if name in keep and not typ.startswith("ENUM(") else None
        if found:
            raise ConfigError(
                f"column {name!r} is {typ}, which cannot reach a PostgreSQL table as it is ({found.group(1)} has no "
                "exact PostgreSQL type on the way): drop it (--drop) or cast it to text in a view"
            )


def _refuse_nanoseconds_into_postgres(con: duckdb.DuckDBPyConnection, source, described: list[tuple[str, str]],
                                      passthrough: list[str], qi: Sequence[str], qi_out: list[str]) -> None:
    """Lake into PostgreSQL: a ``TIMESTAMP_NS`` column (Parquet's nanosecond
    timestamps) holding a digit past the microsecond, which the server's
    ``timestamp`` cuts, refused by name before any work where that changes
    what is published: passed through (refused after all the work by the
    checksums, with a list of other types), counted as sensitive (two values
    made one), or a QI's ``bounds`` (its upper bound below its rows' values:
    refused after the work by the bounds' read-back, helper-140). Read to
    tell: whole microseconds pass; a QI published as text keeps every digit."""
    bounds = {q for q in qi if q not in qi_out and f"{q}_lo" in qi_out}
    cut = [name for name, typ in described if typ == "TIMESTAMP_NS" and (name in passthrough or name in bounds)]
    if not cut:
        return
    row = con.execute("SELECT " + ", ".join(f"bool_or(epoch_ns({ident(c)}) % 1000 <> 0)" for c in cut)
                      + f" FROM {source.relation}").fetchone()
    for c, finer in zip(cut, row):
        if finer:
            fix = ("publish it as text (--interval-format=text)" if c in bounds else
                   "cast it to TIMESTAMP (microseconds) or text in a view, or drop it (--drop)")
            files = source.files() if isinstance(source, io.FileSource) else []
            where = io.finer_than_microseconds(files, c) if len(files) > 1 else None
            of = f" of {where!r}" if where else ""  # the file of a lake, as the coarse columns' check says
            raise ConfigError(f"column {c!r}{of} holds nanosecond timestamps, which a PostgreSQL table keeps to "
                              f"microseconds: {fix}")


_NESTED_HUGEINT = re.compile(r"(?<![A-Z])HUGEINT(?=[\[\],) ])")
"""A HUGEINT inside a list, array or struct type (not UHUGEINT)."""


def _check_nested_hugeints(con: duckdb.DuckDBPyConnection, source, described: list[tuple[str, str]],
                           passthrough: list[str]) -> None:
    """Inside a list or struct a HUGEINT travels as DECIMAL(38,0) and is
    never cast back (only a column of them is): a value of 39 digits was
    written into Parquet or a DuckDB table as a decimal its type cannot
    hold, and the checksums, which compare text, agreed. Refused by column."""
    keep = set(passthrough)
    for name, typ in described:
        if name not in keep or typ == "HUGEINT" or not _NESTED_HUGEINT.search(typ):
            continue
        # Exact: the value as it would travel, compared with itself (a 39-digit string beside it is no HUGEINT).
        c, travels = ident(name), _NESTED_HUGEINT.sub("DECIMAL(38,0)", typ)
        found = con.execute(
            f"SELECT count(*) FROM {source.relation} "
            f"WHERE CAST({c} AS VARCHAR) IS DISTINCT FROM CAST(TRY_CAST({c} AS {travels}) AS VARCHAR)"
        ).fetchone()[0]
        if found:
            raise ConfigError(
                f"column {name!r} holds HUGEINT values of 39 digits in a list or struct, which travel as "
                "DECIMAL(38,0) (38 digits at most): cast it to text in a view, or drop it (--drop)"
            )


def _compared_bytewise(source, spec: AnonymizationSpec, columns: list[tuple[str, str]]) -> dict[str, bool]:
    """Per QI, whether the source compares its values by their bytes, where
    that is known: a file's always; a PostgreSQL column's unless its
    collation or type may hold different texts equal. (A DuckDB column's
    collation is not shown by DuckDB; another database's are its own.)"""
    from .warehouse import equal_apart

    if isinstance(source, io.FileSource):
        return dict.fromkeys(spec.qi_names, True)
    if source.dialect == "postgres":
        types = dict(columns)
        return {q: not equal_apart(types[q]) for q in spec.qi_names if q in types}
    return {}


_HOLDS_TEXT = re.compile(r"(?<![A-Z_])(VARCHAR|ENUM\()")
"""A DuckDB type that is or holds text (a struct's is refused before: :data:`_NO_POSTGRES_TYPE`)."""


def _nul_columns(source, schema: pa.Schema, described: list[tuple[str, str]], drop) -> list[str]:
    """The published text columns of ``source`` that may hold a NUL byte,
    which a PostgreSQL table's text cannot: found by the statistics' pass
    before the work, not by the write after it (helper-87). A DuckDB
    source's columns with text anywhere in their type (``described``: its
    DuckDB types): VARCHAR, VARCHAR[], a map, a list of lists or a
    fixed-size array of text, an enum (whose labels may hold one: they are
    written as text); SQLite's text (helper-93); a PostgreSQL source's hold
    none."""
    if source.dialect == "duckdb":
        return [name for name, typ in described if name not in drop and _HOLDS_TEXT.search(typ)]
    if source.dialect == "sqla:sqlite":
        return [f.name for f in schema if f.name not in drop and pa.types.is_string(f.type)]
    return []


_WRITTEN_AS_COMPARED = re.compile(
    r"smallint|integer|bigint|boolean|text|character varying(\(\d+\))?|character(\(\d+\))?|date|uuid|bytea"
    r"|timestamp(\(\d\))? with(out)? time zone|time(\(\d\))? without time zone|numeric\(\d+,\d+\)|real"
    r"|double precision")
"""Server types (as :meth:`sqlanon.warehouse.PostgresSource.server_columns`
writes them, without a collation) whose values the server holds equal only
when they are written alike: a numeric(p,s) is always written with s digits,
a character(n) padded to n; a float's -0 and 0, one value to the server, are
one to the run too (:func:`sqlanon.domain.normalize_floats`)."""


def _loose_sensitive(columns: list[tuple[str, str]], spec: AnonymizationSpec,
                     groupable: Callable[[str], bool] | None = None) -> list[str]:
    """The sensitive columns of a PostgreSQL source whose server equality may
    make values of different text equal: an unconstrained numeric ('1.0' =
    '1.00'), a citext, a column with a collation (a nondeterministic one:
    'Flu' = 'flu'), and every type not known to be written as it compares
    (:data:`_WRITTEN_AS_COMPARED`): a jsonb ('{"c": 1.5}' = '{"c": 1.50}'), a
    composite holding a numeric, a domain over citext, an interval ('1 day'
    = '24 hours'), an array of any of them (helper-81: only the first three
    were known, and a Parquet output of one value written two ways in every
    class was published as l=2). ``groupable``: whether the server can group
    a column (:func:`_groupable`); one it cannot (xml, point: no equality
    to count by) is left out, but a json, counted as its jsonb (helper-193:
    '{"a":1,"b":2}' and '{"b":2,"a":1}' gave l = 2 in every class of a
    Parquet output; :func:`_json_sensitive`); None: the first three kinds only
    (into a PostgreSQL table, whose check counts as the server does: an
    enum or a domain there cost a second count of the column for nothing,
    and its check's hint blamed them; helper-85)."""
    from .warehouse import equal_apart

    types = dict(columns)
    known = [name for name in spec.sensitive if name in types and (
        equal_apart(types[name]) or types[name].replace("[]", "") == "numeric")]
    other = [name for name in spec.sensitive if name in types and name not in known and groupable is not None
             and not _WRITTEN_AS_COMPARED.fullmatch(types[name].replace("[]", ""))]
    jsons = _json_sensitive(columns, spec)
    return [name for name in spec.sensitive if name in known or name in other and (name in jsons or groupable(name))]


def _json_sensitive(columns: list[tuple[str, str]], spec: AnonymizationSpec) -> dict[str, str]:
    """The json (or json[]) sensitive columns of a PostgreSQL source, each
    to the type it is counted as: no equality on the server, so
    :func:`_loose_sensitive` counts them as jsonb (jsonb[]), which holds one
    object written two ways equal."""
    types = dict(columns)
    return {name: "jsonb" + "[]" * types[name].count("[]") for name in spec.sensitive
            if types.get(name, "").replace("[]", "") == "json"}


def _check_postgres_source(source, spec: AnonymizationSpec, columns: list[tuple[str, str]], drop: tuple[str, ...],
                           target, schema: pa.Schema, snapshot_holder) -> None:
    """The checks of a PostgreSQL input on the run's snapshot session
    (``snapshot_holder``), before any work. A failure of that session (a
    standby's conflict with recovery ends it) is the input's, one line
    (an internal error of three lines: helper-162)."""
    import psycopg

    try:
        if getattr(target, "dialect", None) == "postgres":
            _refuse_ungroupable_sensitive(source, spec, columns, snapshot_holder)
        else:
            _refuse_json_jsonb_cannot_hold(source, spec, columns, snapshot_holder)
        _refuse_uncuttable_qis(source, spec, columns, snapshot_holder)
        _refuse_generated_from_qis(snapshot_holder.execute(render(
            "generated_from.sql", dialect="postgres", inline=True, relation=source.relation, past_stored=True
        ).sql).fetchall(),
            spec, drop, [n for n, _ in columns])
        for view, function in snapshot_holder.execute(render(
                "time_dependent_views.sql", dialect="postgres", inline=True, relation=source.relation,
                past_stored=False).sql):
            log.warning("%s uses %s: each worker reads its fragment at its own time (the snapshot pins "
                        "the rows, not the clock), so a row whose value crosses a cut during the run comes out "
                        "twice or not at all; for a scheduled run, materialize it first (CREATE TABLE AS)",
                        view, function)
        foreign = [r[0] for r in snapshot_holder.execute(render(
            "foreign_reads.sql", dialect="postgres", inline=True, relation=source.relation, past_stored=False).sql)]
        if foreign:
            log.warning("%s reads foreign table(s) %s, whose rows the run's snapshot does not hold (each worker "
                        "reads its fragment in a remote transaction of its own): a change on their server during "
                        "the run publishes rows twice or not at all; for a scheduled run, copy them first "
                        "(CREATE TABLE AS)", source.describe(), ", ".join(foreign))
        _check_numeric_qis(source, spec, columns, snapshot_holder)
        if snapshot_holder.execute("SELECT row_security_active(%s)", (source.relation,)).fetchone()[0]:
            log.warning("row-level security limits what the role reads of %s: only the rows it may see are "
                        "published", source.describe())
        _check_cross_engine_types(columns, spec, drop, target)
        _check_array_subscripts(source, schema, columns, spec, drop, target, snapshot_holder)
    except psycopg.Error as exc:
        raise _probe_failed(source, exc) from exc  # (--debug shows the statement's traceback)


def _server_trouble(exc) -> bool:
    """Whether a probe's failure is the session's or the server's (a lost
    connection, a conflict with recovery on a standby, a cancel, a shutdown,
    a resource), not the statement's: such a probe says nothing of the column's
    type, and a standby's replay conflict was blamed on the QI's type ('is
    integer on the server, whose values a fragment's WHERE clause cannot
    compare', exit 2; helper-162), as was a lock another session holds past
    the role's lock_timeout (55P03)."""
    state = getattr(exc, "sqlstate", None)
    return state is None or state == "55P03" or state[:2] in ("08", "40", "53", "57", "58", "XX")


def _probe_failed(source, exc) -> InputError:
    from .warehouse import recovery_hint

    why = io.first_line(exc)
    return InputError(f"cannot read {source.describe()}: {source.conn.redact(why + recovery_hint(why))}")


def _groupable(server, source, name: str) -> bool:
    """Whether the server can group ``source`` (a PostgreSQL input) by its
    column ``name``: a probe that reads no row, in a savepoint of the run's
    snapshot transaction ``server``, which goes on. A failure of the session
    itself (a standby's conflict with recovery) is the input's, not the
    column's (:func:`_server_trouble`)."""
    return _statement_error(server, source, f"SELECT 1 FROM {source.relation} WHERE false GROUP BY {ident(name)}"
                            ) is None


def _statement_error(server, source, sql: str) -> Exception | None:
    """Run ``sql`` in a savepoint of the run's snapshot transaction
    ``server`` (which goes on): the statement's error, or None. A failure
    of the session or the server (:func:`_server_trouble`) is the input's,
    raised as such."""
    import psycopg

    try:
        with server.transaction():
            server.execute(sql)
    except psycopg.Error as exc:
        if _server_trouble(exc):
            raise _probe_failed(source, exc) from None
        return exc
    return None


def _refuse_trimmed_csv_names(names: list[str], target) -> None:
    """A CSV output's column named with blanks around it ('zip '): DuckDB
    trims a CSV header's names, so the run's own check of the written file
    failed after all the work ("Referenced column "zip " not found", exit
    1; helper-60); a pass-through ' age' beside the QI age was read back as
    the QI (a failed check blaming NULLs), or published for verify to find
    two columns named age (helper-62)."""
    for name in names:
        if name != name.strip(io.CSV_HEADER_BLANKS):
            raise ConfigError(
                f"column {name!r} has blanks around its name, which DuckDB drops reading a CSV header (as "
                f"{name.strip(io.CSV_HEADER_BLANKS)!r}): {target.describe()!r} would not read back as written "
                "(nor be checked); rename it in a view, or write Parquet"
            )


def _refuse_equal_values_written_apart(sens_distinct: dict, target) -> None:
    """A file or DuckDB output keeps a sensitive column's text, and l is
    counted on it: where the server holds values equal that are written
    apart ('1.0' and '1.00', 'Flu' and 'flu' under citext), a class whose
    l values are one value to the source would be published (helper-5).
    A PostgreSQL table keeps the type, and its check counts as the server."""
    if getattr(target, "dialect", None) == "postgres":
        return
    for s, counts in sens_distinct.items():
        if isinstance(counts, tuple) and counts[0] != counts[1]:
            written, equal = counts
            raise ConfigError(
                f"sensitive column {s!r} holds {equal} distinct values written {written} ways (such as 1.0 and "
                "1.00, alone or in a jsonb or composite value, or 'Flu' and 'flu' under citext or a collation): l "
                "would be counted on the text "
                f"{target.describe()!r} publishes; write each value one way in a view (trim_scale({ident(s)}), "
                f"lower({ident(s)}::text), {ident(s)}::jsonb), or publish into PostgreSQL, which counts values as "
                "the server does"
            )


def _collation_hint(columns: list[tuple[str, str]], spec: AnonymizationSpec, merged: Sequence[str] = ()) -> str:
    """Why the server's check can fail where the engine's did not: a sensitive
    column whose collation or type makes different text equal ('Flu' = 'flu',
    1.0 = 1.00); ``merged``: other sensitive columns found to
    (:func:`_merged_on_server`)."""
    types = dict(columns)
    collated = [f"{name!r} ({types[name].split(' COLLATE ', 1)[-1]})"
                for name in [*_loose_sensitive(columns, spec), *merged]]
    if not collated:
        return ""
    return (
        f"; the server counts the values of {', '.join(collated)} under that collation or type, the anonymizer "
        "counts their exact text: give the run those values as the server compares them (e.g. lower(...) or "
        "trim_scale(...) in a view)"
    )


def _merged_on_server(server, relation: str, columns: list[tuple[str, str]], spec: AnonymizationSpec) -> list[str]:
    """The sensitive columns of a PostgreSQL table ``relation`` (a failed
    check's staging table) that hold values of different text the server
    holds equal, beyond the kinds :func:`_collation_hint` knows: a jsonb
    ('{"c": 1.0}' = '{"c": 1.00}'), a composite holding a numeric. Such a
    failure read as the anonymizer's, with no word of why. Asked of the data,
    on the failure's path only: a type is no proof (an enum never merges)."""
    import psycopg

    known = set(_loose_sensitive(columns, spec))
    merged = []
    for name in _loose_sensitive(columns, spec, groupable=lambda c: True):
        if name in known:
            continue
        try:
            with server.transaction():  # a type without equality (json) fails alone
                equal, written = server.execute(f"SELECT count(DISTINCT {ident(name)}), "
                                                f"count(DISTINCT {ident(name)}::text) FROM {relation}").fetchone()
        except psycopg.Error:
            continue
        if equal < written:
            merged.append(name)
    return merged


def _qi_collation_hint(columns: list[tuple[str, str]], spec: AnonymizationSpec) -> str:
    """Why a PostgreSQL source's fragments can hold more rows than it has: a
    QI compared under a collation that equates different strings (citext, a
    nondeterministic collation) puts a row on both sides of a cut."""
    from .warehouse import equal_apart

    collated = [repr(name) for name, typ in columns if name in spec.qi_names and equal_apart(typ)]
    if not collated:
        return ""
    return (
        f"; the server compares {', '.join(collated)} under a collation (or citext) for which different strings "
        "are equal, and a fragment's bounds then took rows of another: give the run its values compared byte "
        "by byte, in a view (name COLLATE \"C\"; a citext column: name::text)"
    )


def _check_csv_as_typed(con, read_as: Callable[..., str], qi: list[str], spec: AnonymizationSpec, target,
                        schema: pa.Schema) -> Verification | None:
    """Refuse a CSV output whose ℓ its readers, who type the file, would
    not find (:func:`verify_as_typed`); the sensitive columns the run held
    as text are the ones whose values can merge. The check as they read
    it, or None where no sensitive column is text or a float (whose 'nan'
    is a missing value to them, as NULL: its classes that reach ℓ only with
    it went unsaid, helper-103)."""
    read = {c for c in spec.sensitive if pa.types.is_string(t := schema.field(c).type)
            or pa.types.is_large_string(t) or pa.types.is_dictionary(t)  # a DuckDB ENUM's labels too
            or pa.types.is_floating(t)}
    check = verify_as_typed(con, read_as, qi, spec.k, spec.l, spec.sensitive) if read else None
    if check is not None and not check.ok:
        raise VerificationError(
            f"refusing to publish {target.describe()!r}: read back with its types, as DuckDB and pandas read a CSV "
            f"file, {check.describe_failure()}; a sensitive value written two ways ('5', '05' and '5.0', 'true' "
            "and 'TRUE', to pyarrow 'true' and '1') is one value to them, as are 'nan' and an empty field of a "
            "column of numbers (NaN and NULL, one value to the run too), and 'NA', 'NaN', 'null' or 'None' and an "
            "empty field (pandas reads them as NULL; pyarrow too in a column of numbers): write each value one "
            "way, or map the NULLs to a text of their own, in a view, or write Parquet"
        )
    return check


def _csv_empty_hint(target, spec: AnonymizationSpec, schema: pa.Schema, check) -> str:
    """Why a CSV output can fail ℓ where the engine did not: '' and NULL."""
    text = [c for c in spec.sensitive if pa.types.is_string(schema.field(c).type)
            or pa.types.is_large_string(schema.field(c).type)]
    short_of_l = check.achieved_l is not None and check.achieved_l < spec.l
    if not (isinstance(target, io.FileTarget) and target.fmt == "csv" and short_of_l and text):
        return ""
    return (
        f"; a CSV file writes '' and NULL as empty fields, which readers (this check too) take as one value: "
        f"if {', '.join(map(repr, text))} {'holds' if len(text) == 1 else 'hold'} both, map one of them in a view, "
        "or write Parquet"
    )


def _refuse_ungroupable_sensitive(source, spec: AnonymizationSpec, columns: list[tuple[str, str]], server) -> None:
    """Into a PostgreSQL table the output's classes are counted on the
    server, grouped by each sensitive column, kept in its server type: a
    json, xml or point one (no equality) failed at that check, after all the
    work, naming the type only. Refused by column up front (a probe that
    reads no row)."""
    types = dict(columns)
    for name in spec.sensitive:
        if not _groupable(server, source, name):
            raise ConfigError(
                f"sensitive column {name!r} is {types.get(name, 'of a type')} on the server, which has no equality "
                "to count its distinct values by: cast it in a view (e.g. to text or jsonb)"
            )


def _refuse_json_jsonb_cannot_hold(source, spec: AnonymizationSpec, columns: list[tuple[str, str]], server) -> None:
    """A json sensitive column into a file is counted as its jsonb
    (:func:`_json_sensitive`): a value jsonb cannot hold ('\\u0000',
    1e1000000) failed the statistics, exit 1, which a scheduler retries for
    ever (helper-198). Refused by name up front, with the server's words
    (a pass casting the column, in a savepoint of the run's snapshot)."""
    for name, cast in _json_sensitive(columns, spec).items():
        # each value cast, no grouping: the statistics' count groups them (once)
        exc = _statement_error(server, source, f"SELECT count(*) FROM {source.relation} WHERE {ident(name)}::{cast} "
                                               "IS NULL")
        if exc is not None:
            raise ConfigError(
                f"sensitive column {name!r} is json holding a value jsonb cannot hold ({io.first_line(exc)}), and l "
                "counts its values as jsonb compares them: cast it to text in a view if its text is the value"
            )


def _refuse_uncuttable_qis(source, spec: AnonymizationSpec, columns: list[tuple[str, str]], server) -> None:
    """A fragment's WHERE clause compares each QI with bound values (``<=``,
    ``IN``): a json, xml, point or hstore QI (no such operator) or a
    composite one (the server takes no literal of a composite as a value
    to compare with) failed there, with the server's words, and only when
    the plan had two fragments or more (helper-27). Refused by column up
    front, on a probe of the clause's shape that reads no row."""
    import psycopg

    types = dict(columns)
    for q in spec.quasi_identifiers:
        name, c = q.name, ident(q.name)
        # A hierarchy's cuts are leaf lists (IN); the others' cut points (<=): an
        # hstore QI with a hierarchy has = but no <= (helper-30).
        # NULL is of unknown type, as a bound value is (and no parameter: a '%' in a name is no placeholder then).
        compare = f"{c} IN (NULL)" if q.hierarchy is not None else f"{c} <= NULL"
        try:
            with server.transaction():  # a savepoint: the run's snapshot transaction goes on
                oid = server.execute(f"SELECT {c} FROM {source.relation} WHERE false AND {compare}"
                                     ).description[0].type_code
                if server.execute("SELECT typtype = 'c' FROM pg_type WHERE oid = %s", (oid,)).fetchone()[0]:
                    why = "a composite, which the server takes no literal of"
                else:
                    continue
        except psycopg.Error as exc:
            if _server_trouble(exc):
                raise _probe_failed(source, exc) from None
            why = io.first_line(exc)
            if "operator does not exist" in why and "." in types.get(name, ""):
                # An extension's type (public.hstore): its operators are not pg_catalog's, the only
                # schema the run's sessions search (warehouse.SAFE_PATH)
                why += "; the run's sessions look up operators in pg_catalog only"
        raise ConfigError(
            f"quasi-identifier {name!r} is {types.get(name, 'of a type')} on the server, whose values a fragment's "
            f"WHERE clause cannot compare ({why}): cast it in a view (e.g. to text)"
        )


def _refuse_generated_from_qis(pairs, spec: AnonymizationSpec, drop: tuple[str, ...], names: list[str],
                               key=lambda name: name) -> None:
    """A generated column computed from a QI (``age_months = age * 12``)
    passed through unchanged and gave the QI's exact value away beside its
    generalization. ``pairs``: each generated column with a column it reads,
    of a PostgreSQL or DuckDB source; DuckDB's may read each other
    (``y = m + 1``, ``m = age * 12``), and its names compare by ``key``
    (:func:`fold_name`: ``AGE * 12`` reads ``age``). Those of the input's columns
    (``names``: a view's table may have others) are refused by name, with
    the QI they read; and so is a QI generated from such a column."""
    reads: dict[str, set[str]] = {}
    for generated, read in pairs:
        reads.setdefault(key(generated), set()).add(key(read))
    qis = {key(q): q for q in spec.qi_names}

    def first_read(column: str, among: dict[str, str], seen: frozenset = frozenset()) -> str | None:
        """The first column of ``among`` that ``column`` reads, through generated columns."""
        for read in reads.get(column, ()):
            if read in among:
                return among[read]
            if read not in seen and (found := first_read(read, among, seen | {column})):
                return found
        return None

    left_out = {key(c) for c in [*spec.qi_names, *drop]}
    for generated in names:
        qi = first_read(key(generated), qis) if key(generated) not in left_out else None
        if qi is not None:
            raise ConfigError(
                f"column {generated!r} is generated from quasi-identifier {qi!r} and would be published "
                f"unchanged, giving its value away: drop it (--drop) or make it a quasi-identifier too"
            )
    # The other way: a QI computed from columns published as they are (age from
    # birth) is computed again by any reader of the output (helper-197); not one
    # that also reads a column left out (bmi of a published height and a dropped
    # weight; helper-198).
    published = {key(n): n for n in names if key(n) not in left_out}

    def bases(column: str, seen: frozenset) -> set[str]:
        """The columns ``column`` is computed from, generated ones followed to theirs."""
        found = set()
        for read in reads.get(column, ()):
            found |= {read} if read in published or read in qis or read not in reads or read in seen else bases(
                read, seen | {read})
        return found

    for q in spec.qi_names:
        if key(q) not in reads:
            continue
        from_ = bases(key(q), frozenset({key(q)}))
        shown = sorted(published[c] for c in from_ if c in published)
        if shown and all(c in published or c in qis for c in from_):
            raise ConfigError(
                f"quasi-identifier {q!r} is generated from {_columns(shown)}, which would be published "
                f"unchanged and give the quasi-identifier's value away: drop it (--drop) or make it a "
                "quasi-identifier too"
            )


def _check_numeric_qis(source, spec: AnonymizationSpec, columns: list[tuple[str, str]], server) -> None:
    """A PostgreSQL ``numeric`` QI must reach the engine exactly, and its
    ``--interval-format bounds`` must be writable.

    DuckDB's postgres extension reads ``numeric(p, s)`` with p <= 38 as an
    exact DECIMAL, but an unconstrained ``numeric`` (or p > 38) as DOUBLE, and
    a ``NaN`` as 0: published intervals would then miss true values, and a
    NaN would be published as 0. Refused by name, with the view to write.
    """
    types = dict(columns)
    for name in spec.qi_names:
        typ = types.get(name, "")
        if not typ.startswith("numeric"):
            continue
        m = re.fullmatch(r"numeric\((\d+),(\d+)\)", typ)
        if m is None or int(m.group(1)) > 38:
            raise ConfigError(
                f"quasi-identifier {name!r} is {typ} on the server, which reaches sqlanon as a rounded double: "
                f"cast it in a view to numeric(p,s) with p <= 38 (exact: {ident(name)}::numeric(20,6)) or to double "
                "precision"
            )
        if int(m.group(2)) > int(m.group(1)) and spec.interval_format == "bounds":  # numeric(3,5): below 0.001
            raise ConfigError(  # a Parquet part cannot hold a decimal so typed: refused after the work (helper-193)
                f"quasi-identifier {name!r} is {typ} on the server (a scale above its precision), which "
                "--interval-format=bounds cannot write: cast it in a view to "
                f"numeric({m.group(2)},{m.group(2)}), or publish it as text (--interval-format=text)"
            )
        nan = server.execute(f"SELECT count(*) FROM {source.relation} WHERE {ident(name)} = 'NaN'").fetchone()[0]
        if nan:
            raise ConfigError(
                f"quasi-identifier {name!r} holds {nan} NaN value(s), which reach sqlanon as 0: "
                f"make them NULL in a view (NULLIF({ident(name)}, 'NaN'))"
            )


def _check_cross_engine_types(columns: list[tuple[str, str]], spec: AnonymizationSpec, drop, target) -> None:
    """Pass-through types that cannot reach a file exactly from PostgreSQL.

    Between engines no checksum compares the values (only the row count), so
    what DuckDB's postgres extension would change on the way is refused by
    name up front: ``time with time zone`` loses its offset; an ``interval``
    in a Parquet file keeps milliseconds only, and so does one in an array
    into any file (the workers' Parquet parts hold it: only a column of
    intervals travels as text). (A PostgreSQL target gets the server's own
    types back, and its checksums compare the values.)
    """
    if getattr(target, "dialect", None) == "postgres":
        return
    parquet = getattr(target, "fmt", "parquet") == "parquet" and not getattr(target, "exact_parts", False)
    for name, typ in columns:
        if name in spec.qi_names or name in drop:
            continue
        nested = typ.startswith("interval") and typ.endswith("]")
        if _ZONED_TIME.match(typ) or (parquet and typ.startswith("interval")) or nested:
            where = "a file" if _ZONED_TIME.match(typ) or nested else "a Parquet file"
            raise ConfigError(
                f"column {name!r} is {typ} on the server, which cannot reach {where} exactly: "
                f"drop it (--drop) or cast it to text in a view"
            )


def _check_array_subscripts(source, schema: pa.Schema, columns: list[tuple[str, str]], spec: AnonymizationSpec,
                            drop, target, server) -> None:
    """A PostgreSQL array whose subscripts do not start at 1 ('[0:1]={7,8}')
    reaches a file as a list, which has no subscripts: it was published as
    [7, 8], its elements' positions shifted, with exit 0 (helper-54). Such a
    pass-through column is refused by name (one scan of the array columns;
    into PostgreSQL arrays travel as the server's text, and keep them).
    The columns DuckDB reads as lists, whatever the server calls their type
    (a domain over int[], a text[] with a collation); numeric ones travel as text."""
    if getattr(target, "dialect", None) == "postgres":
        return
    types = dict(columns)
    arrays = [f.name for f in schema if (pa.types.is_list(f.type) or pa.types.is_large_list(f.type))
              and not types.get(f.name, "").startswith("numeric") and f.name not in spec.qi_names
              and f.name not in drop]
    if not arrays:
        return
    import psycopg

    try:
        shifted = server.execute(
            "SELECT " + ", ".join(f"coalesce(bool_or(array_dims({ident(c)}) !~ '^(\\[1:[0-9]+\\])+$'), false)"
                                  for c in arrays) + f" FROM {source.relation}"
        ).fetchone()
    except psycopg.Error as exc:  # a statement_timeout: as the run's other reads say it (helper-57)
        why = io.first_line(exc)
        why += io.safe_path_hint(why)
        raise InputError(f"cannot read {source.describe()}: {source.conn.redact(why)}") from None
    for name, moved in zip(arrays, shifted):
        if moved:
            raise ConfigError(
                f"column {name!r} holds arrays whose subscripts do not start at 1 (such as '[0:1]={{7,8}}'), which "
                "a file's lists cannot keep: cast it to text in a view, or drop it (--drop)"
            )


# Server types DuckDB's postgres extension reads and writes back exactly
# (binary COPY both ways), as format_type names them. Arrays are not among
# them: PostgreSQL does not fix their dimensions (a 2-D one fails DuckDB's
# read) and a text[]'s string 'NULL' comes back as a NULL.
_BINARY_EXACT = re.compile(
    r"(smallint|integer|bigint|real|double precision|boolean|text|bytea|date|uuid|jsonb?"
    r"|character( varying)?(\(\d+\))?|interval(\(\d+\))?( [a-z ]+(\(\d+\))?)?"
    r"|time(\(\d+\))? without time zone|timestamp(\(\d+\))?( with(out)? time zone)?)"
    r"( COLLATE .+)?",  # the whole name: 'text.mood' is a type of a schema named text
    re.IGNORECASE,
)


def _text_pulls(source, spec: AnonymizationSpec, columns: list[tuple[str, str]], drop: tuple[str, ...] = (),
                into_postgres: bool = False):
    """Pull some pass-through columns of a PostgreSQL source as text, and
    leave ``--drop`` columns out of the workers' SELECT.

    DuckDB's postgres extension reads an unconstrained ``numeric`` as DOUBLE
    and a ``NaN`` as 0: numerics always travel as their text (in a lake
    target they stay text). Into PostgreSQL every type the extension does not
    carry back exactly (see :data:`_BINARY_EXACT`: a composite, an oid, an
    array, a time with time zone...) travels as the server's own text and
    gets its type back on the server. A dropped column is never read (DuckDB
    may not read it at all: a 2-D array).

    Returns:
        The source, and the columns pulled as text.
    """
    text = tuple(
        name for name, typ in columns
        if name not in spec.qi_names and name not in drop
        and (typ.startswith("numeric") or (into_postgres and not _BINARY_EXACT.fullmatch(typ)))
    )
    arrays = tuple(name for name, typ in columns if name not in drop and name not in text and "[]" in typ)
    if not text and not drop:
        return replace(source, arrays=arrays), ()
    kept = tuple(name for name, _ in columns if name not in drop)
    return replace(source, text_columns=text, columns=kept, arrays=arrays), text


def _server_types(columns, spec: AnonymizationSpec, drop, qi_out: list[str],
                  declared: dict[str, str], bases: dict[str, str] | None = None) -> dict[str, str]:
    """Server types for the target: pass-through columns keep theirs (a
    domain's name: its base type dropped the domain and its constraint,
    helper-54), generalized QIs become text, ``_lo``/``_hi`` bounds take the
    QI's (base) type: ``bases``' in another database, where a domain of the
    source's is no type (a QI of a domain over integer was refused there,
    naming its ``_lo`` column, helper-135)."""
    out: dict[str, str] = {}
    for name, typ in columns:
        if name in drop:
            continue
        if name in spec.qi_names:
            if f"{name}_lo" in qi_out:
                out[f"{name}_lo"] = out[f"{name}_hi"] = (bases or {}).get(name, typ)
            else:
                out[name] = "text"
        else:
            out[name] = declared.get(name, typ)
    return out


def _empty_schema(schema: pa.Schema, spec: AnonymizationSpec, drop: tuple[str, ...]) -> pa.Schema:
    """The output schema, for an output with no rows (never published, but typed)."""
    fields = []
    for f in schema:
        if f.name in drop:
            continue
        fields.append(pa.field(f.name, pa.string()) if f.name in spec.qi_names else f)
    return pa.schema(fields)


METRICS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("started_at", pa.timestamp("us", tz="UTC")),
        ("kind", pa.string()),
        ("fragment_id", pa.int32()),
        ("where_clause", pa.string()),
        ("where_params", pa.string()),
        ("rows", pa.int64()),
        ("classes", pa.int64()),
        ("min_class_size", pa.int64()),
        ("achieved_l", pa.int32()),
        ("dp", pa.int64()),
        ("ncp", pa.float64()),
        ("gcp", pa.float64()),
        ("seconds", pa.float64()),
        ("repaired", pa.bool_()),
        ("worker_pid", pa.int64()),
        ("worker_peak_rss_mb", pa.float64()),
        ("k", pa.int32()),
        ("l", pa.int32()),
        ("source", pa.string()),
        ("target", pa.string()),
        ("parameters", pa.string()),
        ("sample_rows", pa.int64()),
        ("sample_seed", pa.int64()),
        ("plan", pa.string()),
    ]
)


def _warn_of_changes_since_last_run(con, target, where: str | None, spec: AnonymizationSpec, schema: pa.Schema,
                                    keep: tuple[str, ...] | None, unchanged: list[str]) -> None:
    """Warn of what the output's readers see change since the last run that
    published ``target`` (its metrics, ``where``), while the run succeeds:

    - a QI generalized, by its type, otherwise: ages as sets, ``{23, 25}``,
      where they were intervals (helper-67). A column's type can change
      between nights: a CSV's guessed from its first rows, a lake's file
      written by another tool. Pinned or given a hierarchy, a QI is the
      job's to change;
    - a QI's intervals written as another kind of value: dates that became
      timestamps, ``[1950-07-03 00:00:00, …]`` for ``[1950-07-03, …]``
      (helper-158);
    - a column published ``unchanged`` (neither a QI nor sensitive) that the
      last run did not publish so: new in the input (an ``ssn`` added
      upstream went out raw, not a word), or a QI no more; unless ``keep``
      lists every such column, which a new one fails (helper-158)."""
    loose = [q for q in spec.quasi_identifiers if q.by_type]
    earlier = target.earlier_run(con, where, _recorded(target))
    if earlier is None:
        return
    try:
        before = json.loads(earlier[0])
    except (TypeError, ValueError):  # not a run's parameters: nothing to compare with
        return
    if not isinstance(before, dict):
        return
    last = f"the last run publishing {target.describe()!r} ({earlier[1]})"
    kinds = before.get("generalization")
    for q in loose if isinstance(kinds, dict) else ():
        was, now = kinds.get(q.name), resolve_generalization(q, schema.field(q.name).type)
        if was in _KINDS and was != now:
            log.warning("quasi-identifier %r is generalized as %s by its type (%s), where %s generalized it as %s: "
                        "its published values change form under the output's readers; pin it (--generalization "
                        "%s=%s, or generalization: in a job file)", q.name, _KINDS[now], schema.field(q.name).type,
                        last, _KINDS[was], q.name, was)
    types = before.get("qi_types")
    for q in spec.quasi_identifiers if isinstance(types, dict) and isinstance(kinds, dict) else ():
        was, now = _value_kind(types.get(q.name)), _value_kind(str(schema.field(q.name).type))
        if kinds.get(q.name) == "interval" and resolve_generalization(q, schema.field(q.name).type) == "interval" \
                and was and now and was != now:
            log.warning("quasi-identifier %r holds %s (%s), where %s found %s (%s): its intervals are written "
                        "otherwise under the output's readers; cast it back in a view if the change is not meant",
                        q.name, now, schema.field(q.name).type, last, was, types[q.name])
    published = before.get("unchanged")
    if keep is None and isinstance(published, list):
        # A sensitive column goes out as it is too: one sensitive no more is no new column (its values were published)
        sensitive = before.get("sensitive") if isinstance(before.get("sensitive"), list) else []
        new = [c for c in unchanged if c not in published and c not in sensitive]
        if new:
            log.warning("%s %s through unchanged into %r, where %s published no such column unchanged: new in "
                        "the input? drop what identifies a person (--drop, drop: in a job file), or list the "
                        "columns to publish unchanged (--keep, keep: in a job file), which fails a run whose input "
                        "gains another", _columns(new), "passes" if len(new) == 1 else "pass", target.describe(), last)


def _value_kind(arrow_type: str | None) -> str | None:
    """What an interval's bounds are written as, for a QI of ``arrow_type``
    (as Arrow prints it): dates, timestamps, times, or None (numbers and
    others, which an integer column turned floating writes alike)."""
    if not isinstance(arrow_type, str):
        return None
    return next((kind for prefix, kind in (("date", "dates"), ("timestamp", "timestamps"), ("time", "times"))
                 if arrow_type.startswith(prefix)), None)


def _columns(names: list[str]) -> str:
    """'column 'a'' or 'columns 'a', 'b', … (3 more)', for a warning."""
    return f"column {listed(names)}" if len(names) == 1 else f"columns {listed(names, 10)}"


_KINDS = {"interval": "intervals", "set": "sets"}


def _json(value) -> str:
    return strict_json(value, sort_keys=True)


def _recorded(place) -> str:
    """A source's or target's description as the metrics record it: a local
    path absolute, as the hierarchy files' are (typed relative, a rerun from
    another directory did not find it: helper-31); a URL as it is shown."""
    return _absolute(place.describe(), getattr(place, "base", None), getattr(place, "path", None))


def _absolute(shown: str | None, *paths) -> str | None:
    """``shown`` with the first of ``paths`` it starts with, a local path,
    made absolute ('o.duckdb table t' → '/work/o.duckdb table t'); a file
    written ('o__metrics.parquet') absolute and normalized; else ``shown``."""
    for path in paths:
        if isinstance(path, str) and path and "://" not in path and shown and shown.startswith(path):
            # A glob as the pattern it is read as (its directory escaped), as a job file's is (helper-189)
            pattern = io.has_wildcard(path) and not os.path.exists(path)
            return (io.absolute_pattern(path) if pattern else os.path.abspath(path)) + shown[len(path):]
    if shown and "://" not in shown and os.path.exists(shown):
        # Normalized, as the output is ('jobs/../pub/o__metrics.parquet' beside 'pub/o.parquet':
        # helper-64); a '..' after a link was taken as the kernel takes it (io.physical_path).
        return os.path.abspath(shown)
    return shown


def _metrics_rows(
    run_id, started, plan, results, repaired, total, spec, options, source, target, sample_rows, workers, seconds,
    schema, drop, keep, planned,
):
    # What was applied, to audit or rerun the job: each QI's generalization
    # as resolved (not None for "the default"), its hierarchy file and what
    # that held (the file at the path may change later), the drops.
    params = {
        "qi": spec.qi_names,
        "generalization": {q.name: resolve_generalization(q, schema.field(q.name).type)
                           for q in spec.quasi_identifiers},
        "hierarchy": {q.name: os.path.abspath(q.hierarchy.source) for q in spec.quasi_identifiers
                      if q.hierarchy is not None},
        "hierarchy_sha256": {q.name: q.hierarchy.fingerprint for q in spec.quasi_identifiers if q.hierarchy is not None},
        "drop": list(drop),
        "keep": None if keep is None else list(keep),
        "sensitive": list(spec.sensitive),
        # What the next run compares with (_warn_of_changes_since_last_run): each QI's type, and the
        # columns published unchanged, neither QI nor sensitive.
        "qi_types": {q: str(schema.field(q).type) for q in spec.qi_names},
        "unchanged": [c for c in schema.names if c not in (*spec.qi_names, *spec.sensitive, *drop)],
        "interval_format": spec.interval_format,
        "fragmentation": plan.strategy,
        # As asked (--fragments), else the default's (one per worker, or more where the memory estimate
        # said so, which the workers' count recorded missed: helper-196): a rerun with it cuts the same plan.
        # The fragments that ran are the plan's, which repairs merge (it said 4 of 16: helper-31).
        "fragments": planned if options.fragments is None else options.fragments,
        "workers": workers,
        "sample": options.sample,
        "encoding": getattr(source, "encoding", None),  # a CSV input's, read with it
        "date_order": options.date_order,  # it reads the input's dates: another order, other rows (helper-31)
        "sqlanon_version": __version__,  # which code published it, beside what it was asked (helper-67)
    }
    common = dict(
        run_id=run_id, started_at=started, k=spec.k, l=spec.l, source=_recorded(source), target=_recorded(target),
        parameters=_json(params), sample_rows=sample_rows, sample_seed=options.seed,
    )
    rows = []
    for f in plan.fragments:
        r = results.get(f.id)
        m = r.metrics if r else None
        where, wparams = fragmentation.where_shown(f.predicates, source.dialect)
        rows.append(
            dict(
                common, kind="fragment", fragment_id=f.id, where_clause=where, where_params=_json(wparams),
                rows=r.rows if r else 0, classes=m.classes if m else 0, min_class_size=m.min_class_size if m else None,
                achieved_l=m.achieved_l if m else None,
                dp=m.dp if m else 0, ncp=m.ncp if m else 0.0, gcp=m.gcp if m else 0.0,
                seconds=r.seconds if r else 0.0, repaired=f.id in repaired, plan=None,
                worker_pid=r.pid if r else None, worker_peak_rss_mb=r.peak_rss_mb if r else None,
            )
        )
    rows.append(
        dict(
            common, kind="total", fragment_id=None, where_clause=None, where_params=None, rows=total.rows,
            classes=total.classes, min_class_size=total.min_class_size, achieved_l=total.achieved_l,
            dp=total.dp, ncp=total.ncp, gcp=total.gcp,
            seconds=seconds, repaired=bool(repaired), plan=_json(plan.to_dict()), worker_pid=None,
            worker_peak_rss_mb=None,
        )
    )
    return pa.Table.from_pylist(rows, schema=METRICS_SCHEMA)


__all__ = ["METRICS_SCHEMA", "RunOptions", "RunResult", "domain_stats", "draw_sample", "run"]
