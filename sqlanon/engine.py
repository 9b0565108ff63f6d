"""The anonymization engine: an Arrow table in, its k-anonymous l-diverse copy out.

Steps, all vectorized (no Python loop over rows):

1. **Encode** every quasi-identifier once as small integers (dense ranks) with
   Arrow's hash-based ``dictionary_encode`` and a sort of the (small)
   dictionary: numbers, dates and timestamps by value, hierarchy columns by
   the hierarchy's leaf order, ``prefix`` columns by their text, other values
   by value. A NULL is a value of its own, ranked after every other value.
2. **Cut** the code matrix into equivalence classes with the kernel of
   :mod:`sqlanon.mondrian` (compiled once, see :mod:`sqlanon.kernel`).
3. **Generalize** each class per QI from its code range (interval, hierarchy
   LCA, prefix) or code set (set), computed per class, then spread to the rows
   with one ``take``. Classes that come out alike (a hierarchy cut
   within one node's leaves) are cut again on the other QIs
   (:func:`_split_merged`) and generalized anew; what still comes out
   alike is one published class.
4. **Measure** the information loss of :mod:`sqlanon.metrics`.

Representativity and NCP use *dataset-wide* statistics (:class:`ColumnStats`),
so a worker that sees only a fragment can pass the global ones in.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import kernel
from .config import AnonymizationSpec, QuasiIdentifier, missing_column
from .domain import (
    ColumnStats, as_compared, as_text, check_type, distinct, interval_stats, normalize_floats, resolve_generalization,
    span_values,
)
from .errors import ConfigError, InputError, PrivacyError
from .generalization import generalize_column
from .metrics import Metrics

__all__ = ["ColumnStats", "EngineResult", "anonymize_table", "column_stats", "resolve_generalization"]

@dataclass(frozen=True)
class EngineResult:
    """What :func:`anonymize_table` returns.

    Attributes:
        table: the anonymized table: the input's rows grouped by class, in
            a random order within each (:func:`publication_order`).
        metrics: information loss and class statistics.
        class_of_row: equivalence class id of every row of ``table`` (int32).
        timings: seconds spent in ``encode``, ``partition``, ``generalize``.
    """

    table: pa.Table
    metrics: Metrics
    class_of_row: np.ndarray
    timings: dict[str, float] = field(default_factory=dict)


@dataclass
class _Encoded:
    name: str
    kind: str
    codes: np.ndarray  # int32 per row
    dictionary: pa.Array  # value of every non-NULL code, in code order
    null_code: int  # -1 when the column has no NULL
    n_codes: int  # codes 0..n_codes-1 (NULL code included)
    present: int  # distinct values present, NULL included
    values: np.ndarray | None = None  # float per code (interval columns)
    qi: QuasiIdentifier | None = None


def _encode_qi(qi: QuasiIdentifier, col: pa.ChunkedArray, kind: str) -> _Encoded:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    if kind in ("prefix", "hierarchy"):
        arr = as_text(arr)
    arr = normalize_floats(arr)
    enc = pc.dictionary_encode(arr)
    dictionary = enc.dictionary
    if kind == "hierarchy":
        rank = qi.hierarchy.leaf_codes(dictionary.to_numpy(zero_copy_only=False), column=qi.name).astype(np.int32)
        sorted_dict = pa.array(qi.hierarchy.leaves, pa.string())
    else:
        order = pc.array_sort_indices(dictionary).to_numpy()
        rank = np.empty(len(dictionary), np.int32)
        rank[order] = np.arange(len(dictionary), dtype=np.int32)
        sorted_dict = dictionary.take(pa.array(order))
    n_vals = len(sorted_dict)
    has_null = enc.indices.null_count > 0
    null_code = n_vals if has_null else -1
    lut = np.append(rank, np.int32(null_code))
    idx = enc.indices.fill_null(-1).to_numpy(zero_copy_only=False) if has_null else enc.indices.to_numpy()
    codes = lut[idx]
    return _Encoded(
        name=qi.name, kind=kind, codes=codes, dictionary=sorted_dict, null_code=null_code,
        n_codes=n_vals + int(has_null), present=len(dictionary) + int(has_null), qi=qi,
    )


def _place_values(e: _Encoded, stats: ColumnStats) -> None:
    """Positions of an interval column's codes in the *dataset's* span unit
    (:func:`span_values`). The NULL code, ranked after every value, sits at
    the fragment's largest value: a node holding NULL spans up to it in the
    representativity of Eq. 1 (which the paper leaves to values), so cuts
    tend to separate NULLs from values (a class mixing them costs NCP 1). A float column's NaN
    (sorted last) goes at the dataset's largest number, as the statistics
    put it; the fragment's own would make the same published interval
    ``[0, nan]`` cost a different NCP in each plan."""
    if e.kind != "interval":
        return
    values = span_values(e.dictionary, stats.unit)
    if (len(values) and stats.max is not None and pa.types.is_floating(e.dictionary.type)
            and math.isnan(e.dictionary[len(values) - 1].as_py())):
        values[-1] = stats.max * stats.unit
    e.values = np.append(values, values[-1] if len(values) else 0.0)


def _covering(enc: list[_Encoded], stats, given: bool = True) -> dict[str, ColumnStats]:
    """The dataset-wide statistics of each QI. ``given`` by a caller, they
    must cover the table's values: outside them NCP went above 1 (or inf),
    and an infinite value, which the table's own statistics refuse, was
    published (helper-16)."""
    if not isinstance(stats, Mapping):
        raise ConfigError(f"stats takes a mapping {{column: ColumnStats}}, got {type(stats).__name__}")
    missing = [e.name for e in enc if e.name not in stats]
    if missing:
        raise ConfigError(f"no dataset statistics for quasi-identifier(s) {', '.join(map(repr, missing))}")
    for e in enc if given else ():
        theirs = stats[e.name]
        if not isinstance(theirs, ColumnStats):
            raise ConfigError(f"stats of {e.name!r} must be a ColumnStats (sqlanon.column_stats computes them), "
                              f"got {type(theirs).__name__}")
        own = _local_stats(e)  # refuses infinite values
        if e.kind == "interval" and own.min is not None and (
                theirs.min is None or own.min < theirs.min or own.max > theirs.max):
            raise ConfigError(f"the statistics given for {e.name!r} span {theirs.min}..{theirs.max}, but the table "
                              f"holds values from {own.min} to {own.max}: pass the whole dataset's")
        if e.kind != "interval" and (own.n_distinct > theirs.n_distinct or (
                theirs.domain is not None and not set(own.domain or ()) <= set(theirs.domain))):
            raise ConfigError(f"the statistics given for {e.name!r} count {theirs.n_distinct} distinct values, but "
                              f"the table holds {own.n_distinct} or others: pass the whole dataset's")
    return {e.name: stats[e.name] for e in enc}


def _local_stats(e: _Encoded) -> ColumnStats:
    if e.kind == "interval":
        last = len(e.dictionary) - 1
        if last >= 0 and pa.types.is_floating(e.dictionary.type) and math.isnan(e.dictionary[last].as_py()):
            last -= 1  # NaN sorts last; its position is the largest number's (span_values)
        if last < 0:
            return ColumnStats(e.present)
        return interval_stats(e.present, e.dictionary.take(pa.array([0, last])), e.name)
    if e.kind == "prefix":
        return ColumnStats(e.present, domain=tuple(e.dictionary.to_pylist()))
    return ColumnStats(e.present)


def column_stats(table: pa.Table, spec: AnonymizationSpec) -> dict[str, ColumnStats]:
    """Dataset-wide statistics of the spec's QIs, computed from ``table`` itself
    (an Arrow table or a pandas DataFrame, as :func:`anonymize_table` takes)."""
    return {e.name: _local_stats(e) for e in _encode_all(_readable(table, spec), spec)}


def _readable(table, spec: AnonymizationSpec) -> pa.Table:
    """``table`` as Arrow with types the engine reads: the views of strings
    and bytes (Polars' ``to_arrow()`` gives them) as strings and bytes, 32-
    and 64-bit decimals as 128-bit ones, and a ``time32`` QI as ``time64``
    (Arrow has no kernels to take, sort or span them: the run failed with
    ArrowNotImplementedError; helper-16). Values are unchanged."""
    if not isinstance(spec, AnonymizationSpec):
        raise ConfigError(
            f"spec must be an AnonymizationSpec (sqlanon.build_spec(qi, k, ...) makes one), got {type(spec).__name__}"
        )
    if not isinstance(table, pa.Table):
        table = _as_arrow(table)
    twice = sorted(c for c, n in Counter(table.column_names).items() if n > 1)
    if twice:
        raise ConfigError(f"the table has more than one column named {', '.join(map(repr, twice))}: rename them")
    for i, f in enumerate(table.schema):
        t = f.type
        wider = (pa.string() if pa.types.is_string_view(t) else pa.binary() if pa.types.is_binary_view(t)
                 else pa.decimal128(t.precision, t.scale) if pa.types.is_decimal(t) and t.bit_width < 128
                 else pa.time64("us") if pa.types.is_time32(t) and f.name in spec.qi_names else None)
        if wider is not None:
            table = table.set_column(i, f.with_type(wider), table.column(i).cast(wider))
    return table


def _check_columns(table: pa.Table, spec: AnonymizationSpec) -> None:
    names = table.column_names
    for c in [*spec.qi_names, *spec.sensitive]:
        if c not in names:
            raise ConfigError(missing_column(c, "the input", names))
    for c in spec.qi_names:
        check_type(c, table.schema.field(c).type, "quasi-identifier")
    for c in spec.sensitive:
        check_type(c, table.schema.field(c).type, "sensitive column")


def _encode_all(table: pa.Table, spec: AnonymizationSpec) -> list[_Encoded]:
    _check_columns(table, spec)
    return [
        _encode_qi(q, table.column(q.name), resolve_generalization(q, table.schema.field(q.name).type))
        for q in spec.quasi_identifiers
    ]


_ROWS_BLOCK = 1 << 15
"""Rows per block of :func:`_rows_of`: 32k rows of ten int32 columns (1.3 MB)
stay in the cache while each column fills its share."""


def _rows_of(columns: list[np.ndarray], n: int) -> np.ndarray:
    """The int32 ``columns`` (of ``n`` rows each, perhaps none) as the rows of
    one (n, len(columns)) array, a block of rows at a time: a column written
    whole strides over the entire array once per column (5M rows of ten:
    0.39 s against 0.16 s)."""
    out = np.empty((n, len(columns)), np.int32)
    for start in range(0, n, _ROWS_BLOCK):
        block = out[start:start + _ROWS_BLOCK]
        for j, c in enumerate(columns):
            block[:, j] = c[start:start + _ROWS_BLOCK]
    return out


def _encode_sensitive(table: pa.Table, name: str) -> tuple[np.ndarray, int]:
    arr = table.column(name).combine_chunks()
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    enc = pc.dictionary_encode(as_compared(arr), null_encoding="encode")
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int32), len(enc.dictionary)


def _refuse_mixed_objects(name: str, values) -> None:
    """Refuse an object column whose values Arrow would change to make them
    one type: dates with times of day (the times dropped), naive and zoned
    times (the zoned ones moved to UTC), text with bytes (helper-16). A
    column of numbers (ints with floats) keeps its values."""
    from pandas.api.types import infer_dtype

    if infer_dtype(values, skipna=True) not in ("date", "datetime", "mixed"):  # text, numbers…: one kind (in C)
        return
    kinds = set(map(type, values))
    times = [k for k in kinds if issubclass(k, dt.datetime)]
    mix = ("dates and times of day" if times and any(issubclass(k, dt.date) and k not in times for k in kinds) else
           "text and bytes" if any(issubclass(k, str) for k in kinds) and any(issubclass(k, bytes) for k in kinds)
           else None)
    if mix is None and times:
        zoned = {v.tzinfo is not None for v in values if isinstance(v, dt.datetime)}
        mix = "times with and without a time zone" if len(zoned) > 1 else None
    if mix:
        raise ConfigError(f"column {name!r} (dtype object) holds {mix}, which Arrow would make one type, changing "
                          "values: cast it first (e.g. pd.to_datetime(..., utc=True), or .astype(str))")


def _as_arrow(data) -> pa.Table:
    """A pandas DataFrame, or anything else Arrow reads as a table, as Arrow."""
    import pandas as pd  # a dependency; imported here, as the engine's own path needs none of it

    if isinstance(data, pd.DataFrame):
        index = data.index
        if all(name is not None for name in index.names):
            try:  # a named index is data (person_id): columns, not lost
                data = data.reset_index()
            except ValueError as exc:
                raise ConfigError(f"the DataFrame's index cannot become a column: {exc}") from None
        elif not (pd.api.types.is_integer_dtype(index.dtype) and index.equals(pd.RangeIndex(len(index)))):
            # 0..n-1 in order, a RangeIndex or not (equals() takes [False, True] and 0.0, 1.0 for it too)
            # Positions (a filter's, a chunk's): published, they would undo the
            # shuffle within classes; dropped, the result's 0..n-1 would pass
            # for them. The caller says which.
            raise ConfigError(
                "the DataFrame's index is not 0..n-1 and has no name: name it to keep it as a column "
                "(df.rename_axis('row_id')), or drop it (df.reset_index(drop=True)); rows come back regrouped"
            )
        twice = sorted({str(c) for c in data.columns[data.columns.duplicated()]})
        if twice:
            raise ConfigError(f"the DataFrame has more than one column named {', '.join(map(repr, twice))}: "
                              "rename them")
        for name in data.columns:
            if data[name].dtype == object:
                _refuse_mixed_objects(str(name), data[name])
        try:
            return pa.Table.from_pandas(data, preserve_index=False)
        except (TypeError, ValueError, OverflowError, pa.ArrowException) as exc:
            # Arrow names the column last; the value it failed on stays out (it is data).
            found = re.search(r"Conversion failed for column (.+?) with type (\w+)", str(exc))
            if found:
                raise ConfigError(
                    f"column {found.group(1)!r} (dtype {found.group(2)}) holds values of mixed types that Arrow "
                    "cannot read as one column: cast it first (e.g. .astype(str))"
                ) from None
            why = "a number too large for 64 bits: cast it to str or Decimal" if isinstance(exc, OverflowError) else \
                type(exc).__name__
            raise ConfigError(f"cannot read the DataFrame as an Arrow table ({why})") from None
    try:  # a dict of columns, anything Arrow reads as a table
        return pa.table(data)
    except (TypeError, ValueError, pa.ArrowException) as exc:
        raise ConfigError(f"anonymize_table takes an Arrow table or a pandas DataFrame, got {type(data).__name__}"
                          ) from exc


def anonymize_table(
    table: pa.Table, spec: AnonymizationSpec, stats: dict[str, ColumnStats] | None = None
) -> EngineResult:
    """Anonymize ``table`` so that it is k-anonymous and l-diverse under ``spec``.

    Args:
        table: the rows to anonymize (a whole dataset, or one fragment of it):
            an Arrow table, or a pandas DataFrame.
        spec: quasi-identifiers, k, l and sensitive columns.
        stats: dataset-wide :class:`ColumnStats` per QI; computed from ``table``
            when omitted (pass the global ones when ``table`` is a fragment).

    Returns:
        An :class:`EngineResult`. Non-QI columns pass through unchanged, in
        their place among the columns; QI columns become text (or
        ``_lo``/``_hi`` bounds). Rows come out grouped by class, shuffled
        within each (:func:`publication_order`): relate them to the input by
        a key column, never by position. A DataFrame's named index is such a
        key: it comes through as columns, first. An unnamed one must be
        pandas' default 0..n-1 (it is dropped); another is refused (name it,
        or drop it: it holds the rows' positions).

    Raises:
        ConfigError: a column is missing, or cannot be a QI (lists, infinite
            numbers…), or ``table`` is not a table Arrow can read.
        InputError: the table is empty.
        PrivacyError: fewer than ``k`` rows, or fewer than ``l`` distinct values
            of a sensitive column: no partition can satisfy the request.

    >>> import pyarrow as pa
    >>> from sqlanon.config import AnonymizationSpec, QuasiIdentifier
    >>> t = pa.table({"age": [30, 31, 40, 41], "zip": ["a", "b", "c", "d"]})
    >>> r = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("age"),), k=2))
    >>> r.table.column("age").to_pylist()
    ['[30, 31]', '[30, 31]', '[40, 41]', '[40, 41]']
    """
    return anonymize_fragment(table, spec, stats, given=stats is not None)


def anonymize_fragment(table, spec: AnonymizationSpec, stats: dict[str, ColumnStats] | None = None,
                       given: bool = False, narrow: bool = False) -> EngineResult:
    """:func:`anonymize_table`; a worker's fragment passes ``given=False``:
    the coordinator's statistics (from SQL) are not checked again against
    the values, whose text forms may differ (a SQLite timestamp's).
    ``narrow``: the text QIs' dictionary indices int16 where the fragment's
    labels fit (a part file, where the width does not show: half the bytes
    written per row); else int32, alike in every fragment."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    table = _readable(table, spec)
    _check_columns(table, spec)
    n = table.num_rows
    if n == 0:
        raise InputError("the input has no rows")
    if n < spec.k:
        raise PrivacyError(f"cannot reach k={spec.k}: the input has only {n} row{'' if n == 1 else 's'}")
    enc = _encode_all(table, spec)
    sens = [_encode_sensitive(table, s) for s in spec.sensitive]
    for s, (_, dom) in zip(spec.sensitive, sens):
        if dom < spec.l:
            raise PrivacyError(
                f"cannot reach l={spec.l}: sensitive column {s!r} has only {dom} distinct value(s)"
            )
    if stats is None:
        stats = {e.name: _local_stats(e) for e in enc}
    else:
        stats = _covering(enc, stats, given)
    for e in enc:
        _place_values(e, stats[e.name])

    d = len(enc)
    X = _rows_of([e.codes for e in enc], n)
    S = _rows_of([codes for codes, _ in sens], n)
    is_cat = np.array([e.kind != "interval" for e in enc])
    dom = np.array([e.n_codes for e in enc], np.int64)
    c_off = np.concatenate([[0], np.cumsum(dom + 1)]).astype(np.int64)
    s_off = np.concatenate([[0], np.cumsum([dm + 1 for _, dm in sens])]).astype(np.int64)
    vals = [e.values if e.values is not None else np.zeros(e.n_codes + 1) for e in enc]
    v_off = np.concatenate([[0], np.cumsum([len(v) for v in vals])])[:-1].astype(np.int64)
    values = np.concatenate(vals) if vals else np.zeros(0)
    gspan = np.array(
        [stats[e.name].range if e.kind == "interval" else float(stats[e.name].n_distinct) for e in enc], np.float64
    )
    timings["encode"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    kernel_args = (spec.k, spec.l, is_cat, values, v_off, gspan, c_off, s_off)
    hier = _hierarchy_arrays(enc)
    perm, bounds = kernel.partition(X, S, *kernel_args, *hier)
    timings["partition"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    columns, ncp_by_attr, keys = _generalize_classes(enc, stats, X, bounds, spec.interval_format)
    # Distinct classes may generalize to the same QI values (e.g. two classes
    # whose hierarchy LCA is the same node); published classes are the groups
    # of identical generalized rows, so merge them.
    group = _merge_identical(keys, len(bounds) - 1)
    held = [e.kind in _LABELS_MAY_MEET for e in enc]
    split_time = 0.0
    if int(group.max()) + 1 < len(bounds) - 1 and any(held) and not all(held):
        # A refined group's class may publish as another published class (a
        # kept one, or another group's): the two would merge, fewer and larger
        # classes than before (8 rows: 3 classes of DP 24 became 2 of DP 32,
        # helper-125). Such groups stay as they were, until no published class
        # joins two (a few rounds at most: past them, the classes as they were).
        refine = np.bincount(group) > 1
        for _ in range(_REFINE_ROUNDS):
            if not refine.any():
                break
            t1 = time.perf_counter()
            order, bounds1, origin = _split_merged(X, S, bounds, group, refine, held, kernel_args, hier)
            X1, S1 = X[order], S[order]
            split_time += time.perf_counter() - t1  # counted in partition, not in generalize
            out = _generalize_classes(enc, stats, X1, bounds1, spec.interval_format)
            group1 = _merge_identical(out[2], len(bounds1) - 1)
            width = int(origin.max()) + 1
            pairs = distinct(group1 * width + origin)
            joins = np.bincount(pairs // width) > 1  # per new published class: rows of two groups
            undo = distinct(origin[joins[group1]])
            undo = undo[refine[undo]]
            if len(undo) == 0:
                X, S, perm, bounds, group = X1, S1, perm[order], bounds1, group1
                columns, ncp_by_attr, keys = out
                break
            refine[undo] = False
        timings["partition"] += split_time
    sizes = np.diff(bounds)
    n_cls = len(sizes)
    class_of_row = np.empty(n, np.int32)
    class_of_row[perm] = np.repeat(np.arange(n_cls, dtype=np.int32), sizes)
    n_groups = int(group.max()) + 1
    g_sizes = np.bincount(group, weights=sizes, minlength=n_groups).astype(np.int64)
    if n_groups == n_cls:
        row_group = class_of_row
        achieved_l = (
            min(int(kernel.count_distinct(S[:, j], bounds, sens[j][1]).min()) for j in range(len(sens)))
            if sens
            else None
        )
        order = publication_order(row_group, perm, bounds)  # perm lists the rows class by class
    else:
        row_group = group[class_of_row].astype(np.int32)
        achieved_l = min((_min_distinct(row_group, codes, n_groups) for codes, _ in sens), default=None)
        order = publication_order(row_group)
    table_out = _assemble(table, spec, columns, class_of_row, order, narrow)
    timings["generalize"] = time.perf_counter() - t0 - split_time

    metrics = Metrics.from_classes(
        g_sizes, ncp_by_attr, k=spec.k, l=spec.l, achieved_l=achieved_l, n_qi=d
    )
    return EngineResult(table_out, metrics, row_group[order], timings)


def _hierarchy_arrays(enc: list[_Encoded]) -> tuple:
    """The trees of the hierarchy QIs, as :func:`sqlanon.kernel.partition`
    takes them to cut at a child boundary of a node's LCA: ``h_off[a]`` is
    column ``a``'s offset into the concatenated leaf -> node array ``h_leaf``
    (-1: no hierarchy); node ids are global over the concatenated trees
    (node 0 and leaf slot 0 are a placeholder, so no array is empty)."""
    d = len(enc)
    h_off = np.full(d, -1, np.int64)
    h_nleaves = np.zeros(d, np.int64)
    leaf, parent, first, last = ([np.zeros(1, np.int64)], [np.full(1, -1, np.int64)], [np.zeros(1, np.int64)],
                                 [np.zeros(1, np.int64)])
    n_leaf, n_node = 1, 1
    for a, e in enumerate(enc):
        if e.kind != "hierarchy":
            continue
        h = e.qi.hierarchy
        h_off[a] = n_leaf
        h_nleaves[a] = h.n_leaves
        leaf.append(h.leaf_node.astype(np.int64) + n_node)
        par = h.parent.astype(np.int64)
        parent.append(np.where(par < 0, -1, par + n_node))
        first.append(h.first_leaf.astype(np.int64))
        last.append(h.last_leaf.astype(np.int64))
        n_leaf += h.n_leaves
        n_node += len(h.parent)
    return (h_off, h_nleaves, np.concatenate(leaf), np.concatenate(parent), np.concatenate(first),
            np.concatenate(last))


def _generalize_classes(enc: list[_Encoded], stats: dict[str, ColumnStats], X: np.ndarray, bounds: np.ndarray,
                        interval_format: str) -> tuple[dict[str, list[tuple[str, pa.Array]]], dict[str, float], list]:
    """Every QI generalized for the classes ``bounds`` of ``X``: the output
    columns by QI, each QI's NCP summed over rows, and each class's key per
    QI (:func:`_merge_identical`)."""
    sizes = np.diff(bounds)
    null_codes = np.array([e.null_code for e in enc], np.int64)
    lo, hi, has_null = kernel.class_ranges(X, bounds, null_codes)
    columns: dict[str, list[tuple[str, pa.Array]]] = {}
    ncp_by_attr: dict[str, float] = {}
    keys = []
    for j, e in enumerate(enc):
        g = generalize_column(e, stats[e.name], lo[:, j], hi[:, j], has_null[:, j], X[:, j], bounds, interval_format)
        columns[e.name] = g.columns
        # Not np.dot: a BLAS call wakes OpenBLAS's thread pool, which then spins
        # ~0.1 s of CPU on the other core, where the other worker runs.
        ncp_by_attr[e.name] = float((g.ncp * sizes).sum())
        keys.append(g.key)
    return columns, ncp_by_attr, keys


_REFINE_ROUNDS = 8
"""Rounds of :func:`_split_merged` a fragment may take, each giving up the
groups whose new classes joined another published class: a round's new
joins come only from groups given up in the one before, rare past the
second; each round generalizes every class again."""

_LABELS_MAY_MEET = ("hierarchy", "prefix")
"""Generalizations under which the two sides of a cut may publish the same
value: a hierarchy's median leaf with both sides under one node, a prefix
common to both sides. (An interval's sides are disjoint ranges, a set's
disjoint sets.)"""


def _split_merged(X: np.ndarray, S: np.ndarray, bounds: np.ndarray, group: np.ndarray, refine: np.ndarray,
                  held: list[bool], kernel_args: tuple, hier: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut again the classes that publish as one (``group``: the same
    generalized values; ``refine``: per group, whether to), on the other
    QIs only: Mondrian cut such a class on a hierarchy QI (``held``: those
    whose sides may publish alike) within one node's leaves, then neither
    side could be cut again, and they published as one class that a cut on another QI
    could have split (Adult: age [33, 37] in Asia, 25 rows, where age <= 35
    keeps k = 10 and l = 2 on both sides; ~1 % of the classes, helper-124).

    All merged groups go through one kernel call: a column of their group
    number, with a representativity no other column reaches (its span next
    to nothing), is cut first until each node holds one group, whose union
    of valid classes is itself valid; the ``held`` columns are constant, so
    within a group only the other QIs are cut. Never coarser than the merged
    class: a group no valid cut splits stays one class. Returns
    ``(order, bounds, origin)``: the rows' new order (the other classes'
    rows first, then the groups'), the new classes' bounds in it, and each
    new class's group."""
    k, l, is_cat, values, v_off, gspan, c_off, s_off = kernel_args
    sizes = np.diff(bounds)
    merged = refine[group]  # per class
    row_group = np.repeat(group, sizes)
    in_merged = np.repeat(merged, sizes)
    kept = np.flatnonzero(~in_merged)
    moved = np.flatnonzero(in_merged)
    moved = moved[np.argsort(row_group[moved], kind="stable")]
    _, number = np.unique(row_group[moved], return_inverse=True)
    n_groups = int(number.max()) + 1
    Xg = np.empty((len(moved), X.shape[1] + 1), np.int32)
    Xg[:, :-1] = X[moved]
    Xg[:, held + [False]] = 0
    Xg[:, -1] = number
    Sg = np.ascontiguousarray(S[moved])
    perm_g, bounds_g = kernel.partition(
        Xg, Sg, k, l, np.append(is_cat, True), np.concatenate([values, np.zeros(n_groups + 1)]),
        np.append(v_off, len(values)), np.append(gspan, 1e-200),
        np.append(c_off, c_off[-1] + n_groups + 1), s_off,
        np.append(hier[0], -1), np.append(hier[1], 0), *hier[2:],
    )
    order = np.concatenate([kept, moved[perm_g]])
    kept_bounds = np.concatenate([[0], np.cumsum(sizes[~merged])])
    new_bounds = np.concatenate([kept_bounds, len(kept) + bounds_g[1:]]).astype(np.int64)
    return order, new_bounds, row_group[order[new_bounds[:-1]]]


def _merge_identical(keys: list[np.ndarray], n_cls: int) -> np.ndarray:
    if n_cls <= 1:
        return np.zeros(n_cls, np.int64)
    # Cheap test first: when a hash of the keys is unique per class (the usual
    # case) no two classes can share their generalized values.
    h = np.zeros(n_cls, np.uint64)
    with np.errstate(over="ignore"):
        for k in keys:
            h = (h * np.uint64(0x100000001B3)) ^ k.astype(np.uint64)
    if len(distinct(h)) == n_cls:
        return np.arange(n_cls, dtype=np.int64)
    import pandas as pd  # only when two classes may share values: rare

    frame = pd.DataFrame({str(i): k for i, k in enumerate(keys)})
    return frame.groupby(list(frame.columns), sort=False).ngroup().to_numpy().astype(np.int64)


def _min_distinct(row_group: np.ndarray, codes: np.ndarray, n_groups: int) -> int:
    pairs = distinct(row_group.astype(np.int64) * (int(codes.max()) + 1) + codes)
    per_group = np.bincount(pairs // (int(codes.max()) + 1), minlength=n_groups)
    return int(per_group.min())


def publication_order(
    class_of_row: np.ndarray, by_class: np.ndarray | None = None, bounds: np.ndarray | None = None
) -> np.ndarray:
    """The order rows are published in: grouped by class, at random within
    each class, from fresh entropy (not the run's seed, which the metrics
    publish). In the input's order, anyone who knows that order (a table
    sorted by a QI, an id, a date) could pair each class's rows with the
    people the class holds: Sweeney's unsorted matching attack.

    ``by_class`` and ``bounds``: the rows already listed class by class
    (int64), class ``c`` at ``bounds[c]:bounds[c + 1]``, as the kernel's
    partition gives them; shuffled in place. Otherwise the rows are grouped
    by ``class_of_row`` (ids 0..classes-1) first."""
    if by_class is None:
        by_class = np.argsort(class_of_row, kind="stable").astype(np.int64)
        bounds = np.concatenate([[0], np.cumsum(np.bincount(class_of_row))])
    rand = np.random.default_rng().integers(0, 2**62, len(by_class), np.int64)
    return kernel.shuffle_blocks(by_class, bounds, rand)  # O(n): Fisher-Yates within each class


def _assemble(
    table: pa.Table, spec: AnonymizationSpec, columns: dict[str, list[tuple[str, pa.Array]]], class_of_row: np.ndarray,
    order: np.ndarray, narrow: bool = False,
) -> pa.Table:
    """The published table: its rows in ``order`` (:func:`publication_order`)."""
    rows = pa.array(order)
    class_idx = class_of_row[order]
    idx = pa.array(class_idx)
    names: list[str] = []
    arrays: list[pa.Array] = []
    for name, col in zip(table.column_names, table.columns):
        if name in columns:
            for out_name, per_class in columns[name]:
                names.append(out_name)
                if pa.types.is_string(per_class.type) or pa.types.is_dictionary(per_class.type):
                    # A dictionary column of the distinct generalized values:
                    # an index per row instead of a copy of its string.
                    enc = per_class if pa.types.is_dictionary(per_class.type) else pc.dictionary_encode(per_class)
                    dictionary = enc.dictionary
                    if len(dictionary) == 0:
                        # All NULL. The column stays a dictionary, as in every
                        # other fragment, but DuckDB 1.4 crashes on an empty
                        # one: give it one value that no row uses.
                        dictionary = pa.array([""], pa.string())
                    indices = enc.indices
                    if indices.null_count == 0:
                        # numpy's gather (int16 narrow): Arrow's take of int32 indices took
                        # 0.66 s at 5M rows of 10 QIs, numpy's 0.58 s, int16 0.38 s.
                        width = np.int16 if narrow and len(dictionary) <= np.iinfo(np.int16).max else np.int32
                        taken = pa.array(indices.to_numpy().astype(width)[class_idx])
                    else:
                        taken = indices.take(idx)
                    arrays.append(pa.DictionaryArray.from_arrays(taken, dictionary, safe=False))  # its own indices
                else:
                    arrays.append(per_class.take(idx))
        else:
            names.append(name)
            arrays.append(col.take(rows))
    if len(set(names)) != len(names):
        dup = sorted({x for x in names if names.count(x) > 1})
        raise ConfigError(f"output column(s) {', '.join(map(repr, dup))} would clash with an input column")
    return pa.table(arrays, names=names)
