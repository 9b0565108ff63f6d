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


def literal(value: Any) -> str:
    """An escaped SQL literal, for the few places an engine cannot bind a value."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"not a finite number: {value!r}")
        return repr(value)
    text = str(value)
    if "\x00" in text:
        raise ValueError("a NUL character cannot appear in an SQL literal")
    return "'" + text.replace("'", "''") + "'"


@dataclass
class Rendered:
    """A rendered statement and its bound parameters, in placeholder order."""

    sql: str
    params: list[Any] = field(default_factory=list)


def _loader() -> jinja2.BaseLoader:
    return jinja2.FileSystemLoader(str(resources.files("sqlanon.sql_templates")))


_ENV = jinja2.Environment(
    loader=_loader(),
    undefined=jinja2.StrictUndefined,
    autoescape=False,
    keep_trailing_newline=False,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters["ident"] = ident
_ENV.filters["lit"] = literal


def render(template: str, **context: Any) -> Rendered:
    """Render ``sql_templates/<template>`` with ``context``; values go through ``p()``."""
    params: list[Any] = []

    def p(value: Any) -> str:
        params.append(value)
        return "?"

    sql = _ENV.get_template(template).render(p=p, **context)
    return Rendered(sql.strip(), params)
