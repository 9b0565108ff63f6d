"""Column kinds and dataset-wide statistics: the light part of the engine.

The coordinator needs these without loading the kernel (numba) or pandas;
:mod:`sqlanon.engine` re-exports them.
"""

from __future__ import annotations

import decimal
import math
import shlex

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .config import QuasiIdentifier
from .errors import ConfigError

__all__ = [
    "ColumnStats",
    "as_float",
    "interval_stats",
    "is_numeric",
    "is_temporal",
    "normalize_floats",
    "as_compared",
    "resolve_generalization",
    "span_values",
]


@dataclass(frozen=True, slots=True)
class ColumnStats:
    """Dataset-wide facts about one quasi-identifier.

    Attributes:
        n_distinct: distinct values, NULL counting as one value (0 for
            ``interval`` columns, whose statistics are their span).
        min: smallest non-NULL value of an ``interval`` column as a float
            (dates in days, timestamps in their unit since the epoch), for
            display; ``None`` otherwise.
        max: largest non-NULL value, as ``min``.
        domain: the sorted distinct text forms (``prefix`` columns only).
        span: ``max - min`` (Range(a) of Eq. 3) in span units (see
            :func:`span_values`), exact for integers, dates and timestamps.
        present: the distinct text forms (``hierarchy`` columns only), the
            leaves a plan's cuts list; the coordinator's alone, not sent
            to workers.
    """

    n_distinct: int
    min: float | None = None
    max: float | None = None
    domain: tuple[str, ...] | None = None
    span: float = 0.0
    present: frozenset[str] | None = None

    @property
    def range(self) -> float:
        """Range(a) of Eq. 3 in span units, 0 for non-numeric columns."""
        return self.span

    @property
    def unit(self) -> float:
        """The span unit of float and decimal values (see :func:`span_values`)."""
        return 1.0 if self.min is None else span_unit(self.min, self.max)


def is_numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def is_text(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def is_temporal(t: pa.DataType) -> bool:
    return pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_time(t) or pa.types.is_duration(t)


def fits_interval(t: pa.DataType) -> bool:
    """Whether a column of Arrow type ``t`` can be generalized to intervals."""
    return is_numeric(t) or is_temporal(t)


def resolve_generalization(qi: QuasiIdentifier, dtype: pa.DataType) -> str:
    """The generalization a QI of Arrow type ``dtype`` gets, checked for fit."""
    g = qi.generalization
    if g is None:
        if qi.hierarchy is not None:
            return "hierarchy"
        return "interval" if fits_interval(dtype) else "set"
    if g == "interval" and not fits_interval(dtype):
        raise ConfigError(
            f"column {qi.name!r} has type {dtype}; 'interval' needs numbers, dates or timestamps (use set or prefix)"
        )
    return g


def check_type(name: str, dtype: pa.DataType, role: str) -> None:
    """Refuse a quasi-identifier or sensitive column whose values cannot be
    compared or grouped: nested values; as QIs, intervals (no order) and
    bytes (no text to publish)."""
    if pa.types.is_dictionary(dtype):
        dtype = dtype.value_type
    if isinstance(dtype, pa.BaseExtensionType):  # DuckDB's UHUGEINT, BIGNUM…: opaque to Arrow
        name_of = getattr(dtype, "type_name", None) or dtype.extension_name
        raise ConfigError(
            f"column {name!r} has type {name_of.upper()}, which Arrow cannot compare or group, and cannot be a "
            f"{role}: cast it to text or to a smaller number in a view, or leave it out"
        )
    nested = pa.types.is_nested(dtype)
    qi = role == "quasi-identifier"
    binary = pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype) or pa.types.is_fixed_size_binary(dtype)
    if nested or (qi and (pa.types.is_interval(dtype) or binary)):
        what = ("nested values" if nested else "intervals, which have no order" if pa.types.is_interval(dtype)
                else "bytes, which have no text to publish")
        shown = "INTERVAL" if pa.types.is_interval(dtype) else dtype  # not Arrow's month_day_nano_interval
        raise ConfigError(
            f"column {name!r} has type {shown} ({what}) and cannot be a {role}: "
            "cast it to text or numbers in a view (e.g. hex), or leave it out"
        )


def _integer_like(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or is_temporal(t)


def as_text(values: pa.Array) -> pa.Array:
    """The values' text form, as published and as hierarchies and prefixes
    match them. A timestamp with a time zone is written in UTC
    (``2020-03-29 00:47:00.000000Z``): the same instant reads the same
    whatever zone the machine (or the DuckDB session) that ran is in."""
    t = values.type
    if pa.types.is_string(t):
        return values
    if isinstance(values, pa.ChunkedArray):  # one array: the fixes below replace by mask
        values = values.combine_chunks()
    if pa.types.is_timestamp(t) and t.tz is not None:
        values = values.cast(pa.timestamp(t.unit, "UTC"))
    if pa.types.is_time(t):
        # SQL's TIME '24:00:00' (the end of a day) is one unit past Arrow's
        # range: Arrow writes '<value out of range: 86400000000>'.
        day, digits = {"s": (86_400, 0), "ms": (86_400_000, 3), "us": (86_400_000_000, 6),
                       "ns": (86_400_000_000_000, 9)}[t.unit]
        ticks = values.view(pa.int32() if pa.types.is_time32(t) else pa.int64())
        end = "24:00:00" + ("." + "0" * digits if digits else "")
        return pc.if_else(pc.equal(ticks, day), pa.scalar(end), values.cast(pa.string()))
    text = values.cast(pa.string())
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        text = _far_years(values, text)
    elif pa.types.is_decimal(t):
        text = _plain_decimals(text)
    elif pa.types.is_float64(t):
        text = _whole_floats(values, text)
    return text


def _whole_floats(values: pa.Array, text: pa.Array) -> pa.Array:
    """A double's whole values written as integers, as Arrow writes the
    small ones (18.0 as '18'), where Arrow writes them in scientific
    notation (from 1e11: 123456789012.0 as '1.23456789012e+11'): a
    hierarchy's leaf 123456789012 matched the integer and not the float
    (helper-84), and the published text read as a measurement. Only below
    2^53, a double's last exact integer: past it a whole value is the
    double's own rounding. (A float32's notation starts past its last
    exact integer, 2^24: it keeps its text.)"""
    sci = pc.fill_null(pc.match_substring(text, "e"), False)
    if not pc.any(sci).as_py():
        return text
    whole = pc.and_(sci, pc.fill_null(pc.and_(pc.equal(pc.floor(values), values),
                                              pc.less(pc.abs(values), 2.0 ** 53)), False))
    if not pc.any(whole).as_py():
        return text
    ints = pc.if_else(whole, values, 0.0).cast(pa.int64()).cast(pa.string())
    return pc.if_else(whole, ints, text)


def _plain_decimals(text: pa.Array) -> pa.Array:
    """Decimals written out, as DuckDB and PostgreSQL write them: Arrow
    writes a small one in scientific notation (0.00000001 of a
    DECIMAL(38,10) as '1.00E-8'; -1E-38), which a reader's cast to the
    column's DECIMAL type read as NULL or 0."""
    sci = pc.fill_null(pc.match_substring(text, "E"), False)
    if not pc.any(sci).as_py():
        return text
    written = [format(decimal.Decimal(v), "f") for v in text.filter(sci).to_pylist()]
    return pc.replace_with_mask(text, sci, pa.array(written, pa.string()))


def _far_years(values: pa.Array, text: pa.Array) -> pa.Array:
    """Dates and timestamps outside years -9999 to 9999 in the same form as
    the others, through numpy's formatting: Arrow writes those past year
    32767 as '<value out of range: 13890172>', and a zoned one as a year
    wrapped around (40000 as -25536); DuckDB holds years to 294247."""
    t = values.type
    if pa.types.is_date32(t):
        ticks, unit = values.cast(pa.int32()).cast(pa.int64()), "D"
    elif pa.types.is_date64(t):
        ticks, unit = values.cast(pa.int64()), "ms"
    else:
        if t.unit == "ns":  # 1677 to 2262: always in range (and the bounds below would overflow)
            return text
        ticks, unit = values.cast(pa.int64()), t.unit
    lo = int(np.datetime64("-9999-01-01", unit).astype(np.int64))
    hi = int(np.datetime64("10000-01-01", unit).astype(np.int64))
    far = pc.fill_null(pc.or_(pc.less(ticks, lo), pc.greater_equal(ticks, hi)), False)
    if not pc.any(far).as_py():
        return text
    # DuckDB's (and PostgreSQL's, through it) 'infinity' and '-infinity': the
    # type's largest integer and its negation, written as SQL writes them (a
    # set published {294247-01-10 04:00:54.775807, …} for 'infinity', and a
    # date beyond PostgreSQL's range for a date's).
    top = 2**31 - 1 if pa.types.is_date32(t) else 2**63 - 1
    inf = pc.fill_null(pc.equal(ticks, top), False)
    neg = pc.fill_null(pc.equal(ticks, -top), False)
    if pc.any(pc.or_(inf, neg)).as_py():
        text = pc.if_else(inf, pa.scalar("infinity"), pc.if_else(neg, pa.scalar("-infinity"), text))
        far = pc.and_(far, pc.invert(pc.or_(inf, neg)))
        if not pc.any(far).as_py():
            return text
    picked = ticks.filter(far).to_numpy(zero_copy_only=False).astype(f"datetime64[{unit}]")
    formatted = np.char.replace(np.datetime_as_string(picked), "T", " ")
    if pa.types.is_date64(t):
        formatted = np.array([f.split(" ")[0] for f in formatted])
    if pa.types.is_timestamp(t) and t.tz is not None:
        formatted = np.char.add(formatted, "Z")
    return pc.replace_with_mask(text, far, pa.array(formatted.tolist(), pa.string()))


def normalize_floats(arr: pa.Array) -> pa.Array:
    """Make ``-0.0`` and ``0.0`` (and every NaN) one value, as SQL compares
    them. A half float becomes the float32 it is exactly (Arrow has no
    arithmetic on half floats: a float16 QI failed with an Arrow error)."""
    if pa.types.is_float16(arr.type):
        arr = arr.cast(pa.float32())
    if pa.types.is_floating(arr.type):
        arr = pc.add(arr, pa.scalar(0.0, arr.type))  # -0.0 + 0.0 == +0.0
        arr = pc.if_else(pc.is_nan(arr), pa.scalar(float("nan"), arr.type), arr)
    return arr


_DAY_NS = 86_400_000_000_000


def as_compared(arr: pa.Array) -> pa.Array:
    """``arr`` with the values SQL compares equal made one, to count
    distinct values as strictly as the servers: the floats of
    :func:`normalize_floats`, a NaN as NULL (both say "no value", and pandas
    reads both as NaN: a class of NaN and NULL passed as 2-diverse,
    helper-21; the verification's SQL counts them so too), and intervals
    by their length, a month as 30 days and a day as 24 hours, as
    PostgreSQL compares them ('1 day' = '24 hours', '1 mon' = '30 days'; an
    l counted on their parts published '1 day' and '24:00:00' as two values
    of a class: helper-14). DuckDB holds
    mixed-sign ones apart ('1 day -1 hour' and '23 hours'): it may count
    more values than this, which only generalizes more."""
    if pa.types.is_floating(arr.type):
        arr = normalize_floats(arr)
        return pc.if_else(pc.is_nan(arr), pa.nulls(len(arr), arr.type), arr)
    if not pa.types.is_interval(arr.type):
        return normalize_floats(arr)
    parts = np.frombuffer(arr.buffers()[1], np.dtype([("m", "<i4"), ("d", "<i4"), ("n", "<i8")]),
                          count=arr.offset + len(arr))[arr.offset:]
    days = parts["m"].astype(np.int64) * 30 + parts["d"] + parts["n"] // _DAY_NS
    key = np.stack([days, parts["n"] % _DAY_NS], axis=1).astype("<i8")
    return pa.array(key.view("S16").ravel(), pa.binary(16), mask=arr.is_null().to_numpy(zero_copy_only=False))


def span_unit(lo: float, hi: float) -> float:
    """The unit of float positions between ``lo`` and ``hi``: the value
    itself, or half of it where ``hi - lo`` passes the largest double."""
    return 1.0 if math.isfinite(float(hi) - float(lo)) else 0.5  # Python floats: no numpy overflow warning


def span_values(sorted_values: pa.Array, unit: float | None = None) -> np.ndarray:
    """Positions of sorted distinct values on a line, for spans and their ratios.

    Integers, dates and timestamps: exact 64-bit offsets from the first
    value, as floats (no loss for spans below 2**53, e.g. nanosecond
    timestamps of a century or 64-bit ids). Decimals: exact offsets from the
    first value, as floats. Floats: the value times ``unit``: 1 (exact,
    denormals too) unless the dataset's span passes the largest double, then
    0.5 (:func:`span_unit`); None takes the unit of
    these values' own range, which is right when they are the whole dataset.
    Only differences and their ratios to :attr:`ColumnStats.span` (same
    units) are meaningful. NaN (sorted last) gets the position of the largest number.
    """
    if len(sorted_values) == 0:
        return np.zeros(0)
    t = sorted_values.type
    if _integer_like(t):
        if pa.types.is_unsigned_integer(t):
            ticks = sorted_values.cast(pa.uint64()).to_numpy(zero_copy_only=False).astype(np.uint64)
        else:
            ints = sorted_values.cast(pa.int32()) if pa.types.is_date32(t) else sorted_values
            ticks = ints.cast(pa.int64()).to_numpy(zero_copy_only=False).astype(np.int64).view(np.uint64)
        # In unsigned 64-bit arithmetic: sorted, so every offset is below
        # 2**64 and exact, where int64 overflowed past 2**63 (1677 to 2262 in
        # nanoseconds; -5e18 to 5e18) into negative spans.
        return (ticks - ticks[0]).astype(np.float64)
    if pa.types.is_decimal(t) and t.precision < 76:  # 76 digits: no room for a difference, as doubles below
        # Exact offsets from the first value, then doubles: values of 24 digits
        # 0.01 apart were one double, and their classes' NCP 0 (helper-14).
        wide = sorted_values.cast(pa.decimal256(t.precision + 1, t.scale))
        offsets = pc.subtract(wide, wide[0]).cast(pa.float64(), safe=False)
        return offsets.to_numpy(zero_copy_only=False).astype(np.float64) * (1.0 if unit is None else unit)
    out = sorted_values.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False).astype(np.float64)
    nan = np.isnan(out)
    finite = out[~nan]  # sorted: NaN last
    if unit is None:
        unit = span_unit(finite[0], finite[-1]) if finite.size else 1.0
    out *= unit
    if nan.any():
        out[nan] = finite[-1] * unit if finite.size else 0.0
    return out


def as_float(values: pa.Array) -> np.ndarray:
    """Values as plain floats (approximate), for display (ColumnStats.min/max)."""
    t = values.type
    if pa.types.is_date32(t):
        values = values.cast(pa.int32())
    elif is_temporal(t):
        values = values.cast(pa.int64())
    return values.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False).astype(np.float64)


def interval_stats(n_distinct: int, lo_hi: pa.Array, name: str = "") -> ColumnStats:
    """:class:`ColumnStats` of an interval column ``name`` from its [min, max] pair."""
    if lo_hi.null_count:
        return ColumnStats(n_distinct)
    t = lo_hi.type
    temporal = pa.types.is_date32(t) or pa.types.is_timestamp(t) or pa.types.is_date64(t)
    infinite = False
    if temporal:
        # DuckDB (and PostgreSQL through it) hands 'infinity' over as the type's largest integer.
        ints = lo_hi.cast(pa.int32() if pa.types.is_date32(t) else pa.int64()).to_pylist()
        infinite = max(abs(v) for v in ints) >= (2**31 - 1 if pa.types.is_date32(t) else 2**63 - 1)
    lo, hi = as_float(lo_hi)
    if infinite or math.isinf(lo) or math.isinf(hi):
        # pandas' Timestamp.max and min are DuckDB's infinities (helper-21): said, as the value is finite to pandas.
        what = ("dates or timestamps (or the type's largest or smallest, e.g. pandas' Timestamp.max, which DuckDB "
                "reads as infinity)") if temporal else "values"
        raise ConfigError(
            f"column {name!r} holds infinite {what}, which no interval can span: filter them out or make them NULL "
            f"in a view, or generalize it as a set (--generalization {shlex.quote(name)}=set)"
        )
    pos = span_values(lo_hi)
    return ColumnStats(n_distinct, float(lo), float(hi), span=float(pos[-1] - pos[0]))


def distinct(a: np.ndarray) -> np.ndarray:
    """``np.unique(a)`` of integers, by sorting. numpy 2.4's ``np.unique``
    hashes when asked for the values alone, far slower where most values
    differ (5M int64 of as many values: 6 s against 0.06 s; 370k: 0.16 s
    against 0.004 s)."""
    values = np.sort(a, axis=None)
    if len(values) < 2:
        return values
    first = np.empty(len(values), bool)
    first[0] = True
    np.not_equal(values[1:], values[:-1], out=first[1:])
    return values[first]
