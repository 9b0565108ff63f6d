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

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import duckdb

from . import io, mondrian
from .config import AnonymizationSpec, QuasiIdentifier, suggest
from .engine import EngineResult, anonymize_table, resolve_generalization
from .errors import ConfigError, InputError, VerificationError
from .hierarchies import load_hierarchy
from .metrics import Metrics
from .verify import Verification, verify_relation

log = logging.getLogger("sqlanon")

__all__ = ["RunResult", "anonymize", "build_spec", "verify"]


@dataclass(frozen=True)
class RunResult:
    """What one anonymization run did.

    Attributes:
        output: where the anonymized table was published.
        metrics: information loss and class statistics.
        verification: the SQL check of the published output.
        timings: seconds per phase (``read``, ``anonymize``, ``write``,
            ``verify``, ``total``).
    """

    output: str
    metrics: Metrics
    verification: Verification
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The ``--json`` document."""
        return {**self.metrics.to_dict(), "output": self.output, "timings": self.timings}


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

    Hierarchy files are loaded here, so a bad file fails before any data is read.
    """
    hierarchies = dict(hierarchies or {})
    generalization = dict(generalization or {})
    names = [q.name if isinstance(q, QuasiIdentifier) else q for q in qi]
    for option, cols in (("--hierarchy", hierarchies), ("--generalization", generalization)):
        for col in cols:
            if col not in names:
                raise ConfigError(f"{option} names column {col!r}, which is not a quasi-identifier{suggest(col, names)}")
    qis = []
    for q in qi:
        if isinstance(q, QuasiIdentifier):
            qis.append(q)
            continue
        h = load_hierarchy(hierarchies[q]) if q in hierarchies else None
        qis.append(QuasiIdentifier(q, generalization.get(q), h))
    return AnonymizationSpec(tuple(qis), k=k, l=l, sensitive=tuple(sensitive), interval_format=interval_format)


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
    overwrite: bool = False,
    interval_format: str = "text",
) -> RunResult:
    """Publish a k-anonymous, l-diverse copy of ``input`` at ``output``.

    The output is written aside, verified with SQL, and only then moved into
    place; on any error nothing is written and an existing output is kept.

    Args:
        input: a Parquet or CSV file, a glob, or a directory of part files.
        output: a ``.parquet`` or ``.csv`` file.
        qi: the quasi-identifier columns.
        k: minimum equivalence class size (>= 2).
        l: minimum distinct sensitive values per class (>= 1).
        sensitive: the sensitive columns (needed when ``l > 1``).
        hierarchies: ``{column: hierarchy file}`` (JSON tree or CSV levels).
        generalization: ``{column: interval|set|prefix|hierarchy}``; others by type.
        drop: columns to remove (direct identifiers).
        overwrite: replace an existing output.
        interval_format: ``text`` (``[lo, hi]``) or ``bounds`` (``c_lo``, ``c_hi``).

    Raises:
        ConfigError: bad arguments (CLI exit code 2).
        InputError, HierarchyError, PrivacyError, VerificationError: the run
            failed (exit code 1).
    """
    t_start = time.perf_counter()
    spec = build_spec(qi, k, l, sensitive, hierarchies, generalization, interval_format)
    drop = list(drop)
    for col in drop:
        if col in spec.qi_names or col in spec.sensitive:
            raise ConfigError(f"--drop names {col!r}, which is a quasi-identifier or sensitive column")
    source = io.open_source(input)
    if source.same_file(os.fspath(output)) or os.path.abspath(os.fspath(output)) == os.path.abspath(source.path):
        raise ConfigError(f"output {os.fspath(output)!r} is the input; write the anonymized copy elsewhere")
    target = io.open_target(output, overwrite=overwrite)

    timings: dict[str, float] = {}
    warm = threading.Thread(target=mondrian.warm_up, daemon=True)
    warm.start()
    con = io.connect()
    staging = None
    try:
        t0 = time.perf_counter()
        table = io.read_arrow(con, source)
        missing = [c for c in drop if c not in table.column_names]
        if missing:
            raise ConfigError(f"--drop names column {missing[0]!r}, which is not in the input")
        table = table.drop_columns(drop) if drop else table
        timings["read"] = time.perf_counter() - t0
        log.info("read %d rows from %s", table.num_rows, source.describe())

        t0 = time.perf_counter()
        warm.join()
        result: EngineResult = anonymize_table(table, spec)
        timings["anonymize"] = time.perf_counter() - t0
        log.info("%d classes, min size %d", result.metrics.classes, result.metrics.min_class_size)

        t0 = time.perf_counter()
        staging = io.write_staging(con, result.table, target)
        timings["write"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        check = verify_relation(
            con, io.staged_relation(target, staging), output_qi_columns(spec, table.schema), spec.k, spec.l,
            spec.sensitive,
        )
        if not check.ok or check.rows != table.num_rows:
            raise VerificationError(
                f"refusing to publish {target.describe()!r}: "
                + (check.describe_failure() if not check.ok else f"{check.rows} rows written, {table.num_rows} read")
            )
        timings["verify"] = time.perf_counter() - t0
        io.publish(staging, target)
        staging = None
    finally:
        io.discard(staging)
        con.close()
    timings["total"] = time.perf_counter() - t_start
    return RunResult(target.describe(), result.metrics, check, timings)


def verify(
    input: str | os.PathLike,
    *,
    qi: Sequence[str],
    k: int,
    l: int = 1,  # noqa: E741
    sensitive: Sequence[str] = (),
) -> Verification:
    """Check that a generalized file is k-anonymous and l-diverse (see :mod:`sqlanon.verify`)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"k must be a positive integer, got {k!r}")
    if isinstance(l, bool) or not isinstance(l, int) or l < 1:
        raise ConfigError(f"l must be a positive integer, got {l!r}")
    if l > 1 and not sensitive:
        raise ConfigError(f"l = {l} needs at least one sensitive column (--sensitive)")
    if not qi:
        raise ConfigError("name the quasi-identifier columns (--qi)")
    source = io.open_source(input)
    con = io.connect()
    try:
        cols = [c[0] for c in con.execute(f"SELECT * FROM {source.relation} LIMIT 0").description]
        for c in [*qi, *sensitive]:
            if c not in cols:
                raise ConfigError(f"column {c!r} is not in {source.describe()!r}{suggest(c, cols)}")
        return verify_relation(con, source.relation, list(qi), k, l, sensitive)
    except duckdb.Error as exc:
        raise InputError(f"cannot read {source.describe()!r}: {io.first_line(exc)}") from exc
    finally:
        con.close()
