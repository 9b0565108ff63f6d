"""Generalized values and their NCP, computed per equivalence class.

Every function here works on arrays with one entry per *class* (a few per
cent of the rows): a class's code range ``[lo, hi]`` (codes are ranks in the
column's order, so the range of an interval, the LCA of hierarchy leaves and
the common prefix of lexicographically sorted text all follow from its two
ends), or its code set for ``set``. The engine spreads the results to the rows
with one ``take``.

Rules shared by all kinds (documented in the README):

* A class whose values are all equal keeps the value (NCP 0).
* A class whose values are all NULL stays NULL (NCP 0).
* A class that mixes NULLs and values is rendered ``<generalization> or NULL``
  and costs NCP 1 for that column (nothing narrower can be said of a NULL).
  With ``--interval-format bounds`` its ``_lo``/``_hi`` are NULL.

NCP of a generalized value ``v`` (Eq. 3 of the paper, plus two definitions of
ours for the kinds the paper leaves open):

* interval: ``(hi - lo) / (max - min of the whole dataset)``;
* hierarchy: ``leaves under v / leaves of the hierarchy``;
* set: ``|set| / distinct values of the whole dataset`` (NULL counts as one);
* prefix: ``distinct dataset values starting with the prefix / distinct dataset values``.
"""

from __future__ import annotations

import bisect
import math
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import kernel
from .domain import as_text
from .errors import ConfigError

if TYPE_CHECKING:
    from .engine import ColumnStats, _Encoded

NULL_SUFFIX = " or NULL"


@dataclass(frozen=True)
class Generalized:
    """One QI generalized per class.

    Attributes:
        columns: output ``(name, per-class array)`` pairs: one text column
            (a dictionary array when built per distinct range), or
            ``_lo``/``_hi`` bounds.
        ncp: NCP of the column's value in each class (Eq. 3), per row of the class.
        key: an integer per class, equal iff the published values are equal.
    """

    columns: list[tuple[str, pa.Array]]
    ncp: np.ndarray
    key: np.ndarray


def _wrap(prefix: str, middle: pa.Array, suffix: str) -> pa.Array:
    return pc.binary_join_element_wise(pa.scalar(prefix), middle, pa.scalar(suffix), "")


_NEEDS_QUOTES = r'[,{}"]|^[ \t\n\r\f\v]|[ \t\n\r\f\v]$|^$| or NULL$'


def _quote_members(text: pa.Array, needs_quotes: str = _NEEDS_QUOTES) -> pa.Array:
    """Set members as published: in double quotes (a quote doubled) when
    their text would read as more than one member or as a set or a NULL
    (a ', ', a brace, a quote, spaces at an end, the empty string, an
    ending ' or NULL'): the value '{a, b}' beside NULLs was published as
    '{a, b} or NULL', which reads as a or b (helper-39). Other values as
    they are. ``needs_quotes``: what calls for quotes (a regex)."""
    odd = pc.fill_null(pc.match_substring_regex(text, needs_quotes), False)
    if not pc.any(odd).as_py():
        return text
    escaped = _wrap('"', pc.replace_substring(text, '"', '""'), '"')
    return pc.if_else(odd, escaped, text)


_READS_AS_NULL_MARK = r'^"| or NULL$|^$'
"""A published value (a prefix class's one value, a hierarchy label) that
would read as a class mixing a value and NULLs ('x or NULL'), quoted as a
set's member is; so is one that starts with a quote (helper-49), and the
empty string, which a CSV file writes as "" and DuckDB and pandas read as
NULL (helper-8)."""


_PREFIX_VALUE_MARK = _READS_AS_NULL_MARK + r"|\*$"
"""A prefix class's one value that would read as another class: one of
:data:`_READS_AS_NULL_MARK`, or ending with ``*``, which read as a pattern: a
class of 'ab*' ten times beside one of abc and abd were both 'ab*', one class
to every reader, whose NCP no reader could recompute (helper-50)."""


def _text_key(text: pa.Array) -> np.ndarray:
    return pc.dictionary_encode(text).indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)


def generalize_column(
    e: _Encoded,
    stats: ColumnStats,
    lo: np.ndarray,
    hi: np.ndarray,
    has_null: np.ndarray,
    col: np.ndarray,
    bounds: np.ndarray,
    interval_format: str,
) -> Generalized:
    """Generalize column ``e`` for every class.

    Args:
        e: the encoded column.
        stats: its dataset-wide statistics.
        lo, hi: per class, smallest and largest non-NULL code (-1 if none).
        has_null: per class, whether it holds a NULL.
        col: the column's codes in class order (class ``c`` is
            ``col[bounds[c]:bounds[c + 1]]``).
        bounds: class boundaries.
        interval_format: ``text`` or ``bounds``.

    A text column comes as a dictionary array when its values are computed
    once per distinct code range (interval, hierarchy), else as text.
    """
    per_range = e.kind == "hierarchy" or (e.kind == "interval" and interval_format != "bounds")
    if per_range and e.n_codes < _MAX_RANGE_CODES:
        return _per_distinct_range(e, stats, lo, hi, has_null, col, bounds, interval_format)
    return _generalize(e, stats, lo, hi, has_null, col, bounds, interval_format)


_MAX_RANGE_CODES = 2**30
"""Codes below it pack a class's (lo, hi, NULL, value) into one int64
(:func:`_per_distinct_range`, at most 2**62); a column of more distinct
values (codes are int32: up to 2**31) is generalized class by class, as two
ranges packed past 2**63 could share a label."""


def _per_distinct_range(e, stats, lo, hi, has_null, col, bounds, interval_format) -> Generalized:
    """An interval's or a hierarchy node's text, and its NCP, follow from the
    class's code range and whether it holds NULLs and values: computed once
    per distinct range (some dozens for the ~37,000 classes of 500,000 poker
    rows; text built class by class, then dictionary-encoded twice, was ~10 %
    of a fragment's time), then spread to the classes as a dictionary column.
    The key still compares the text: ranges with one LCA publish one label."""
    has_val = lo >= 0
    width = e.n_codes + 1
    ranges = ((np.where(has_val, lo, 0) * width + np.where(has_val, hi, 0)) * 2 + has_null) * 2 + has_val
    first, inverse = _one_per_range(ranges, width * width * 4)
    g = _generalize(e, stats, lo[first], hi[first], has_null[first], col, bounds, interval_format)
    ((name, text),) = g.columns
    enc = pc.dictionary_encode(text)
    classes = pa.DictionaryArray.from_arrays(enc.indices.take(pa.array(inverse.astype(np.int32))), enc.dictionary)
    return Generalized([(name, classes)], g.ncp[inverse], g.key[inverse])


_DENSE_RANGES = 1 << 22
"""Packed ranges below it (and below 8 per class, or 65,536) are told apart
by a table of them (a flag and a number each: 36 MB at most), not by
sorting the classes' (:func:`_one_per_range`)."""


def _one_per_range(ranges: np.ndarray, space: int) -> tuple[np.ndarray, np.ndarray]:
    """A class of each distinct packed range (``ranges < space``), and each
    class's range number, the ranges numbered in ascending order: as
    ``np.unique``'s ``return_index``/``return_inverse`` but for which class
    stands for a range (any: they share lo, hi and NULL). In O(classes) where
    the ranges fit a table (poker's 10 columns at 5M rows: 0.25 s by sorting)."""
    if space > min(_DENSE_RANGES, max(1 << 16, 8 * len(ranges))):
        _, first, inverse = np.unique(ranges, return_index=True, return_inverse=True)
        return first, inverse
    present = np.zeros(space, bool)
    present[ranges] = True
    number = np.cumsum(present) - 1  # of every range present, its rank
    inverse = number[ranges]
    first = np.empty(int(number[-1]) + 1, np.int64)
    first[inverse] = np.arange(len(ranges))
    return first, inverse


def _generalize(e, stats, lo, hi, has_null, col, bounds, interval_format) -> Generalized:
    """:func:`generalize_column`, class by class."""
    n_cls = len(lo)
    has_val = lo >= 0
    single = has_val & (lo == hi)
    mixed = has_val & has_null
    safe_lo = np.where(has_val, lo, 0)
    safe_hi = np.where(has_val, hi, 0)
    shown = e.dictionary
    if e.kind == "interval" and pa.types.is_floating(shown.type) and shown.type != pa.float64():
        # A float32's shortest text (6.6951504) reads as a double above the
        # value (6.695150375366211): the bounds left out 16 % of a column's
        # rows to every reader (helper-8). Written as the double it is, as
        # its `bounds` are (in a CSV file they were that text: helper-19).
        shown = shown.cast(pa.float64())
    dstr = as_text(shown)
    missing = pa.array(~has_val)
    # A class of numbers and NaN ('[9, nan]', NaN placed at the largest number)
    # cost 0 when 9 was the largest: a generalized value at no cost. It costs
    # 1, as a class of values and NULLs does (helper-102).
    nan_code = len(e.dictionary) - 1
    with_nan = (np.zeros(n_cls, bool) if e.kind != "interval" or nan_code < 0
                or not pa.types.is_floating(e.dictionary.type) or not math.isnan(e.dictionary[nan_code].as_py())
                else has_val & (hi == nan_code) & (lo < nan_code))

    if e.kind == "interval" and interval_format == "bounds":
        invalid = ~has_val | mixed
        take = pa.array(safe_lo if len(e.dictionary) else np.zeros(n_cls, np.int64), mask=invalid)
        take_hi = pa.array(safe_hi if len(e.dictionary) else np.zeros(n_cls, np.int64), mask=invalid)
        cols = [(f"{e.name}_lo", shown.take(take)), (f"{e.name}_hi", shown.take(take_hi))]
        span = e.values[safe_hi] - e.values[safe_lo]
        ncp = np.where(single, 0.0, np.where(with_nan, 1.0, span / stats.range if stats.range > 0 else 0.0))
        # NULL bounds stand for a class of NULLs and for a mixed one alike (both
        # may be one published class): a reader learns nothing from them, so
        # they cost 1, unless the column holds no value anywhere (no mixed class).
        ncp = np.where(invalid, 0.0 if stats.min is None else 1.0, ncp)
        key = np.where(invalid, -1, safe_lo * (e.n_codes + 1) + safe_hi)
        return Generalized(cols, ncp, key)

    if len(e.dictionary) == 0:  # the column is NULL everywhere
        text = pa.nulls(n_cls, pa.string())
        return Generalized([(e.name, text)], np.zeros(n_cls), np.full(n_cls, -1, np.int64))

    lo_s = dstr.take(pa.array(safe_lo))
    if e.kind == "interval":
        hi_s = dstr.take(pa.array(safe_hi))
        text = pc.if_else(pa.array(single), lo_s, _wrap("[", pc.binary_join_element_wise(lo_s, hi_s, ", "), "]"))
        span = e.values[safe_hi] - e.values[safe_lo]
        cost = np.where(with_nan, 1.0, span / stats.range if stats.range > 0 else 0.0)
    elif e.kind == "hierarchy":
        h = e.qi.hierarchy
        node = h.shown_as[h.lca(safe_lo, safe_hi)]
        text = _quote_members(pa.array(h.names, pa.string()), _READS_AS_NULL_MARK).take(pa.array(node))
        cost = h.leaves_under(node) / h.n_leaves
    elif e.kind == "set":
        offsets, codes = kernel.class_distinct(col, bounds, e.n_codes, e.null_code)
        quoted = _quote_members(dstr)
        members = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), quoted.take(pa.array(codes)))
        text = pc.if_else(pa.array(single), quoted.take(pa.array(safe_lo)), _wrap("{", pc.binary_join(members, ", "), "}"))
        cost = np.diff(offsets) / max(stats.n_distinct, 1)
    elif e.kind == "prefix":
        text, cost = _prefix(e, stats, dstr, safe_lo, safe_hi, col, bounds)
        text = pc.if_else(pa.array(single), _quote_members(lo_s, _PREFIX_VALUE_MARK), text)
    else:  # pragma: no cover - config validation rules this out
        raise ConfigError(f"unknown generalization {e.kind!r}")

    text = pc.if_else(missing, pa.nulls(n_cls, pa.string()), text)
    if mixed.any():
        text = pc.if_else(pa.array(mixed), pc.binary_join_element_wise(text, pa.scalar(NULL_SUFFIX), ""), text)
    ncp = np.where(mixed, 1.0, np.where(has_val & ~single, cost, 0.0))
    return Generalized([(e.name, text)], ncp, _text_key(text))


def _prefix(e, stats, dstr, lo, hi, col, bounds):
    """Common prefix of each class's smallest and largest text, ``*`` padded.

    Codes follow the text order, so a class's common prefix is that of its two
    ends. The loops below run once per *class* over Python strings (exact for
    any character, NUL and U+10FFFF included), never per row.
    """
    if stats.domain is None:
        raise ConfigError(f"prefix generalization of {e.name!r} needs the column's domain in its statistics")
    strs = dstr.to_pylist()
    lens = np.array([len(s) for s in strs] + [0], np.int64)  # the NULL code has no text
    maxlen = kernel.class_max_of(col, bounds, lens)
    # A class of several values: its prefix less any '*' it ends with, which a
    # reader cannot tell from the mask ('*a' and '*b' publish '**', read as no
    # prefix): NCP as read, the same for every class of that text (helper-59).
    prefixes = [os.path.commonprefix((strs[a], strs[b])) for a, b in zip(lo.tolist(), hi.tolist())]
    prefixes = [p if a == b else p.rstrip("*") for p, a, b in zip(prefixes, lo.tolist(), hi.tolist())]
    text = pa.array(
        [p + "*" * max(int(m) - len(p), 0) for p, m in zip(prefixes, maxlen.tolist())], pa.string()
    )
    domain = stats.domain
    cost = np.array(
        [(_prefix_end(domain, p) - bisect.bisect_left(domain, p)) for p in prefixes], np.float64
    ) / max(len(domain), 1)
    return text, cost


def _prefix_end(domain: tuple[str, ...], prefix: str) -> int:
    """Index after the last value of the sorted ``domain`` that starts with ``prefix``."""
    stem = prefix.rstrip("\U0010ffff")
    if not stem:
        return len(domain) if not prefix else bisect.bisect_right(domain, prefix + "\U0010ffff" * 64)
    successor = stem[:-1] + chr(ord(stem[-1]) + 1)  # the first text after every text starting with stem
    return bisect.bisect_left(domain, successor)
