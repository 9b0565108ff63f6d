"""What to anonymize and how: frozen, validated specifications.

The CLI (flags or ``--config job.yml``) and the library API build these same
objects; validation happens here, when a spec is built, never inside the kernel.
"""

from __future__ import annotations

import difflib
import glob
import json
import math
import os
import re
import unicodedata
import urllib.parse
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING

from .errors import ConfigError

if TYPE_CHECKING:
    from .hierarchies import Hierarchy

GENERALIZATIONS = ("interval", "set", "prefix", "hierarchy")
"""How a quasi-identifier is generalized within an equivalence class.

* ``interval`` — numbers, dates, timestamps: ``[lo, hi]``.
* ``set`` — any type: ``{a, b, c}``.
* ``prefix`` — values as text: common prefix, ``*`` for every redacted character.
* ``hierarchy`` — categorical values: lowest common ancestor in a hierarchy.
"""

INTERVAL_FORMATS = ("text", "bounds")

STRATEGIES = ("quantile", "mondrian")
"""How the coordinator cuts the domain into fragments (paper §4.1)."""

FILE_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".tsv": "csv"}
"""File extensions and their formats; ``.tsv`` is CSV separated by tabs."""

CSV_COMPRESSIONS = {".gz": "gzip", ".zst": "zstd"}
"""Compressed CSV (``people.csv.gz``, ``people.tsv.zst``): DuckDB reads and writes them as they stream."""


def format_suffix(path: str) -> str:
    """The extension naming a file's format, as spelled: ``.parquet``, ``.csv``, ``.tsv.gz``; else ''."""
    suffixes = PurePath(path.rstrip("/*")).suffixes
    # .gz and .zst as spelled: DuckDB tells a compression by its lower-case suffix only.
    if len(suffixes) >= 2 and suffixes[-1] in CSV_COMPRESSIONS and FILE_FORMATS.get(suffixes[-2].lower()) == "csv":
        return "".join(suffixes[-2:])
    return suffixes[-1] if suffixes and suffixes[-1].lower() in FILE_FORMATS else ""


def file_format(path: str) -> str | None:
    """``parquet`` or ``csv`` from a path's extension, else None."""
    suffix = format_suffix(path).lower()
    return FILE_FORMATS["." + suffix.split(".")[1]] if suffix else None  # ".tsv.gz" -> ".tsv"


def csv_dialect(path: str) -> tuple[str, str]:
    """The delimiter and compression a CSV file's name asks for: ``(',', 'none')``,
    ``('\\t', 'gzip')`` for ``.tsv.gz``."""
    suffix = format_suffix(path).lower()
    delimiter = "\t" if suffix.startswith(".tsv") else ","
    return delimiter, next((c for ext, c in CSV_COMPRESSIONS.items() if suffix.endswith(ext)), "none")


def plain(x):
    """``x`` in the values JSON has, for every parser: a NaN or infinite
    number (a QI value in a violation, a cut value in a WHERE clause's
    parameters) as the string Python shows for it, not the bare NaN token
    JSON does not have; other values JSON lacks (dates, decimals) as text.
    What the library's ``to_dict()`` and ``explain()`` return (a date there
    failed ``json.dumps``: helper-16)."""
    if isinstance(x, bool) or x is None or isinstance(x, (str, int)):
        return x
    if type(x).__module__ == "numpy" and hasattr(x, "tolist"):  # np.int64(5): 5, not '5'; an array: a list
        return plain(x.tolist())
    if isinstance(x, float):
        return x if math.isfinite(x) else str(x)
    if isinstance(x, dict):  # keys as JSON takes them (a MAP QI's dates: a TypeError, helper-11)
        return {k if isinstance(k, (str, int, bool)) or k is None or (isinstance(k, float) and math.isfinite(k))
                else str(k): plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    return str(x)


def strict_json(doc, *, indent: int | None = None, sort_keys: bool = False) -> str:
    """JSON text that every parser reads (:func:`plain`)."""
    return json.dumps(plain(doc), indent=indent, sort_keys=sort_keys, allow_nan=False)


def closest(word: str, choices, cutoff: float = 0.6) -> str | None:
    """The choice closest to ``word`` (one differing only in case first),
    or None when nothing is close (or ``word`` is no text: ``executor=None``)."""
    if not isinstance(word, str):
        return None
    choices = list(choices)
    same_but_case = [c for c in choices if c.lower() == word.lower() and c != word]
    close = same_but_case or difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return close[0] if close else None


def suggest(word: str, choices, cutoff: float = 0.6) -> str:
    """A ``" (did you mean 'x'?)"`` hint, or ``""`` when nothing is close."""
    close = closest(word, choices, cutoff)
    return f" (did you mean {close!r}?)" if close is not None else ""


# One name of a comma-separated list: double-quoted as in SQL (a quote
# inside doubled), which lets a name hold a comma, or bare up to the comma.
_LIST_ITEM = re.compile(r'\s*(?:"((?:[^"]|"")*)"\s*(?=,|$)|([^,]*))(?:,|$)')


def split_names(text: str) -> list[str]:
    """Column names as the CLI and the API's strings take them: ``"a, b"`` →
    ``['a', 'b']``; ``'"last, first",age'`` → ``['last, first', 'age']``. A
    name that only starts with a quote (``"x``, ``"a"b``) is taken as written."""
    out: list[str] = []
    pos = 0
    while pos < len(text):
        m = _LIST_ITEM.match(text, pos)
        quoted, bare = m.group(1), m.group(2)
        name = quoted.replace('""', '"') if quoted is not None else bare.strip()
        if name:
            out.append(name)
        pos = m.end()
    return out


_SQLITE_RELATIVE = re.compile(r"sqlite(\+\w+)?:///(?!/)")
"""sqlite:///relative.db, not sqlite:////abs.db."""


def sqlite_url_from(url: str, base: str) -> str:
    """A SQLite URL's relative database file joined to the directory ``base``
    (a job file's, or the working one: recorded in the metrics as where it
    is, and read there by workers in another directory); any other URL, and
    an in-memory database, as it is. The directory is quoted into the URL,
    whose path SQLAlchemy decodes (w%41/ read ../wA/: helper-190), and
    twice into a URI filename, which SQLite decodes again (helper-189)."""
    m = _SQLITE_RELATIVE.match(url)
    rest = url[m.end():] if m else ""
    if m and rest and not rest.startswith((":memory:", "file:")):  # quoted: the URL's path is decoded (helper-190)
        return url[:m.end()] + os.path.join(urllib.parse.quote(base), rest)
    if m and re.match(r"file:(?!/)[^?#]", rest) and re.search(r"[?&]uri=(true|1|yes|on)(&|#|$)", url, re.IGNORECASE):
        return url[:m.end()] + "file:" + os.path.join(urllib.parse.quote(urllib.parse.quote(base)), rest[5:])
    return url


GLOB_ESCAPED = re.compile(r"\[([*?\[])\]")
"""A wildcard character :func:`glob.escape` made a character of a name."""


def has_wildcard(pattern: str) -> bool:
    """Whether ``pattern`` holds a wildcard other than one :func:`glob.escape` wrote."""
    return any(ch in GLOB_ESCAPED.sub("", pattern) for ch in "*?[")


def physical_path(path: str, output: bool = False) -> str:
    """``path`` with each ``..`` taken as the kernel (and ``ls``) takes it:
    the parent of where the path before it leads, a symbolic link followed.
    DuckDB and os.path.abspath cut ``link/..`` off as text: a job file in a
    linked directory naming ``../people.parquet`` read another file than
    the shell shows, and wrote its output elsewhere again (helper-60).
    Left as written where both readings lead to the same place (a relative
    path stays relative: a remote cluster's check of it), and an ``output``
    ending in ``..``, which names no file of its own (refused as written)."""
    parts = path.split(os.sep)
    if ".." not in parts:
        return path
    last = len(parts) - 1 - parts[::-1].index("..")
    if output and all(p in ("", ".") for p in parts[last + 1:]):
        return path
    head = os.sep.join(parts[:last + 1]) or os.sep
    if os.path.realpath(head) == os.path.realpath(os.path.abspath(head)):
        return path
    real, tail = os.path.realpath(head), parts[last + 1:]
    if not output and has_wildcard(os.sep.join(tail)) and not os.path.isfile(os.path.join(real, *tail)):
        real = glob.escape(real)  # a pattern's directory is no pattern (x[a]/ beside xa/: helper-190)
    return os.path.join(real, *tail)


def quoted_name(name: str) -> str:
    """``name`` as one item of :func:`split_names`'s lists, commas and all."""
    return '"' + name.replace('"', '""') + '"'


def table_text(parts) -> str:
    """A table's name parts as ``--table`` takes them back: ``hr.people``, a
    part holding a dot or starting with a quote quoted (``"hr.people"``, one
    table of that name, shown as 'hr.people' beside hr's people: helper-60)."""
    return ".".join(quoted_name(p) if "." in p or p.startswith('"') else p for p in parts)


def listed(names: list[str], limit: int = 30, show=repr) -> str:
    """The first ``limit`` names, quoted (a name holding ', ', 'Name, Full', read as two), or as ``show`` gives them."""
    return ", ".join(map(show, names[:limit])) + (f", … ({len(names) - limit} more)" if len(names) > limit else "")


def missing_table(table: str, where: str, names, kind: str = "table") -> str:
    """The error for a ``--table`` that ``where`` (a database, shown without
    its password) lacks: a close name if any, and the tables and views it has
    (``names``; None: not known); ``kind="schema"``: its schema, and the
    schemas it has."""
    if names is None:
        return f"--table: {kind} {table!r} is not in {where}"
    names = list(names)
    return (f"--table: {kind} {table!r} is not in {where}{suggest(table, names, cutoff=0.7)}; "
            + (f"it has: {listed(names)}" if names else f"it has no {'tables or views' if kind == 'table' else kind}"))


def missing_column(name: str, where: str, names, option: str | None = None) -> str:
    """The error for a column named on the command line (by ``option``) that
    ``where`` lacks: a close name if any, and the columns it has (the first
    30 of a wide table)."""
    names = list(names)
    shown = listed(names)
    # Closer than other keys need: 'zipcode' got "did you mean 'income'?" at difflib's 0.6 (helper-42).
    hint = suggest(name, names, cutoff=0.7)
    held = [n for n in names if "," in n and name in (p.strip() for p in n.split(","))]
    within = [n for n in names if len(name) >= 3 and name.lower() in n.lower()]
    alike = [n for n in names if unicodedata.normalize("NFC", n) == unicodedata.normalize("NFC", name)]
    if alike:  # 'café' as e + U+0301 beside 'café' as U+00E9: one name to the eye (helper-188)
        form = next((f"as {f}" for f in ("NFC", "NFD") if unicodedata.is_normalized(f, alike[0])), "in neither NFC "
                    "nor NFD")
        hint = (f" ({alike[0]!r} looks the same but its accented letters are written otherwise in Unicode, {form}: "
                "name it so, or normalize the names)")
    elif held and not hint:  # --drop 'Name, Full' read as 'Name' and 'Full'
        hint = f" (a name holding a comma is written in double quotes: '{quoted_name(held[0])}')"
    elif not hint and len(within) == 1:  # 'zip' for 'zipcode'
        hint = f" (did you mean {within[0]!r}?)"
    if option:  # as other errors name a flag's column: "--hierarchy names column 'x', which ..."
        return f"{option} names column {name!r}, which is not in {where}{hint}; it has: {shown}"
    return f"column {name!r} is not in {where}{hint}; it has: {shown}"


@dataclass(frozen=True, slots=True)
class QuasiIdentifier:
    """One quasi-identifier column.

    Attributes:
        name: the column name.
        generalization: one of :data:`GENERALIZATIONS`, or ``None`` to choose by
            type: ``hierarchy`` when a hierarchy is given, ``interval`` for
            numbers and temporal types, ``set`` otherwise.
        hierarchy: the generalization hierarchy (required for ``hierarchy``).
    """

    name: str
    generalization: str | None = None
    hierarchy: Hierarchy | None = None

    @property
    def by_type(self) -> bool:
        """Whether its generalization is left to its column's type
        (``interval`` or ``set``), which may change with the input's."""
        return self.generalization is None and self.hierarchy is None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError("a quasi-identifier needs a non-empty column name")
        g = self.generalization
        if g is not None and g not in GENERALIZATIONS:
            raise ConfigError(
                f"unknown generalization {g!r} for column {self.name!r}{suggest(g, GENERALIZATIONS)}; "
                f"choose one of {', '.join(GENERALIZATIONS)}"
            )
        if g == "hierarchy" and self.hierarchy is None:
            raise ConfigError(f"column {self.name!r} uses generalization 'hierarchy' but no hierarchy file was given: "
                              f"pass --hierarchy {self.name}=FILE")
        if self.hierarchy is not None and g not in (None, "hierarchy"):
            raise ConfigError(f"column {self.name!r} has a hierarchy but generalization {g!r}; drop one of the two")
        if self.hierarchy is not None:
            from .hierarchies import Hierarchy  # here: it imports numpy and pyarrow, which the CLI loads later

            if not isinstance(self.hierarchy, Hierarchy):  # a path failed mid-run
                raise ConfigError(f"the hierarchy of column {self.name!r} must be a Hierarchy (sqlanon.load_hierarchy"
                                  f"(path) reads one), got {type(self.hierarchy).__name__}")


MIN_K = 2
"""The least k a run takes (k = 1 is no anonymity)."""

MIN_L = 1
"""The least l a run takes (1: no sensitive column is checked)."""


@dataclass(frozen=True, slots=True)
class AnonymizationSpec:
    """The privacy model and the quasi-identifiers of one anonymization.

    Attributes:
        quasi_identifiers: the QI columns, in order.
        k: every equivalence class has at least ``k`` rows (k >= 2).
        l: every class has at least ``l`` distinct values of each sensitive column.
        sensitive: the sensitive columns (required when ``l > 1``).
        interval_format: ``text`` renders intervals as ``[lo, hi]``; ``bounds``
            replaces an interval column ``c`` by typed columns ``c_lo`` and ``c_hi``.
    """

    quasi_identifiers: tuple[QuasiIdentifier, ...]
    k: int
    l: int = 1  # noqa: E741 - the letter of the literature
    sensitive: tuple[str, ...] = field(default_factory=tuple)
    interval_format: str = "text"

    def __post_init__(self) -> None:
        object.__setattr__(self, "quasi_identifiers", tuple(self.quasi_identifiers))
        object.__setattr__(self, "sensitive", tuple(self.sensitive))
        if not self.quasi_identifiers:  # named as the option: 'qi' in 'job.yml', qi= (helper-29)
            raise ConfigError("--qi names no column: name at least one quasi-identifier")
        for q in self.quasi_identifiers:
            if not isinstance(q, QuasiIdentifier):  # ('age',): an AttributeError further on
                raise ConfigError(f"quasi_identifiers takes QuasiIdentifier objects (sqlanon.build_spec takes "
                                  f"names), got {q!r}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < MIN_K:
            raise ConfigError(f"k must be an integer >= {MIN_K}, got {self.k!r}")
        if isinstance(self.l, bool) or not isinstance(self.l, int) or self.l < MIN_L:
            raise ConfigError(f"l must be an integer >= {MIN_L}, got {self.l!r}")
        if self.l > 1 and not self.sensitive:
            raise ConfigError(f"l = {self.l} needs at least one sensitive column (--sensitive)")
        names = [q.name for q in self.quasi_identifiers]
        for n in names:
            if names.count(n) > 1:
                raise ConfigError(f"quasi-identifier {n!r} is named twice")
        for s in self.sensitive:
            if self.sensitive.count(s) > 1:
                raise ConfigError(f"sensitive column {s!r} is named twice")
            if s in names:
                raise ConfigError(f"column {s!r} cannot be both a quasi-identifier and sensitive")
        if self.interval_format not in INTERVAL_FORMATS:
            raise ConfigError(
                f"unknown interval format {self.interval_format!r}{suggest(self.interval_format, INTERVAL_FORMATS)}; "
                f"choose one of {', '.join(INTERVAL_FORMATS)}"
            )

    @property
    def qi_names(self) -> list[str]:
        return [q.name for q in self.quasi_identifiers]
