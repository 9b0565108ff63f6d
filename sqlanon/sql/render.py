"""Render the Jinja SQL templates of ``sql_templates/`` safely.

Two rules make the templates injection-proof:

* identifiers only enter through the ``ident`` filter, which quotes them and
  doubles embedded quote characters (a column named ``a"; DROP TABLE x; --``
  is just a column); dotted names are passed as lists and quoted part by part;
* values only enter through ``p(value)``, which appends the value to the bound
  parameter list and emits a placeholder (``?`` for DuckDB, a named ``:p0``
  for other SQLAlchemy databases, whose SQL runs as ``text()``); where an
  engine cannot bind (a file path inside ``COPY … TO``, SQL sent through
  ``postgres_query``), the ``lit`` filter or ``inline`` emits a properly
  escaped literal.

``StrictUndefined`` turns a missing template variable into an error instead of
silently rendering nothing.
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import re
import uuid
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Callable

import jinja2


def _double_quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _qualified(name: str | list[str] | tuple[str, ...], quote: Callable[[str], str]) -> str:
    """``quote`` applied to a name, or to each part of a qualified one."""
    if isinstance(name, (list, tuple)):
        if not name:
            raise ValueError("not an identifier: an empty qualified name")
        return ".".join(_qualified(part, quote) for part in name)
    if not isinstance(name, str) or name == "":
        raise ValueError(f"not an identifier: {name!r}")
    return quote(name)


ASCII_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
ASCII_LOWER = "abcdefghijklmnopqrstuvwxyz"
"""What DuckDB folds in names; ``translate(name, ASCII_UPPER, ASCII_LOWER)`` folds as it does in SQL."""

_ASCII_LOWER = str.maketrans(ASCII_UPPER, ASCII_LOWER)


def fold_name(name: str) -> str:
    """``name`` as DuckDB matches names (of tables, schemas, columns): with
    ASCII letters in lower case only ('Émile' and 'émile' are two tables
    to it; sqlanon's Unicode lower() refused one as the other's name)."""
    return name.translate(_ASCII_LOWER)


def ident(name: str | list[str] | tuple[str, ...]) -> str:
    """Quote an identifier (or each part of a qualified one) for SQL."""
    return _qualified(name, _double_quoted)


def literal(value: Any, dialect: str = "duckdb") -> str:
    """An escaped SQL literal, for the places an engine cannot bind a value
    (DuckDB table-function arguments, SQL sent through ``postgres_query``).

    Dates and timestamps become typed literals (``DATE '2020-01-31'``) that
    DuckDB and PostgreSQL both read, as do infinite and NaN doubles; strings
    have their quotes doubled (PostgreSQL's ``standard_conforming_strings``,
    on by default, takes backslashes literally).
    """
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            raise ValueError(f"not a finite number: {value!r}")
        return str(value)
    if isinstance(value, dt.datetime):
        kind = "TIMESTAMPTZ" if value.tzinfo is not None else "TIMESTAMP"
        return f"{kind} '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            # A cut of a float QI may fall on one (a set-generalized column
            # holds them); this spelling reads the same in DuckDB and PostgreSQL.
            word = "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
            return f"CAST('{word}' AS DOUBLE PRECISION)"
        return repr(value)
    text = str(value)
    if "\x00" in text:
        raise ValueError("a NUL character cannot appear in an SQL literal")
    if dialect == "postgres":
        # An escape string reads the same whatever standard_conforming_strings
        # says: backslashes and quotes are both escaped.
        return "E'" + text.replace("\\", "\\\\").replace("'", "''") + "'"
    return "'" + text.replace("'", "''") + "'"


@dataclass
class Rendered:
    """A rendered statement and its bound parameters, in placeholder order."""

    sql: str
    params: list[Any] = field(default_factory=list)


DIALECTS = ("duckdb", "postgres")
GENERIC = "sqla:"
"""Prefix of the other SQLAlchemy dialects: ``sqla:<drivername>``, e.g.
``sqla:sqlite`` or ``sqla:mysql+pymysql``. Their templates come from
``sql_templates/sqlalchemy/`` (then the defaults), identifiers are quoted
the dialect's way and values are named binds (``:p0``) of a ``text()``."""


def is_generic(dialect: str) -> bool:
    """Whether ``dialect`` names another SQLAlchemy database (``sqla:<drivername>``)."""
    return isinstance(dialect, str) and dialect.startswith(GENERIC) and len(dialect) > len(GENERIC)


@functools.lru_cache(maxsize=None)
def sqlalchemy_dialect(dialect: str):
    """The SQLAlchemy dialect object behind ``sqla:<drivername>`` (no driver is imported)."""
    from sqlalchemy.engine import URL

    return URL.create(dialect[len(GENERIC):]).get_dialect()()


def _generic_ident(dialect: str):
    """Identifier quoting for a SQLAlchemy dialect, for SQL run as ``text()``:
    the dialect's quote characters (backticks on MySQL, brackets on SQL
    Server) with the dialect's escaping inside, and ``:`` escaped so that
    ``text()`` never takes part of a name for a bind parameter (it also
    doubles ``%`` itself for drivers that format with ``%``)."""
    preparer = sqlalchemy_dialect(dialect).identifier_preparer
    doubles_percent = "%%" in preparer.quote_identifier("%")

    def quote(name: str) -> str:
        quoted = preparer.quote_identifier(name)
        if doubles_percent:  # text() doubles them again when it compiles
            quoted = quoted.replace("%%", "%")
        return quoted.replace(":", "\\:")

    return functools.partial(_qualified, quote=quote)


class _BytecodeCache(jinja2.FileSystemBytecodeCache):
    """Compiled templates kept on disk (:mod:`sqlanon.cache`), as Python keeps
    its bytecode: compiling a run's templates costs every process about 60 ms,
    loading them about 5 ms. Jinja checks each entry against its template's
    source. A cache that cannot be written is only slower."""

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _bytecode_cache(dialect: str) -> jinja2.BytecodeCache | None:
    """The disk cache of ``dialect``'s environment: one per dialect. Jinja
    works out a filter of constants (``{{ "__sqlanon_rn" | ident }}``) once,
    compiling, and its cache key is the template's name and source: a
    template compiled for MySQL (backticks) was loaded for PostgreSQL, a
    syntax error on the server, and MySQL's took DuckDB's double quotes,
    a string there (helper-187)."""
    from ..cache import writable_dir

    d = writable_dir()
    tag = re.sub(r"[^A-Za-z0-9+.-]", "_", dialect)  # (a "sqla:" prefix has a colon)
    return _BytecodeCache(str(d), f"sql-template-{tag}-%s.cache") if d is not None else None


def _environment(dialect: str) -> jinja2.Environment:
    # A dialect's own template (sql_templates/<dialect>/x.sql) overrides the
    # default one (sql_templates/x.sql), as dbt's adapter.dispatch does.
    base = resources.files("sqlanon.sql_templates")
    folder = "sqlalchemy" if is_generic(dialect) else dialect
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(
            [jinja2.FileSystemLoader(str(base / folder)), jinja2.FileSystemLoader(str(base))]
        ),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
        bytecode_cache=_bytecode_cache(dialect),
    )
    env.filters["ident"] = _generic_ident(dialect) if is_generic(dialect) else ident
    env.filters["lit"] = literal
    env.filters["without_nan"] = _without_nan
    sqlite = dialect == "sqla:sqlite"
    env.tests["sqlite_stamp_cut"] = _stamp_cut if sqlite else (lambda pr: False)
    env.filters["stamp_text"] = _stamp_text
    env.filters["stamp_t"] = _stamp_t
    return env


@functools.lru_cache(maxsize=None)
def _env(dialect: str) -> jinja2.Environment:
    if dialect not in DIALECTS and not is_generic(dialect):
        raise ValueError(f"unknown SQL dialect {dialect!r}")
    return _environment(dialect)


def quote_for(dialect: str):
    """The identifier-quoting function of ``dialect``."""
    return _generic_ident(dialect) if is_generic(dialect) else ident


def _stamp_cut(pr: Any) -> bool:
    """Whether a predicate cuts by naive timestamps (``where.sql`` on SQLite,
    which keeps them as text and compares them as text)."""
    values = pr.value if isinstance(pr.value, (list, tuple)) else (pr.value,)
    return any(isinstance(v, dt.datetime) and v.tzinfo is None for v in values)


def _stamp_text(value: dt.datetime) -> str:
    """A cut's timestamp as the text SQLite compares a row's with (``where.sql``):
    with every fraction digit, each shorter spelling of the same instant (no
    fraction, fewer digits, no seconds) is a prefix and sorts below; pysqlite's
    '2020-01-07 14:00:00' sorted below a row's '2020-01-07 14:00:00.000000'
    (SQLAlchemy's own storage form), and the row went above a cut at its own value."""
    return value.isoformat(sep=" ", timespec="microseconds")


def _stamp_t(value: dt.datetime) -> str:
    """:func:`_stamp_text` with ISO's 'T': above every row text at or before
    the instant, in either spelling (``where.sql``'s guard for an index)."""
    return value.isoformat(sep="T", timespec="microseconds")


def _without_nan(values) -> list:
    """``values`` as a list, a float NaN left out (``where.sql``: a join does not match it)."""
    return [v for v in values if not (isinstance(v, float) and v != v)]


def _nanosecond_text(value: Any) -> str | None:
    """A timestamp with nanoseconds (pandas', which pyarrow gives for a
    TIMESTAMP_NS value) as text DuckDB reads exactly, or ``None``. DuckDB
    binds the value itself as a microsecond TIMESTAMP: a cut of a
    TIMESTAMP_NS QI fell a few hundred nanoseconds below the value its plan,
    ``--explain`` and metrics named, so their clauses selected other rows
    (helper-32)."""
    if isinstance(value, dt.datetime) and value.tzinfo is None and getattr(value, "nanosecond", 0):
        return value.isoformat(sep=" ")
    return None


def _nanosecond_list(values: list | tuple) -> list[str | None] | None:
    """A list of timestamps of which some have nanoseconds (a TIMESTAMP_NS
    column's, as pandas Timestamps) as texts DuckDB reads exactly, or
    ``None``: DuckDB binds such a list as microsecond TIMESTAMPs, and a long
    hierarchy cut's ``IN (SELECT unnest(?))`` matched none of its rows
    (helper-37). A list holds one column's values: its first tells."""
    first = next((v for v in values if v is not None), None)
    if not isinstance(first, dt.datetime) or first.tzinfo is not None or not any(map(_nanosecond_text, values)):
        return None
    return [None if v is None else v.isoformat(sep=" ") for v in values]


def _list_type(values: list | tuple) -> str | None:
    """The DuckDB type of a list parameter whose values JSON writes as text
    (dates, times, decimals, UUIDs), from a closed set of names; ``None``
    for the values JSON keeps (text, numbers, booleans)."""
    kinds = {type(v) for v in values if v is not None}
    if len(kinds) != 1:
        return None
    kind = kinds.pop()
    if kind is decimal.Decimal:
        exponents = [v.as_tuple().exponent for v in values if v is not None]
        if not all(isinstance(e, int) for e in exponents):
            return None
        scale = max(0, -min(exponents))
        return f"DECIMAL(38, {scale})" if scale <= 38 else None
    if issubclass(kind, dt.datetime):  # pandas' Timestamp too (its nanoseconds: _nanosecond_list)
        return "TIMESTAMPTZ" if any(v.tzinfo is not None for v in values if v is not None) else "TIMESTAMP"
    return {dt.date: "DATE", dt.time: "TIME", uuid.UUID: "UUID"}.get(kind)


def render(template: str, *, dialect: str = "duckdb", inline: bool = False, typed: bool = False,
           **context: Any) -> Rendered:
    """Render ``sql_templates/<template>`` with ``context``; values go through ``p()``.

    Args:
        template: the template file name.
        dialect: ``duckdb``, ``postgres`` or ``sqla:<drivername>``: which
            overrides apply (``sql_templates/<dialect>/``, ``sqlalchemy/`` for
            the last), how identifiers are quoted and how values are bound.
        inline: render values as escaped literals instead of placeholders,
            for SQL that must travel as text (e.g. through ``postgres_query``).
        typed: (DuckDB) SQL for people, whose parameters are written as
            JSON: a list of dates, times, decimals or UUIDs is cast to its
            type (``CAST(? AS DATE[])``), so that the same SQL run with the
            JSON's text values compares as the run did. (DuckDB infers a
            single value's type from its comparison, not a list's.)
    """
    params: list[Any] = []
    generic = is_generic(dialect)

    def p(value: Any) -> str:
        if inline:
            return literal(value, dialect)
        nanoseconds = dialect == "duckdb" and _nanosecond_text(value)
        if nanoseconds:
            params.append(nanoseconds)
            return "CAST(? AS TIMESTAMP_NS)"
        nanoseconds = dialect == "duckdb" and isinstance(value, (list, tuple)) and _nanosecond_list(value)
        if nanoseconds:
            params.append(nanoseconds)
            return "CAST(? AS TIMESTAMP_NS[])"
        params.append(value)
        if typed and dialect == "duckdb" and isinstance(value, (list, tuple)):
            kind = _list_type(value)
            if kind is not None:
                return f"CAST(? AS {kind}[])"
        # Other SQLAlchemy databases run the SQL as text(): named binds, which
        # SQLAlchemy turns into the driver's own parameter style.
        return f":p{len(params) - 1}" if generic else "?"

    sql = _env(dialect).get_template(template).render(p=p, dialect=dialect, **context)
    return Rendered(sql.strip(), params)
