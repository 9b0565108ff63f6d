"""Mondrian kernel benchmark: numba (ahead of time, JIT) vs plain numpy recursion vs level-wise numpy.

    python3 -m examples.bench_kernels [--rows 1000000] [--k 10] [--repeat 3] [--seed 0]

All kernels run in ONE process on the same encoded Poker Hand data
(:func:`examples.poker.poker_table`, seed 0):

* ``X``: the 10 QIs ``s1, r1, ..., s5, r5`` as an ``int32`` row-major matrix
  ``(n, 10)`` of codes ``value - 1`` (suits 0-3, ranks 0-12), all numeric, the
  value of a code being the code itself and the dataset span ``domain - 1``
  (3 for suits, 12 for ranks);
* ``S``: the sensitive ``hand`` class as codes ``(n, 1)`` (0-9); ``l = 2``.

Kernels, all with the cut rule of :mod:`sqlanon.mondrian` (see its docstring):

1. ``numba``: :func:`sqlanon.kernel.partition` (what ships: the kernel
   compiled ahead of time by ``numba.pycc``) and :func:`sqlanon.mondrian.partition`
   (the same source through numba's JIT). A warm-up call on a tiny input
   with the same argument types loads (or compiles) each first; the time a
   *fresh process* needs to load each (``--load-repeat`` alternating
   subprocesses that first import numpy, pyarrow, DuckDB and pandas as a
   worker does; median) is reported separately. The kernel reorders
   ``X``/``S`` in place, so each run gets fresh copies (made outside the
   timed region).
2. ``numpy recursion``: the "naive" baseline of the issue: a Python stack of
   row-index arrays, one node at a time, with numpy min/max, ``np.partition``
   for the lower median, boolean masks and ``np.unique`` for the l check.
3. ``numpy segmented``: level-wise. All open nodes of a level are processed
   together with segmented operations (``np.minimum.reduceat`` per node,
   ``np.lexsort`` per node row for the attribute order, ``np.bincount`` over
   (node, code) for medians and side sizes and over (node, side, hand) for
   the l-diversity distinct counts, a sort-free O(n) split), looping in
   Python only over levels and over candidate ranks ``r = 0..d-1`` (rank ``r``
   is tried only for the nodes whose first ``r`` candidates had no valid cut).

Every kernel's output is checked: a permutation of all rows, every class with
``>= k`` rows and ``>= l`` distinct hand codes. Reported per kernel: wall
seconds (best of ``--repeat``; the kernels run interleaved, one round at a
time, so background load hits them alike), number of classes,
``DP = sum(size^2)`` and ``NCP = sum_classes size * sum_a (max_a - min_a) /
span_a``. Also printed: whether each partition is *identical* (the same sets
of rows) to the numba one. The three apply the same deterministic rule per
node, and a node's decision depends only on its own rows, so the order in
which nodes are visited (depth first vs level by level) cannot change the
result: all three are expected to be identical.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np

from examples.poker import poker_table
from sqlanon import kernel, mondrian

QI = ("s1", "r1", "s2", "r2", "s3", "r3", "s4", "r4", "s5", "r5")

# A kernel maps (X, S, k, l, span) to (perm, bounds): perm[i] is the original
# row at position i, class c is perm[bounds[c]:bounds[c + 1]].
Kernel = Callable[[np.ndarray, np.ndarray, int, int, np.ndarray], tuple[np.ndarray, np.ndarray]]


# --------------------------------------------------------------------------
# Data
# --------------------------------------------------------------------------


def encode_poker(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Returns ``(X, S, span)``: QI codes ``(n, 10)``, hand codes ``(n, 1)``, spans ``(10,)``."""
    t = poker_table(rows, seed)
    X = np.empty((rows, len(QI)), np.int32)
    for j, c in enumerate(QI):
        X[:, j] = t.column(c).to_numpy() - 1
    S = t.column("hand").to_numpy().astype(np.int32).reshape(-1, 1)
    dom = np.array([4 if c[0] == "s" else 13 for c in QI], np.int64)
    span = (dom - 1).astype(np.float64)
    return X, S, span


# --------------------------------------------------------------------------
# 1. numba (the shipped kernel)
# --------------------------------------------------------------------------


def _numba_args(X: np.ndarray, S: np.ndarray, span: np.ndarray) -> tuple:
    """The encoding arrays :func:`sqlanon.mondrian.partition` takes, as the engine builds them."""
    d = X.shape[1]
    dom = span.astype(np.int64) + 1
    is_cat = np.zeros(d, np.bool_)
    # One value per code (value = code), plus a padding slot like the engine.
    vals = [np.arange(dm + 1, dtype=np.float64) for dm in dom]
    v_off = np.concatenate([[0], np.cumsum([len(v) for v in vals])])[:-1].astype(np.int64)
    values = np.concatenate(vals)
    c_off = np.concatenate([[0], np.cumsum(dom + 1)]).astype(np.int64)
    s_dom = int(S.max()) + 1
    s_off = np.array([0, s_dom + 1], np.int64)
    return (is_cat, values, v_off, span.astype(np.float64), c_off, s_off) + kernel.no_hierarchy(d)


def numba_warm_up(X: np.ndarray, S: np.ndarray, span: np.ndarray) -> float:
    """Seconds to load (or compile) the kernel: one call on 64 rows, same types."""
    t0 = time.perf_counter()
    mondrian.partition(X[:64].copy(), S[:64].copy(), 2, 1, *_numba_args(X, S, span))
    return time.perf_counter() - t0


def kernel_numba(X, S, k, l, span, partition=mondrian.partition):
    """:func:`sqlanon.mondrian.partition` (expects fresh copies: it reorders X and S)."""
    perm, bounds = partition(X, S, k, l, *_numba_args(X, S, span))
    return perm, bounds


_LOAD = (
    "import time, numpy, pyarrow, duckdb, pandas\n"
    "t0 = time.perf_counter()\n"
    "from sqlanon import kernel\n"
    "kernel.load()\n"
    "print(time.perf_counter() - t0, kernel.load().__name__)\n"
)


def load_seconds(repeat: int) -> dict[str, float]:
    """Median seconds for a fresh process to import and load the kernel: ahead of time vs JIT, alternating."""
    kernel.load()  # compiled (or its failure recorded) before timing
    times: dict[str, list[float]] = {"aot": [], "jit": []}
    for _ in range(repeat):
        for mode in times:
            env = {**os.environ, "SQLANON_KERNEL": "jit" if mode == "jit" else "auto"}
            out = subprocess.run([sys.executable, "-c", _LOAD], env=env, capture_output=True, text=True, check=True)
            secs, name = out.stdout.split()
            if (name == "sqlanon.mondrian") != (mode == "jit"):
                raise SystemExit(f"the {mode} run loaded {name}: is a C compiler missing?")
            times[mode].append(float(secs))
    return {mode: statistics.median(t) for mode, t in times.items()}


# --------------------------------------------------------------------------
# 2. plain numpy recursion (the naive baseline)
# --------------------------------------------------------------------------


def kernel_numpy_recursive(X, S, k, l, span):
    """One node at a time from a Python stack of original-row index arrays."""
    n, _ = X.shape
    s_all = S[:, 0]
    stack = [np.arange(n)]
    leaves: list[np.ndarray] = []
    while stack:
        idx = stack.pop()
        size = idx.size
        cut = None
        if size >= 2 * k:
            Xn = X[idx]
            sn = s_all[idx]
            mn = Xn.min(axis=0)
            mx = Xn.max(axis=0)
            cand = np.flatnonzero(mx > mn)
            rep = (mx - mn) / span  # Eq. 1, numeric: span(node) / span(dataset)
            wid = mx - mn + 1  # code span: the distinct-value tie-break
            # Representativity desc, then width desc, then index asc (lexsort is stable).
            order = cand[np.lexsort((-wid[cand], -rep[cand]))]
            half = (size + 1) // 2
            for a in order:
                col = Xn[:, a]
                m = np.partition(col, half - 1)[half - 1]  # lower median
                for t in (m, m - 1):  # code <= m first, code < m if that is invalid
                    left = col <= t
                    nl = int(np.count_nonzero(left))
                    if nl < k or size - nl < k:
                        continue
                    if np.unique(sn[left]).size < l or np.unique(sn[~left]).size < l:
                        continue
                    cut = left
                    break
                if cut is not None:
                    break
        if cut is None:
            leaves.append(idx)
        else:
            # Right first so the left child is popped next (numba's order).
            stack.append(idx[~cut])
            stack.append(idx[cut])
    sizes = np.fromiter((c.size for c in leaves), np.int64, len(leaves))
    return np.concatenate(leaves), np.concatenate([[0], np.cumsum(sizes)])


# --------------------------------------------------------------------------
# 3. level-wise segmented numpy
# --------------------------------------------------------------------------


def kernel_numpy_segmented(X, S, k, l, span, stats: dict | None = None):
    """All open nodes of a level at once; Python loops over levels and candidate ranks.

    State: the rows of the open nodes, reordered so that every node is a
    contiguous segment (``XT``, ``so``, ``rows`` = original row ids), and the
    segment ``starts``. The codes are kept column-major (``XT`` is ``(d, n)``,
    in the smallest integer type that holds them): per-segment reductions and
    row gathers along a contiguous axis are ~2-3x faster than on the
    row-major ``(n, d)`` matrix. Per level:

    1. per-node min/max with ``np.minimum/maximum.reduceat`` -> representativity,
       code width and the candidate order of every node (``np.lexsort`` along
       each node's row of the ``(nodes, d)`` key arrays; stable, so index asc
       breaks the remaining ties, exactly as the numba insertion sort);
    2. for rank ``r = 0, 1, ...``: the still-undecided nodes that have an
       ``r``-th candidate attribute gather that attribute's code per row;
       ``np.bincount`` over (node, code) and a cumulative sum over codes give
       the rows with ``code <= c`` per node: the lower median ``m`` is the
       first code reaching ``(size + 1) // 2``, and the side sizes of both
       thresholds ``t = m`` and ``t = m - 1`` are read off. The l check of a
       threshold counts the distinct (node, side, hand) triples (again one
       ``np.bincount``, into a dense presence table). The first valid
       threshold (``m``, else ``m - 1``) is taken; nodes without one go on
       to rank ``r + 1``;
    3. nodes with no valid cut (or fewer than ``2k`` rows) become classes and
       leave the open set; the others are split in O(n): the left and the
       right rows, each in their current order, are scattered to their
       child's block (``np.repeat`` of per-node offsets, no sort), then one
       gather moves ``XT``/``so``/``rows``.

    The dense tables need ``nodes * max_code`` and ``nodes * 2 * n_hand``
    counters (13 and 20 per node here): fine for these small domains; with
    wide domains one would sort the rows by (node, code) (``np.lexsort``)
    and use ``np.add.reduceat`` / ``np.unique`` on the pairs instead.

    Ties are broken per node exactly as in the numba kernel (nothing is
    decided per level), and a node's decision depends only on its rows, so
    the partition is the same as numba's (checked by the benchmark).
    """
    n, d = X.shape
    D = int(X.max()) + 1  # codes per column (upper bound over columns)
    SD = int(S.max()) + 1  # hand codes
    XT = np.ascontiguousarray(X.T, dtype=np.min_scalar_type(int(X.max())))
    so = S[:, 0]
    rows = np.arange(n)
    starts = np.zeros(1, np.int64)
    leaf_rows: list[np.ndarray] = []
    leaf_sizes: list[np.ndarray] = []
    levels = 0
    rank_rounds = 0
    while rows.size:
        levels += 1
        n_open = rows.size
        m_nodes = starts.size
        sizes = np.diff(np.append(starts, n_open))
        node_of_row = np.repeat(np.arange(m_nodes), sizes)

        # 1. Candidate attributes of every node, in rank order.
        mn = np.minimum.reduceat(XT, starts, axis=1).T.astype(np.int64)  # (nodes, d)
        mx = np.maximum.reduceat(XT, starts, axis=1).T.astype(np.int64)
        cand = (mx > mn) & (sizes >= 2 * k)[:, None]
        rep = np.where(cand, (mx - mn) / span, -1.0)
        wid = (mx - mn + 1).astype(np.int64)
        order = np.lexsort((-wid, -rep), axis=-1)  # (nodes, d)
        n_cand = cand.sum(axis=1)

        attr = np.full(m_nodes, -1, np.int64)  # chosen cut attribute, -1 = none
        thr = np.zeros(m_nodes, np.int64)  # left side: code <= thr
        undecided = n_cand > 0
        # 2. Try candidate rank r for the nodes still without a cut.
        for r in range(d):
            nodes = np.flatnonzero(undecided & (n_cand > r))
            if nodes.size == 0:
                break
            rank_rounds += 1
            nn = nodes.size
            a = order[nodes, r]
            nsz = sizes[nodes]
            lid = np.repeat(np.arange(nn), nsz)  # local node id per selected row
            seg0 = np.cumsum(nsz) - nsz
            idx = np.arange(int(nsz.sum())) + np.repeat(starts[nodes] - seg0, nsz)
            # The node's attribute, per row (flat take into the (d, n) matrix).
            v = np.take(XT.ravel(), np.repeat(a * n_open, nsz) + idx).astype(np.int64)
            sv = so[idx]
            # Rows per (node, code) -> cumulative counts: rows with code <= c.
            le_c = np.bincount(lid * D + v, minlength=nn * D).reshape(nn, D).cumsum(axis=1)
            med = np.argmax(le_c >= ((nsz + 1) // 2)[:, None], axis=1)  # lower median
            ar = np.arange(nn)
            le = le_c[ar, med]  # rows with code <= m
            lt = np.where(med > 0, le_c[ar, np.maximum(med - 1, 0)], 0)  # code < m

            def diverse(t: np.ndarray) -> np.ndarray:
                """Both sides of ``code <= t[node]`` hold >= l distinct hand codes."""
                right = v > np.repeat(t, nsz)
                # Distinct (node, side, hand) triples, as a dense presence table.
                seen = np.bincount((lid * 2 + right) * SD + sv, minlength=nn * 2 * SD)
                distinct = (seen.reshape(nn, 2, SD) > 0).sum(axis=2)
                return (distinct >= l).all(axis=1)

            # numba tries t = m when its sizes are valid, then t = m - 1 when
            # those are: the first one that also passes the l check wins.
            ok1 = (le >= k) & (nsz - le >= k)
            if ok1.any():
                ok1[ok1] = diverse(med)[ok1]
            ok2 = (lt >= k) & (nsz - lt >= k) & ~ok1
            if ok2.any():
                ok2[ok2] = diverse(med - 1)[ok2]
            chosen = ok1 | ok2
            hit = nodes[chosen]
            attr[hit] = a[chosen]
            thr[hit] = np.where(ok1, med, med - 1)[chosen]
            undecided[hit] = False

        # 3. Close the nodes without a cut, split the others.
        cut = attr >= 0
        leaf_mask = ~cut[node_of_row]
        if leaf_mask.any():
            leaf_rows.append(rows[leaf_mask])
            leaf_sizes.append(sizes[~cut])
        if not cut.any():
            break
        # Rows of the cut nodes, in order; per node: left child rows first
        # (code <= thr), then the right child, each in their current order.
        pos = np.flatnonzero(~leaf_mask)
        csz = sizes[cut]
        seg_start = np.cumsum(csz) - csz  # node starts in the new arrays
        code = np.take(XT.ravel(), np.repeat(attr[cut] * n_open, csz) + pos)
        right = code > np.repeat(thr[cut], csz)
        n_left = np.add.reduceat(~right, seg_start, dtype=np.int64)
        n_right = csz - n_left
        # The i-th left row of the whole level goes to i + (its node's left
        # block start - left rows of earlier nodes); likewise for right rows.
        left_start = seg_start
        right_start = seg_start + n_left
        src = np.empty(pos.size, np.int64)
        n_l = int(n_left.sum())
        src[np.arange(n_l) + np.repeat(left_start - (np.cumsum(n_left) - n_left), n_left)] = pos[~right]
        src[np.arange(pos.size - n_l) + np.repeat(right_start - (np.cumsum(n_right) - n_right), n_right)] = pos[right]
        XT = np.take(XT, src, axis=1)  # np.take: faster than XT[:, src]
        so = so[src]
        rows = rows[src]
        starts = np.column_stack([left_start, right_start]).ravel()

    if stats is not None:
        stats["levels"] = levels
        stats["rank_rounds"] = rank_rounds
    sizes = np.concatenate(leaf_sizes)
    return np.concatenate(leaf_rows), np.concatenate([[0], np.cumsum(sizes)])


# --------------------------------------------------------------------------
# Checks and metrics
# --------------------------------------------------------------------------


def check_and_measure(X, S, k, l, span, perm, bounds) -> tuple[int, int, float, np.ndarray]:
    """Asserts a valid (k, l) partition; returns ``(classes, DP, NCP, canonical labels)``."""
    n = X.shape[0]
    perm = np.asarray(perm, np.int64)
    bounds = np.asarray(bounds, np.int64)
    assert perm.shape == (n,) and np.array_equal(np.bincount(perm, minlength=n), np.ones(n, np.int64)), \
        "not a permutation of the rows"
    assert bounds[0] == 0 and bounds[-1] == n
    sizes = np.diff(bounds)
    n_cls = sizes.size
    assert sizes.min() >= k, f"a class has {sizes.min()} < k={k} rows"
    cls = np.repeat(np.arange(n_cls), sizes)
    SD = int(S.max()) + 1
    present = np.bincount(cls * SD + S[perm, 0], minlength=n_cls * SD).reshape(n_cls, SD) > 0
    assert present.sum(axis=1).min() >= l, f"a class has < l={l} distinct hand codes"
    Xp = X[perm]
    lo = np.minimum.reduceat(Xp, bounds[:-1], axis=0)
    hi = np.maximum.reduceat(Xp, bounds[:-1], axis=0)
    ncp = float(np.dot(sizes, ((hi - lo) / span).sum(axis=1)))
    dp = int(np.dot(sizes, sizes))
    # Canonical form: each row labelled by the smallest original row id of its class.
    label = np.empty(n, np.int64)
    label[perm] = np.minimum.reduceat(perm, bounds[:-1])[cls]
    return n_cls, dp, ncp, label


def machine() -> str:
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    import numba

    return (
        f"{platform.machine()}, {os.cpu_count()} cores, {mem:.0f} GiB, Python {platform.python_version()}, "
        f"numpy {np.__version__}, numba {numba.__version__}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: runs the three kernels and prints the table; returns 0."""
    parser = argparse.ArgumentParser(prog="python3 -m examples.bench_kernels", description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="poker rows (default: 1000000)")
    parser.add_argument("--k", type=int, default=10, help="k (default: 10)")
    parser.add_argument("--l", type=int, default=2, help="l on hand (default: 2)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per kernel, best reported (default: 3)")
    parser.add_argument("--seed", type=int, default=0, help="poker seed (default: 0)")
    parser.add_argument("--load-repeat", type=int, default=5, help="fresh processes per load mode (default: 5)")
    args = parser.parse_args(argv)
    if args.rows < 2 * args.k or args.k < 1 or args.repeat < 1:
        parser.error("need --k >= 1, --rows >= 2k and --repeat >= 1")

    loads = load_seconds(args.load_repeat)
    X, S, span = encode_poker(args.rows, args.seed)
    warm = numba_warm_up(X, S, span)
    seg_stats: dict = {}

    def run_numba(partition=mondrian.partition):
        Xc, Sc = X.copy(), S.copy()  # partition reorders its inputs
        t0 = time.perf_counter()
        out = kernel_numba(Xc, Sc, args.k, args.l, span, partition)
        return out, time.perf_counter() - t0

    def timed(fn, **kw):
        def run():
            t0 = time.perf_counter()
            out = fn(X, S, args.k, args.l, span, **kw)
            return out, time.perf_counter() - t0
        return run

    kernels: list[tuple[str, Callable[[], tuple[tuple[np.ndarray, np.ndarray], float]]]] = [
        ("numba ahead of time (`sqlanon.kernel.partition`, shipped)", lambda: run_numba(kernel.partition)),
        ("numba JIT (`sqlanon.mondrian.partition`)", run_numba),
        ("numpy recursion (naive)", timed(kernel_numpy_recursive)),
        ("numpy segmented (level-wise)", timed(kernel_numpy_segmented, stats=seg_stats)),
    ]
    best = {name: float("inf") for name, _ in kernels}
    result: dict[str, tuple] = {}
    for _ in range(args.repeat):  # interleaved rounds
        for name, run in kernels:
            (perm, bounds), secs = run()
            best[name] = min(best[name], secs)
            if name not in result:
                result[name] = check_and_measure(X, S, args.k, args.l, span, perm, bounds)

    print(f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}")
    argv_shown = sys.argv[1:] if argv is None else list(argv)
    print(f"command: python3 -m examples.bench_kernels {' '.join(argv_shown)}".rstrip())
    print(f"machine: {machine()}")
    print(
        f"data: poker {args.rows:,} rows (seed {args.seed}), 10 numeric QIs, sensitive hand, "
        f"k = {args.k}, l = {args.l}; best of {args.repeat}, kernels interleaved"
    )
    print(f"numba JIT warm-up in this process (cache load or compile, one tiny call): {warm:.3f} s")
    print(
        f"kernel load in a fresh process (median of {args.load_repeat}, alternating): "
        f"ahead of time {loads['aot']:.3f} s, JIT {loads['jit']:.3f} s\n"
    )
    print("| kernel | seconds | classes | DP | NCP |")
    print("|---|---|---|---|---|")
    for name, _ in kernels:
        n_cls, dp, ncp, _ = result[name]
        print(f"| {name} | {best[name]:.3f} | {n_cls:,} | {dp:,} | {ncp:,.1f} |")
    ref = result[kernels[0][0]][3]
    print()
    for name, _ in kernels[1:]:
        same = np.array_equal(result[name][3], ref)
        print(f"{name}: partition {'identical to' if same else 'DIFFERENT from'} the shipped kernel's")
    print(
        f"segmented: {seg_stats['levels']} levels, {seg_stats['rank_rounds']} (level, candidate rank) rounds"
    )
    print("all partitions checked: permutation of the rows, every class >= k rows and >= l hand codes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
