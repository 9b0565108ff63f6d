"""Generalization hierarchies for categorical quasi-identifiers.

A hierarchy is a tree whose leaves are the values an attribute takes and whose
internal nodes are the more general values they can be replaced with (Fig. 1
of the distributed Mondrian paper: countries -> continents -> World). Two file
formats are read, chosen by extension:

* ``.json``: nested ``{"cat": NAME, "subcats": [children] | null}`` nodes.
* ``.csv``: ARX's "levels" format, one row per leaf value listing the value and
  then its ancestors up to the root, ``;``-separated (``,`` is accepted when
  the first line has no ``;``).

Both become a :class:`Hierarchy`: flat numpy arrays indexed by node id, with
the leaves numbered in depth-first order. In that order every node covers a
contiguous range ``[first_leaf, last_leaf]`` of leaf indices, so Mondrian can
cut a categorical attribute like a numeric one (on leaf indices) and siblings
stay together, and the lowest common ancestor of a partition's values depends
only on its smallest and largest leaf index (:meth:`Hierarchy.lca`).

Example:
    >>> h = load_hierarchy("hierarchies/countries.json")  # doctest: +SKIP
    >>> codes = h.leaf_codes(["Italy", "France"], column="native-country")  # doctest: +SKIP
    >>> h.names[h.lca(codes.min(keepdims=True), codes.max(keepdims=True))[0]]  # doctest: +SKIP
    'Europe'
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import os
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from io import StringIO
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from sqlanon.domain import as_text
from sqlanon.errors import HierarchyError

__all__ = ["Hierarchy", "load_hierarchy"]

#: Label of the root added to a CSV hierarchy whose last column is not one
#: common value.
IMPLICIT_ROOT = "*"

#: How many offending values an error message lists before "(and N more)".
_MAX_LISTED = 5


def _visible(text: str) -> str:
    """``text`` without the characters that print as nothing: format and
    control characters (a BOM, a zero-width space, a NUL)."""
    return "".join(ch for ch in text if unicodedata.category(ch) not in ("Cf", "Cc"))


def _list_values(values: Sequence[Any]) -> str:
    """Render values for a one-line message: sorted, repr-quoted, at most five.

    Args:
        values: The distinct offending values.

    Returns:
        ``'a', 'b', 'c'`` (by text, nulls last) followed by ``(and N more)``
        past five values.
    """
    ordered = sorted(values, key=lambda v: (v is None, str(v)))
    text = ", ".join(repr(v) for v in ordered[:_MAX_LISTED])
    if len(ordered) > _MAX_LISTED:
        text += f" (and {len(ordered) - _MAX_LISTED} more)"
    return text


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """A generalization hierarchy stored as flat arrays indexed by node id.

    Node ids follow the depth-first pre-order of the tree (children in file
    order for JSON, in first-appearance order for CSV), so node 0 is the root.
    Leaves are numbered in the same depth-first order; the leaf index of a
    value is its position in :attr:`leaves`. Every node covers the contiguous
    leaf range ``[first_leaf[node], last_leaf[node]]``. All arrays are
    read-only.

    Attributes:
        source: The file path as given to :func:`load_hierarchy`, for messages.
        names: Node id -> label. Labels may repeat across nodes (a leaf and an
            internal node, or two internal nodes); leaf labels are unique.
        parent: int32, node id -> parent node id; -1 for the root.
        depth: int32, node id -> depth; 0 for the root.
        first_leaf: int32, node id -> index of the first leaf under it.
        last_leaf: int32, node id -> index of the last leaf under it
            (inclusive).
        leaves: Leaf labels in leaf (depth-first) order.
        leaf_node: int32, leaf index -> node id.
    """

    source: str
    names: list[str]
    parent: np.ndarray
    depth: np.ndarray
    first_leaf: np.ndarray
    last_leaf: np.ndarray
    leaves: list[str]
    leaf_node: np.ndarray

    def __repr__(self) -> str:
        """Summarize instead of dumping every array."""
        return (
            f"Hierarchy(source={self.source!r}, nodes={len(self.names)}, "
            f"leaves={self.n_leaves}, height={int(self.depth.max())})"
        )

    @property
    def n_leaves(self) -> int:
        """Number of leaves (the size of the attribute's domain)."""
        return len(self.leaves)

    @cached_property
    def fingerprint(self) -> str:
        """SHA-256 of the tree itself (labels and parents, in node order):
        the same for the same hierarchy whatever file or format held it, and
        different as soon as a label or an edge changes. The metrics record
        it, so an audit can tell which hierarchy a run applied even after
        the file at that path was edited."""
        tree = json.dumps([self.names, self.parent.tolist()], ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(tree.encode("utf-8")).hexdigest()

    @cached_property
    def _leaf_index(self):
        """Leaf label -> leaf index lookup, a ``pandas.Index`` (built on first use)."""
        import pandas as pd

        return pd.Index(self.leaves, dtype=object)

    def leaf_codes(self, values: Any, *, column: str | None = None) -> np.ndarray:
        """Map values to their leaf indices.

        The work is vectorized: numpy/pandas input is factorized and only the
        distinct values are looked up (``Index.get_indexer``); Arrow input goes
        through ``pyarrow.compute.index_in``. Integer input is compared through
        its decimal text, so a numeric ``age`` column matches the ``"39"``
        leaves of an ARX age hierarchy. Nulls never match.

        Args:
            values: A sequence, numpy array, pandas Series or pyarrow array of
                strings.
            column: Column name used in the error message.

        Returns:
            int32 array of leaf indices, one per value.

        Raises:
            HierarchyError: Some values are not leaves of this hierarchy. The
                message names the file, up to five missing values (sorted,
                repr-quoted) with "(and N more)", and the column.
        """
        if isinstance(values, (pa.Array, pa.ChunkedArray)):
            return self._arrow_leaf_codes(values, column)
        import pandas as pd  # lazily: keeps pandas out of the coordinator's start-up

        if not isinstance(values, (np.ndarray, pd.Series, pd.Index)):
            values = np.asarray(values, dtype=object)
        codes, uniques = pd.factorize(values, use_na_sentinel=False)
        uniques = np.asarray(uniques)
        if uniques.dtype.kind in "iu":
            uniques = uniques.astype(str)
        elif uniques.dtype.kind == "O":
            # Python ints, or a nullable Int64 column; a loop over the
            # distinct values only.
            uniques = np.array(
                [
                    str(v)
                    if isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                    else v
                    for v in uniques
                ],
                dtype=object,
            )
        found = self._leaf_index.get_indexer(uniques.astype(object, copy=False))
        missing = found < 0
        if missing.any():
            bad = [None if pd.isna(v) else v for v in uniques[missing].tolist()]
            self._raise_missing(bad, column)
        return found.astype(np.int32)[codes]

    @cached_property
    def _leaf_array(self) -> pa.Array:
        """The leaves as an Arrow string array, for ``pyarrow.compute``."""
        return pa.array(self.leaves, type=pa.string())

    def _arrow_leaf_codes(
        self, values: pa.Array | pa.ChunkedArray, column: str | None
    ) -> np.ndarray:
        """:meth:`leaf_codes` for Arrow input, without leaving Arrow (its
        values as text as the engine writes them: domain.as_text)."""
        if not pa.types.is_string(values.type):
            values = as_text(values)
        found = pc.index_in(values, value_set=self._leaf_array)
        if found.null_count:
            bad = pc.unique(pc.filter(values, pc.is_null(found))).to_pylist()
            self._raise_missing(bad, column)
        return np.asarray(found.to_numpy(), dtype=np.int32)

    def _raise_missing(self, bad: list[Any], column: str | None) -> None:
        """Raise the "no leaf for value(s)" error for the distinct ``bad``
        values, naming a leaf that differs from one only by blanks around
        it, its case or its Unicode form: a value and a leaf that print
        alike ('café' composed and decomposed) baffled (helper-66)."""
        where = f" of column {column!r}" if column is not None else ""
        raise HierarchyError(
            f"hierarchy {self.source!r} has no leaf for value(s) "
            f"{_list_values(bad)}{where}{self._near_leaves(bad)}"
        )

    def _near_leaves(self, bad: list[Any]) -> str:
        """``; 'a' differs from the leaf 'a ' only by …`` for the values of
        ``bad`` the error lists, or ''."""
        ways = {"blanks around it": str.strip, "case": str.casefold,
                "its Unicode form (composed or decomposed)": lambda v: unicodedata.normalize("NFC", v),
                # a BOM, a NUL, a zero-width space: invisible where the error prints (helper-191)
                "characters that print as nothing ('\\ufeff', '\\x00', '\\u200b')": _visible}
        listed = sorted((v for v in bad if isinstance(v, str)), key=str)[:_MAX_LISTED]
        if not listed:
            return ""
        found: dict[str, str] = {}
        groups = set(self.names) - set(self.leaves)
        for v in listed:  # data coarsened upstream: a value is a group's name (helper-113)
            if v in groups:
                found[v] = (f"{v!r} is a group of the hierarchy, not a leaf (map it to one of its leaves, or drop "
                            "those rows)")
        for how, loose in ways.items():
            index: dict[str, str] = {}
            for leaf in self.leaves:
                index.setdefault(loose(leaf), leaf)
            for v in listed:
                if v not in found and loose(v) in index:
                    found[v] = f"{v!r} differs from the leaf {index[loose(v)]!r} only by {how}"
        return f"; {', '.join(found[v] for v in listed if v in found)}" if found else ""

    def lca(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Lowest common ancestors of leaf ranges, vectorized.

        Because every node covers a contiguous leaf range and ancestors of
        leaf ``lo`` all start at or before ``lo``, the lowest common ancestor
        of the leaves in ``[lo, hi]`` is the first ancestor of ``lo`` whose
        range reaches ``hi``. All elements climb together, one tree level per
        numpy step, so the loop runs at most ``height`` times.

        Args:
            lo: Leaf indices, the smallest leaf of each range.
            hi: Leaf indices, the largest leaf of each range (``lo <= hi``);
                broadcast against ``lo``.

        Returns:
            int32 array of node ids with the broadcast shape of ``lo``/``hi``.

        Raises:
            IndexError: A leaf index is outside ``[0, n_leaves)``.
            ValueError: Some ``lo`` is greater than its ``hi``.
        """
        lo_arr, hi_arr = np.broadcast_arrays(
            np.asarray(lo, dtype=np.intp), np.asarray(hi, dtype=np.intp)
        )
        shape = lo_arr.shape
        lo_flat = lo_arr.ravel()
        hi_flat = hi_arr.ravel()
        if lo_flat.size == 0:
            return np.empty(shape, dtype=np.int32)
        if min(lo_flat.min(), hi_flat.min()) < 0 or max(
            lo_flat.max(), hi_flat.max()
        ) >= self.n_leaves:
            raise IndexError(
                f"leaf index out of range [0, {self.n_leaves}) for hierarchy "
                f"{self.source}"
            )
        if (lo_flat > hi_flat).any():
            raise ValueError(f"lca needs lo <= hi (hierarchy {self.source})")
        node = self.leaf_node[lo_flat]  # fancy indexing: a writable copy
        active = np.flatnonzero(self.last_leaf[node] < hi_flat)
        while active.size:
            up = self.parent[node[active]]
            node[active] = up
            active = active[self.last_leaf[up] < hi_flat[active]]
        return node.astype(np.int32, copy=False).reshape(shape)

    @cached_property
    def shown_as(self) -> np.ndarray:
        """int32, node id -> the node its label names to a reader: the
        shallowest node of that label. Groups may share a label across
        levels (``a;*;*``): a class generalized to the inner ``*`` reads as
        the root, and is charged NCP for what it reads as (helper-8)."""
        first: dict[str, int] = {}
        return np.array([first.setdefault(name, node) for node, name in enumerate(self.names)], np.int32)

    def leaves_under(self, nodes: np.ndarray) -> np.ndarray:
        """Number of leaves under each node (1 for a leaf).

        This is ``|v̂|`` of the NCP metric for categorical attributes.

        Args:
            nodes: Node ids.

        Returns:
            int64 array ``last_leaf - first_leaf + 1``, shaped like ``nodes``.
        """
        nodes = np.asarray(nodes, dtype=np.intp)
        return (
            self.last_leaf[nodes].astype(np.int64)
            - self.first_leaf[nodes]
            + 1
        )


# --------------------------------------------------------------------------
# Building the arrays from a tree given as labels + ordered children lists.
# --------------------------------------------------------------------------


def _frozen(values: list[int] | np.ndarray) -> np.ndarray:
    """Return a read-only int32 array."""
    arr = np.asarray(values, dtype=np.int32)
    arr.setflags(write=False)
    return arr


def _frozen_hierarchy(source: str, names: list[str], parent, depth, first_leaf, last_leaf, leaves: list[str],
                      leaf_node) -> Hierarchy:
    """The hierarchy of these arrays (lists or numpy arrays), read-only int32."""
    return Hierarchy(source=source, names=names, parent=_frozen(parent), depth=_frozen(depth),
                     first_leaf=_frozen(first_leaf), last_leaf=_frozen(last_leaf), leaves=leaves,
                     leaf_node=_frozen(leaf_node))


def _refuse_empty_groups(source: str, names: list[str], parent) -> None:
    """Refuse a group named '' (a JSON file's; a CSV file has no empty cell):
    its rows were published as the empty text, a value of the data, where
    only a leaf may be empty, for the data's own empty text (helper-84).
    ``parent``: a list or numpy array."""
    if "" not in names:
        return
    parent = np.asarray(parent).tolist()
    groups = set(parent[1:])
    empty = next((i for i, name in enumerate(names) if name == "" and i in groups), None)
    if empty is not None:
        where = "the root" if empty == 0 else f"a group under {' > '.join(_path(names, parent, parent[empty]))}"
        raise HierarchyError(f"hierarchy file {source!r} names {where} '': its rows would be published as the empty "
                             "text, a value of the data; name it (only a leaf may be empty)")


def _refuse_reused_names(source: str, names: list[str], parent: list[int]) -> None:
    """Refuse a name given to two nodes unless one is the other's ancestor
    and, when the name is a leaf's (a value of the data), both stand for that
    leaf alone (a group named as its only member, ARX's ``Male;Male;*``):
    rows generalized to a group named as a leaf outside it, or as one of
    several leaves below it, would be published under that leaf's value.
    Groups may share a label across levels (``*`` at two levels).

    Raises:
        HierarchyError: naming the value and the two places it is used.
    """
    nodes: dict[str, list[int]] = {}
    for node, name in enumerate(names):
        nodes.setdefault(name, []).append(node)
    leaves: list[int] | None = None
    for name, ids in nodes.items():
        if len(ids) < 2:
            continue
        for a, b in itertools.combinations(ids, 2):  # pre-order: a < b, so only a can be b's ancestor
            up = b
            while up > a:
                up = parent[up]
            if up != a:
                where = [" > ".join(_path(names, parent, x)) for x in (a, b)]
                # Paths that print alike ('G > x; G > x'; helper-84): siblings, or
                # children of two groups of one name (helper-85).
                places = f"{where[0]}; {where[1]}"
                if where[0] == where[1] and parent[a] == parent[b]:
                    places = (f"{where[0]}, twice among the children of "
                              f"{' > '.join(_path(names, parent, parent[a])) if parent[a] > 0 else 'the root'}")
                elif where[0] == where[1]:
                    places = f"{where[0]}, under two different groups named {names[parent[a]]!r}"
                raise HierarchyError(
                    f"hierarchy file {source!r} uses the value {name!r} for two different nodes ({places}): rows "
                    "generalized to one would read as the other; rename one"
                )
        if ids[-1] + 1 < len(parent) and parent[ids[-1] + 1] == ids[-1]:
            continue  # the deepest has children (pre-order: a first child follows its parent): groups only
        leaves = leaves or _leaf_counts(parent)
        for group in ids[:-1]:
            if leaves[group] > 1:
                raise HierarchyError(
                    f"hierarchy file {source!r}: the group {' > '.join(_path(names, parent, group))!r} has the "
                    f"name of one of its {leaves[group]} leaves ({' > '.join(_path(names, parent, ids[-1]))}): "
                    f"rows of the others generalized to the group would be published as {name!r}; rename the group"
                )


def _leaf_counts(parent: list[int]) -> list[int]:
    """The number of leaves under each node of a pre-order tree (node 0 the root)."""
    counts = [0] * len(parent)
    has_child = [False] * len(parent)
    for node in range(len(parent) - 1, 0, -1):  # children come after their parent
        if not has_child[node]:
            counts[node] += 1
        has_child[parent[node]] = True
        counts[parent[node]] += counts[node]
    return counts


def _path(names: list[str], parent: list[int], node: int) -> list[str]:
    """The labels from the root's child down to ``node`` (the root's own for the root)."""
    out = []
    while node > 0:
        out.append(names[node])
        node = parent[node]
    return out[::-1] or [names[0]]


def _refuse_duplicate_leaves(source: str, names: list[str], parent: list[int], leaves: list[str],
                             leaf_node: list[int]) -> None:
    """Refuse two leaves with one label, naming both by their paths.

    Raises:
        HierarchyError: at the first leaf (in leaf order) whose label an earlier leaf has.
    """
    seen: dict[str, int] = {}
    for leaf, node in zip(leaves, leaf_node):
        first = seen.setdefault(leaf, node)
        if first != node:  # where, as a CSV file's error says its lines (helper-66)
            where = " and ".join(" > ".join(_path(names, parent, x)) for x in (first, node))
            raise HierarchyError(f"hierarchy file {source!r} has duplicate leaf value {leaf!r} ({where})")


def _build(source: str, labels: list[str], children: list[list[int]]) -> Hierarchy:
    """Number a tree depth-first and compute its flat arrays.

    Args:
        source: The file path, for messages.
        labels: Temporary node id -> label; temporary id 0 is the root.
        children: Temporary node id -> ordered child ids.

    Returns:
        The hierarchy, with node ids renumbered in depth-first pre-order.

    Raises:
        HierarchyError: Two leaves have the same label.
    """
    n = len(labels)
    names: list[str] = []
    parent: list[int] = []
    depth: list[int] = []
    first_leaf: list[int] = []
    leaves: list[str] = []
    leaf_node: list[int] = []
    # Iterative pre-order walk (no recursion limit on deep trees).
    stack: list[tuple[int, int, int]] = [(0, -1, 0)]
    while stack:
        old, new_parent, d = stack.pop()
        new = len(names)
        names.append(labels[old])
        parent.append(new_parent)
        depth.append(d)
        first_leaf.append(len(leaves))
        kids = children[old]
        if kids:
            stack.extend((kid, new, d + 1) for kid in reversed(kids))
        else:
            leaf_node.append(new)
            leaves.append(labels[old])
    # In pre-order a subtree is a contiguous block of ids after its root, so
    # a node's last leaf is the largest last leaf among its descendants:
    # propagate from the highest id (deepest, rightmost) down to the root.
    last_leaf = [-1] * n
    for leaf_idx, node in enumerate(leaf_node):
        last_leaf[node] = leaf_idx
    for node in range(n - 1, 0, -1):
        p = parent[node]
        if last_leaf[node] > last_leaf[p]:
            last_leaf[p] = last_leaf[node]

    _refuse_empty_groups(source, names, parent)
    _refuse_duplicate_leaves(source, names, parent, leaves, leaf_node)
    _refuse_reused_names(source, names, parent)
    return _frozen_hierarchy(source, names, parent, depth, first_leaf, last_leaf, leaves, leaf_node)


def _from_preorder(
    source: str, names: list[str], parent: np.ndarray, depth: np.ndarray, labels: pa.Array | None = None
) -> Hierarchy:
    """:func:`_build` for a tree already numbered in pre-order, a tree level
    at a time instead of a node at a time: the fast readers of both formats
    end here. A ZIP-code or ICD-10 hierarchy of 500,000 leaves took 5-6 s
    and a 650 MB peak in per-node Python (1.0-1.6 s and 340 MB this way:
    hierarchies/README.md, "Size"). The same checks as :func:`_build`; its
    per-node code runs only to word an error.

    Args:
        source: The file path, for messages.
        names: Node id -> label, in depth-first pre-order (node 0 the root).
        parent: int32, node id -> parent id (-1 for the root).
        depth: int32, node id -> depth.
        labels: ``names`` as an Arrow string array, when the reader has it.

    Raises:
        HierarchyError: Two leaves have the same label, or a label is
            reused as :func:`_refuse_reused_names` refuses.
    """
    _refuse_empty_groups(source, names, parent)
    n = len(names)
    is_leaf = np.ones(n, dtype=bool)
    is_leaf[parent[1:]] = False
    leaf_node = np.flatnonzero(is_leaf).astype(np.int32)
    first_leaf = (np.cumsum(is_leaf) - is_leaf).astype(np.int32)  # leaves before the node
    last_leaf = np.empty(n, dtype=np.int32)
    last_leaf[leaf_node] = np.arange(leaf_node.size, dtype=np.int32)
    # A group's last leaf is its last child's, deepest level first. Within a
    # level, nodes in id order have their parents in id order, so a parent's
    # last child is where the parent changes: one write per parent.
    by_depth = np.argsort(depth, kind="stable")
    height = int(depth.max())
    bounds = np.searchsorted(depth, np.arange(height + 2), sorter=by_depth)
    for d in range(height, 0, -1):
        nodes = by_depth[bounds[d]:bounds[d + 1]]
        up = parent[nodes]
        last = np.append(up[1:] != up[:-1], True)
        last_leaf[up[last]] = last_leaf[nodes[last]]
    leaves = [names[i] for i in leaf_node.tolist()]
    if len(set(leaves)) < len(leaves):
        _refuse_duplicate_leaves(source, names, parent.tolist(), leaves, leaf_node.tolist())
    if len(set(names)) < n:
        codes = pc.dictionary_encode(pa.array(names, pa.string()) if labels is None else labels).indices
        if _may_refuse_reused_names(codes.to_numpy(), is_leaf, first_leaf, last_leaf, leaf_node):
            _refuse_reused_names(source, names, parent.tolist())
    return _frozen_hierarchy(source, names, parent, depth, first_leaf, last_leaf, leaves, leaf_node)


def _may_refuse_reused_names(
    codes: np.ndarray, is_leaf: np.ndarray, first_leaf: np.ndarray, last_leaf: np.ndarray, leaf_node: np.ndarray
) -> bool:
    """Whether :func:`_refuse_reused_names` would refuse the tree, decided
    with array operations over the nodes whose label another node has (ARX
    files reuse labels across levels: ``Male;Male;*``, ``*`` twice).

    Args:
        codes: Node id -> label code (equal labels, equal codes).
        is_leaf, first_leaf, last_leaf, leaf_node: The tree's arrays.

    Returns:
        True when two nodes of one label are not one above the other, or the
        lowest of them is a leaf and another has more than one leaf.
    """
    nodes = np.flatnonzero(np.bincount(codes)[codes] > 1)
    nodes = nodes[np.argsort(codes[nodes], kind="stable")]  # by label, then by id
    label = codes[nodes]
    same = label[1:] == label[:-1]
    # Every pair above one another <=> each one above the next: a is above b
    # when b lies in a's block of pre-order ids, which ends at a's last leaf.
    end = leaf_node[last_leaf]
    if (nodes[1:][same] > end[nodes[:-1][same]]).any():
        return True
    lowest = np.append(~same, True)
    group = np.cumsum(np.append(True, ~same)) - 1
    leafy = is_leaf[nodes[lowest]][group]
    return bool((leafy & ~lowest & (last_leaf[nodes] > first_leaf[nodes])).any())


# --------------------------------------------------------------------------
# File formats.
# --------------------------------------------------------------------------


def _read_text(source: str) -> str:
    """Read a hierarchy file as UTF-8 (a leading BOM is dropped).

    Raises:
        HierarchyError: The file is missing, unreadable or not UTF-8.
    """
    try:
        with open(source, encoding="utf-8-sig", newline="") as fh:
            return fh.read()
    except FileNotFoundError:
        # '--hierarchy a=x.json,b=y.csv' read as one file name (helper-201)
        hint = ("; give each column its own --hierarchy COLUMN=FILE" if re.search(r",[^,=]+=", str(source))
                else "")
        raise HierarchyError(f"hierarchy file {str(source)!r} not found{hint}") from None
    except UnicodeDecodeError as exc:
        raise HierarchyError(
            f"hierarchy file {source!r} is not valid UTF-8 (byte {exc.start})"
        ) from exc
    except OSError as exc:
        raise HierarchyError(
            f"cannot read hierarchy file {source!r}: {exc.strerror or exc}"
        ) from exc


def _json_label(source: str, node: dict[str, Any], where: str) -> str:
    """Return a JSON node's ``cat`` as a string (numbers are coerced).

    Raises:
        HierarchyError: ``cat`` is missing or not a string or number.
    """
    if "cat" not in node:
        raise HierarchyError(f'hierarchy file {source!r}: node {where} has no "cat"')
    cat = node["cat"]
    if isinstance(cat, str):
        return cat
    if isinstance(cat, float):
        # As a float column's values are written and matched: 18.0 is "18"
        # (str() would give "18.0" and match no value), 1e-07 "1e-7".
        return as_text(pa.array([cat], pa.float64()))[0].as_py()
    if isinstance(cat, int) and not isinstance(cat, bool):
        return str(cat)
    raise HierarchyError(
        f'hierarchy file {source!r}: node {where} has "cat" {cat!r}, '
        "expected a string or a number"
    )


def _json_preorder(source: str, doc: dict[str, Any]) -> Hierarchy | None:
    """Read a parsed JSON tree straight into pre-order arrays, with the
    least work per node (a loop over 500,000 nodes); None as soon as a node
    breaks a rule, for :func:`_parse_json`'s walk to word the error.
    """
    names: list[str] = []
    parent: list[int] = []
    depth: list[int] = []
    stack: list[tuple[Any, int, int]] = [(doc, -1, 0)]
    repeat = itertools.repeat
    while stack:
        node, up, d = stack.pop()
        if type(node) is not dict:
            return None
        cat = node.get("cat")
        if type(cat) is not str:
            if type(cat) not in (int, float):  # bool, None (or no "cat"), a list...
                return None
            cat = _json_label(source, node, "")
        subcats = node.get("subcats")
        keys = len(node)
        if keys > 2 or (keys == 2 and subcats is None and "subcats" not in node):
            return None  # a key other than "cat" and "subcats"
        me = len(names)
        names.append(cat)
        parent.append(up)
        depth.append(d)
        if subcats:
            if type(subcats) is not list:
                return None
            stack.extend(zip(reversed(subcats), repeat(me), repeat(d + 1)))
        elif subcats is not None and type(subcats) is not list:
            return None
    return _from_preorder(source, names, np.array(parent, dtype=np.int32), np.array(depth, dtype=np.int32))


def _parse_json(source: str, text: str) -> Hierarchy:
    """Parse the ``{"cat": NAME, "subcats": [...] | null}`` tree format.

    Raises:
        HierarchyError: The text is not JSON or a node is malformed.
    """
    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        node = dict(pairs)
        if len(node) < len(pairs):  # json keeps the last one: a second "subcats" dropped the first's leaves
            keys = [k for k, _ in pairs]
            twice = next(k for k in keys if keys.count(k) > 1)
            raise HierarchyError(f"hierarchy file {source!r} has a node with the key {twice!r} twice")
        return node

    try:
        doc = json.loads(text, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        raise HierarchyError(
            f"hierarchy file {source!r} is not valid JSON: {exc.msg} "
            f"(line {exc.lineno}, column {exc.colno})"
        ) from exc
    except RecursionError as exc:
        raise HierarchyError(
            f"hierarchy file {source!r} is nested too deeply to parse"
        ) from exc
    if not isinstance(doc, dict):
        raise HierarchyError(
            f'hierarchy file {source!r}: the top level must be a {{"cat": ..., '
            f'"subcats": [...]}} object, not {type(doc).__name__}'
        )
    fast = _json_preorder(source, doc)
    if fast is not None:
        return fast
    # A node breaks a rule: this walk words the error.
    labels: list[str] = []
    children: list[list[int]] = []
    # (json node, temporary id, path of labels from the root, for messages)
    todo: list[tuple[dict[str, Any], int, str]] = []

    def add(node: Any, parent_path: str | None, index: int) -> int:
        where = "root" if parent_path is None else f"#{index + 1} under {parent_path}"
        if not isinstance(node, dict):
            raise HierarchyError(
                f"hierarchy file {source!r}: node {where} is of type "
                f"{type(node).__name__}, expected an object"
            )
        label = _json_label(source, node, where)
        path = repr(label) if parent_path is None else f"{parent_path} > {label!r}"
        unknown = sorted(set(node) - {"cat", "subcats"})
        if unknown:  # a misspelt "subcat" left the node a leaf: its values were 'not in the hierarchy'
            from .config import suggest

            raise HierarchyError(f'hierarchy file {source!r}: node {path} has the key {unknown[0]!r}'
                                 f'{suggest(unknown[0], ["cat", "subcats"])}; a node has "cat" and "subcats" only')
        labels.append(label)
        children.append([])
        todo.append((node, len(labels) - 1, path))
        return len(labels) - 1

    add(doc, None, 0)
    while todo:
        node, nid, path = todo.pop()
        subcats = node.get("subcats")
        if subcats is None:
            continue
        if not isinstance(subcats, list):
            raise HierarchyError(
                f'hierarchy file {source!r}: "subcats" of node {path} is of type '
                f"{type(subcats).__name__}, expected a list or null"
            )
        children[nid] = [add(child, path, i) for i, child in enumerate(subcats)]
    return _build(source, labels, children)


#: The characters ``str.isspace()`` (and so ``str.strip()``) takes for blanks, which RE2 has no class for.
_BLANKS = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
#: A cell of blanks only (RE2 syntax).
_BLANK_CELL = f"^[{_BLANKS}]+$"


def _csv_levels(source: str, text: str) -> Hierarchy | None:
    """Read a CSV levels file with column-at-a-time work (Arrow's CSV reader
    when no cell is quoted, else the csv module in C), then build the tree
    from whole columns. None when the file breaks a rule (or is too odd to
    be sure of: a quoted cell of blanks alone, a text over 1 GB), for
    :func:`_parse_csv`'s row-by-row reader to word the error.
    """
    if len(text) > 2**30 or "\x00" in text:
        return None
    first = next((ln for ln in StringIO(text, newline="") if ln.strip()), None)
    if first is None:
        return None
    delimiter = ";" if ";" in first or "," not in first else ","
    columns = _arrow_columns(text, delimiter, first.count(delimiter) + 1) if '"' not in text else None
    if columns is None:
        columns = _csv_module_columns(text, delimiter)
    if columns is None or any(pc.any(pc.equal(pc.binary_length(col), 0)).as_py() for col in columns):
        return None  # ragged, an empty cell or not valid CSV
    if len(columns) == 1 and any(pc.all(pc.match_substring(columns[0], sep)).as_py() for sep in ("\t", "|")):
        return None  # tab or pipe separated
    return _csv_tree(source, columns)


def _arrow_columns(text: str, delimiter: str, width: int) -> list[pa.Array] | None:
    """The columns of a file without quotes, by Arrow's CSV reader, which
    splits at the delimiter and at line ends (LF, CR LF, CR) only and skips
    empty lines, as the csv module reads such a file. A line of blanks
    (which :func:`_parse_csv` skips) makes the rows ragged, unless the file
    has one column: then it is dropped here. None when the rows are ragged
    or a cell is over the csv module's field size limit (which that
    function refuses).
    """
    data = text.encode("utf-8")
    try:
        table = pacsv.read_csv(  # one block: one chunk per column, no copy to join them
            pa.py_buffer(data),
            read_options=pacsv.ReadOptions(autogenerate_column_names=True, use_threads=False,
                                           block_size=max(len(data), 1)),
            parse_options=pacsv.ParseOptions(delimiter=delimiter, quote_char=False, escape_char=False,
                                             ignore_empty_lines=True),
            convert_options=pacsv.ConvertOptions(column_types={f"f{i}": pa.string() for i in range(width)},
                                                 strings_can_be_null=False),
        )
    except pa.ArrowInvalid:
        return None
    if table.num_columns != width or table.num_rows == 0:
        return None
    columns = [col.combine_chunks() for col in table.columns]
    if any(pc.max(pc.utf8_length(col)).as_py() > csv.field_size_limit() for col in columns):
        return None
    if width == 1:
        blank = pc.match_substring_regex(columns[0], _BLANK_CELL)
        columns[0] = columns[0].filter(pc.invert(blank))
    return columns


def _csv_module_columns(text: str, delimiter: str) -> list[pa.Array] | None:
    """The columns by the csv module, as :func:`_parse_csv` reads rows, for
    files with quoted cells. None when the text is not valid CSV or the
    rows are ragged; or when a row is one cell of blanks and the text has
    a quoted cell of blanks: a row does not tell a quoted one (a leaf) from
    an unquoted one (a blank line, skipped).
    """
    try:
        rows = [row for row in csv.reader(StringIO(text, newline=""), delimiter=delimiter, strict=True) if row]
    except csv.Error:
        return None
    widths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    blank = [i for i in np.flatnonzero(widths == 1).tolist() if not rows[i][0].strip()]
    if blank:
        sep = re.escape(delimiter)
        if re.search(f'(?<![^{sep}\r\n])"[{_BLANKS}]*"(?![^{sep}\r\n])', text):
            return None  # a quoted cell of blanks is a value, a line of them a line to skip: which is this?
        keep = np.ones(len(rows), dtype=bool)
        keep[blank] = False
        rows = list(itertools.compress(rows, keep))
        widths = widths[keep]
    if not rows or (widths != widths[0]).any():
        return None
    width = int(widths[0])
    cells = pa.array(list(itertools.chain.from_iterable(rows)), pa.string())
    return [cells.take(np.arange(i, len(cells), width)) for i in range(width)]


def _csv_tree(source: str, columns: list[pa.Array]) -> Hierarchy | None:
    """Build the tree of CSV levels from whole columns (leaf first): nodes
    by (column, value), children in first-appearance order, as
    :func:`_parse_csv` does. None for a duplicate leaf or a node with two
    parents, which that function words with their lines.

    Arrow numbers a column's distinct values in first-appearance order, so
    sorting the rows by those numbers, top column first, puts the leaves in
    depth-first order; a node starts where its column's number changes.
    """
    n = len(columns[0])
    if len(columns) >= 2 and len(pc.unique(columns[-1])) == 1:
        root = columns[-1][0].as_py()
        columns = columns[:-1]
    else:
        root = IMPLICIT_ROOT
    encoded = [pc.dictionary_encode(col) for col in columns[1:]]
    if len(pc.unique(columns[0])) != n:
        return None  # a duplicate leaf
    codes = [np.arange(n)] + [enc.indices.to_numpy() for enc in encoded]
    values = [columns[0]] + [enc.dictionary for enc in encoded]
    for below, above in zip(codes[1:], codes[2:]):
        seen = np.empty(int(below.max()) + 1, dtype=above.dtype)
        seen[below] = above
        if (seen[below] != above).any():
            return None  # a node with two parents
    order = np.lexsort(codes)  # the last key (the top column) first
    codes, values = codes[::-1], values[::-1]  # top column first, as node ids go
    levels = len(codes)
    ranked = [code[order] for code in codes]
    starts = np.ones((n, levels), dtype=bool)
    for j, code in enumerate(ranked):
        starts[1:, j] = code[1:] != code[:-1]
    ids = np.cumsum(starts.ravel()).reshape(n, levels)  # row by row, top down: pre-order; 0 is the root
    count = int(ids[-1, -1]) + 1
    parent = np.empty(count, dtype=np.int32)
    depth = np.empty(count, dtype=np.int32)
    label = np.empty(count - 1, dtype=np.int64)  # node id - 1 -> index into the columns' values, concatenated
    parent[0], depth[0] = -1, 0
    above = np.zeros(n, dtype=np.int64)  # each sorted row's node one level up
    offset = 0
    for j, (code, value) in enumerate(zip(ranked, values)):
        new = starts[:, j]
        node = ids[new, j]
        parent[node] = above[new]
        depth[node] = j + 1
        label[node - 1] = code[new] + offset
        offset += len(value)
        above = np.maximum.accumulate(np.where(new, ids[:, j], 0))
    labels = pa.concat_arrays([pa.array([root], pa.string()), pa.concat_arrays(values).take(label)])
    return _from_preorder(source, labels.to_pylist(), parent, depth, labels)


def _parse_csv(source: str, text: str) -> Hierarchy:
    """Parse ARX's CSV levels format (leaf value first, root last).

    Raises:
        HierarchyError: The file is empty or ragged, has an empty cell, a
            duplicate leaf, or a node with two parents.
    """
    fast = _csv_levels(source, text)
    if fast is not None:
        return fast
    # Something to refuse (or a rare shape the fast readers leave): row by row, naming lines.
    # Lines end at \n, \r\n or \r only: str.splitlines() also broke at \x0c, \x85, \u2028… (helper-19).
    lines = list(StringIO(text, newline=""))
    first = next((ln for ln in lines if ln.strip()), None)
    if first is None:
        raise HierarchyError(f"hierarchy file {source!r} is empty (no rows)")
    delimiter = ";" if ";" in first or "," not in first else ","

    rows: list[tuple[int, list[str]]] = []
    reader = csv.reader(lines, delimiter=delimiter, strict=True)
    width = 0
    width_line = 0
    try:
        for row in reader:
            line_no = reader.line_num
            if not row or (len(row) == 1 and not lines[line_no - 1].strip()):
                continue  # blank line (a quoted " " is a leaf)
            if not rows:
                width, width_line = len(row), line_no
            elif len(row) != width:
                raise HierarchyError(
                    f"hierarchy file {source!r} line {line_no} has {len(row)} "
                    f"columns, expected {width} as on line {width_line}"
                )
            for col, cell in enumerate(row):
                if cell == "":
                    raise HierarchyError(
                        f"hierarchy file {source!r} line {line_no} has an empty "
                        f"value in column {col + 1}"
                    )
            rows.append((line_no, row))
    except csv.Error as exc:
        raise HierarchyError(
            f"hierarchy file {source!r} line {reader.line_num} is not valid CSV: {exc}"
        ) from exc

    if width == 1:
        other = next((sep for sep in ("\t", "|") if all(sep in row[0] for _, row in rows)), None)
        if other is not None:  # read as a flat list of leaves whose names hold the whole lines
            raise HierarchyError(
                f"hierarchy file {source!r} separates its values with {'tabs' if other == chr(9) else repr(other)}: "
                "a CSV hierarchy's levels are separated by ';' (or ',')"
            )
    tops = {row[-1] for _, row in rows}
    if width >= 2 and len(tops) == 1:
        root_label = rows[0][1][-1]
        top_level = width - 2  # the highest column below the root
    else:
        root_label = IMPLICIT_ROOT
        top_level = width - 1

    labels: list[str] = [root_label]
    children: list[list[int]] = [[]]
    # (column index, value) -> (temporary id, line it first appeared on)
    nodes: dict[tuple[int, str], tuple[int, int]] = {}
    node_parent: list[int] = [-1]
    leaf_line: dict[str, int] = {}
    for line_no, row in rows:
        leaf = row[0]
        if leaf in leaf_line:
            raise HierarchyError(
                f"hierarchy file {source!r} has duplicate leaf value {leaf!r} "
                f"(lines {leaf_line[leaf]} and {line_no})"
            )
        leaf_line[leaf] = line_no
        up = 0  # the root
        for level in range(top_level, -1, -1):
            key = (level, row[level])
            hit = nodes.get(key)
            if hit is None:
                nid = len(labels)
                labels.append(row[level])
                children.append([])
                node_parent.append(up)
                children[up].append(nid)
                nodes[key] = (nid, line_no)
            else:
                nid, seen_line = hit
                if node_parent[nid] != up:
                    raise HierarchyError(
                        f"hierarchy file {source!r}: node {row[level]!r} in column "
                        f"{level + 1} has two parents, {labels[node_parent[nid]]!r} "
                        f"(line {seen_line}) and {labels[up]!r} (line {line_no})"
                    )
            up = nid
    return _build(source, labels, children)


def load_hierarchy(path: str | os.PathLike[str]) -> Hierarchy:
    """Load a generalization hierarchy from a ``.json`` or ``.csv`` file.

    Args:
        path: The file. Its extension (case-insensitive) selects the format.

    Returns:
        The validated hierarchy.

    Raises:
        HierarchyError: Unknown extension, unreadable file, bad JSON/CSV,
            empty hierarchy, duplicate leaf, or a CSV node with two parents.
            The message is one line and names the file.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise HierarchyError(f"load_hierarchy takes the path of a .json or .csv file, got {type(path).__name__}")
    source = os.fspath(path)
    ext = os.path.splitext(source)[1].lower()
    if ext not in (".json", ".csv"):
        raise HierarchyError(
            f"hierarchy file {source!r} has unknown extension {ext or '(none)'!r}; "
            "expected .json or .csv"
        )
    text = _read_text(source)
    hierarchy = _parse_json(source, text) if ext == ".json" else _parse_csv(source, text)
    try:
        "".join(hierarchy.names).encode("utf-8")
    except UnicodeEncodeError:  # JSON's "\ud800": an internal error once the run wrote it (helper-72)
        bad = next(name for name in hierarchy.names if not _encodes(name))
        raise HierarchyError(f"hierarchy file {source!r} has the label {bad!r}, which is no Unicode text (a lone "
                             "surrogate, as JSON's \\ud800 escape makes): correct it") from None
    return hierarchy


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
