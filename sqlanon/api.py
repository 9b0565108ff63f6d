"""The library API; the CLI is a thin veneer over these functions.

>>> from sqlanon import anonymize
>>> result = anonymize(  # doctest: +SKIP
...     "examples/adults.csv", "adults_anon.parquet",
...     qi=["age", "education-num", "race", "native-country"],
...     hierarchies={"native-country": "hierarchies/countries.json"},
...     sensitive=["income"], k=10, l=2,
... )
>>> result.metrics.min_class_size >= 10  # doctest: +SKIP
True
"""

from __future__ import annotations

import dataclasses
import fnmatch
import glob
import logging
import numbers
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence

import duckdb
import numpy as np

from . import coordinator, executors, interrupts, io, warehouse
from .config import (GENERALIZATIONS, AnonymizationSpec, QuasiIdentifier, closest, missing_column, quoted_name,
                     split_names, suggest, table_text)
from .coordinator import RunOptions, RunResult
from .domain import resolve_generalization
from .errors import ConfigError, InputError, in_library_terms
from .hierarchies import load_hierarchy
from .sql import render
from .verification import (Verification, relation_types, verify_as_typed, verify_relation, warn_null_counted,
                           warn_spellings, warn_split_classes)

log = logging.getLogger("sqlanon")

__all__ = ["RunResult", "Verification", "anonymize", "build_spec", "verify"]

# Arguments are checked here, at the API's edge, as the CLI's options are:
# a value of the wrong kind is a ConfigError naming the argument, never an
# AttributeError from deep inside, nor (``overwrite="no"``) a truthy string
# that replaced an existing output.


def _names(value, option: str, objects: type | None = None, unique: bool = False) -> tuple:
    """Column names as given: a sequence, or one string of comma-separated
    names as the CLI takes them ("age,zip"; a bare string used to be read
    as its characters: column 'a' is not in ...). ``unique``: each once
    (drop='name,name' failed in Arrow)."""
    if unique:
        return tuple(dict.fromkeys(_names(value, option, objects)))
    if isinstance(value, str):
        return tuple(split_names(value))
    if value is None:
        return ()
    if isinstance(value, (bytes, bytearray)):  # b"age,race": its byte values were named (helper-160)
        raise ConfigError(f"{option} takes column names as text, got bytes {bytes(value)!r}")
    if isinstance(value, Mapping):  # qi={"age": "set"}: its values were ignored
        raise ConfigError(f"{option} takes column names, got a mapping {value!r}"
                          + ("; give generalization={column: kind} for the kinds" if option == "qi" else ""))
    try:
        names = tuple(value)
    except TypeError:
        raise ConfigError(f"{option} takes column names, got {value!r}") from None
    for name in names:
        if not isinstance(name, str) and not (objects and isinstance(name, objects)):
            raise ConfigError(f"{option} takes column names, got {name!r} among them")
    return names


def _column_of(qi) -> list[str]:
    """Each QI's column name: a :class:`QuasiIdentifier` stands for its column."""
    return [q.name if isinstance(q, QuasiIdentifier) else q for q in qi]


def _flag(value, name: str) -> bool:
    """``overwrite``, ``explain``: True or False (numpy's too), nothing truthy."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise ConfigError(f"{name} must be True or False, got {value!r}")


def _whole(value):
    """An integer argument as an int, numpy's too (a count computed from
    data); anything else as it is, for the option's own check to name."""
    return int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else value


def _number(value, name: str):
    """``sample``, ``task_timeout``: None, or a number (numpy's too)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def _rows_or_fraction(sample):
    """``sample=500.0`` as rows, as ``--sample 500`` is (the metrics said 500.0 one way, 500 the other: helper-60)."""
    return int(sample) if isinstance(sample, float) and sample > 1 and sample.is_integer() else sample


def _text(value, name: str) -> str | None:
    """An option given as text (a table name, an executor…), or None."""
    if value is None or isinstance(value, str):
        return value
    raise ConfigError(f"{name} must be a string, got {value!r}")


def _location(value, name: str, what: str = "a file, a directory or a database URL") -> str:
    """A path or a database URL, as text (a path's ``..`` as the kernel takes it: :func:`io.physical_path`)."""
    if isinstance(value, (str, os.PathLike)):
        text = os.fspath(value)
        if isinstance(text, str) and text.strip():
            return text if warehouse.is_url(text) else io.physical_path(text, output=name != "input")
        raise ConfigError(f"{name} is empty: name {what}")
    hint = "; anonymize_table anonymizes a table in memory" if hasattr(value, "columns") else ""
    raise ConfigError(f"{name} takes a path or a database URL, got {type(value).__name__}{hint}")


def _by_column(value, name: str, what: str) -> dict:
    """``hierarchies`` and ``generalization``: ``{column: file or kind}``."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name} takes a mapping {{column: {what}}}, got {value!r}")
    for col, val in value.items():
        if not isinstance(col, str) or not isinstance(val, (str, os.PathLike)):
            raise ConfigError(f"{name} takes a mapping {{column: {what}}}, got {col!r}: {val!r} in it")
    return dict(value)


@in_library_terms
def build_spec(
    qi: Sequence[str | QuasiIdentifier],
    k: int,
    l: int = 1,  # noqa: E741
    sensitive: Sequence[str] = (),
    hierarchies: Mapping[str, str | os.PathLike] | None = None,
    generalization: Mapping[str, str] | None = None,
    interval_format: str = "text",
) -> AnonymizationSpec:
    """Build and validate an :class:`AnonymizationSpec` from plain arguments.

    Args:
        qi: the quasi-identifier columns: names (a sequence, or one string
            ``"age,zip"``) or :class:`QuasiIdentifier` objects.
        k, l, sensitive, interval_format: as :func:`anonymize` takes them.
        hierarchies: ``{column: hierarchy file}``; loaded here, so a bad file
            fails before any data is read.
        generalization: ``{column: interval|set|prefix|hierarchy}``.

    Returns:
        The validated :class:`AnonymizationSpec`.

    Raises:
        ConfigError: an argument of the wrong kind or value, a column named
            twice, a mapping naming a column that is not a QI, or one a
            :class:`QuasiIdentifier` already generalizes its own way.
        HierarchyError: a hierarchy file that cannot be loaded.
    """
    qi, sensitive = _names(qi, "qi", QuasiIdentifier), _names(sensitive, "sensitive")
    hierarchies = _by_column(hierarchies, "hierarchies", "hierarchy file")
    generalization = _by_column(generalization, "generalization", "interval|set|prefix|hierarchy")
    names = _column_of(qi)
    for option, cols in (("--hierarchy", hierarchies), ("--generalization", generalization)):
        for col in cols:
            if col not in names:
                if col in _column_of(sensitive):  # helper-42: "not a quasi-identifier" said nothing of why
                    raise ConfigError(f"{option} names column {col!r}, which is sensitive: sensitive columns are "
                                      "published as they are, never generalized")
                value = str(cols[col])
                # 'g=c=g.json' of the QI 'g=c', split at the first '=' (helper-192)
                longer = next((n for n in names if n.startswith(f"{col}=")
                               and value.startswith(n[len(col) + 1:] + "=")), None)
                close = closest(col, names)
                # Either name may be the misspelt one: 'did you mean agee?' spread a --qi typo (helper-201)
                hint = (f" (a column whose name holds '=' is written in double quotes: "
                        f"'{quoted_name(longer)}={value[len(longer) - len(col):]}')" if longer else
                        f" (the quasi-identifiers include {close!r}: is one of the two misspelt?)" if close else "")
                raise ConfigError(f"{option} names column {col!r}, which is not a quasi-identifier{hint}")
    for col, kind in generalization.items():
        if kind not in GENERALIZATIONS:
            raise ConfigError(f"--generalization gives column {col!r} the unknown kind {kind!r}"
                              f"{suggest(str(kind), GENERALIZATIONS)}; choose one of {', '.join(GENERALIZATIONS)}")
    qis = []
    for q, name in zip(qi, names):
        if isinstance(q, QuasiIdentifier) and (name not in hierarchies and name not in generalization):
            qis.append(q)
            continue
        if isinstance(q, QuasiIdentifier) and (q.hierarchy is not None or q.generalization is not None):
            # They used to be dropped without a word.
            raise ConfigError(
                f"column {name!r} is a QuasiIdentifier with its own generalization, and hierarchies or "
                "generalization name it too: give it one way"
            )
        h = load_hierarchy(hierarchies[name]) if name in hierarchies else None
        qis.append(QuasiIdentifier(name, generalization.get(name), h))
    return AnonymizationSpec(
        tuple(qis), k=_whole(k), l=_whole(l), sensitive=tuple(sensitive), interval_format=interval_format
    )


def output_qi_columns(spec: AnonymizationSpec, schema) -> list[str]:
    """The QI column names as published (``c`` or ``c_lo``/``c_hi``)."""
    out = []
    for q in spec.quasi_identifiers:
        kind = resolve_generalization(q, schema.field(q.name).type)
        if kind == "interval" and spec.interval_format == "bounds":
            out += [f"{q.name}_lo", f"{q.name}_hi"]
        else:
            out.append(q.name)
    return out


@in_library_terms
@interrupts.watched
def anonymize(
    input: str | os.PathLike,
    output: str | os.PathLike,
    *,
    qi: Sequence[str | QuasiIdentifier],
    k: int,
    l: int = 1,  # noqa: E741
    sensitive: Sequence[str] = (),
    hierarchies: Mapping[str, str | os.PathLike] | None = None,
    generalization: Mapping[str, str] | None = None,
    drop: Sequence[str] = (),
    keep: Sequence[str] | None = None,
    overwrite: bool = False,
    interval_format: str = "text",
    table: str | None = None,
    target_table: str | None = None,
    workers: int | None = None,
    fragments: int | None = None,
    fragmentation: str = "mondrian",
    sample: float | None = None,
    seed: int = 0,
    worker_memory: str | None = None,
    metrics: str | None = None,
    explain: bool = False,
    progress: Callable[[int, int], None] | None = None,
    status: Callable[[str], None] | None = None,
    executor: str = "local",
    scheduler: str | None = None,
    spark_master: str | None = None,
    retries: int | None = None,
    task_timeout: float | None = None,
    date_order: str | None = None,
    encoding: str | None = None,
) -> RunResult:
    """Publish a k-anonymous, l-diverse copy of ``input`` at ``output``.

    The coordinator reads statistics and a sample through SQL, cuts the data
    into fragments (WHERE clauses), and worker processes anonymize one fragment
    each. The output is assembled aside, verified with SQL, and only then
    swapped in; on any error nothing is published and an existing output is
    kept. A metrics table (one row per fragment and a total row) is appended
    next to the output (or at ``metrics``).

    Args:
        input: a Parquet, CSV or TSV file (``.csv.gz``…), a glob, a directory
            of part files, a DuckDB database file (with ``table``), or a
            database URL (with ``table``): ``postgresql://…``, or another
            SQLAlchemy URL such as ``sqlite:///hr.db``. A path or a URL, not
            a DataFrame (:func:`anonymize_table` takes those).
        output: a ``.parquet``/``.csv``/``.tsv`` file, a directory (``out/``),
            a DuckDB database file (with ``target_table``) or a
            ``postgresql://`` URL (with ``target_table``).
        qi: the quasi-identifier columns.
        k: minimum equivalence class size (>= 2).
        l: minimum distinct sensitive values per class (>= 1).
        sensitive: the sensitive columns (needed when ``l > 1``).
        hierarchies: ``{column: hierarchy file}`` (JSON tree or CSV levels).
        generalization: ``{column: interval|set|prefix|hierarchy}``; others by type.
        drop: columns to remove (direct identifiers).
        keep: the columns to publish unchanged, when given: every other
            column must be a QI, sensitive or in ``drop``, or the run is
            refused (a column new in the input is not published raw).
        overwrite: replace an existing output (``True`` or ``False`` only).
        interval_format: ``text`` (``[lo, hi]``) or ``bounds`` (``c_lo``, ``c_hi``).
        table: the source table in a DuckDB file or behind a database URL
            (``schema.table``).
        target_table: the output table in a DuckDB file or behind a
            ``postgresql://`` URL (``schema.table``).
        workers: worker processes (default: CPU count; 1 runs in-process).
        fragments: how many fragments to cut (default: ``workers``, or a multiple of it where one each
            would not fit the workers' memory: :func:`sqlanon.coordinator.fragments_for_memory`).
        fragmentation: ``mondrian`` or ``quantile``.
        sample: sample fraction (<= 1) or rows (> 1); default bounded by memory.
        seed: the sample's seed.
        worker_memory: DuckDB memory limit per worker, e.g. ``2GB``.
        metrics: where to append the metrics table.
        explain: only plan: the result carries the plan, nothing is written.
        progress: called with ``(finished, total)`` fragments: ``(0, total)``
            as they start, then as each finishes.
        status: called with each step of the run as it starts ("reading
            statistics", "anonymizing", "checking k=10 l=2 of the output",
            "publishing"…), for a progress display.
        executor: ``local``, ``dask`` or ``spark`` (see :mod:`sqlanon.executors`).
        scheduler: Dask scheduler address (default: a LocalCluster of ``workers``).
        spark_master: Spark master URL (default: ``local[workers,retries+1]``;
            an active SparkSession is used as it is).
        retries: reruns of a failed task on Dask or Spark (default 2; the
            local pool reruns none, and says so when it is given).
        task_timeout: seconds one fragment may take.
        date_order: ``"DMY"`` or ``"MDY"``: how a CSV input writes numeric
            dates (``01/02/2020``); by default DuckDB guesses, and a run
            whose values read both ways is refused.
        encoding: a CSV input's text encoding, ``"utf-8"`` (the default),
            ``"latin-1"`` or ``"utf-16"``; a file that is not that text is refused.

    Raises:
        ConfigError, HierarchyError: bad arguments, a hierarchy to fix (CLI
            exit code 2).
        InputError, PrivacyError, VerificationError: the run failed (exit
            code 1).
    """
    src, out = _location(input, "input"), _location(output, "output")
    overwrite, explain = _flag(overwrite, "overwrite"), _flag(explain, "explain")
    metrics = None if metrics is None else io.utf8_path(
        _location(metrics, "--metrics", "a .parquet or .csv file, or a table of the output's database"), "metrics file")
    # The run spills and stages there (DuckDB takes UTF-8 paths only).
    io.utf8_path(tempfile.gettempdir(), "the temporary directory (TMPDIR)")
    for name, value in (("interval_format", interval_format), ("table", table), ("target_table", target_table),
                        ("fragmentation", fragmentation), ("worker_memory", worker_memory), ("executor", executor),
                        ("scheduler", scheduler), ("spark_master", spark_master), ("date_order", date_order),
                        ("encoding", encoding)):
        _text(value, name)
    encoding = _encoding(encoding)
    if progress is not None and not callable(progress):
        raise ConfigError(f"progress must be a function of (finished, total), got {progress!r}")
    if status is not None and not callable(status):
        raise ConfigError(f"status must be a function of one string, got {status!r}")
    spec = build_spec.with_flags(qi, k, l, sensitive, hierarchies, generalization, interval_format)
    options = RunOptions(
        workers=_whole(workers), fragments=_whole(fragments), fragmentation=fragmentation,
        sample=_rows_or_fraction(_number(sample, "sample")), seed=_whole(seed), worker_memory=worker_memory,
        metrics=metrics, explain=explain, progress=progress, status=status, executor=executor, scheduler=scheduler,
        spark_master=spark_master,
        retries=_whole(retries), task_timeout=_number(task_timeout, "task_timeout"),
        date_order=date_order.upper() if isinstance(date_order, str) else date_order,  # as --date-order takes it
    )
    _check_reachable(options, src, out, table)
    # A CSV line past DuckDB's 2 MB (a text value of 3 MB): read with a larger limit.
    source = warehouse.open_source(src, table) if warehouse.is_url(src) else io.with_longer_lines(
        lambda line_size: io.open_source(src, table, max_line_size=line_size, encoding=encoding), what=repr(src))
    _refuse_same(source, out, target_table)
    if encoding and not (isinstance(source, io.FileSource) and source.fmt == "csv"):
        log.warning("the encoding %s applies to CSV inputs only; %s is not one", encoding, source.describe())
    if metrics is not None:
        _check_metrics(metrics, source, out, target_table)
    _refuse_hierarchy_files(spec, out)
    # A plan (--explain) is checked as the run is (the plan of a job that would fail is no plan; its metrics
    # too: helper-62), on the output itself (helper-63; a database output's too: a Parquet stand-in refused a
    # pass-through interval the run publishes into a table), and writes nothing. It takes no lock of a table,
    # and holds a file's (a DuckDB file's tables are read) as a plan's, which a run waits for (helper-183).
    if warehouse.is_url(out):
        target = warehouse.open_target(out, target_table, overwrite=overwrite, metrics=metrics, plan=explain)
    else:
        target = io.open_target(out, overwrite=overwrite, table=target_table, plan=explain)
    # A Ctrl-C that DuckDB consumes still stops the run before it publishes
    # (interrupts.watched, around the whole call); the output's lock is
    # released before a SIGTERM ends the process.
    with executors.callers_start_method():
        try:
            _check_metrics_target(target, source, out, metrics, target_table)

            def run(line_size: int | None) -> coordinator.RunResult:
                return coordinator.run(
                    source if line_size is None else dataclasses.replace(source, max_line_size=line_size), target,
                    spec, _names(drop, "drop", unique=True), options,
                    output_qi=lambda schema: output_qi_columns(spec, schema),
                    keep=None if keep is None else _names(keep, "keep", unique=True),
                )

            if not (isinstance(source, io.FileSource) and source.fmt == "csv"):
                return run(None)
            # A long line past the rows that opening the source read fails the
            # run's first full read (nothing published): it runs again.
            return io.with_longer_lines(run, source.max_line_size, repr(src),
                                        whose=lambda exc: str(exc).startswith(f"cannot read {source.describe()!r}"))
        finally:
            _let_go(target)


def _let_go(target) -> None:
    """Another run may write the output now (its lock, and a PostgreSQL target's session, given up)."""
    if isinstance(target, io.LocalStagingTarget):
        target.release()
    elif isinstance(target, warehouse.PostgresTarget):
        target.unlock()


def _check_metrics_target(target, source, out: str, metrics: str | None, target_table: str | None) -> None:
    """Before any work: the metrics file next to a file output, or the
    metrics table of a table output, is sqlanon's and takes the run's rows."""
    if isinstance(target, io.LocalStagingTarget) and metrics is None and target_table is None:
        default = io.default_metrics_path(out)
        root = None if isinstance(source, warehouse.PostgresSource) else source.root
        if root is not None and _overlaps(default, root):
            raise ConfigError(f"the metrics file {default!r} (next to the output) is the input or inside it: "
                              "name another with --metrics")
        io.check_metrics_file(default, coordinator.METRICS_SCHEMA)
    elif isinstance(target, (io.DuckDBTarget, warehouse.PostgresTarget)):
        target.check_metrics_target(metrics, coordinator.METRICS_SCHEMA)


def _encoding(encoding: str | None) -> str | None:
    """``encoding`` as DuckDB names it (None for UTF-8, the default), or the error."""
    if encoding is None:
        return None
    name = encoding.lower()
    if name not in io.ENCODINGS:
        raise ConfigError(f"encoding must be one of {', '.join(io.ENCODINGS)}, not {encoding!r}")
    return None if name == "utf-8" else name


def _check_reachable(options: RunOptions, src: str, out: str, table: str | None) -> None:
    """A remote cluster's workers read the source and write parts on other
    hosts: local paths must be absolute (on a filesystem they all mount)."""
    # A caller's active Spark session on a remote master too (it went by --spark-master only: helper-28).
    if not executors.remote_cluster(options.executor, options.scheduler, options.spark_master):
        return
    if warehouse.is_url(out):
        raise ConfigError(
            f"--executor={options.executor} on a remote cluster cannot stage parts for a database target "
            "(they go to the coordinator's temporary directory); write to a shared directory instead"
        )
    for what, path in (("input", src), ("output", out)):
        if warehouse.is_url(path):
            db = warehouse.Conn(path)
            if db.backend == "sqlite" and not os.path.isabs(db.database or ""):
                raise ConfigError(
                    f"the SQLite {what} {db.safe()!r} is a relative path: with --executor={options.executor} on a "
                    "remote cluster give an absolute path (sqlite:////abs/path.db) that every worker mounts"
                )
            continue
        if table is not None and what == "input":
            raise ConfigError("a remote cluster cannot read a DuckDB file; export the table to Parquet first")
        if not os.path.isabs(path):
            raise ConfigError(
                f"the {what} {path!r} is a relative local path: with --executor={options.executor} on a remote "
                f"cluster give an absolute path that every worker mounts{', or a database URL' * (what == 'input')}"
            )  # (a database output is refused above: helper-56)


def _real(path: str) -> str:
    return os.path.realpath(path.rstrip("/"))


def _same_place(a: str, b: str) -> bool:
    return _real(a) == _real(b)


def _inside(a: str, b: str) -> bool:
    """Whether path ``a`` lies under directory ``b``."""
    return _real(a).startswith(_real(b) + os.sep)


def _overlaps(a: str, b: str) -> bool:
    """True when two local paths are the same or one lies inside the other."""
    return _same_place(a, b) or _inside(a, b) or _inside(b, a)


def _check_metrics(metrics: str, source, out: str, target_table: str | None) -> None:
    """``--metrics`` names a new place: not the input, not the output."""
    if warehouse.is_url(out) or target_table is not None:
        if io.file_format(metrics) is None and not warehouse.is_url(out):  # a table in the output DuckDB file
            io.check_duckdb_output(out)  # first: its metrics' schema was blamed on 'x.parquet' (helper-86)
            target = io.DuckDBTarget(out, tuple(io.split_table_name(target_table)))
            mkey = io.duckdb_table_key(target.metrics_table(metrics))
            if mkey == io.duckdb_table_key(target.table):
                raise ConfigError(f"--metrics={metrics!r} is the output table; name another table")
            same_file = isinstance(source, io.DuckDBSource) and source.same_path(out)
            if same_file and mkey == io.duckdb_table_key(source.table):
                raise ConfigError(f"--metrics={metrics!r} is the input table; name another table")
            io.DuckDBTarget(out, target.metrics_table(metrics)).exists()  # its schema must exist
            return
        if not io.file_format(metrics):
            if target_table:  # names resolved as the server does (an unqualified one on its search_path)
                db = warehouse.Conn(out).require_postgres("the output")
                if warehouse._table(metrics, "--metrics", db) == warehouse._table(target_table, "--target-table", db):
                    raise ConfigError(f"--metrics={metrics!r} is the output table; name another table")
            return  # a table in the output database
    elif not io.file_format(metrics):
        raise ConfigError(f"cannot tell the format of --metrics={metrics!r}: name a .parquet or .csv file")
    parent = os.path.dirname(os.path.abspath(metrics))
    if not os.path.isdir(parent):
        raise ConfigError(f"--metrics={metrics!r}: directory {parent!r} does not exist")
    if not os.access(parent, os.W_OK):  # found before the run, not after it
        raise ConfigError(f"--metrics={metrics!r}: directory {parent!r} is not writable")
    root = None if isinstance(source, warehouse.PostgresSource) else source.root
    if _overlaps(metrics, out):
        raise ConfigError(f"--metrics={metrics!r} would overwrite the output; name another file")
    if root is not None and _overlaps(metrics, root):
        if isinstance(source, io.FileSource) and source.same_path(metrics) and not _same_place(metrics, root):
            raise ConfigError(f"--metrics={metrics!r} is one of the files of the input {source.describe()!r}; name "
                              "another file")  # (helper-112)
        glob_source = isinstance(source, io.FileSource) and not source.base and source.root != source.path
        if glob_source:  # not the input's own files: it was said to overwrite them (helper-108)
            raise ConfigError(f"--metrics={metrics!r} lies under {root!r}, where the input {source.describe()!r} "
                              "reads (a later run could read it back); name another file")
        where = "is" if _same_place(metrics, root) else "lies inside" if _inside(metrics, root) else "holds"
        raise ConfigError(f"--metrics={metrics!r} {where} the input {root!r}; name another file")
    io.check_metrics_file(metrics, coordinator.METRICS_SCHEMA)


def _refuse_hierarchy_files(spec, out: str) -> None:
    """The output may not be a file a QI's hierarchy is read from: with
    --overwrite the run replaced the hierarchy with the anonymized rows,
    exit 0, and the next night failed on it (helper-188). (A metrics file
    is refused as one that is not a metrics table: _check_metrics.)"""
    for q in spec.quasi_identifiers:
        read = getattr(q.hierarchy, "source", None)
        if not isinstance(read, str) or not os.path.exists(read):  # (one given as a mapping, say)
            continue
        if not warehouse.is_url(out) and _overlaps(out, read):
            raise ConfigError(f"output {out!r} {'is' if _same_place(out, read) else 'holds'} the hierarchy file of "
                              f"quasi-identifier {q.name!r}; write the anonymized copy elsewhere")


def _refuse_qi_also_sensitive(qi: Sequence[str], sensitive: Sequence[str]) -> None:
    """As named, and as published (``age`` as ``age_lo``/``age_hi``: helper-11)."""
    if set(qi) & set(sensitive):
        both = sorted(set(qi) & set(sensitive))[0]
        raise ConfigError(f"column {both!r} cannot be both a quasi-identifier and sensitive")


def _published_qi(qi: Sequence[str], cols: list[str]) -> list[str]:
    """The columns QIs were published as: ``age`` as ``age_lo`` and
    ``age_hi`` in an ``--interval-format bounds`` output (where ``age`` is
    not a column)."""
    out: list[str] = []
    for q in qi:
        bounds = [f"{q}_lo", f"{q}_hi"]
        out += bounds if q not in cols and all(b in cols for b in bounds) else [q]
    return out


def _refuse_files_read(source: io.DuckDBSource, out: str) -> None:
    """The output must not be, hold or fall under the files the input's views
    read: --overwrite replaced a raw file below the view (and a file a glob
    of it matches would be read back by the next run)."""
    reads = source.reads()
    read = next((f for f in reads.existing_files() if _overlaps(out, f)), None)
    if read is not None:
        raise ConfigError(f"output {out!r} {'is' if _same_place(out, read) else 'holds'} the file {read!r}, which "
                          f"the input {source.describe()!r} reads (a view over it); write the anonymized copy elsewhere")
    where = os.path.abspath(out.rstrip("/"))
    pattern = next((p for p in reads.files if glob.has_magic(p) and fnmatch.fnmatchcase(where, p)), None)
    if pattern is not None:  # e.g. -o raw/new.parquet under read_parquet('raw/*.parquet') (helper-25)
        raise ConfigError(f"output {out!r} lies where the input {source.describe()!r} reads ({pattern!r}, a view "
                          "over it): a later run would read it back; write the anonymized copy elsewhere")
    if reads.opaque:
        log.warning("the input %s reads files it names only when it runs (query(), a macro's argument, an "
                    "expression): if it reads %s, this run replaces it", source.describe(), out)


def _refuse_same(source, out: str, target_table: str | None) -> None:
    """The output must not be the input (file, directory, DuckDB table or server table)."""
    same = False
    if isinstance(source, warehouse.PostgresSource):
        if warehouse.is_url(out) and target_table is not None:
            out_conn = warehouse.Conn(out).require_postgres("the output")
            table = warehouse._table(target_table, "--target-table", out_conn)
            one_server = warehouse.same_server(source.conn, out_conn)
            # A standby's table is its primary's (physical replication): read on
            # one, replaced on the other, the run published over its own input.
            standby = None if one_server else warehouse.replica_pair(source.conn, out_conn)
            same = table == source.table and (one_server or standby is not None)
            if same and standby is not None:
                raise ConfigError(
                    f"output {target_table!r} is the input: {standby} is a standby of the other server (the same "
                    "system identifier and database), so its table is the output's; write the anonymized copy "
                    "elsewhere"
                )
            if not same and (one_server or standby is not None):
                reads, opaque = warehouse.reads_table(source, table)
                if reads:
                    raise ConfigError(
                        f"output {target_table!r} holds rows the input {source.describe()!r} reads (a view over "
                        "it, a parent of it, or a partition or child of it); write the anonymized copy elsewhere"
                    )
                if opaque:
                    log.warning("the input %s calls %s, whose reads the server does not record: if %s reads "
                                "%s, this run replaces the rows it reads", source.describe(), ", ".join(opaque),
                                "it" if len(opaque) == 1 else "one", table_text(table))
    elif target_table is None:
        same = source.same_path(out)
        if isinstance(source, io.DuckDBSource) and not same:
            _refuse_files_read(source, out)
        if not same and source.root is not None and _overlaps(out, source.root):
            glob_source = isinstance(source, io.FileSource) and not source.base and source.root != source.path
            if not glob_source:
                where = "is" if _same_place(out, source.root) else (
                    "lies inside" if _inside(out, source.root) else "holds")
                raise ConfigError(f"output {out!r} {where} the input {source.root!r}; write the anonymized copy "
                                  "elsewhere")
            raise ConfigError(
                f"output {out!r} lies under {source.root!r}, where the input {source.describe()!r} reads "
                "(a later run could read it back); write the anonymized copy elsewhere"
            )
    elif isinstance(source, io.FileSource) and not warehouse.is_url(out) and _overlaps(out, source.root):
        raise ConfigError(
            f"output {out!r} lies under {source.root!r}, where the input {source.describe()!r} reads (the run's "
            "staging files would be read as input); write the anonymized copy elsewhere"
        )
    elif isinstance(source, io.DuckDBSource) and source.same_path(out):
        key = io.duckdb_table_key(io.split_table_name(target_table))
        same = key == io.duckdb_table_key(source.table)
        if not same and key in source.tables_read():  # --overwrite replaced the table below the input view
            raise ConfigError(f"output {target_table!r} holds rows the input {source.describe()!r} reads (a view "
                              "over it); write the anonymized copy elsewhere")
    if same and target_table is None and isinstance(source, io.DuckDBSource):
        # 'write elsewhere' told that the same database file could not hold it (helper-201)
        raise ConfigError(f"output {out!r} is the input's database: name a new table in it with --target-table, "
                          "or write the anonymized copy elsewhere")
    if same:
        raise ConfigError(f"output {target_table or out!r} is the input; write the anonymized copy elsewhere")


@in_library_terms
@interrupts.watched
def verify(
    input: str | os.PathLike,
    *,
    qi: Sequence[str],
    k: int,
    l: int = 1,  # noqa: E741
    sensitive: Sequence[str] = (),
    table: str | None = None,
    show: int = 20,
) -> Verification:
    """Check that a published table is k-anonymous and l-diverse, with SQL.

    It groups ``input`` by the ``qi`` columns as published: every group
    must hold at least ``k`` rows and ``l`` distinct values of each
    ``sensitive`` column (a NULL counts as one value).

    Args:
        input: a Parquet or CSV file, a glob or a directory (as
            :func:`anonymize` reads them), a DuckDB file with ``table``, or a
            ``postgresql://`` URL with ``table``.
        qi, k, l, sensitive, table: as :func:`anonymize` takes them.
        show: how many violating classes ``violations`` lists at most
            (smallest first; ``n_violations`` counts them all).

    Returns:
        A :class:`Verification`: ``ok`` is False when some class breaks k or
        l; ``n_violations`` counts them, ``violations`` lists the first, and
        ``describe_failure()`` words them. A failed check does not raise
        (``sqlanon verify`` exits 1 on it): test ``ok``, e.g.
        ``if not result.ok: raise VerificationError(result.describe_failure())``.

    Raises:
        ConfigError: bad arguments, or a column the input lacks.
        InputError: the input cannot be read.
    """
    qi = tuple(_column_of(_names(qi, "qi", QuasiIdentifier)))  # as anonymize takes them
    sensitive = _names(sensitive, "sensitive", unique=True)  # once each: income twice listed ___distinct_income
    k, l = _whole(k), _whole(l)  # noqa: E741
    table = _text(table, "table")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"k must be a positive integer, got {k!r}")
    if isinstance(l, bool) or not isinstance(l, int) or l < 1:
        raise ConfigError(f"l must be a positive integer, got {l!r}")
    if l > 1 and not sensitive:
        raise ConfigError(f"l = {l} needs at least one sensitive column (--sensitive)")
    show = _whole(show)
    if isinstance(show, bool) or not isinstance(show, int) or show < 0:
        raise ConfigError(f"show must be a whole number >= 0, got {show!r}")
    if not qi:
        raise ConfigError("name the quasi-identifier columns (--qi)")
    _refuse_qi_also_sensitive(qi, sensitive)
    spec_in = _location(input, "input")
    if warehouse.is_url(spec_in):
        warehouse.Conn(spec_in).require_postgres("the table to verify")
        source = warehouse.open_source(spec_in, table)
        types = dict(source.server_columns())
        cols = list(types)
        with source.conn.connect() as server:
            if not cols:  # (one that does not exist is refused by server_columns)
                raise InputError(f"table {table_text(source.table)!r} of {source.conn.safe()} has no columns")
            qi = _published_qi(qi, cols)
            for option, c in [*(("--qi", c) for c in qi), *(("--sensitive", c) for c in sensitive)]:
                if c not in cols:
                    raise ConfigError(missing_column(c, source.describe(), cols, option))
            _refuse_qi_also_sensitive(qi, sensitive)
            # A citext QI, or one under a (nondeterministic) collation, put 'PARIS' and 'Paris' in one
            # class, two to every reader (helper-11): compared byte by byte, as DuckDB's are below; so is
            # every QI but a number, boolean, date or time and enum, as its text: a domain over either, a
            # bpchar's trailing blanks (helper-181), an array or composite holding them, an interval's
            # '1 mon' and '30 days', an array's -0 (helper-183). (A number by its value, as psycopg's
            # Decimal compares; a float's -0.0 by its sign, below.)
            category = dict(server.execute(_CATEGORIES, (source.relation,)).fetchall())
            loose = [c for c in qi if warehouse.equal_apart(types[c]) or category.get(c) not in _VALUE_COMPARED]
            relation = source.relation if not loose else render(
                "binary_text.sql", dialect="postgres", inline=True, relation=source.relation, columns=loose,
                keep=list(dict.fromkeys([*qi, *sensitive]))).sql
            server.execute("SET work_mem = '256MB'")
            # As a run counts them: a float's NaN as its NULL (a domain over one's too: server_columns).
            floats = [s for s in sensitive if types[s] in ("real", "double precision")]
            check = verify_relation(server, relation, list(qi), k, l, sensitive, dialect="postgres", nan_null=floats,
                                    limit=show)
            if check.ok:
                text = [s for s in sensitive if category.get(s) == "S"]  # a domain over text too
                warn_spellings(server, relation, list(qi), l, text, dialect="postgres")
                warn_null_counted(check)
            return check
    if os.path.isfile(spec_in) and io.is_sqlite(spec_in):  # its advice, a sqlite:/// URL, is refused below (helper-60)
        raise ConfigError(f"{spec_in!r} is a SQLite database, which sqlanon verify does not read: it checks what "
                          "sqlanon publishes (Parquet, CSV, DuckDB and PostgreSQL tables)")
    # A CSV line past DuckDB's 2 MB (a long text value passing through a run's CSV output).
    return io.with_longer_lines(lambda line_size: _verify_lake(spec_in, table, qi, k, l, sensitive, line_size, show),
                                what=repr(spec_in))


_CATEGORIES = ("SELECT a.attname, t.typcategory::text FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_type t "
               "ON t.oid = a.atttypid WHERE a.attrelid = pg_catalog.to_regclass(%s) AND a.attnum > 0 "
               "AND NOT a.attisdropped")
"""A PostgreSQL relation's columns and their types' categories (a domain's is its base type's)."""
_VALUE_COMPARED = ("B", "D", "E", "N")
"""The categories whose values readers compare as the server does: booleans,
dates and times, enums and numbers (not an array, composite, string or interval)."""


def _nests_loose(t) -> bool:
    """Whether DuckDB type ``t`` (a ``DuckDBPyType``) nests a float or an interval (a list's, a
    struct's, a map's, an array's, a union's), whose values DuckDB holds
    equal where readers tell them apart (-0.0 and 0.0, '1 month' and '30 days').
    Read from the type, not its name (an ENUM's label 'FLOAT': helper-183)."""
    if t.id not in ("list", "struct", "map", "array", "union"):
        return False
    return any(getattr(c, "id", None) in ("float", "double", "interval") or (hasattr(c, "id") and _nests_loose(c))
               for _, c in t.children)  # (an array's children hold its size too)


def _verify_lake(spec_in: str, table: str | None, qi: tuple[str, ...], k: int, l: int,  # noqa: E741
                 sensitive: tuple[str, ...], line_size: int | None, show: int = 20) -> Verification:
    """:func:`verify` of a lake or DuckDB file (``line_size``: a CSV's longest line, when past 2 MB)."""
    source = typed = io.open_source(spec_in, table, max_line_size=line_size, flag=False)  # UTF-8: what runs write
    csv = isinstance(source, io.FileSource) and source.fmt == "csv"
    if csv:
        # CSV is text: '1.0' and '1.00' are two published values (two classes),
        # as the publishing check counts them, not one number.
        source = dataclasses.replace(source, as_text=True, rfc_quotes=True)
        typed = dataclasses.replace(typed, rfc_quotes=True)  # as its readers split it (helper-181)
    con = io.connect()
    try:
        source.attach(con)
        # One look at the columns' types (a CSV relation's is a sniff of the file).
        cols, types = relation_types(con, source.relation)
        typeof = {c: str(t) for c, t in zip(cols, types)}
        qi = _published_qi(qi, cols)
        if csv and len(cols) == 1 and io.looks_delimited(cols[0]) and cols[0] not in (*qi, *sensitive):
            # A ragged row: the sniffer's one column, not the user's --qi (exit 2), as anonymize says (helper-68).
            raise InputError(io.read_as_one_column(repr(source.describe()), cols[0])
                             + io.csv_break(source.files(), cols[0]))
        for option, c in [*(("--qi", c) for c in qi), *(("--sensitive", c) for c in sensitive)]:
            if c not in cols:
                raise ConfigError(missing_column(c, repr(source.describe()), cols, option))
        _refuse_qi_also_sensitive(qi, sensitive)
        if isinstance(typed, io.FileSource) and typed.hive_keys:  # a directory's value its readers read otherwise
            # ('2020-1-1' beside '2020-01-01' one date; 'NULL' a missing value): passed as one class (helper-191)
            io.refuse_altered_hive_values(typed, typed.arrow_schema(con), tuple(c for c in cols if c not in (
                *qi, *sensitive)), leave="leave the key out of the check")
        index = next((c for c in cols if coordinator.PANDAS_INDEX.fullmatch(c) and c not in (*qi, *sensitive)), None)
        if index is not None:  # anonymize refuses it; verify checks k and l of the columns named (helper-68)
            log.warning("column %r of %r is the index pandas wrote with the rows, their positions in a frame: rows "
                        "in an order that follows a raw value (a frame sorted by age) tell it to a reader, which no "
                        "check of k and l sees", index, source.describe())
        for c in getattr(source, "coarse", ()):  # as anonymize refuses them (helper-11)
            where = io.finer_than_microseconds(source.files(), c) if c in (*qi, *sensitive) else None
            if where:
                raise ConfigError(f"column {c!r} of {where!r} holds values finer than microseconds, "
                                 "which DuckDB reads to microseconds: values apart would be counted as one")
        relation = source.relation
        # An INTERVAL QI's '1 month' and '30 days' (DuckDB holds them equal) are two classes to its readers: its
        # text is compared. A nested one holding floats or intervals cannot be so ('[a, b]' prints one list of
        # two strings and one of one string alike), nor as its readers compare it (-0.0 in a list: helper-181).
        texts = [c for c in qi if typeof[c] == "INTERVAL"]
        nested = next((c for c in qi if _nests_loose(types[cols.index(c)])), None)
        if nested is not None:
            raise ConfigError(f"quasi-identifier {nested!r} is {typeof[nested]}, whose values DuckDB holds equal "
                              "where its readers tell them apart (-0.0 and 0.0, '1 month' and '30 days'): verify "
                              "it as text (cast it to VARCHAR in a view)")
        # A QI's collation (NOCASE) made 'PARIS' and 'Paris' one class, two to every reader. A
        # sensitive column's values count as written (README), as count(DISTINCT …) counts them
        # with two sensitive columns: GROUP BY, with one, merged 'Flu' and 'flu' (helper-137).
        text = [c for c in (*qi, *sensitive) if typeof[c] == "VARCHAR"] if isinstance(source, io.DuckDBSource) else []
        if text or texts:
            relation = render("binary_text.sql", relation=relation, columns=[*text, *texts], texts=texts).sql
        check = verify_relation(con, relation, list(qi), k, l, sensitive, limit=show)
        if csv and check.ok and l > 1:  # ... and as its readers type it, as the publishing check counts too
            typed_check = verify_as_typed(con, lambda every_row, text: dataclasses.replace(
                typed, null_strings=io.READER_NULLS, every_row=every_row, text_columns=text).relation, list(qi), k, l,
                sensitive, show)
            if typed_check is not None and not typed_check.ok:  # its text held l: say why it fails (helper-98)
                check = dataclasses.replace(typed_check, reading=(
                    "read as pandas reads the file: '5' and '5.0' one value, 'NA', 'null' or 'NaN' and an empty "
                    "field one, shown as NULL"))
            elif typed_check is not None:  # its 'nan' and 'NA' are missing values to its readers (helper-103)
                check = dataclasses.replace(check, by_null=typed_check.by_null)
        if check.ok:
            warn_spellings(con, relation, list(qi), l, [c for c in sensitive if typeof[c] == "VARCHAR"])
            warn_null_counted(check)
            if isinstance(source, io.FileSource) and len(source.files()) > 1:
                name = io.file_column(list(typeof))
                split = dataclasses.replace(source, file_column=name)
                warn_split_classes(con, split.relation, list(qi), k, l, sensitive, name)
        return check
    except duckdb.Error as exc:
        raise InputError(f"cannot read {source.describe()!r}: {io.first_line(exc)}") from exc
    finally:
        con.close()
