"""Check k-anonymity and l-diversity of any generalized relation with SQL.

The check groups the relation by its (generalized) quasi-identifier columns:
every group must hold at least ``k`` rows and at least ``l`` distinct values
of each sensitive column (a NULL counts as one value). It runs on what was
actually written, so it also catches two classes that generalized to the
same values (they form one, larger, group: still safe).
"""

from __future__ import annotations

import contextlib
import logging
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field, fields

import duckdb
import pyarrow as pa

from .config import plain
from .errors import ConfigError, InputError, SqlanonError
from .io import first_line, safe_path_hint
from .sql import ident, literal, render

log = logging.getLogger("sqlanon")


@dataclass(frozen=True)
class Verification:
    """The outcome of a k/ℓ check: of :func:`sqlanon.verify`, and of each run's (``RunResult.verification``)."""

    k: int
    l: int  # noqa: E741
    rows: int
    classes: int
    min_class_size: int
    dp: int
    max_class_size: int = 0
    min_distinct: dict[str, int] = field(default_factory=dict)
    violations: list[dict] = field(default_factory=list)
    """The first violating classes (at most ``limit``: 20 by default)."""
    n_violations: int = 0
    """How many classes break k or l in all."""
    violating_rows: int = 0
    """How many rows those classes hold."""
    reading: str = ""
    """How the table was read where not as it is written, said with its
    violations: a CSV file read as its readers type it (:func:`verify_as_typed`)."""
    by_null: dict[str, int] = field(default_factory=dict)
    """Per sensitive column, the classes that reach ℓ only with NULL
    counted as one of their values (none listed when there are none, or ℓ is 1)."""

    @property
    def ok(self) -> bool:
        return self.n_violations == 0

    @property
    def achieved_l(self) -> int | None:
        return min(self.min_distinct.values()) if self.min_distinct else None

    def describe_failure(self, limit: int = 3, lines: bool = False) -> str:
        """The violations in one line (an error message), or with ``lines``
        one class per indented line (``sqlanon verify``'s report: 20 classes
        on one line made a line of 2,400 characters, helper-42). Of a check
        that passed, that no class breaks them (not '0 class(es) …: ')."""
        if self.ok:
            return f"no class breaks k={self.k}/l={self.l}"
        sep = "\n  " if lines else "; "
        shown = sep.join(", ".join(f"{key}={_shown(val)}" for key, val in v.items()) for v in self.violations[:limit])
        shown_n = min(limit, len(self.violations))
        more = ""
        if self.n_violations > shown_n:
            more = f"{sep if lines and shown else ' ' if shown else ''}(and {self.n_violations - shown_n} more)"
        how = f" ({self.reading})" if self.reading else ""
        head = f"{self.n_violations} class(es) of {self.violating_rows} row(s) break k={self.k}/l={self.l}{how}:"
        return f"{head}{sep if lines else ' '}{shown}{more}"

    def __repr__(self) -> str:
        """With ``ok`` first, the field one looks for (a property, which the dataclass's repr left out)."""
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self))
        return f"Verification(ok={self.ok!r}, {shown})"

    def to_dict(self) -> dict:
        return plain({
            "ok": self.ok,
            "k": self.k,
            "l": self.l,
            "rows": self.rows,
            "classes": self.classes,
            "min_class_size": self.min_class_size,
            "max_class_size": self.max_class_size,
            "dp": self.dp,
            "min_distinct": self.min_distinct,
            "n_violations": self.n_violations,
            "violating_rows": self.violating_rows,
            "violations": self.violations,
            "reading": self.reading,
            "classes_l_by_null": self.by_null,
        })


def _shown(value) -> str:
    """A QI's value as a failed check shows it: NULL as NULL (not None), a
    text in another Unicode form than NFC escaped ('Zoe\\u0301'), which
    printed as 'Zoé', one more class of 'Zoé' beside it (helper-68)."""
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return ascii(value) if unicodedata.normalize("NFC", value) != value else repr(value)
    return str(value)


@contextlib.contextmanager
def _one_line_errors(what: str, server: bool):
    """A DuckDB error, or the server's driver error, as one line: ``cannot <what>[ on the server]: …``."""
    try:
        yield
    except duckdb.Error as exc:
        raise InputError(f"cannot {what}: {first_line(exc)}") from exc
    except SqlanonError:
        raise
    except Exception as exc:  # noqa: BLE001 - a server-side driver error: one line, no traceback
        if not server:
            raise
        line = first_line(exc)
        raise InputError(f"cannot {what} on the server: {line}{safe_path_hint(line)}") from None


def _fetch(con, template: str, dialect: str, **context) -> tuple[list[str], list[tuple]]:
    """Column names and rows of a rendered template, on DuckDB or on the server."""
    if not isinstance(con, duckdb.DuckDBPyConnection):  # a psycopg connection: it runs on the server
        stmt = render(template, dialect=dialect, inline=True, **context)
        log.debug("%s on the server:\n%s", template, stmt.sql)
        cur = con.execute(stmt.sql)  # no parameters: psycopg leaves the text alone
        return [d.name for d in cur.description], [tuple(r) for r in cur.fetchall()]
    stmt = render(template, dialect=dialect, **context)
    log.debug("%s:\n%s\nparameters: %r", template, stmt.sql, stmt.params)
    cur = con.execute(stmt.sql, stmt.params)
    return [c[0] for c in cur.description], cur.fetchall()


def _unloadable(exc: BaseException) -> bool:
    """Whether a psycopg error is one of loading a value into Python (its
    DataError), after the server had answered."""
    import psycopg

    return isinstance(exc, psycopg.DataError) and not getattr(exc, "sqlstate", None)


def relation_types(con: duckdb.DuckDBPyConnection, relation: str) -> tuple[list[str], list]:
    """The column names and DuckDB types of ``relation``."""
    described = con.sql(f"SELECT * FROM {relation}")
    return described.columns, described.types


def float_columns(con: duckdb.DuckDBPyConnection, relation: str, columns: list[str]) -> list[str]:
    """Those of ``columns`` of ``relation`` that hold floats (and may hold NaN)."""
    names, types = relation_types(con, relation)
    floats = {n for n, t in zip(names, types) if str(t) in ("FLOAT", "DOUBLE")}
    return [c for c in columns if c in floats]


def _float_columns_on_server(con, relation: str, columns: list[str]) -> list[str]:
    """Those of ``columns`` of ``relation`` on a PostgreSQL server that hold
    floats (``real``, ``double precision``: by their type's OID)."""
    floats = {d.name for d in con.execute(f"SELECT * FROM {relation} LIMIT 0").description if d.type_code in (700, 701)}
    return [c for c in columns if c in floats]


def warn_spellings(con, relation: str, qi: list[str], l: int, text: list[str],  # noqa: E741
                   dialect: str = "duckdb") -> None:
    """Warn when ℓ holds only as the values are written: classes whose text
    sensitive columns (``text``) hold fewer than ``l`` values once case,
    blanks around them, zero-width and control characters and the Unicode form are
    ignored ('HIV' and 'HIV ', a composed and a decomposed 'é': one value
    to a reader). A check of what a table says, not a verdict: the values
    are counted as written (helper-68). Not run by a publishing check."""
    for s in text if l > 1 else ():
        try:
            _, rows = _fetch(con, "verify_spellings.sql", dialect, relation=relation, qi=qi, s=s, l=l)
            n, (lo, hi) = rows[0] if rows[0][0] else (0, (None, None))
        except Exception as exc:  # noqa: BLE001 - a hint only (a type it cannot lower, a driver's array)
            log.debug("the spellings of %r were not compared: %s", s, first_line(exc))
            continue
        if n:
            log.warning("l=%d holds as the values are written, but %d class(es) hold fewer than %d values of %r once "
                        "case, blanks around them, zero-width and control characters and the Unicode form are "
                        "ignored (one holds %s and %s): one value written two ways?", l, n, l, s, _shown(lo),
                        _shown(hi))


def warn_null_counted(check: Verification) -> None:
    """Warn when ℓ holds only with NULL counted as a value: a sensitive
    column gone mostly NULL upstream passed l = 2 with classes of one
    income and NULLs, not a word (helper-100). NULL is a value to ℓ, as
    the README says; to a reader it says 'this one, or unknown'."""
    learns = ("a reader learns the value, or that it is missing" if check.l == 2 else
              f"a reader narrows it to fewer than {check.l} values, or learns that it is missing")
    for s, n in check.by_null.items():
        log.warning("l=%d holds with a missing value (NULL or NaN; in a CSV file 'NA' and its kin too) counted as a "
                    "value of %r: %d class(es) hold fewer than %d values besides it (%s)", check.l, s, n, check.l,
                    learns)


def warn_split_classes(con, relation: str, qi: list[str], k: int, l: int,  # noqa: E741
                       sensitive: list[str], file_column: str) -> None:
    """Warn of classes that hold k rows and l values only across the files
    of a lake (``relation``, with each row's file in ``file_column``): to a
    reader of one file, or of what the files are split by (a colleague's
    export per age band, a tool's part per fragment), each part is a class
    of its own, and it breaks k or l (helper-68). Checked after a passing
    check of the whole."""
    parts = verify_relation(con, relation, qi, k, l, sensitive, limit=1, file_column=file_column)
    if parts.ok:
        return
    first = dict(parts.violations[0])
    file = first.pop(file_column)
    shown = ", ".join(f"{c}={_shown(first[c])}" for c in qi)
    log.warning("k=%d/l=%d hold across the files, but %d part(s) of classes in one file break them (%s: %d row(s) "
                "in %r): a reader of one file, or of what the files are split by, sees such a part as a class", k, l,
                parts.n_violations, shown, first[count_keys([*qi, file_column], sensitive)[0]], file)


def verify_as_typed(
    con: duckdb.DuckDBPyConnection, read_as: Callable[..., str], qi: list[str], k: int, l: int,  # noqa: E741
    sensitive: list[str] | tuple[str, ...], limit: int = 20,
) -> Verification | None:
    """ℓ of a CSV file as its readers count it: ``read_as(every_row, text)`` is
    the file read with the types DuckDB guesses (pandas' are alike; from its
    first rows, or every row; the columns ``text`` as text) and the texts pandas takes for a missing value
    as NULL (:data:`sqlanon.io.READER_NULLS`), where a sensitive value
    written two ways ('5' and '5.0', 'true' and 'TRUE', 'NA' and an empty
    field) is one value, two in its text. The QIs are read as written (a
    reader's typing merges classes, whose ℓ may then hide a class's), so
    only sensitive values merge, and only ℓ can come out worse. A type
    guessed from the first rows that a later one breaks (a
    column 'NA' left all numbers there, then 'pending': helper-98) is
    guessed again from every row, a whole extra pass, only then. None, with
    a warning, when even that cannot read the file typed."""
    # The QIs as written: typed, 'yes' and 'Yes' (one BOOLEAN), '2020-01-01' and '2020-1-1' (one DATE) made
    # one class, whose l the two classes pandas and pyarrow keep apart lacked (helper-191). Their classes
    # as finely as any reader's, their sensitive values as coarsely.
    written = tuple(qi)
    for every_row in (False, True):
        try:
            relation = read_as(every_row, written)
            described = relation_types(con, relation)  # (a sniff of the file: every row's, the second time)
            flags = tuple(c for c, t in zip(*described) if c in sensitive and str(t) == "BOOLEAN")
            if flags:  # DuckDB's booleans take 'Yes', 'yes' and 'YES', three texts to pandas and pyarrow (helper-181)
                relation = read_as(every_row, written + flags)  # as text, which the readers' own booleans are made of
                described = relation_types(con, relation)
            return verify_relation(con, _as_readers_compare(con, relation, sensitive, described), qi, k, l,
                                   sensitive, limit=limit)
        except (InputError, duckdb.Error) as exc:
            failure = exc
    log.warning("the CSV file does not read back with its types (%s): its l is checked on its text only",
                first_line(failure))
    return None


PYARROW_BOOLEANS = ("1", "0", "true", "false", "True", "False", "TRUE", "FALSE")
"""The texts pyarrow's CSV reader (and pandas' with engine="pyarrow") reads as booleans."""


def _as_readers_compare(con: duckdb.DuckDBPyConnection, relation: str, sensitive,
                        described: tuple[list[str], list]) -> str:
    """``relation`` (a CSV file read typed) with each sensitive column that
    DuckDB keeps as text compared as pandas and pyarrow read it: one whose
    every value reads as a number ('5', '05', '+5', '5.0') by that number,
    one of pyarrow's boolean texts only ('true', '1') as a boolean,
    one of dates, times and timestamps ('2020-01-01', '2020-01-01
    00:00:00') as pyarrow itself reads them. DuckDB
    keeps '05' beside '5' as text, and l = 2 of '5' and '05' was published
    and verified where pandas reads one value (helper-107). Each column is
    looked at up to its first value that is neither (at once, for most).
    ``described``: its :func:`relation_types`."""
    names, types = described
    text = [c for c, t in zip(names, types) if c in sensitive and str(t) == "VARCHAR"]
    replaced = []
    for c in text:
        v = f"trim({ident(c)})"
        if not con.execute(f"SELECT 1 FROM {relation} WHERE {v} <> '' AND TRY_CAST({v} AS DOUBLE) IS NULL "
                           "LIMIT 1").fetchall():
            replaced.append(f"CAST(TRY_CAST({v} AS DOUBLE) AS VARCHAR) AS {ident(c)}")
            continue
        booleans = ", ".join(literal(b) for b in PYARROW_BOOLEANS)
        if not con.execute(f"SELECT 1 FROM {relation} WHERE {v} <> '' AND {v} NOT IN ({booleans}) LIMIT 1").fetchall():
            replaced.append(f"CASE WHEN {v} IN ('1', 'true', 'True', 'TRUE') THEN 'true' WHEN {v} <> '' THEN 'false' "
                            f"END AS {ident(c)}")
            continue
        # pyarrow (and pandas' engine="pyarrow") types a column of dates, times and
        # timestamps by all its values: '2020-01-01' and '2020-01-01 00:00:00' one
        # value, which DuckDB's sniffer kept as two texts (helper-159). DuckDB's
        # casts take other spellings than pyarrow's parsers (helper-161): pyarrow
        # itself reads the column's distinct values, each mapped to what it read.
        if not con.execute(f"SELECT 1 FROM {relation} WHERE {ident(c)} <> '' AND NOT regexp_matches({ident(c)}, "
                           "'^[0-9]') LIMIT 1").fetchall():
            read = _as_pyarrow_reads(con, relation, c)
            if read is not None:
                name = f"__sqlanon_read_{len(replaced)}"
                con.register(name, read)
                # The column qualified: a sensitive column named text or read bound to the lookup's own.
                replaced.append(f"(SELECT r.read FROM {ident(name)} r WHERE r.text = {SOURCE_ALIAS}.{ident(c)}) "
                                f"AS {ident(c)}")
    return (f"(SELECT * REPLACE ({', '.join(replaced)}) FROM (SELECT * FROM {relation}) AS {SOURCE_ALIAS})"
            if replaced else relation)


SOURCE_ALIAS = "__sqlanon_typed"


def _as_pyarrow_reads(con: duckdb.DuckDBPyConnection, relation: str, column: str) -> pa.Table | None:
    """The distinct non-empty values of the text ``column`` of ``relation``
    (``text``) beside how pyarrow's CSV reader reads them, as text
    (``read``): a column of them alone, typed as pyarrow infers it, whose
    values then print alike where it read one value (an instant written
    in two zones, a date and its midnight); None when pyarrow reads the
    column as text (one value it cannot parse is enough)."""
    import pyarrow.csv as pa_csv

    values = con.execute(f"SELECT DISTINCT {ident(column)} AS text FROM {relation} WHERE {ident(column)} <> ''"
                         ).fetch_arrow_table()
    written = pa.BufferOutputStream()  # in Arrow's memory, read back without a copy
    pa_csv.write_csv(values, written)
    try:
        read = pa_csv.read_csv(pa.BufferReader(written.getvalue())).column(0)
    except pa.ArrowException:  # no type fits every value (pyarrow reads it as text, or fails to)
        return None
    if pa.types.is_string(read.type) or pa.types.is_large_string(read.type) or pa.types.is_binary(read.type):
        return None
    return pa.table({"text": values.column(0), "read": read.cast(pa.string())})


CANONICAL_TEXT = (
    "SET TimeZone = 'UTC'", "SET DateStyle = 'ISO, MDY'", "SET IntervalStyle = 'postgres'",
    "SET extra_float_digits = 3", "SET bytea_output = 'hex'", "SET lc_monetary = 'C'",
)
"""PostgreSQL settings that fix how values print as text, for checksums that
two sessions (the input's and the output's) must compute alike."""


@dataclass(frozen=True)
class Checksums:
    """Checksums of a relation's pass-through columns (``sql_templates/_checksum.sql``)."""

    columns: dict[str, str | None]
    """Per column: its values as a multiset."""
    rows: str | None = None
    """Each row's values of all the columns together (two or more columns)."""

    @classmethod
    def from_row(cls, names: list[str], values: list, columns: list[str]) -> "Checksums":
        """From a result row of ``_checksum.sql`` (``names`` and ``values``)."""
        got = dict(zip(names, values))
        return cls({c: got[f"__sqlanon_h{i}"] for i, c in enumerate(columns)}, got.get("__sqlanon_hrow"))

    def differences(self, other: "Checksums") -> list[str]:
        """What differs from ``other``, as the columns' names (or "their rows")."""
        changed = [repr(c) for c, v in self.columns.items() if other.columns.get(c) != v]
        if not changed and self.rows != other.rows:
            changed.append("their rows (values moved between rows)")
        return changed


def column_checksums(con, relation: str, columns: list[str], dialect: str = "duckdb", *,
                     native: bool = False, doing: str = "compare the pass-through columns") -> Checksums:
    """The checksums of ``columns`` of ``relation``, in one statement.

    ``con`` is a DuckDB connection or a psycopg connection (then its session's
    text output settings are pinned first: :data:`CANONICAL_TEXT`).
    ``native``: DuckDB hashes the values as they are, not their text (for
    two relations whose columns have the same types).
    """
    server = not isinstance(con, duckdb.DuckDBPyConnection)
    with _one_line_errors(doing, server):
        for stmt in CANONICAL_TEXT if server else ():
            con.execute(stmt)
        names, rows = _fetch(con, "checksum.sql", dialect, relation=relation, checksum=columns, native=native)
    return Checksums.from_row(names, list(rows[0]), columns)


RESERVED_PREFIX = "__sqlanon_"
"""sqlanon's own SQL names its helper columns and CTEs with this prefix, so a
column it groups or counts must not start with it."""


def count_keys(qi: list[str], sensitive: list[str]) -> list[str]:
    """The keys of a violation's counts, ``__rows`` and ``__distinct_<s>`` per
    sensitive column, each given leading ``_``s while a QI has its name: a
    QI named ``__rows`` lost its values to the count (helper-68)."""
    taken = set(qi)
    keys = []
    for key in ["__rows", *(f"__distinct_{s}" for s in sensitive)]:
        while key in taken:
            key = "_" + key
        taken.add(key)
        keys.append(key)
    return keys


def refuse_reserved(names) -> None:
    """Refuse QI and sensitive columns named like sqlanon's helper columns,
    in any case (DuckDB's names are case-insensitive): the SQL would take
    the user's column for its own count, and pass a table breaking k."""
    for c in names:
        if c.lower().startswith(RESERVED_PREFIX):
            raise ConfigError(f"column {c!r}: names starting with {RESERVED_PREFIX!r} (in any case) are sqlanon's "
                              "own; rename it")


def verify_relation(
    con: duckdb.DuckDBPyConnection,
    relation: str,
    qi: list[str],
    k: int,
    l: int = 1,  # noqa: E741
    sensitive: list[str] | tuple[str, ...] = (),
    limit: int = 20,
    dialect: str = "duckdb",
    nan_null: list[str] | None = None,
    file_column: str | None = None,
) -> Verification:
    """Verify ``relation`` (an SQL relation expression) on ``con``.

    Args:
        con: the DuckDB connection that can see ``relation``, or a psycopg
            connection to the server that holds it (the check then runs there).
        relation: a rendered, safe relation expression (a quoted table name or
            a table function call).
        qi: the generalized quasi-identifier columns to group by.
        k: minimum rows per group.
        l: minimum distinct values of each sensitive column per group.
        sensitive: the sensitive columns.
        limit: how many violating groups to return at most.
        dialect: the SQL dialect of ``con``.
        nan_null: the sensitive columns whose NaN counts as their NULL (both
            say "no value", and pandas reads both as NaN: helper-21), as the
            engine counts them (those it held as floats); by default those
            that hold floats in ``relation`` (on DuckDB; none on a server).
        file_column: a column of ``relation`` naming each row's file, to
            group by as one more QI (each file's part of a class).
    """
    sensitive = list(sensitive)
    refuse_reserved([*qi, *sensitive])
    qi = [*qi, file_column] if file_column else qi
    server = not isinstance(con, duckdb.DuckDBPyConnection)
    signed: list[str] = []

    def fetch(template: str, **context) -> tuple[list[str], list[tuple]]:
        return _fetch(con, template, dialect, relation=relation, qi=qi, sensitive=sensitive, nan_null=nan_null,
                      signed=signed, **context)

    with _one_line_errors("verify", server):
        # One look at the relation's types (on DuckDB a CSV relation's is a sniff of the file).
        floats = (_float_columns_on_server if server else float_columns)(con, relation, [*qi, *sensitive])
        if nan_null is None:
            nan_null = [] if server else [s for s in sensitive if s in floats]
        signed = [c for c in qi if c in floats]
        _, rows_ = fetch("verify_summary.sql", k=k, l=l)
        row = rows_[0]
        violations: list[dict] = []
        classes, rows, min_size, max_size, dp, n_bad, bad_rows = row[:7]
        mins = dict(zip(sensitive, row[7:7 + len(sensitive)]))
        by_null = dict(zip(sensitive, row[7 + len(sensitive):]))
        log.info("k=%d l=%d checked by SQL: %s rows in %s classes (smallest %s); %s break it",
                 k, l, rows or 0, classes, min_size or 0, n_bad or "none")
        if n_bad:
            # ... and nanoseconds, which Python's datetime would cut (helper-68)
            zoned = [] if server else [c for c, t in zip(*relation_types(con, relation))
                                       if c in qi and ("TIME ZONE" in str(t) or str(t) == "TIMESTAMP_NS")]
            try:
                _, bad = fetch("verify_violations.sql", k=k, l=l, limit=limit, as_text=zoned)
            except Exception as exc:  # noqa: BLE001 - re-raised unless it is the driver's
                if not server or not _unloadable(exc):
                    raise
                # A value the driver cannot hold (a date before year 1, after
                # 9999): the check failed with that error, not its violations
                # (helper-32). They are shown as the server prints them.
                _, bad = fetch("verify_violations.sql", k=k, l=l, limit=limit, as_text=list(qi))
            # The counts as numbers on every server (PostgreSQL's sum() is a numeric: "2" in --json).
            keys = [*qi, *count_keys(qi, sensitive)]
            violations = [{n: v if i < len(qi) else int(v) for i, (n, v) in enumerate(zip(keys, r))} for r in bad]
    return Verification(
        k=k, l=l, rows=int(rows or 0), classes=int(classes), min_class_size=int(min_size or 0), dp=int(dp or 0),
        max_class_size=int(max_size or 0),
        min_distinct={s: int(v) for s, v in mins.items() if v is not None}, violations=violations,
        n_violations=int(n_bad or 0), violating_rows=int(bad_rows or 0),
        by_null={s: int(v) for s, v in by_null.items() if v and l > 1},
    )
