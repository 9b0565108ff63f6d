"""Any other SQLAlchemy database as a source: SQLite, MySQL… (not yet SQL Server or Oracle: :data:`UNSUPPORTED`)

PostgreSQL has its own path (:mod:`sqlanon.warehouse`: DuckDB's postgres
extension, server-side ``TABLESAMPLE``, snapshots, publishing). Every other
SQLAlchemy URL is read through SQLAlchemy and the database's own driver:

* the statistics are one aggregate statement run by the database;
* the sample is drawn by the database with a portable statement (rows
  numbered with ``ROW_NUMBER() OVER ()``, a seeded hash of the number keeps
  the requested share; ``sql_templates/sqlalchemy/sample.sql``);
* each worker opens its own database connection and runs
  ``SELECT * FROM <table> WHERE <fragment clause>``, so only its fragment
  travels.

Statements run as SQLAlchemy ``text()``: identifiers are quoted the
dialect's way (backticks on MySQL, brackets on SQL Server, double quotes
elsewhere) and values are named binds that SQLAlchemy hands to the driver
in its own parameter style (:func:`sqlanon.sql.render.render`). Results are converted to Arrow
column by column, typed from the table's reflected column types.

Such a database is an input only; write the anonymized copy to Parquet, a
DuckDB file or PostgreSQL. There is no snapshot: as with files, the table
must not change during a run.
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import multiprocessing
import os
import re
import warnings
from dataclasses import dataclass, field, replace
from urllib.parse import unquote

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from .config import missing_table, table_text
from .errors import ConfigError, InputError
from .io import first_line, physical_path, split_table_name
from .sql.render import GENERIC, Rendered, quote_for
from .warehouse import Conn

log = logging.getLogger("sqlanon")

FETCH_ROWS = 65_536
"""Rows per fetch: the conversion to Arrow goes chunk by chunk."""
PROBE_ROWS = 1000
"""Rows read to type the columns that declare no type (SQLite allows that)
in other databases; SQLite's are typed by the storage classes they hold
(:data:`SQLITE_CLASSES`)."""
SQLITE_CLASSES = {
    frozenset(): pa.string(), frozenset({"integer"}): pa.int64(), frozenset({"real"}): pa.float64(),
    frozenset({"integer", "real"}): pa.float64(), frozenset({"text"}): pa.string(), frozenset({"blob"}): pa.binary(),
}
"""An untyped SQLite column's Arrow type by the storage classes of its
values; any other mix is read as text (and fails by name where it is read)."""


@dataclass(frozen=True)
class SqlAlchemySource:
    """A table in a database reached through SQLAlchemy.

    Attributes:
        conn: the URL (shown only through :meth:`Conn.safe`).
        table: ``(table,)`` or ``(schema, table)``.
        fields: every column with its Arrow type, from the reflected
            SQLAlchemy types (set by :func:`open_source`).
    """

    conn: Conn
    table: tuple[str, ...]
    fields: tuple[tuple[str, pa.DataType], ...] = field(default=(), repr=False)
    mixed: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """Untyped SQLite columns whose values are of kinds no one type holds
    (integers and text…), with those kinds: read as text, a chunk holding
    one kind only read as text silently; refused by name wherever read."""
    generated: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    """``(generated column, column its expression reads)`` of the table
    (:func:`generated_reads`): one computed from a QI is refused where it
    would pass through (helper-197: SQLite's ``age + 0 STORED`` published
    beside the generalized age)."""

    @property
    def dialect(self) -> str:
        """``sqla:<drivername>``; SQLite's whatever its driver: ``sqlite+pysqlite://``
        runs SQLite's SQL, but the templates' SQLite branches (``sqla:sqlite``:
        its timestamps' text, COLLATE BINARY, the NUL check) were skipped for
        it (helper-151)."""
        return GENERIC + ("sqlite" if self.conn.backend == "sqlite" else self.conn.drivername)

    @property
    def relation(self) -> str:
        return quote_for(self.dialect)(list(self.table))

    @property
    def path(self) -> str:
        return f"{self.conn.safe()} {table_text(self.table)}"

    @property
    def root(self) -> str | None:
        """The database file of a file database (SQLite), else None."""
        db = self.conn.database
        if self.conn.backend != "sqlite" or not db or db == ":memory:":
            return None
        query = dict(self.conn.query)
        if db.startswith("file:") and str(query.get("uri", "")).lower() in ("true", "1", "yes", "on"):
            # A URI (pysqlite's uri=true): its path, '' or ':memory:' or mode=memory for none.
            path = unquote(re.sub(r"^//[^/]*", "", db[len("file:"):]).split("?")[0].split("#")[0])
            return None if path in ("", ":memory:") or query.get("mode") == "memory" else os.path.abspath(path)
        return os.path.abspath(db)  # without uri=true, 'file:x.db' is a file of that name

    def describe(self) -> str:
        return f"{self.conn.safe()} table {table_text(self.table)}"

    def same_path(self, other: str) -> bool:
        return self.root is not None and os.path.realpath(other) == os.path.realpath(self.root)

    def export_snapshot(self):
        """No snapshot to share across connections: the table must not change during a run."""
        return self, None

    def attach(self, con: duckdb.DuckDBPyConnection) -> None:
        """Nothing to attach: statements go through SQLAlchemy."""

    def detach(self, con: duckdb.DuckDBPyConnection) -> None:
        """Nothing to detach."""

    def arrow_schema(self, con: duckdb.DuckDBPyConnection) -> pa.Schema:
        """Column names and types, as reflected when the source was opened."""
        return pa.schema(list(self.fields))

    def fetch(self, con: duckdb.DuckDBPyConnection, stmt: Rendered,
              types: dict[str, pa.Field] | None = None) -> pa.Table:
        """Run a rendered statement on the database; only its result travels.
        Result columns named in ``types`` are read as that field (a driver's
        values may not say: MySQL's TIME arrives as a duration, a BIGINT
        UNSIGNED past 2**63 as a Python int no int64 holds); the others
        are the driver's (the caller casts what it needs)."""
        return self._query(stmt.sql, stmt.params, types or {})

    def leave_out(self, drop) -> "SqlAlchemySource":
        """The source without the ``drop`` columns: they are never read (a
        column that cannot be read can then be dropped to get past it)."""
        return replace(self, fields=tuple(f for f in self.fields if f[0] not in drop))

    def select(self, con: duckdb.DuckDBPyConnection, where: str | None = None, params=()) -> pa.Table:
        """The fragment's rows: ``SELECT * … WHERE <clause>`` run by the database,
        in the table's column types."""
        cols = ", ".join(quote_for(self.dialect)(name) for name, _ in self.fields)
        sql = f"SELECT {cols} FROM {self.relation}" + (f" WHERE {where}" if where else "")
        return self._query(sql, list(params), dict(self.fields))

    def _query(self, sql, params: list, types: dict[str, pa.DataType | pa.Field]) -> pa.Table:
        """Run ``sql`` (text with ``:pN`` binds, or a SQLAlchemy statement) into
        Arrow; result columns named in ``types`` get that type (a field's
        type, errors naming the field: a statistic's column is its QI's)."""
        from sqlalchemy import text
        from sqlalchemy.exc import SQLAlchemyError

        try:
            with _engine(self.conn).connect() as c:
                stmt = text(sql) if isinstance(sql, str) else sql
                result = c.execute(stmt, {f"p{i}": v for i, v in enumerate(params)})
                names = list(result.keys())
                self._refuse_mixed(names, types)
                batches = []
                while rows := result.fetchmany(FETCH_ROWS):
                    columns = list(zip(*rows))
                    batches.append(pa.record_batch([_column(n, col, types.get(n)) for n, col in zip(names, columns)],
                                                   names=names))
        except SQLAlchemyError as exc:
            raise InputError(f"cannot read {self.describe()}: {self.conn.redact(first_line(_cause(exc)))}") from None
        if not batches:  # (a field's type: an empty sample's QIs failed 'DataType expected': helper-52)
            empty = {n: getattr(types.get(n), "type", types.get(n)) or pa.null() for n in names}
            return pa.table({n: pa.array([], t) for n, t in empty.items()})
        return pa.Table.from_batches(_unify(batches))

    def _refuse_mixed(self, names: list[str], types: dict) -> None:
        """A column of :attr:`mixed` values fails the read wherever it is read,
        not only where one chunk of it holds two kinds (a fragment or sample
        of its integers alone was published as their text: helper-134)."""
        kinds = dict(self.mixed)
        for n in names:
            name = getattr(types.get(n), "name", n)
            if name in kinds and n in types:
                raise ConfigError(
                    f"column {name!r}: cannot read its values as one type: it declares none and holds "
                    f"{kinds[name]} values; read the table through a view that gives the column one type, "
                    "or drop it (--drop)")


def _unify(batches: list[pa.RecordBatch]) -> list[pa.RecordBatch]:
    """Give every chunk one schema (an all-NULL chunk infers the null type,
    an untyped SQLite column may give ints in one chunk and floats in the next)."""
    try:
        schema = pa.unify_schemas([b.schema for b in batches], promote_options="permissive")
        return [b.cast(schema) if b.schema != schema else b for b in batches]
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        raise ConfigError(f"the database returned values of mixed types: {first_line(exc)}") from None


def _cause(exc: Exception) -> BaseException:
    """The driver's own error behind a SQLAlchemy one, when there is one."""
    return getattr(exc, "orig", None) or exc


def _column(name: str, values: tuple, arrow_type: pa.DataType | pa.Field | None) -> pa.Array:
    """One result column as Arrow, in ``arrow_type`` when it is given.

    Values must be what the type says (:func:`_exact`): SQLite lets any
    column hold any value, and Arrow would read 50.9 in an INTEGER column as
    50, 2 in a BOOLEAN column as true, or a number in a DATE column as days
    since 1970, silently. A field gives its type and, to errors, its name.
    """
    if isinstance(arrow_type, pa.Field):
        name, arrow_type = arrow_type.name, arrow_type.type
    try:
        if arrow_type is None:
            return pa.array(values)
        if pa.types.is_time(arrow_type) and dt.timedelta in set(map(type, values)):
            return _times_of_day(name, values, arrow_type)
        _exact(name, values, arrow_type)
        try:
            return pa.array(values, type=arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return pa.array(values).cast(arrow_type)  # SQLite keeps dates as text; 0/1 as booleans
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError) as exc:
        want = f" as {arrow_type}" if arrow_type is not None else ""
        raise ConfigError(f"column {name!r}: cannot read its values{want}: {first_line(exc)}") from None


def _times_of_day(name: str, values: tuple, t: pa.DataType) -> pa.Array:
    """A TIME column whose driver returns durations (MySQL's TIME through
    PyMySQL, which may also hold -838:59:59 to 838:59:59) as times of day,
    exactly; a duration outside one day is refused by column."""
    micros = pa.array(values, pa.duration("us")).cast(pa.int64())
    outside = pc.or_(pc.less(micros, 0), pc.greater_equal(micros, 86_400_000_000))
    if pc.any(outside).as_py():
        raise ConfigError(
            f"column {name!r} is a TIME holding durations outside one day, which a time of day cannot hold: "
            "read it as text in a view (CAST(… AS CHAR)), or drop it (--drop)"
        )
    return micros.cast(t)


def _accepted(t: pa.DataType) -> tuple[type, ...] | None:
    """The Python values that read as ``t`` without loss (None: any)."""
    if pa.types.is_boolean(t):
        return (bool,)
    if pa.types.is_integer(t):
        return (int,)
    if pa.types.is_floating(t):
        return (int, float)  # an int beyond 2**53 is refused by Arrow itself
    if pa.types.is_decimal(t):
        return (int, decimal.Decimal)  # a Decimal that would need rounding too
    if pa.types.is_timestamp(t):
        return (dt.datetime, str)  # text is parsed, strictly
    if pa.types.is_date(t):
        return (dt.date, str)
    if pa.types.is_time(t):
        return (dt.time, str)
    if pa.types.is_binary(t):
        return (bytes, bytearray, memoryview)
    return None  # text: any value as its text


def _exact(name: str, values: tuple, t: pa.DataType) -> None:
    """Refuse values that ``t`` would change (see :func:`_column`)."""
    present = set(map(type, values))  # C speed: no Python loop over the rows
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        # Text takes any value as its text, but a blob's bytes (b'blob' was published as 'blob').
        odd = present & {bytes, bytearray, memoryview}
    elif (accepted := _accepted(t)) is not None:
        odd = {k for k in present - {type(None)} if not issubclass(k, accepted)}
    else:
        return
    if pa.types.is_boolean(t) and odd == {int} and set(values) - {None} <= {0, 1}:
        return  # SQLite's booleans
    if pa.types.is_integer(t) and odd == {float} and all(v.is_integer() for v in values if type(v) is float):
        return
    if pa.types.is_date(t) and dt.datetime in present:
        odd.add(dt.datetime)  # a date column holding times of day
    # What reads exactly is no example: a boolean column's 0 and 1 (one holding 0/1 and 'yes' names the
    # 'yes'), an integer column's 3.0 (one holding 3.0 and 'oops' names the 'oops').
    examples = (v for v in values if type(v) in odd and not (
        (type(v) is int and v in (0, 1) and pa.types.is_boolean(t))
        or (type(v) is float and v.is_integer() and pa.types.is_integer(t))))
    example = min(examples, key=lambda v: type(v).__name__, default=None)
    if example is not None:
        kind = type(example)
        raise ConfigError(
            f"column {name!r} is declared {t} but holds {kind.__name__} values such as {example!r}, which would "
            "change on the way; read the table through a view that gives the column one type, or drop it (--drop)"
        )


_ENGINES: dict[str, object] = {}


def _engine(conn: Conn):
    """One engine per URL and process (no pool kept: a worker connects once)."""
    from sqlalchemy import create_engine
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError
    from sqlalchemy.pool import NullPool

    if conn.url not in _ENGINES:
        try:
            with warnings.catch_warnings(record=True) as said:  # SQLAlchemy's warning: two lines, one per process
                warnings.simplefilter("always")
                _ENGINES[conn.url] = create_engine(conn.url, poolclass=NullPool)
            for w in said if multiprocessing.parent_process() is None else ():  # once, by the run, not its workers
                log.warning("%s: %s", conn.safe(), conn.redact(re.sub(r" \(Background on this .*", "", str(w.message))))
        except ImportError as exc:
            raise ConfigError(f"no driver for {conn.safe()}: {first_line(exc)} (install the database's DBAPI driver)") from None
        except NoSuchModuleError:  # 'foo://', 'duckdb:///x.db' (SQLAlchemy's "Can't load plugin")
            raise ConfigError(f"{conn.safe()}: SQLAlchemy has no dialect {conn.drivername!r}; name a database "
                              "file or directory, or a URL of a database SQLAlchemy reads") from None
        except (ValueError, TypeError, ArgumentError) as exc:  # ?timeout=abc, ?check_same_thread=maybe
            raise ConfigError(f"{conn.safe()}: {conn.redact(first_line(exc))}") from None
    return _ENGINES[conn.url]


def arrow_type(sa_type, backend: str) -> pa.DataType | None:
    """The Arrow type for a reflected SQLAlchemy column type (None: unknown,
    inferred from the values).

    Exact numbers stay exact: a DECIMAL of at most 38 digits is ``decimal128``,
    a wider or unbounded one is read as text. SQLite stores NUMERIC values as
    integers or floats (so: float64) and TIME as text (kept as text).
    """
    from sqlalchemy import types as t

    if isinstance(sa_type, t.Boolean):
        return pa.bool_()
    if isinstance(sa_type, t.Integer):  # MySQL's BIGINT UNSIGNED reaches 2**64 - 1
        return pa.uint64() if getattr(sa_type, "unsigned", False) else pa.int64()
    if isinstance(sa_type, t.Float) or (isinstance(sa_type, t.Numeric) and backend == "sqlite"):
        return pa.float64()
    if isinstance(sa_type, t.Numeric):
        p, s = sa_type.precision, sa_type.scale
        return pa.decimal128(p, s or 0) if p and p <= 38 else pa.string()
    if isinstance(sa_type, t.DateTime):
        return pa.timestamp("us", tz="UTC" if getattr(sa_type, "timezone", False) else None)
    if isinstance(sa_type, t.Date):
        return pa.date32()
    if isinstance(sa_type, t.Time):
        return pa.string() if backend == "sqlite" else pa.time64("us")
    if isinstance(sa_type, (t.String, t.Enum)):
        return pa.string()
    if isinstance(sa_type, t._Binary):
        return pa.binary()
    return None


UNSUPPORTED = {"mssql": "SQL Server", "oracle": "Oracle"}
"""SQLAlchemy backends whose SQL the portable statements do not fit (README)."""


def _physical(conn: Conn) -> Conn:
    """A SQLite file's URL with each ``..`` taken as the kernel takes it
    (:func:`sqlanon.io.physical_path`): SQLAlchemy cuts ``link/..`` off as
    text, so a job in a linked directory naming ``sqlite:///../hr.db`` read
    another database than ``ls`` shows, or failed as one not there (helper-86)."""
    db = conn.database
    if conn.backend != "sqlite" or not db or db.startswith("file:") or ".." not in db.split(os.sep):
        return conn
    physical = physical_path(db)
    head, sep, rest = conn.url.partition(db)
    moved = Conn(head + physical + rest) if sep and physical != db else conn
    return moved if moved.database == physical else conn


def open_source(conn: Conn, table: str | None) -> SqlAlchemySource:
    """The table's columns are reflected now: a missing table fails before any work."""
    from sqlalchemy import inspect
    from sqlalchemy.exc import NoSuchTableError, SQLAlchemyError

    if conn.backend in UNSUPPORTED:  # a run failed only in the database's SQL, after its statistics (helper-24)
        raise ConfigError(f"{conn.safe()}: {UNSUPPORTED[conn.backend]} is not supported as an input yet (it needs "
                          "ROW_NUMBER() with an ORDER BY, and has no TRUE/FALSE); export the table to Parquet or "
                          "PostgreSQL first")
    if not table:
        raise ConfigError("a database URL needs --table (schema.table)")
    parts = tuple(split_table_name(table))
    schema, name = (None, parts[0]) if len(parts) == 1 else parts
    conn = _physical(conn)
    source = SqlAlchemySource(conn, parts)
    if source.root is not None and not os.path.isfile(source.root):
        # SQLite would create an empty database file there, and leave it behind.
        what = "is a directory, not a database file" if os.path.isdir(source.root) else "does not exist"
        raise InputError(f"SQLite database {source.root!r} {what}")
    try:
        columns = inspect(_engine(conn)).get_columns(name, schema=schema)
        if conn.backend in ("mysql", "mariadb"):
            columns = _exact_names(conn, columns, schema, name)
    except NoSuchTableError:
        # exit 2 with the close name, as a DuckDB file's or PostgreSQL's typo (it was 1: helper-51)
        try:
            found = inspect(_engine(conn))
            names = [f"{schema}.{n}" if schema else n
                     for n in sorted(found.get_table_names(schema=schema) + found.get_view_names(schema=schema))]
        except SQLAlchemyError:
            names = None
        raise ConfigError(missing_table(table, conn.safe(), names)) from None
    except SQLAlchemyError as exc:
        try:  # a schema it does not have (SQLite: 'unknown database "hr"', exit 1: helper-52)
            schemas = inspect(_engine(conn)).get_schema_names() if schema is not None else None
        except SQLAlchemyError:
            schemas = None
        if schemas is not None and schema not in schemas:
            raise ConfigError(missing_table(schema, conn.safe(), schemas, "schema")) from None
        raise InputError(f"cannot read {conn.safe()}: {conn.redact(first_line(_cause(exc)))}") from None
    known = [(c["name"], arrow_type(c["type"], conn.backend)) for c in columns]
    if conn.backend == "sqlite":  # SQLAlchemy's reflection of them is wrong there (_sqlite_generated)
        try:
            generated = [{**c, "computed": None} for c in columns] + _sqlite_generated(conn, schema, name)
        except SQLAlchemyError as exc:
            raise InputError(f"cannot read {conn.safe()}: {conn.redact(first_line(_cause(exc)))}") from None
    else:
        generated = columns
    source = replace(source, generated=generated_reads(generated))
    if any(t is None for _, t in known):
        # Columns without a declared type (SQLite allows them): type them from their values.
        from sqlalchemy import column, func, select
        from sqlalchemy import table as table_clause

        # Each alone: one holding values of mixed kinds must not fail the
        # run before --drop can leave it out (typed as text, it fails by name
        # where it is read).
        def probed(n: str) -> pa.DataType | frozenset:
            if conn.backend == "sqlite":  # every row's storage class: the first rows may all be NULL (helper-13)
                stmt = select(func.typeof(column(n)).label("t")).distinct().select_from(
                    table_clause(name, schema=schema))
                kinds = frozenset(source._query(stmt, [], {}).column("t").to_pylist()) - {"null"}
                return SQLITE_CLASSES.get(kinds, kinds)
            stmt = select(column(n)).select_from(table_clause(name, schema=schema)).limit(PROBE_ROWS)
            try:
                return _inferred(source._query(stmt, [], {}).column(n).type)
            except InputError:
                return pa.string()

        mixed: list[tuple[str, str]] = []

        def typed(n: str) -> pa.DataType:
            t = probed(n)
            if isinstance(t, frozenset):  # SQLite storage classes no one type holds
                mixed.append((n, " and ".join(sorted(t))))
                return pa.string()
            return t

        known = [(n, t if t is not None else typed(n)) for n, t in known]
        return replace(source, fields=tuple(known), mixed=tuple(mixed))
    return replace(source, fields=tuple(known))


_EXPRESSION_TOKENS = re.compile(r"""'(?:[^']|'')*'|"((?:[^"]|"")*)"|`((?:[^`]|``)*)`|\[([^\]]*)\]"""
                                r"|([A-Za-z_\u0080-\uffff][\w$\u0080-\uffff]*)|(\()|(\))|(--[^\n]*|/\*.*?(?:\*/|$)|\s+)"
                                r"|.", re.S)
"""A generated column's expression (or a table's DDL) as SQLite and MySQL
write it: a string literal (skipped), a quoted identifier ("a""b", `a``b`,
[a b]), a bare word, a parenthesis, blanks or a comment (group 7; a quote
or parenthesis in a comment hid a generated column: helper-198), anything
else."""


def _named(m: re.Match) -> str | None:
    """The identifier an :data:`_EXPRESSION_TOKENS` token names, if any."""
    quoted, backquoted, bracketed, word = m.groups()[:4]
    return next((n for n in (quoted and quoted.replace('""', '"'), backquoted and backquoted.replace("``", "`"),
                             bracketed, word) if n), None)


def generated_reads(columns: list[dict]) -> tuple[tuple[str, str], ...]:
    """``(generated column, column read)`` of reflected ``columns`` whose
    ``computed`` expression names another of them (names compared
    case-insensitively, as SQLite and MySQL do; a function's name that is
    also a column's counts, on the safe side, but not one called:
    ``date(birth)`` reads birth, not a column named date). An expression
    is cut at its first unmatched ``)``."""
    names = {c["name"].casefold(): c["name"] for c in columns}
    pairs = []
    for c in columns:
        text = (c.get("computed") or {}).get("sqltext")
        if text is None:
            continue
        depth, read = 0, []
        tokens = [m for m in _EXPRESSION_TOKENS.finditer(str(text)) if not m.group(7)]
        for i, m in enumerate(tokens):
            depth += 1 if m.group(5) else -1 if m.group(6) else 0
            if depth < 0:
                break
            name = _named(m)
            called = m.group(4) and i + 1 < len(tokens) and tokens[i + 1].group(5)  # date(birth): a function
            if name is not None and name.casefold() in names and not called:
                read.append(names[name.casefold()])
        pairs += [(c["name"], r) for r in dict.fromkeys(read)]
    return tuple(pairs)


def _sqlite_generated(conn: Conn, schema: str | None, name: str) -> list[dict]:
    """The generated columns of SQLite table ``name`` as ``{"name", "computed":
    {"sqltext"}}``, read from its CREATE TABLE: SQLAlchemy's reflection ran
    the first one's expression on to the DDL's last parenthesis and gave
    the others none (``x AS (age / 10)`` empty; helper-197). A column's
    expression is what follows its ``AS (`` at the definition's own level.
    A view's are those of the tables and views its SQL names, by name, as
    it passes the columns on (DuckDB's are followed so; helper-198)."""
    from sqlalchemy import text

    master = f"{quote_for('sqla:sqlite')([schema])}.sqlite_master" if schema else "sqlite_master"
    with _engine(conn).connect() as c:
        ddls = {n.casefold(): (kind, sql) for kind, n, sql in c.execute(
            text(f"SELECT type, name, sql FROM {master} WHERE type IN ('table', 'view')"))}
    found: list[dict] = []
    todo, seen = [name.casefold()], set()
    while todo:
        kind, ddl = ddls.get(todo.pop(), (None, None))
        if ddl is None or ddl in seen:
            continue
        seen.add(ddl)
        tokens = [m for m in _EXPRESSION_TOKENS.finditer(ddl) if not m.group(7)]
        if kind == "view":  # every name it holds that is a table or view of the schema
            todo += [n.casefold() for m in tokens if (n := _named(m)) is not None and n.casefold() in ddls]
        else:
            found += _generated_in(ddl, tokens)
    return found


def _generated_in(ddl: str, tokens: list[re.Match]) -> list[dict]:
    """:func:`_sqlite_generated` of one CREATE TABLE (``tokens``: its
    :data:`_EXPRESSION_TOKENS`, comments and blanks left out)."""
    found: list[dict] = []
    depth, column, after_as, start = 0, None, False, None
    for m in tokens:
        if m.group(5):  # (
            depth += 1
            if depth == 2 and after_as and column is not None:
                start = m.end()
            after_as = False
        elif m.group(6):  # )
            depth -= 1
            if depth == 1 and start is not None:
                found.append({"name": column, "computed": {"sqltext": ddl[start:m.start()]}})
                start = None
        elif depth != 1:
            continue
        elif m.group(0) == ",":
            column, after_as = None, False
        elif column is None:
            column = _named(m)  # a definition's first token: its column (or CONSTRAINT, PRIMARY…: no AS)
        else:
            after_as = (m.group(4) or "").upper() == "AS"
    return found


def _exact_names(conn: Conn, columns: list[dict], schema: str | None, name: str) -> list[dict]:
    """The reflected columns under their names as the server has them.

    SQLAlchemy reads MySQL's names from SHOW CREATE TABLE without undoing
    its quoting: a column named x`y came back as x``y (a"b as a""b under
    sql_mode ANSI_QUOTES), and no statement could then find it."""
    from sqlalchemy import text

    with _engine(conn).connect() as c:
        names = [row[0] for row in c.execute(
            text("SELECT column_name FROM information_schema.columns "
                 "WHERE table_schema = COALESCE(:s, DATABASE()) AND table_name = :t ORDER BY ordinal_position"),
            {"s": schema, "t": name},
        )]
    if len(names) != len(columns):  # not the table reflected (a view of another schema?): as reflected
        return columns
    return [{**col, "name": n} for col, n in zip(columns, names)]


def _inferred(t: pa.DataType) -> pa.DataType:
    return pa.string() if pa.types.is_null(t) else t
