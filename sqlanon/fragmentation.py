"""Split a source into fragments, one per worker: the coordinator's planner (§4).

The coordinator looks at a *sample* of the source and cuts it the way §4.1 of
the distributed Mondrian paper describes, then hands every worker the
*conditions* of its fragment (§4.2), never the rows: each worker pulls its
fragment with ``SELECT … WHERE <conditions>``.

Two strategies:

* ``quantile`` (Fig. 4): the quasi-identifier with the most distinct values in
  the sample is cut at the W-quantiles of its ranks into W fragments (fewer
  when it has fewer than W distinct values).
* ``mondrian`` (Fig. 5): recursive cuts, each on the attribute with the highest
  representativity (Eq. 1; ties go to the attribute whose cut falls nearest
  the quantile it aims at, which keeps fragments balanced, then to the one
  with the most distinct values in the node, the paper's tie rule, then to
  the first in QI order). Unlike the paper, which
  cuts at the median ⌈log2 W⌉ times and gives some workers two fragments when
  W is not a power of two, a node meant for ``w`` workers is cut at the
  ``floor(w/2)/w`` quantile; its left side gets ``floor(w/2)`` workers and its
  right side ``ceil(w/2)``, so every fragment holds about n/W rows for any W.
  A side that cannot be cut any further (one value in every QI) stays one
  fragment, so a plan may have fewer than W fragments.

A cut can only fall between two distinct values, so each quantile is placed at
the boundary between distinct values whose left side is nearest to it in rows
(on a tie, the larger left side, as the paper's ``rank <= median``). This
balances better than the paper's nearest-rank value when a value repeats
often: in Fig. 2(a) the first 4-quantile becomes ``Age <= 25`` (2 of 9 rows,
target 2.25) where the paper takes ``Age <= 30`` (3 rows).

Values are ordered as the engine orders them (:mod:`sqlanon.engine`):
numbers, dates, timestamps and strings by value, hierarchy columns by the
hierarchy's leaf order, NULL after every value. One deliberate difference:
a ``prefix`` column that is not a string is cut by value, not by its text,
because a portable predicate can only compare a column in its own type.

**Conditions hold for any data, not just the sample.** A cut is a
:class:`Predicate` pair whose two sides are complements under SQL's
three-valued logic, so the fragments of a plan are disjoint and complete over
every possible row of the source's schema, including values the sample never
saw:

* on a value (numbers, dates, strings: VARCHAR compares by code point in
  DuckDB, like Arrow's sort): ``col <= v`` vs ``col > v OR col IS NULL``;
* on a hierarchy column: ``col IN (every leaf up to the cut, in leaf order)``
  vs ``col NOT IN (…) OR col IS NULL``: leaves the sample never saw fall on
  their side of the leaf order, values that are not leaves go right;
* when the cut separates NULL from the values: ``col IS NOT NULL`` vs
  ``col IS NULL``.

NULL always goes right. A fragment's condition is the conjunction of the
predicates on the path from the root of the cut tree, rendered to SQL only by
:func:`where_sql` (template ``where.sql``: quoted identifiers, bound values).

**Fragment ids.** A fresh plan numbers its fragments ``0 .. W'-1`` from left to
right (in value order of the cuts). An id always means the same rows:
:func:`merge` keeps the ids of the fragments it does not touch and gives the
merged fragment a *new* id, one more than the largest id in the plan, which no
fragment of the plan has ever had (so a late result for a merged-away
fragment can never be mistaken for the merged one). After a merge the ids are
no longer contiguous; ``Plan.fragments`` stays in left-to-right order.

Example:
    >>> import pyarrow as pa
    >>> from sqlanon.config import AnonymizationSpec, QuasiIdentifier
    >>> sample = pa.table({"age": [25, 25, 30, 38, 42, 43, 50, 50]})
    >>> spec = AnonymizationSpec((QuasiIdentifier("age"),), k=2)
    >>> plan = plan_fragments(sample, spec, workers=2, total_rows=800)
    >>> [(f.id, f.path, f.estimated_rows) for f in plan.fragments]
    [(0, '0', 400), (1, '1', 400)]
    >>> where_sql(plan.fragments[1].predicates)
    ('("age" > ? OR "age" IS NULL)', [38])
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .config import STRATEGIES, AnonymizationSpec, QuasiIdentifier, suggest
from .domain import ColumnStats, as_text, distinct, is_text, normalize_floats, resolve_generalization, span_values
from .errors import ConfigError, InputError
from .sql.render import DIALECTS, is_generic, render  # noqa: F401 - DIALECTS: duckdb binds ?, postgres inlines literals

log = logging.getLogger("sqlanon")

__all__ = [
    "DIALECTS",
    "OPS",
    "STRATEGIES",
    "Fragment",
    "Plan",
    "Predicate",
    "merge",
    "plan_fragments",
    "where_sql",
]

OPS = ("le", "gt_or_null", "gt", "le_any", "in", "not_in_or_null", "is_null", "not_null")
"""The closed set of predicate operators (see :class:`Predicate`)."""

_SCALAR_OPS = ("le", "gt_or_null", "gt")
_SET_OPS = ("in", "not_in_or_null", "le_any")  # a tuple of values
_BOUND_OPS = (*_SCALAR_OPS, "le_any", "is_null", "not_null")  # a value column's (_bounds)
_ABOVE = ("gt_or_null", "gt", "not_in_or_null", "is_null")
"""The right side of a cut, the rows not in its left side (``le``, ``in``, ``not_null``)."""


# --------------------------------------------------------------------------
# The plan: predicates, fragments, and their JSON form.
# --------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    """A JSON-ready form of a cut value (dates as ISO strings, bytes as hex)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, np.generic):
        return _jsonable(value.item())
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)  # 'inf', '-inf', 'nan'
    if isinstance(value, (dt.date, dt.time)):  # datetime is a date
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    return str(value)  # Decimal, timedelta, ...


@dataclass(frozen=True)
class Predicate:
    """One side of one cut: a condition on one column, as data.

    Attributes:
        column: the column name (quoted only when rendered).
        op: one of :data:`OPS`:

            * ``le``: ``column <= value``;
            * ``gt_or_null``: ``column > value OR column IS NULL``;
            * ``gt``: ``column > value`` (a cut's side never holds it: a
              ``gt_or_null`` where the conjunction already leaves NULL out);
            * ``le_any``: ``column <= v1 OR column <= v2 …`` (``value`` a
              tuple): quantile fragments merged (:func:`merge`);
            * ``in``: ``column IN value`` (``value`` a tuple);
            * ``not_in_or_null``: ``column NOT IN value OR column IS NULL``;
            * ``is_null`` / ``not_null``: ``column IS [NOT] NULL``.

            ``le``/``gt_or_null``, ``in``/``not_in_or_null`` and
            ``not_null``/``is_null`` are complements: exactly one of each pair
            holds for any row.
        value: a scalar for ``le``/``gt_or_null``/``gt``, a tuple of non-NULL
            values for ``in``/``not_in_or_null``/``le_any`` (a list is turned
            into a tuple), ``None`` otherwise.
        foldable: (``in``/``not_in_or_null``) whether this list and the
            column's other lists in a conjunction may become one list by
            set algebra on their values (see :func:`where_sql`): no two
            values of the column's domain compare equal in any collation.
            (``le``/``gt_or_null``/``le_any``) whether the database orders the column's
            values as the plan does (numbers, dates; text read from files,
            compared by its bytes), so that of a cut-tree path's bounds on
            the column the last ones are the tightest. Not part of the
            condition (nor of :meth:`to_dict`).
    """

    column: str
    op: str
    value: Any = None
    foldable: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise ValueError(f"a predicate needs a non-empty column name, got {self.column!r}")
        if self.op not in OPS:
            raise ValueError(f"unknown predicate op {self.op!r}{suggest(str(self.op), OPS)}; choose one of {', '.join(OPS)}")
        if self.op in _SET_OPS:
            if not isinstance(self.value, (tuple, list)):
                raise ValueError(f"op {self.op!r} needs a tuple of values, got {type(self.value).__name__}")
            object.__setattr__(self, "value", tuple(self.value))
            if any(v is None for v in self.value):
                raise ValueError(f"op {self.op!r} on column {self.column!r}: NULL cannot be in the value list")
            if self.op == "le_any" and not self.value:
                raise ValueError(f"op 'le_any' on column {self.column!r} needs at least one value")
        elif self.op in _SCALAR_OPS:
            if self.value is None or isinstance(self.value, (tuple, list)):
                raise ValueError(f"op {self.op!r} on column {self.column!r} needs one non-NULL value")
        elif self.value is not None:
            raise ValueError(f"op {self.op!r} takes no value")

    def to_dict(self) -> dict[str, Any]:
        """``{"column", "op", "value"}`` with the value JSON-ready."""
        return {"column": self.column, "op": self.op, "value": _jsonable(self.value)}


@dataclass(frozen=True)
class Fragment:
    """One fragment of a plan: the rows one worker pulls.

    Attributes:
        id: stable id (see the module docstring): ``0 .. W'-1`` left to right
            in a fresh plan; a merged fragment gets a new, never used id.
        predicates: the conjunction selecting the fragment; ``()`` is every row.
        path: the fragment's place in the cut tree. ``mondrian``: one character
            per cut from the root, ``0`` left and ``1`` right (``""`` is the
            root), and ``predicates[i]`` is the side taken at ``path[i]``.
            ``quantile``: every fragment is a child of the root; its path is its
            position in the fresh plan in decimal, ``"i-j"`` for a merged run.
        sample_rows: rows of the sample in the fragment.
        estimated_rows: ``sample_rows`` scaled to the source's row count
            (largest-remainder rounding, so the estimates sum to it).
    """

    id: int
    predicates: tuple[Predicate, ...]
    path: str
    sample_rows: int
    estimated_rows: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ids, sizes and predicates (values as in
        :meth:`Predicate.to_dict`), as its SQL has them (:func:`where_sql`: a
        column's lists one list; 64 fragments of a 100,000-leaf hierarchy
        wrote 69 MB of them into the metrics' plan, 2 MB so)."""
        return {
            "id": self.id,
            "path": self.path,
            "sample_rows": self.sample_rows,
            "estimated_rows": self.estimated_rows,
            "predicates": [p.to_dict() for p in _folded(self.predicates)],
        }


@dataclass(frozen=True)
class Plan:
    """The fragments of a source, left to right; their conditions are disjoint and complete.

    Attributes:
        strategy: ``quantile`` or ``mondrian``.
        fragments: the fragments in left-to-right order.
    """

    strategy: str
    fragments: tuple[Fragment, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, for ``--explain`` and the metrics table."""
        return {
            "strategy": self.strategy,
            "n_fragments": len(self.fragments),
            "sample_rows": sum(f.sample_rows for f in self.fragments),
            "estimated_rows": sum(f.estimated_rows for f in self.fragments),
            "fragments": [f.to_dict() for f in self.fragments],
        }

    def fragment(self, fragment_id: int) -> Fragment:
        """The fragment with id ``fragment_id``.

        Raises:
            KeyError: no fragment has that id.
        """
        return self.fragments[self.position(fragment_id)]

    def position(self, fragment_id: int) -> int:
        """Index in :attr:`fragments` of the fragment with id ``fragment_id``.

        Raises:
            KeyError: no fragment has that id.
        """
        for i, f in enumerate(self.fragments):
            if f.id == fragment_id:
                return i
        raise KeyError(f"no fragment with id {fragment_id!r} in the plan (ids: {[f.id for f in self.fragments]})")

    def sibling_of(self, fragment_id: int) -> tuple[int, ...]:
        """The ids of the fragments to merge ``fragment_id`` with when it must be repaired.

        ``mondrian``: every fragment under the sibling subtree of the fragment
        in the cut tree, so that ``merge(plan, (fragment_id, *sibling_of(...)))``
        yields the parent node. ``quantile``: the neighbouring fragment with
        fewer estimated rows (the right one on a tie). ``()`` when the plan has
        a single fragment.

        Raises:
            KeyError: no fragment has that id.
        """
        pos = self.position(fragment_id)
        if len(self.fragments) == 1:
            return ()
        if self.strategy == "quantile":
            near = [i for i in (pos + 1, pos - 1) if 0 <= i < len(self.fragments)]
            best = min(near, key=lambda i: self.fragments[i].estimated_rows)
            return (self.fragments[best].id,)
        path = self.fragments[pos].path
        sib = path[:-1] + ("1" if path[-1] == "0" else "0")
        return tuple(f.id for f in self.fragments if f.path.startswith(sib))


def merge(plan: Plan, ids: Iterable[int]) -> Plan:
    """Replace the fragments ``ids`` by one fragment covering exactly their rows.

    ``mondrian``: ``ids`` must be all the fragments under one node of the cut
    tree (a fragment and its :meth:`Plan.sibling_of` are); the merged fragment
    is that node, with the node's path and its conjunction (the common prefix
    of their predicates). ``quantile``: ``ids`` must be neighbours; the merged
    fragment keeps the first's sides above the cuts before it, within any of
    the run's own cuts (:func:`_within_any`). Either way the plan stays
    disjoint and complete, in any order of the values.

    The merged fragment gets a new id, one more than the largest id in the
    plan (never the id of an earlier fragment); the other fragments keep
    theirs. Sizes are summed.

    Raises:
        KeyError: an id is not in the plan.
        ValueError: ``ids`` is empty or is not a node's subtree / a run of neighbours.
    """
    wanted = set(ids)
    if not wanted:
        raise ValueError("merge needs at least one fragment id")
    pos = sorted(plan.position(i) for i in wanted)
    if len(pos) == 1:
        return plan
    first, last = pos[0], pos[-1]
    if pos != list(range(first, last + 1)):
        raise ValueError(f"fragments {sorted(wanted)} are not neighbours in the plan; only adjacent fragments can merge")
    run = plan.fragments[first : last + 1]
    if plan.strategy == "quantile":
        preds = tuple(p for p in run[0].predicates if p.op in _ABOVE) + _within_any(run)
        path = f"{run[0].path.split('-')[0]}-{run[-1].path.split('-')[-1]}"
    else:
        prefix = _common_prefix([f.path for f in run])
        under = [i for i, f in enumerate(plan.fragments) if f.path.startswith(prefix)]
        if under != pos:
            raise ValueError(
                f"fragments {sorted(wanted)} are not a whole subtree of the cut tree: node {prefix!r} "
                f"also covers fragment(s) {[plan.fragments[i].id for i in under if i not in pos]}; "
                "merge a fragment with its sibling_of()"
            )
        preds = run[0].predicates[: len(prefix)]
        path = prefix
    merged = Fragment(
        id=max(f.id for f in plan.fragments) + 1,
        predicates=preds,
        path=path,
        sample_rows=sum(f.sample_rows for f in run),
        estimated_rows=sum(f.estimated_rows for f in run),
    )
    return Plan(plan.strategy, plan.fragments[:first] + (merged,) + plan.fragments[last + 1 :])


def _within_any(run: tuple[Fragment, ...]) -> tuple[Predicate, ...]:
    """Quantile neighbours merged: the rows above the cuts before the first
    (its ``_ABOVE`` sides) within any of the run's own cuts (the last
    predicate of each, :func:`_quantile`). A hierarchy's lists hold every
    leaf up to their cut, and NULL is the last cut: the last one is the
    union. A value column's cuts ``<= v`` are one in the plan's order, not
    in a collation's: ``le_any`` says each (helper-48: a merge of NOCASE
    text kept the last cut alone and lost the rows within an earlier one).
    A run that holds the last fragment (above every cut) is within none."""
    own = [f.predicates[-1] for f in run if f.predicates and f.predicates[-1].op not in _ABOVE]
    if len(own) < len(run):
        return ()
    if any(p.op in ("in", "not_null") for p in own):
        return (own[-1],)
    values = tuple(v for p in own for v in (p.value if p.op == "le_any" else (p.value,)))
    return (Predicate(own[-1].column, "le_any", values, own[-1].foldable),)


def _common_prefix(paths: list[str]) -> str:
    lo, hi = min(paths), max(paths)  # the common prefix of all is that of the extremes
    n = 0
    while n < min(len(lo), len(hi)) and lo[n] == hi[n]:
        n += 1
    return lo[:n]


def where_sql(predicates: Iterable[Predicate], dialect: str = "duckdb", typed: bool = False) -> tuple[str, list[Any]]:
    """Render a conjunction of predicates as an SQL condition and its bound parameters.

    Identifiers are quoted the dialect's way; every value is a placeholder
    (``?``; ``:p0``, ``:p1``… for another SQLAlchemy database) and the
    parameters are returned in placeholder order (for ``postgres``: an
    escaped literal, and no parameters).

    Args:
        predicates: the conjunction (a fragment's ``predicates``); ``()`` gives ``TRUE``.
        dialect: one of :data:`DIALECTS`, or ``sqla:<drivername>``.
        typed: for the SQL shown to people, whose parameters are written as
            JSON (``render(typed=True)``).

    Returns:
        ``(sql, params)``.

    Raises:
        ConfigError: unknown dialect.
        TypeError: an item is not a :class:`Predicate`.

    >>> where_sql((Predicate("age", "le", 38), Predicate("zip", "is_null")))
    ('("age" <= ? AND "zip" IS NULL)', [38])
    >>> where_sql(())
    ('TRUE', [])
    """
    if dialect not in DIALECTS and not is_generic(dialect):
        raise ConfigError(f"unknown SQL dialect {dialect!r}{suggest(str(dialect), DIALECTS)}; choose one of {', '.join(DIALECTS)} or sqla:<drivername>")
    preds = tuple(predicates)
    for p in preds:
        if not isinstance(p, Predicate):
            raise TypeError(f"where_sql takes Predicate objects, got {type(p).__name__}")
    rendered = render("where.sql", dialect=dialect, inline=dialect == "postgres", typed=typed,
                      predicates=_folded(preds))
    return rendered.sql, rendered.params


CLUSTER_KEY_VALUES = 10_000
"""At most this many bound values in :func:`cluster_key`'s expression (else no ordered copy)."""


def cluster_key(plan: Plan) -> tuple[str, list[Any]] | None:
    """An SQL expression (DuckDB's, and its bound parameters) giving each
    row its fragment's position in ``plan``, or None (not a fresh plan, or
    one whose cuts bind more than :data:`CLUSTER_KEY_VALUES` values):
    nested ``CASE``s down the cut tree, a row meeting one predicate per
    level (a first-match ``CASE`` of every fragment's clause took 6.4 s per
    1M rows for 256 fragments, this 0.1 s). A ``quantile`` plan's cuts, all
    on one column, are nested as a binary search. Only to order a copy of
    the source so that a fragment's rows share row groups, which its
    clause's bounds then skip the others of
    (:meth:`sqlanon.io.Staging.clustered_copy`): a row's place in the copy
    never decides which fragment pulls it, its clause does."""
    frs = plan.fragments
    if len(frs) < 2:
        return None
    if plan.strategy == "quantile":
        key = _quantile_key(frs)
    elif any(len(f.predicates) != len(f.path) for f in frs):
        return None
    else:
        key = _mondrian_key(frs, 0, len(frs), 0)
    # A large hierarchy's cuts list its leaves at every level: with 200,000
    # leaves the copy took 8 s at 400k rows, more than the reads it saves (helper-172).
    return key if key is not None and len(key[1]) <= CLUSTER_KEY_VALUES else None


def _case(pred: Predicate, left: tuple[str, list[Any]], right: tuple[str, list[Any]]) -> tuple[str, list[Any]]:
    """The key ``left`` where ``pred`` holds, else ``right`` (:func:`cluster_key`)."""
    sql, params = where_sql((pred,))
    return f"CASE WHEN {sql} THEN {left[0]} ELSE {right[0]} END", [*params, *left[1], *right[1]]


def _mondrian_key(frs: tuple[Fragment, ...], lo: int, hi: int, depth: int) -> tuple[str, list[Any]] | None:
    """The key of fragments ``lo`` to ``hi``, which share their first
    ``depth`` cuts; None where they are not a binary cut tree as a fresh
    plan's are (the left side's paths go on with 0, then the right's with 1)."""
    if hi - lo == 1:
        return str(lo), []
    sides = [frs[i].path[depth] if len(frs[i].path) > depth else "" for i in range(lo, hi)]
    split = lo + sides.count("0")
    if split in (lo, hi) or sides != ["0"] * (split - lo) + ["1"] * (hi - split):
        return None
    left, right = _mondrian_key(frs, lo, split, depth + 1), _mondrian_key(frs, split, hi, depth + 1)
    return None if left is None or right is None else _case(frs[lo].predicates[depth], left, right)


def _quantile_key(frs: tuple[Fragment, ...]) -> tuple[str, list[Any]] | None:
    """The key of a fresh ``quantile`` plan's fragments, or None (merged
    ones): fragment i but the last ends with cut i's left side
    (:func:`_quantile`: ``<= value``, the leaves up to it, or ``IS NOT
    NULL`` where the last cut is between the values and NULL), which holds
    for the rows of fragments 0 to i and no other."""
    if [f.path for f in frs] != [str(i) for i in range(len(frs))] or any(
            not f.predicates or f.predicates[-1].op not in ("le", "in", "not_null") for f in frs[:-1]):
        return None

    def split(lo: int, hi: int) -> tuple[str, list[Any]]:
        if hi - lo == 1:
            return str(lo), []
        mid = (lo + hi) // 2
        return _case(frs[mid - 1].predicates[-1], split(lo, mid), split(mid, hi))

    return split(0, len(frs))


def _value_key(v: Any) -> Any:
    """A value as a set member that compares as SQL's ``IN`` does (a float NaN is one value)."""
    return ("NaN",) if isinstance(v, float) and v != v else v


def _folded(preds: tuple[Predicate, ...]) -> tuple[Predicate, ...]:
    """The conjunction with each column's bounds folded (:func:`_bounds`),
    and its ``in`` and ``not_in_or_null`` lists
    as one ``in`` list, where one of them is an ``in`` (set algebra on the
    values: the same rows). A fragment deep in a hierarchy's cuts holds the
    node's leaves once, not once per cut on its way (helper-34).

    Only where no two of the lists' values may compare equal in the
    database: under a collation ('W5' = 'w5' in a NOCASE column, citext,
    MySQL's default ones) the algebra of Python's equality put a row in two
    fragments (a case variant of a value taken out of a list still matched
    it: helper-37); such a column's lists stay as they are (the plan tells
    which: :attr:`Predicate.foldable`)."""
    groups: dict[str, list[Predicate]] = {}
    for p in preds:
        groups.setdefault(p.column, []).append(p)
    bounds: dict[int, Predicate | None] = {}
    for group in groups.values():
        if all(q.op in _BOUND_OPS for q in group) and (len(group) > 1 or group[0].op == "le_any"):
            bounds.update(_bounds(group))
    out = []
    for p in preds:
        group = groups[p.column]
        if id(p) in bounds:  # at the column's first place, lower bound first
            if p is group[0]:
                kept = [bounds[id(q)] for q in group if bounds[id(q)] is not None]
                out.extend(sorted(kept, key=lambda q: q.op == "le"))
        elif (len(group) == 1 or any(q.op not in ("in", "not_in_or_null") or not q.foldable for q in group)
                or all(q.op != "in" for q in group)):
            out.append(p)
        elif p is group[0]:
            keep = [{_value_key(v) for v in q.value} for q in group if q.op == "in"]
            drop = {_value_key(v) for q in group if q.op == "not_in_or_null" for v in q.value}
            base = next(q for q in reversed(group) if q.op == "in").value
            out.append(Predicate(p.column, "in", tuple(
                v for v in base if _value_key(v) not in drop and all(_value_key(v) in k for k in keep)), True))
    return tuple(out)


def _bounds(group: list[Predicate]) -> dict[int, Predicate | None]:
    """One column's predicates of a cut-tree path (``le``, ``gt_or_null``,
    ``is_null``, ``not_null``), each (by ``id``) as it is written in the
    conjunction, or ``None`` when the others already say it: the same rows.
    ``("race" <= 'Other' AND "race" <= 'Asian-Pac-Islander')`` is ``"race"
    <= 'Asian-Pac-Islander'``, and ``("age" > 36 OR "age" IS NULL) AND
    "age" <= 52`` is ``"age" > 36 AND "age" <= 52`` (helper-42).

    * Where a bound or ``not_null`` leaves NULL out, a ``gt_or_null`` is a
      ``gt`` and ``not_null`` says nothing more: so in any database.
    * Each cut of a path lies inside the bounds before it, in the plan's
      order of the values: where the database orders them so
      (:attr:`Predicate.foldable`), the last ``le`` and the last
      ``gt_or_null`` are the tightest, and the others go. Text under a
      collation may order otherwise: its bounds stay.
    * ``is_null`` (a path's last cut on the column) implies the
      ``gt_or_null`` before it.
    * Merged quantile cuts (``le_any``), ordered so, are their last one."""
    ordered = all(q.foldable for q in group if q.op in (*_SCALAR_OPS, "le_any"))
    as_is = {id(q): Predicate(q.column, "le", q.value[-1], True) if q.op == "le_any" and ordered else q
             for q in group}
    ops = {q.op for q in as_is.values()}
    if "is_null" in ops:
        if ops & {"le", "le_any", "not_null", "gt"}:  # no row: left as it is
            return as_is
        last = [q for q in group if q.op == "is_null"][-1]
        return {id(q): q if q is last else None for q in group}
    last = {op: [q for q in as_is.values() if q.op == op][-1] for op in ops}
    nonnull = bool(ops & {"le", "le_any", "gt", "not_null"})
    out: dict[int, Predicate | None] = {}
    for key, q in as_is.items():
        if q.op == "not_null":
            out[key] = q if ops == {"not_null"} else None
        elif ordered and q is not last[q.op]:
            out[key] = None
        elif q.op == "gt_or_null" and nonnull:
            out[key] = Predicate(q.column, "gt", q.value, q.foldable)
        else:
            out[key] = q
    return out


def _apart_under_any_collation(values: Iterable[Any]) -> bool:
    """Whether no two distinct texts among ``values`` could be one value to
    a collation: none differ only in case, accents, compatibility forms,
    spacing or punctuation (what case-, accent- and punctuation-insensitive
    collations and PAD SPACE comparisons ignore). Other values (numbers,
    dates) compare as Python compares them."""
    seen: dict[str, str] = {}
    for v in values:
        if isinstance(v, str):
            key = _collation_key(v)
            if seen.setdefault(key, v) != v:
                return False
    return True


def _collation_key(text: str) -> str:
    """``text`` with what a lenient collation ignores taken out (see :func:`_apart_under_any_collation`)."""
    if text.isascii():
        return _IGNORABLE.sub("", text.casefold())
    text = "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))
    return _IGNORABLE.sub("", text.casefold().translate(_BASE_LETTERS))


_IGNORABLE = re.compile(r"[\W_]+")
_BASE_LETTERS = str.maketrans({"ł": "l", "ø": "o", "æ": "ae", "œ": "oe", "đ": "d", "ð": "d", "þ": "th", "ħ": "h",
                               "ı": "i", "ŀ": "l", "ŧ": "t"})
"""Letters no decomposition takes apart that accent-insensitive ICU collations
equate with a base letter ('Łódź' = 'Lodz', 'æon' = 'aeon': helper-39)."""


def where_shown(predicates: Iterable[Predicate], dialect: str = "duckdb") -> tuple[str, list[Any]]:
    """:func:`where_sql` as the database receives it, for people (``--explain``,
    the metrics table): another SQLAlchemy database's SQL runs as ``text()``,
    whose ``\\:`` escape of a colon in a name the database never sees; a
    long list of a hierarchy cut's dates or decimals is cast to its type,
    so the clause run by hand with its JSON parameters selects the same rows."""
    sql, params = where_sql(predicates, dialect, typed=True)
    return (sql.replace("\\:", ":") if is_generic(dialect) else sql), params


# --------------------------------------------------------------------------
# Encoding the sample: one integer code per row and QI, in engine order.
# --------------------------------------------------------------------------


@dataclass
class _Column:
    """A QI of the sample as codes; ascending codes follow the engine's order.

    Value columns: code ``i`` is the i-th smallest distinct value, NULL is
    ``n_values``. Hierarchy columns: code ``i`` is leaf ``i``, a value that is
    not a leaf is ``n_leaves`` and NULL is ``n_leaves + 1``.
    """

    name: str
    numeric: bool  # Eq. 1: span ratio (True) or distinct-count ratio
    codes: np.ndarray  # int64 per sample row
    null_code: int
    sorted_values: pa.Array | None = None  # value columns: value of each code
    leaf_values: list[Any] | None = None  # hierarchy columns: leaf i as a column value, or None
    n_leaves: int = 0
    span_values: np.ndarray | None = None  # numeric columns: float per non-NULL code
    cuttable: bool = True  # False: its values have no Python form to bind (a date before year 1)
    foldable: bool = False  # hierarchy columns: no two leaves equal in a collation; value columns: the
    # database orders the values as the plan does (Predicate.foldable)
    ranked: bool = False  # codes in the database's own order (_ranked): a larger code, a larger value there

    def cut(self, c: int, next_code: int, low: int = 0) -> tuple[Predicate, Predicate]:
        """The (left, right) predicates of the cut ``code <= c`` (``next_code``: the node's next code).

        ``low``: a hierarchy column's first leaf the node may hold (its
        predicates leave out the leaves before: one past the last cut of
        this column on its way down, on the right). Within the node, the
        leaves ``low..c`` are the side ``code <= c``: listing them from leaf
        0, every cut of a deep path named every leaf before it, and a plan
        of 64 fragments over 100,000 ZIP codes carried 211 MB of them into
        its tasks, metrics and --explain (helper-34)."""
        if next_code == self.null_code:
            return Predicate(self.name, "not_null"), Predicate(self.name, "is_null")
        if self.leaf_values is not None:
            left = tuple(v for v in self.leaf_values[low : c + 1] if v is not None)
            return (Predicate(self.name, "in", left, self.foldable),
                    Predicate(self.name, "not_in_or_null", left, self.foldable))
        value = self.sorted_values[c].as_py()
        return (Predicate(self.name, "le", value, self.foldable),
                Predicate(self.name, "gt_or_null", value, self.foldable))


def _plain(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_dictionary(arr.type):
        arr = arr.cast(arr.type.value_type)
    return arr


def _leaf_values(leaves: list[str], dtype: pa.DataType) -> tuple[list[Any], set[str]]:
    """Each leaf label as a value of a column of type ``dtype`` (None if no value has that text),
    and the labels that are values of the type without a Python form to bind
    (a date before year 1, '-0043-03-15': such a column is left uncut).

    The engine matches a non-string column to a hierarchy through the value's
    text, so value ``v`` is leaf ``label`` iff ``str(v) == label``; an ``IN``
    list on such a column must hold the typed values.
    """
    if is_text(dtype):
        return list(leaves), set()
    out: list[Any] = []
    unbindable: set[str] = set()
    for label in leaves:  # one pass over the hierarchy, not over rows
        try:
            v = _time_scalar(label, dtype) if pa.types.is_time(dtype) else pa.scalar(label, pa.string()).cast(dtype)
            ok = as_text(pa.array([v], dtype))[0].as_py() == label
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            ok = False
        try:
            out.append(v.as_py() if ok else None)
        except (OverflowError, ValueError):
            out.append(None)
            unbindable.add(label)
    return out, unbindable


_TIME_TEXT = re.compile(r"(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?")
_TICKS_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}


def _time_scalar(label: str, dtype: pa.DataType) -> pa.Scalar:
    """A TIME column's value written ``label`` (``10:00:00.000000``, as
    :func:`~sqlanon.domain.as_text` writes it; 24:00:00 has no Python form,
    and is listed in no cut: its rows go to the cuts' right sides, as a
    value that is no leaf does): Arrow casts no text to a
    time, and every leaf of a TIME QI's hierarchy was None, each cut's
    list empty: its left side ``FALSE``, and all rows in the last fragment,
    which the plan had counted a quarter of (helper-155).

    Raises:
        pa.ArrowInvalid: ``label`` is not a time's text.
    """
    m = _TIME_TEXT.fullmatch(label)
    if m is None:
        raise pa.ArrowInvalid(f"not a time: {label!r}")
    h, mi, s, frac = m.groups()
    per_s = _TICKS_PER_SECOND[dtype.unit]
    ticks = ((int(h) * 60 + int(mi)) * 60 + int(s)) * per_s + int((frac or "").ljust(9, "0")) * per_s // 10**9
    if ticks >= 86_400 * per_s:  # SQL's 24:00:00, which Python's time (a bound value) wraps to 00:00:00
        raise pa.ArrowInvalid(f"no Python time: {label!r}")
    return pa.array([ticks], pa.int32() if pa.types.is_time32(dtype) else pa.int64()).cast(dtype)[0]


def _encode(qi: QuasiIdentifier, col: pa.ChunkedArray, unit: float | None,
            present: frozenset[str] | None = None, bytewise: bool | None = None,
            text_order: bool = False, rank: pa.ChunkedArray | None = None) -> _Column:
    """``present``: a hierarchy column's values in the whole source, as
    text; its cuts list only those leaves (the others name no row; a leaf
    that is no value of the column's type, a hierarchy shared with other
    data, failed the server's parsing of the clause: helper-37).
    ``bytewise``: whether the source compares the column's values by their
    bytes (then its lists fold), or under a collation (then they do not);
    ``None``: unknown, told from the leaves (:func:`_apart_under_any_collation`).
    ``text_order``: whether the source orders text by its bytes, as the
    plan does (:attr:`Predicate.foldable` of a value column's cuts).
    ``rank``: a value column's rank of each row's value in the source's own
    order (1 for the smallest, NULL last: :func:`_ranked`); its codes follow
    that order instead of Arrow's."""
    arr = _plain(col)
    kind = resolve_generalization(qi, arr.type)
    if kind == "hierarchy":
        h = qi.hierarchy
        text = as_text(arr)
        enc = pc.dictionary_encode(text)
        import pandas as pd  # lazily: the coordinator rarely needs it

        found = pd.Index(h.leaves, dtype=object).get_indexer(enc.dictionary.to_numpy(zero_copy_only=False))
        n_leaves = h.n_leaves
        null_code = n_leaves + 1
        leaf_values, unbindable = _leaf_values(h.leaves, arr.type)
        # Not a leaf, or a leaf no cut can list (a TIME's 24:00:00, which has
        # no Python form): after the leaves, on every cut's right side, where
        # its SQL sends the rows (24:00:00 listed first was planned in the
        # first fragment and read in the last).
        listed = np.array([v is not None for v in leaf_values] + [False], bool)
        lut = np.where(listed[found], found, n_leaves).astype(np.int64)
        if present is not None:
            leaf_values = [v if label in present else None for label, v in zip(h.leaves, leaf_values)]
            unbindable &= present
        foldable = bytewise if bytewise is not None else _apart_under_any_collation(
            v for v in leaf_values if v is not None)
        col_out = _Column(qi.name, False, np.empty(0, np.int64), null_code, leaf_values=leaf_values,
                          n_leaves=n_leaves, foldable=foldable, cuttable=not unbindable)  # (an IN list's values)
    else:
        # SQL compares -0.0 equal to 0.0 and every NaN equal to NaN; Arrow
        # hashes them apart. One code each keeps sample counts equal to SQL's.
        arr = normalize_floats(arr)
        if rank is not None:
            return _ranked(qi.name, arr, rank, text_order)
        enc = pc.dictionary_encode(arr)
        dictionary = enc.dictionary
        order = pc.array_sort_indices(dictionary).to_numpy()
        lut = np.empty(len(dictionary), np.int64)
        lut[order] = np.arange(len(dictionary), dtype=np.int64)
        null_code = len(dictionary)
        sorted_values = dictionary.take(pa.array(order, pa.int64()))
        numeric = kind == "interval"
        col_out = _Column(qi.name, numeric, np.empty(0, np.int64), null_code, sorted_values=sorted_values,
                          span_values=span_values(sorted_values, unit) if numeric else None,
                          cuttable=_bindable(sorted_values), foldable=text_order or not is_text(arr.type))
    if not col_out.cuttable:  # a run with no other QI was one fragment, whatever --fragments said (helper-34)
        log.warning("quasi-identifier %r holds dates or timestamps outside years 1-9999, which cannot be a "
                    "cut's value: the fragments are not cut on it", qi.name)
    idx = enc.indices
    if idx.null_count:
        codes = np.append(lut, np.int64(null_code))[idx.fill_null(-1).to_numpy(zero_copy_only=False)]
    else:
        codes = lut[idx.to_numpy(zero_copy_only=False)]
    col_out.codes = codes.astype(np.int64, copy=False)
    return col_out


def _ranked(name: str, arr: pa.Array, rank: pa.ChunkedArray, text_order: bool) -> _Column:
    """A text column coded by its values' ranks in the source's order (as
    its database ranked them: ``ranked_sample.sql``), so that a cut
    ``code <= c`` splits the sample as the cut's SQL, ``<= value of c``,
    splits the table: values equal under the column's collation share a
    code; a NULL, ranked after every value, gets the null code."""
    codes = rank.combine_chunks().to_numpy(zero_copy_only=False).astype(np.int64) - 1
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    null_code = int(codes[valid].max()) + 1 if valid.any() else 0
    codes[~valid] = null_code
    # code i's value: any of its values, which the database holds equal (dense ranks: every code has one)
    _, first = np.unique(codes[valid], return_index=True)
    sorted_values = arr.filter(pa.array(valid)).take(pa.array(first, pa.int64()))
    return _Column(name, False, codes, null_code, sorted_values=sorted_values, foldable=text_order, ranked=True)


def _bindable(sorted_values: pa.Array) -> bool:
    """Whether the smallest and largest values have a Python form, to bind
    as a cut's value: dates and timestamps outside years 1-9999 have none
    (such a column is left uncut; the workers generalize it as any other)."""
    try:
        for i in (0, len(sorted_values) - 1) if len(sorted_values) else ():
            sorted_values[i].as_py()
    except (OverflowError, ValueError):
        return False
    return True


def _span(c: _Column, u: np.ndarray) -> float:
    """Span of the sorted distinct codes ``u`` (NULL adds no span)."""
    vals = u[u != c.null_code]
    if vals.size < 2:
        return 0.0
    return float(c.span_values[vals[-1]] - c.span_values[vals[0]])


def _ratio(part: float, whole: float) -> float:
    """Representativity ``part / whole``; 0 when ``whole`` is 0, 1 for inf/inf."""
    if not whole > 0:
        return 0.0
    r = part / whole
    return r if math.isfinite(r) else 1.0


# --------------------------------------------------------------------------
# The strategies.
# --------------------------------------------------------------------------


def _quantile(cols: list[_Column], n: int, workers: int) -> list[tuple[np.ndarray, str, tuple[Predicate, ...]]]:
    """Fig. 4: cut the QI with most distinct values at the W-quantiles of its ranks."""
    n_values = [len(distinct(c.codes)) if c.cuttable else 0 for c in cols]
    j = int(np.argmax(n_values))  # first of the ties: QI order
    if n_values[j] == 0:
        return [(np.arange(n), "0", ())]
    c = cols[j]
    u, cnt = np.unique(c.codes, return_counts=True)
    k = min(workers, len(u)) - 1  # number of cuts
    if k <= 0:
        return [(np.arange(n), "0", ())]
    left_rows = np.cumsum(cnt)[:-1]  # rows left of the boundary after u[i], i = 0..D-2
    if k == len(u) - 1:
        bounds = np.arange(k)
    else:
        targets = n * np.arange(1, workers) / workers
        hi = np.searchsorted(left_rows, targets).clip(0, len(left_rows) - 1)
        lo = (hi - 1).clip(0)
        nearest = np.where(np.abs(left_rows[lo] - targets) < np.abs(left_rows[hi] - targets), lo, hi)
        bounds = np.empty(k, np.int64)
        prev = -1
        for t in range(k):  # strictly increasing, leaving room for the cuts still to place
            prev = bounds[t] = min(max(int(nearest[t]), prev + 1), len(u) - 1 - k + t)
    cut_codes = u[bounds]
    which = np.searchsorted(cut_codes, c.codes, side="left")  # fragment of each row
    sides = [c.cut(int(u[b]), int(u[b + 1])) for b in bounds]
    order = np.argsort(which, kind="stable")
    starts = np.searchsorted(which[order], np.arange(k + 2))
    out = []
    for i in range(k + 1):
        # A value column's fragment i is "above every cut before, within cut i": in a table's text
        # column under a collation the cut values may be in another order than the plan's, and the
        # intervals "above cut i-1, within cut i" overlapped (rows twice: helper-46). Where the
        # database orders them as the plan (Predicate.foldable) the SQL has the interval all the same
        # (_bounds). A hierarchy's lists hold the leaves up to their cut, and cuts made in the database's
        # own order (ranked) are above each other there: one before is enough.
        before = sides[:i] if c.leaf_values is None and not c.ranked else sides[i - 1 : i]
        preds = tuple(right for _, right in before) + (() if i == k else (sides[i][0],))
        out.append((order[starts[i] : starts[i + 1]], str(i), preds))
    return out


def _choose_cut(cols: list[_Column], rows: np.ndarray, w: int, whole: list[float], lows: tuple[int, ...]):
    """The best cut of a node for ``w`` workers: ``(left_mask, w_left, left_pred, right_pred, lows_right)``
    or None (``lows``: per QI, the node's first leaf, :meth:`_Column.cut`; ``lows_right``: the right child's)."""
    best = None
    for j, c in enumerate(cols):  # loop over QIs; the work per QI is vectorized
        if not c.cuttable:
            continue
        codes = c.codes[rows]
        u, cnt = np.unique(codes, return_counts=True)
        if len(u) < 2:
            continue
        rep = _ratio(_span(c, u) if c.numeric else float(len(u)), whole[j])
        miss = np.abs(np.cumsum(cnt)[:-1] - len(rows) * (w // 2) / w)  # distance to the floor(w/2)/w quantile
        # Between equally representative QIs (Eq. 1 leaves the choice open;
        # poker's ten all span their range), the one cut nearest the
        # quantile: the workers' loads are the run's critical path.
        key = (-rep, float(miss.min()), -len(u), j)
        if best is None or key < best[0]:
            best = (key, j, codes, u, miss)
    if best is None:
        return None
    _, j, codes, u, miss = best
    i = int(np.flatnonzero(miss == miss.min())[-1])  # on a tie the larger left side, as "rank <= median"
    w_left = w // 2
    c = cols[j]
    left, right = c.cut(int(u[i]), int(u[i + 1]), lows[j])
    return codes <= u[i], w_left, left, right, lows[:j] + (int(u[i]) + 1,) + lows[j + 1:]


def _mondrian(cols: list[_Column], n: int, workers: int, whole: list[float]):
    """Fig. 5, cutting a node for ``w`` workers at its ``floor(w/2)/w`` quantile."""
    out = []
    stack = [(np.arange(n), workers, "", (), (0,) * len(cols))]
    while stack:  # depth first, left before right: fragments come out left to right
        rows, w, path, preds, lows = stack.pop()
        cut = _choose_cut(cols, rows, w, whole, lows) if w > 1 else None
        if cut is None:
            out.append((rows, path, preds))
            continue
        mask, w_left, left, right, lows_right = cut
        stack.append((rows[~mask], w - w_left, path + "1", preds + (right,), lows_right))
        stack.append((rows[mask], w_left, path + "0", preds + (left,), lows))
    return out


def _estimates(sample_rows: np.ndarray, total: int, n: int) -> np.ndarray:
    """Scale sample counts to ``total`` rows, largest remainder first, summing to ``total``."""
    if n == 0:
        out = np.zeros(len(sample_rows), np.int64)
        out[0] = total
        return out
    exact = sample_rows.astype(np.float64) * total / n
    base = np.floor(exact).astype(np.int64)
    extra = total - int(base.sum())
    if extra > 0:
        base[np.argsort(-(exact - base), kind="stable")[:extra]] += 1
    return base


def plan_fragments(
    sample: pa.Table,
    spec: AnonymizationSpec,
    workers: int,
    strategy: str = "mondrian",
    total_rows: int | None = None,
    stats: Mapping[str, ColumnStats] | None = None,
    bytewise: Mapping[str, bool] | None = None,
    text_order: bool = False,
    order: Mapping[str, pa.ChunkedArray] | None = None,
) -> Plan:
    """Plan the fragments of a source from a sample of it.

    Args:
        sample: rows sampled from the source (at least the QI columns, with
            the source's types).
        spec: the quasi-identifiers (their hierarchies and generalizations
            fix the order of their values).
        workers: the number of fragments wanted, W >= 1.
        strategy: ``mondrian`` (Fig. 5, balanced for any W) or ``quantile`` (Fig. 4).
        total_rows: the source's row count, to scale ``estimated_rows``; the
            sample's row count when omitted.
        stats: dataset-wide :class:`~sqlanon.engine.ColumnStats` per QI for
            Eq. 1 (``range`` for interval columns, ``n_distinct`` otherwise);
            the sample's own when omitted. Ignored by ``quantile``, but for
            their ``present`` values: both strategies' hierarchy cuts list
            only the leaves the source holds.
        bytewise: per QI, whether the source compares its values by their
            bytes (a file; a PostgreSQL column of a deterministic collation)
            or under a collation that may hold different texts equal (a
            nondeterministic one, citext); a fragment's lists of one column
            are merged into one only in the first case (for a QI not named:
            when no two of its hierarchy's leaves could be equal in any
            collation).
        text_order: whether the source orders text by its bytes, as the
            plan does (a file; a table's column may have a collation that
            orders it otherwise): then a fragment's bounds on a text column
            are written as its tightest two (:func:`where_sql`), as those
            of other types always are.
        order: per text QI of a table, each sample row's rank in the
            source's own order of the column (``ranked_sample.sql``): the
            plan cuts in that order. A table's column may have a collation
            (NOCASE, ICU, a case-insensitive MySQL one) that orders text
            otherwise than its bytes, the plan's order without it: cut by
            the bytes, 8 fragments of 20,000 names under NOCASE held 5 to
            5,143 rows (mondrian), or none (quantile).

    Returns:
        A :class:`Plan` of **at most** W fragments: fewer when the sample has
        too few distinct values (a node whose QIs all have one value in the
        sample cannot be cut; ``quantile`` makes at most as many fragments as
        its attribute has distinct values), and one fragment with no
        predicates for an empty sample or W = 1.

    Raises:
        ConfigError: bad ``workers``, ``strategy`` or ``total_rows``, or
            ``stats`` misses a QI.
        InputError: the sample lacks a QI column.
    """
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ConfigError(f"workers must be an integer >= 1, got {workers!r}")
    workers = int(workers)
    if strategy not in STRATEGIES:
        raise ConfigError(
            f"unknown fragmentation strategy {strategy!r}{suggest(str(strategy), STRATEGIES)}; "
            f"choose one of {', '.join(STRATEGIES)}"
        )
    if total_rows is not None and (isinstance(total_rows, bool) or not isinstance(total_rows, (int, np.integer)) or total_rows < 0):
        raise ConfigError(f"total_rows must be an integer >= 0, got {total_rows!r}")
    names = sample.column_names
    for q in spec.quasi_identifiers:
        if q.name not in names:
            raise InputError(f"column {q.name!r} is not in the sample{suggest(q.name, names)}; it has: {', '.join(names)}")
    n = sample.num_rows
    total = n if total_rows is None else int(total_rows)

    if n == 0 or workers == 1:
        parts = [(np.arange(n), "" if strategy == "mondrian" else "0", ())]
    else:
        if stats is not None and strategy == "mondrian":
            missing = [q.name for q in spec.quasi_identifiers if q.name not in stats]
            if missing:
                raise ConfigError(f"no dataset statistics for quasi-identifier(s) {', '.join(map(repr, missing))}")
        present = {name: s.present for name, s in stats.items()} if stats is not None else {}
        if strategy != "mondrian":
            stats = None  # the sample's own span units
        bytewise = bytewise or {}
        order = order or {}
        cols = [_encode(q, sample.column(q.name), stats[q.name].unit if stats else None, present.get(q.name),
                        bytewise.get(q.name), text_order, order.get(q.name)) for q in spec.quasi_identifiers]
        if strategy == "quantile":
            parts = _quantile(cols, n, workers)
        else:
            if stats is not None:
                whole = [stats[c.name].range if c.numeric else float(stats[c.name].n_distinct) for c in cols]
            else:
                whole = []
                for c in cols:
                    u = distinct(c.codes)
                    whole.append(_span(c, u) if c.numeric else float(len(u)))
            parts = _mondrian(cols, n, workers, whole)

    sizes = np.array([len(rows) for rows, _, _ in parts], np.int64)
    est = _estimates(sizes, total, n)
    fragments = tuple(
        Fragment(id=i, predicates=preds, path=path, sample_rows=int(sizes[i]), estimated_rows=int(est[i]))
        for i, (_, path, preds) in enumerate(parts)
    )
    return Plan(strategy, fragments)
