"""Render the Jinja SQL templates of ``sql_templates/`` safely.

Two rules make the templates injection-proof:

* identifiers only enter through the ``ident`` filter, which quotes them and
  doubles embedded quote characters (a column named ``a"; DROP TABLE x; --``
  is just a column); dotted names are passed as lists and quoted part by part;
* values only enter through ``p(value)``, which appends the value to the bound
  parameter list and emits a ``?`` placeholder; where an engine cannot bind
  (a file path inside ``COPY … TO``), the ``lit`` filter emits a properly
  escaped string literal.

``StrictUndefined`` turns a missing template variable into an error instead of
silently rendering nothing.
"""

from __future__ import annotations

import datetime as dt
import decimal
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import jinja2


def ident(name: str | list[str] | tuple[str, ...]) -> str:
    """Quote an identifier (or each part of a qualified one) for SQL."""
    if isinstance(name, (list, tuple)):
        if not name:
            raise ValueError("not an identifier: an empty qualified name")
        return ".".join(ident(part) for part in name)
    if not isinstance(name, str) or name == "":
        raise ValueError(f"not an identifier: {name!r}")
    return '"' + name.replace('"', '""') + '"'


def literal(value: Any, dialect: str = "duckdb") -> str:
    """An escaped SQL literal, for the places an engine cannot bind a value
    (DuckDB table-function arguments, SQL sent through ``postgres_query``).

    Dates and timestamps become typed literals (``DATE '2020-01-31'``) that
    DuckDB and PostgreSQL both read; strings have their quotes doubled
    (PostgreSQL's ``standard_conforming_strings``, on by default, takes
    backslashes literally).
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
            raise ValueError(f"not a finite number: {value!r}")
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


def _environment(dialect: str) -> jinja2.Environment:
    # A dialect's own template (sql_templates/<dialect>/x.sql) overrides the
    # default one (sql_templates/x.sql), as dbt's adapter.dispatch does.
    base = resources.files("sqlanon.sql_templates")
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(
            [jinja2.FileSystemLoader(str(base / dialect)), jinja2.FileSystemLoader(str(base))]
        ),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["ident"] = ident
    env.filters["lit"] = literal
    return env


_ENVS = {d: _environment(d) for d in DIALECTS}


def render(template: str, *, dialect: str = "duckdb", inline: bool = False, **context: Any) -> Rendered:
    """Render ``sql_templates/<template>`` with ``context``; values go through ``p()``.

    Args:
        template: the template file name.
        dialect: which ``sql_templates/<dialect>/`` overrides apply.
        inline: render values as escaped literals instead of ``?`` placeholders,
            for SQL that must travel as text (e.g. through ``postgres_query``).
    """
    params: list[Any] = []

    def p(value: Any) -> str:
        if inline:
            return literal(value, dialect)
        params.append(value)
        return "?"

    sql = _ENVS[dialect].get_template(template).render(p=p, dialect=dialect, **context)
    return Rendered(sql.strip(), params)
