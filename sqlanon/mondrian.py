"""The Mondrian kernel: recursive median cuts over integer-encoded columns.

This module is pure computation: numpy arrays in, numpy arrays out. It knows
nothing of SQL, files or column names; :mod:`sqlanon.engine` encodes a table
into the arrays it takes and turns its classes into generalized values.

The recursion of the paper's Fig. 7 runs as one compiled loop (numba) over a
stack of row ranges. Rows are *physically reordered* at every cut, so each open
node is a contiguous block of the code matrix: scans are sequential, and the
final equivalence classes are contiguous blocks too. The loop that reorders a
node's rows also takes each side's per-column min and max (every row is in
hand there), which the stack carries to the child: no node scans its rows
only for them (14-28 % of the kernel's time on poker). numba was chosen over a
level-by-level segmented numpy formulation because the work per node is a
handful of short scans; with ~100,000 leaves at k = 10 on a million rows the
per-call overhead of numpy dominated (see BENCHMARKS.md).

Cut rule (per node, paper §5 with Eq. 1):

* Candidate attributes are those with more than one code in the node, ordered
  by representativity: numeric ``span(node) / span(dataset)`` in value units,
  categorical ``distinct(node) / distinct(dataset)``; ties (e.g. all 1 at the
  first cut) go to the attribute with more distinct values in the node (for
  numeric columns the code span, an upper bound that is exact at the root),
  then to the lower index.
* The cut value is the median code ``m``: the left side is ``code <= m`` as in
  the paper. When ties at the median make that cut invalid (e.g. ``m`` is the
  largest code), ``code < m`` is tried before giving up on the attribute.
  (Preferring the more balanced of the two raised NCP on poker by ~2%.) A cut is valid when both
  sides keep at least ``k`` rows and at least ``l`` distinct codes of every
  sensitive column.
* A column with a hierarchy (its codes are the leaves in tree order, so
  every node covers a range of them) first tries the boundaries of the
  child of the node's LCA that holds the median leaf: with that child's
  leaves ``[f, e]``, ``code <= f - 1`` and ``code <= e``, the more balanced
  first, each valid as above; then the median cuts. A side then keeps whole
  subtrees of the LCA where a median cut splits one child and publishes
  both sides at the LCA (on UCI Adult: total NCP lower in 29 of 30
  configurations, median -19 %). With l > 1 a valid snapped cut is
  weighed against the first valid median cut other than itself by the
  least DP each leaves reachable (:func:`_cut_bounds`: a side with few of a sensitive column's
  rarer values makes few l-diverse classes, however it is cut) and taken
  unless that is over 1.1 times the median's: hierarchy subtrees track the
  sensitive value (married, higher education: income), and on Adult's
  eight QIs with l = 2 the snapped cuts alone stranded such sides (DP
  +44-47 %, largest class 885 rows; with the bound -5 to +5 %, 405-583,
  the NCP median -19 % kept; helper-129). Guards on the row balance
  (1/4, 0.4) kept DP rises of up to 20 % and halved the NCP gain.
* If no attribute admits a valid cut, the node is an equivalence class.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .cache import kernel_jit

SOURCE_DIGEST = hashlib.sha256(__loader__.get_data(__file__)).hexdigest()  # (a zip import too)
"""This file as this process imported it: :func:`sqlanon.kernel._build` compiles
these functions only under a key of the same source."""

_SNAP_SLACK = 1.1
"""With l > 1, a hierarchy's snapped cut is taken over the median cut when
the least DP it leaves reachable (:func:`_cut_bounds`) is at most this
times the median cut's (helper-129: 1.0 lost most of the NCP gain on C,
the bound's rounding favouring the balanced cut; 1.1 kept it)."""

__all__ = ["partition", "class_ranges", "class_distinct", "class_max_of", "count_distinct", "shuffle_blocks"]


@kernel_jit(nogil=True)
def _sides_diverse(X, S, start, end, a, t, l, s_off, stamp_l, stamp_r, mark):
    """True if both sides of the cut ``X[:, a] <= t`` have >= l distinct codes per sensitive column.

    A column's scan stops once both sides have ``l``: with few sensitive
    values that is within a few rows, where scanning the whole block took
    a fifth of the kernel's time (poker; BENCHMARKS.md, section 2, twenty-second session)."""
    n_s = S.shape[1]
    for s in range(n_s):
        mark += 1
        nl = 0
        nr = 0
        base = s_off[s]
        for i in range(start, end):
            c = base + S[i, s]
            if X[i, a] <= t:
                if stamp_l[c] != mark:
                    stamp_l[c] = mark
                    nl += 1
                    if nl >= l and nr >= l:
                        break
            else:
                if stamp_r[c] != mark:
                    stamp_r[c] = mark
                    nr += 1
                    if nl >= l and nr >= l:
                        break
        if nl < l or nr < l:
            return False, mark
    return True, mark


@kernel_jit(nogil=True, inline="always")
def _widen(X, i, lo, hi):
    """Widen the per-column ranges ``lo``/``hi`` to take in row ``i`` of ``X``
    (inlined in numba's IR: the partition loop calls it for every row)."""
    for b in range(X.shape[1]):
        v = X[i, b]
        if v < lo[b]:
            lo[b] = v
        if v > hi[b]:
            hi[b] = v


@kernel_jit(nogil=True)
def _median_counts(X, start, end, a, lo, hi, hist, buf):
    """Median code of column ``a`` in the block and the counts ``#(<= m)``, ``#(< m)``."""
    size = end - start
    half = (size + 1) // 2
    width = hi - lo + 1
    if width <= 4 * size:
        for j in range(width):
            hist[j] = 0
        for i in range(start, end):
            hist[X[i, a] - lo] += 1
        cum = 0
        for j in range(width):
            cum += hist[j]
            if cum >= half:
                return lo + j, cum, cum - hist[j]
        return hi, size, size - hist[width - 1]
    # Wide code range relative to the block: select the median instead.
    for i in range(start, end):
        buf[i - start] = X[i, a]
    m = np.partition(buf[:size], half - 1)[half - 1]
    lt, le = _counts_le(X, start, end, a, lo, hi, hist, m - 1, m)  # a scan: the range is wide
    return m, le, lt


@kernel_jit(nogil=True)
def _last_leaf(X, start, end, a, lo, hi, hist, nleaves):
    """The largest leaf code (below ``nleaves``, the NULL code) of column
    ``a`` in the block whose codes span ``[lo, hi]``: from the histogram
    :func:`_median_counts` left in ``hist`` when it built one, else by a
    scan; -1 when the block holds none."""
    size = end - start
    if hi - lo + 1 <= 4 * size:
        for j in range(min(hi, nleaves - 1) - lo, -1, -1):
            if hist[j] > 0:
                return lo + j
        return -1
    last = -1
    for i in range(start, end):
        v = X[i, a]
        if last < v < nleaves:
            last = v
    return last


@kernel_jit(nogil=True)
def _snap_bounds(a, mn, mx, m, h_off, h_nleaves, h_leaf, h_parent, h_first, h_last):
    """Child boundaries of the LCA of leaves ``[mn, mx]`` around leaf ``m``:
    ``(f - 1, e)`` where ``[f, e]`` is the leaf range of the LCA's child that
    holds ``m``. ``(-1, -1)`` when column ``a`` has no hierarchy, or the
    block's leaves are one (beside its NULL code: the caller passes the
    largest leaf as ``mx``) or its median ``m`` is the NULL code."""
    off = h_off[a]
    if off < 0 or mx >= h_nleaves[a] or m > mx or mn >= mx:
        return -1, -1
    node = h_leaf[off + mn]
    while h_last[node] < mx:
        node = h_parent[node]
    lca = node
    node = h_leaf[off + m]
    while h_parent[node] != lca:
        node = h_parent[node]
    return h_first[node] - 1, h_last[node]


@kernel_jit(nogil=True)
def _counts_le(X, start, end, a, lo, hi, hist, t1, t2):
    """The counts ``#(code <= t1)``, ``#(code <= t2)`` of column ``a`` in the
    block (``t1 <= t2``): from the histogram :func:`_median_counts` left in
    ``hist`` when it built one (same ``lo``, ``hi``), else by a scan."""
    size = end - start
    width = hi - lo + 1
    if width <= 4 * size:
        c1 = 0
        cum = 0
        last = min(t2, hi) - lo
        for j in range(last + 1):
            cum += hist[j]
            if j == t1 - lo:
                c1 = cum
        return c1, cum
    c1 = 0
    c2 = 0
    for i in range(start, end):
        v = X[i, a]
        if v <= t1:
            c1 += 1
        if v <= t2:
            c2 += 1
    return c1, c2


@kernel_jit(nogil=True)
def _l_capacity(cnt, codes, m, l, qmax):
    """The most classes (at most ``qmax``) that rows with the sensitive code
    counts ``cnt[codes[:m]]`` can make with ``l`` distinct codes in each: the
    largest ``q`` with ``sum(min(c, q)) >= l * q`` (concave in ``q``, so a
    bisection). Over the codes present only: a column of 100,000 values made
    every call as long as its domain (a run 0.5 s -> 67 s)."""
    a = 0
    b = qmax
    while a < b:
        q = (a + b + 1) // 2
        tot = 0
        for j in range(m):
            c = cnt[codes[j]]
            tot += c if c < q else q
        if tot >= l * q:
            a = q
        else:
            b = q - 1
    return a


@kernel_jit(nogil=True)
def _cut_bounds(X, S, start, end, a, t0, n0, t1, n1, l, k, s_off, cnt, seen):
    """The least sums of squared class sizes the two sides of the cuts
    ``X[:, a] <= t0`` and ``X[:, a] <= t1`` (with ``n0`` and ``n1`` rows
    on their left) could reach: per side, ``n * n / q`` where
    ``q`` is the most classes it can make (``n / k``, and
    :func:`_l_capacity` of every sensitive column). A side whose rows hold
    few of a sensitive column's rarer codes can be cut into few l-diverse
    classes, however it is cut. One scan of the block per sensitive column
    for both cuts: ``cnt[j]``/``seen[j]`` are the counts and codes of the
    sides ``<= t0``, ``> t0``, ``<= t1``, ``> t1``; the counts are all
    zero between calls (only the codes a call counted are reset, after it)."""
    n_s = S.shape[1]
    nr0 = end - start - n0
    nr1 = end - start - n1
    q0l = n0 / k  # not rounded down: k alone then bounds every cut alike (k * rows)
    q0r = nr0 / k
    q1l = n1 / k
    q1r = nr1 / k
    for s in range(n_s):
        base = s_off[s]
        m = np.zeros(4, np.int64)  # codes seen per side
        for i in range(start, end):
            c = base + S[i, s]
            v = X[i, a]
            for j in (0 if v <= t0 else 1, 2 if v <= t1 else 3):
                if cnt[j, c] == 0:
                    seen[j, m[j]] = c
                    m[j] += 1
                cnt[j, c] += 1
        q0l = min(q0l, _l_capacity(cnt[0], seen[0], m[0], l, n0 // k + 1))
        q0r = min(q0r, _l_capacity(cnt[1], seen[1], m[1], l, nr0 // k + 1))
        q1l = min(q1l, _l_capacity(cnt[2], seen[2], m[2], l, n1 // k + 1))
        q1r = min(q1r, _l_capacity(cnt[3], seen[3], m[3], l, nr1 // k + 1))
        for j in range(4):
            for i in range(m[j]):
                cnt[j, seen[j, i]] = 0
    return (n0 * n0 / max(q0l, 1.0) + nr0 * nr0 / max(q0r, 1.0),
            n1 * n1 / max(q1l, 1.0) + nr1 * nr1 / max(q1r, 1.0))


@kernel_jit(nogil=True)
def partition(X, S, k, l, is_cat, values, v_off, global_span, c_off, s_off,
              h_off, h_nleaves, h_leaf, h_parent, h_first, h_last):
    """Cut the rows of ``X`` into Mondrian equivalence classes.

    Args:
        X: (n, d) int32 codes, C-contiguous; reordered in place.
        S: (n, s) int32 sensitive codes (s may be 0); reordered in place.
        k: minimum class size.
        l: minimum distinct codes of every sensitive column per class.
        is_cat: (d,) bool, representativity by distinct count (True) or span.
        values: concatenated float64 value of every code of numeric columns.
        v_off: (d,) offsets of each column's codes into ``values``.
        global_span: (d,) dataset span (numeric) or distinct count (categorical).
        c_off: (d + 1,) offsets of each column's code domain (stamp arrays).
        s_off: (s + 1,) offsets of each sensitive column's code domain.
        h_off: (d,) per column, the offset of its leaves into ``h_leaf``, or -1
            for a column without a hierarchy (its codes are then cut at the
            median only).
        h_nleaves: (d,) leaves of each column's hierarchy (0 without one);
            codes from it up (NULL) are not leaves.
        h_leaf: the tree node of every leaf code, concatenated over columns.
        h_parent, h_first, h_last: per node (ids global over the
            concatenated trees), its parent (-1 at a root) and the first and
            last leaf code below it.

    Returns:
        ``(perm, bounds)``: ``perm[i]`` is the original row now at position ``i``;
        class ``c`` is the block ``bounds[c]:bounds[c + 1]``.
    """
    n, d = X.shape
    perm = np.arange(n)
    max_dom = 1
    for a in range(d):
        w = c_off[a + 1] - c_off[a]
        if w > max_dom:
            max_dom = w
    hist = np.zeros(max_dom + 1, np.int64)
    buf = np.empty(n, np.int32)
    stamp_c = np.zeros(c_off[d] + 1, np.int64)
    stamp_l = np.zeros(s_off[S.shape[1]] + 1, np.int64)
    stamp_r = np.zeros(s_off[S.shape[1]] + 1, np.int64)
    mark = 0
    cnt_b = np.zeros((4, s_off[S.shape[1]] + 1), np.int64)  # _cut_bounds' sensitive counts (zero between calls)
    seen_b = np.empty((4, s_off[S.shape[1]] + 1), np.int64)  # and the codes they hold
    mn = np.empty(d, np.int64)
    mx = np.empty(d, np.int64)
    rep = np.empty(d, np.float64)
    wid = np.empty(d, np.int64)
    order = np.empty(d, np.int64)

    stack_lo = np.empty(n // max(k, 1) + 2, np.int64)
    stack_hi = np.empty(n // max(k, 1) + 2, np.int64)
    cap = 64
    st_mn = np.empty((cap, d), np.int32)
    st_mx = np.empty((cap, d), np.int32)
    lmn = np.empty(d, np.int32)
    lmx = np.empty(d, np.int32)
    rmn = np.empty(d, np.int32)
    rmx = np.empty(d, np.int32)
    # The stack's entries carry their block's per-column min and max (the
    # root's from one scan, a child's from its parent's partition loop).
    lmn[:] = 2147483647
    lmx[:] = -2147483648
    for i in range(n):
        _widen(X, i, lmn, lmx)  # not into st_mn[0]: numba would make that view for every row
    st_mn[0, :] = lmn
    st_mx[0, :] = lmx
    top = 0
    stack_lo[0] = 0
    stack_hi[0] = n
    top = 1
    bounds = np.empty(n // max(k, 1) + 2, np.int64)
    n_classes = 0

    while top > 0:
        top -= 1
        start = stack_lo[top]
        end = stack_hi[top]
        size = end - start
        cut = False
        if size >= 2 * k:
            for a in range(d):
                mn[a] = st_mn[top, a]
                mx[a] = st_mx[top, a]
            # Representativity (Eq. 1); -1 marks an attribute that cannot be cut.
            n_cand = 0
            for a in range(d):
                if mn[a] == mx[a]:
                    rep[a] = -1.0
                    continue
                n_cand += 1
                wid[a] = mx[a] - mn[a] + 1
                if is_cat[a]:
                    mark += 1
                    base = c_off[a]
                    cnt = 0
                    for i in range(start, end):
                        c = base + X[i, a]
                        if stamp_c[c] != mark:
                            stamp_c[c] = mark
                            cnt += 1
                    rep[a] = cnt / global_span[a] if global_span[a] > 0 else 0.0
                    wid[a] = cnt
                else:
                    span = values[v_off[a] + mx[a]] - values[v_off[a] + mn[a]]
                    rep[a] = span / global_span[a] if global_span[a] > 0 else 0.0
            # Order candidates: representativity desc, distinct values desc, index asc.
            for a in range(d):
                order[a] = a
            for i in range(1, d):
                j = i
                while j > 0:
                    p = order[j - 1]
                    q = order[j]
                    if rep[q] > rep[p] or (rep[q] == rep[p] and wid[q] > wid[p]):
                        order[j - 1] = q
                        order[j] = p
                        j -= 1
                    else:
                        break
            for oi in range(n_cand):
                a = order[oi]
                m, le, lt = _median_counts(X, start, end, a, mn[a], mx[a], hist, buf)
                # Two candidate thresholds: code <= m and code <= m - 1.
                t1 = m
                c1 = le
                t2 = m - 1
                c2 = lt
                ok1 = c1 >= k and size - c1 >= k
                ok2 = c2 >= k and size - c2 >= k
                if ok2 and not ok1:
                    t1, c1, ok1 = t2, c2, True
                    ok2 = False
                # Hierarchy column: first the child boundaries of the node's
                # LCA on either side of the median leaf, the more balanced first.
                # A block holding NULL (its code after the leaves) snaps among its leaves:
                # NULL then goes right, as any cut puts it (helper-194: not snapped at all, every
                # NULL beside a hierarchy's leaves published a median cut at the root).
                last_leaf = mx[a]
                if h_off[a] >= 0 and last_leaf >= h_nleaves[a]:
                    last_leaf = _last_leaf(X, start, end, a, mn[a], mx[a], hist, h_nleaves[a])
                b_lo, b_hi = _snap_bounds(a, mn[a], last_leaf, m, h_off, h_nleaves, h_leaf, h_parent, h_first, h_last)
                ts0 = 0
                cs0 = 0
                oks0 = False
                ts1 = 0
                cs1 = 0
                oks1 = False
                if b_hi >= 0:
                    n_lo, n_hi = _counts_le(X, start, end, a, mn[a], mx[a], hist, b_lo, b_hi)
                    ok_lo = n_lo >= k and size - n_lo >= k
                    ok_hi = n_hi >= k and size - n_hi >= k
                    if abs(2 * n_lo - size) <= abs(2 * n_hi - size):
                        ts0, cs0, oks0, ts1, cs1, oks1 = b_lo, n_lo, ok_lo, b_hi, n_hi, ok_hi
                    else:
                        ts0, cs0, oks0, ts1, cs1, oks1 = b_hi, n_hi, ok_hi, b_lo, n_lo, ok_lo
                # The first threshold whose cut is valid for k and for l wins;
                # with l > 1, a snapped cut only against the first valid median
                # cut, by the least DP each could still reach (_cut_bounds, one scan for both).
                chosen = -1
                t = 0
                snap_c = -1
                snap_t = 0
                for attempt in range(4):
                    if attempt == 0:
                        ok_, t_, c_ = oks0, ts0, cs0
                    elif attempt == 1:
                        ok_, t_, c_ = oks1, ts1, cs1
                    elif attempt == 2:
                        ok_, t_, c_ = ok1, t1, c1
                    else:
                        ok_, t_, c_ = ok2, t2, c2
                    if not ok_ or (snap_c >= 0 and t_ == snap_t):  # the snapped cut: weighed against the next
                        continue
                    if l > 1:
                        good, mark = _sides_diverse(X, S, start, end, a, t_, l, s_off, stamp_l, stamp_r, mark)
                        if not good:
                            continue
                        if attempt < 2:
                            if snap_c < 0:
                                snap_c = c_
                                snap_t = t_
                            continue
                    chosen = c_
                    t = t_
                    break
                if snap_c >= 0:
                    take = chosen < 0
                    if not take:
                        b_snap, b_med = _cut_bounds(X, S, start, end, a, snap_t, snap_c, t, chosen, l, k, s_off, cnt_b,
                                                    seen_b)
                        take = b_snap <= _SNAP_SLACK * b_med
                    if take:
                        chosen = snap_c
                        t = snap_t
                if chosen < 0:
                    continue
                # In-place partition of the block: rows with code <= t first,
                # each side's min and max per column taken on the way.
                lmn[:] = 2147483647
                lmx[:] = -2147483648
                rmn[:] = 2147483647
                rmx[:] = -2147483648
                i = start
                j = end - 1
                while i <= j:
                    if X[i, a] <= t:
                        _widen(X, i, lmn, lmx)
                        i += 1
                    else:
                        for b in range(d):
                            tmp = X[i, b]
                            X[i, b] = X[j, b]
                            X[j, b] = tmp
                        for b in range(S.shape[1]):
                            tmp = S[i, b]
                            S[i, b] = S[j, b]
                            S[j, b] = tmp
                        tp = perm[i]
                        perm[i] = perm[j]
                        perm[j] = tp
                        _widen(X, j, rmn, rmx)
                        j -= 1
                mid = start + chosen
                # Right child first so the left one is processed next: classes
                # then come out in positional order.
                if top + 2 > cap:  # the stack is as deep as the tree: rarely past 64
                    cap *= 2
                    grown = np.empty((cap, d), np.int32)
                    grown[:top] = st_mn[:top]
                    st_mn = grown
                    grown = np.empty((cap, d), np.int32)
                    grown[:top] = st_mx[:top]
                    st_mx = grown
                stack_lo[top] = mid
                stack_hi[top] = end
                for b in range(d):
                    st_mn[top, b] = rmn[b]
                    st_mx[top, b] = rmx[b]
                top += 1
                stack_lo[top] = start
                stack_hi[top] = mid
                for b in range(d):
                    st_mn[top, b] = lmn[b]
                    st_mx[top, b] = lmx[b]
                top += 1
                cut = True
                break
        if not cut:
            bounds[n_classes] = start
            n_classes += 1
    bounds[n_classes] = n
    return perm, bounds[: n_classes + 1].copy()


@kernel_jit(nogil=True)
def class_ranges(X, bounds, null_code):
    """Per class and column: min and max non-NULL code, and NULL presence.

    Returns ``(lo, hi, has_null)``, each (classes, d); ``lo``/``hi`` are -1 for
    a class whose column is all NULL. ``null_code[a]`` is -1 if column ``a``
    has no NULLs.
    """
    n_cls = bounds.shape[0] - 1
    d = X.shape[1]
    lo = np.full((n_cls, d), -1, np.int64)
    hi = np.full((n_cls, d), -1, np.int64)
    has_null = np.zeros((n_cls, d), np.bool_)
    for c in range(n_cls):
        for a in range(d):
            nc = null_code[a]
            l_ = np.int64(-1)
            h_ = np.int64(-1)
            for i in range(bounds[c], bounds[c + 1]):
                v = X[i, a]
                if v == nc:
                    has_null[c, a] = True
                else:
                    if l_ < 0 or v < l_:
                        l_ = v
                    if v > h_:
                        h_ = v
            lo[c, a] = l_
            hi[c, a] = h_
    return lo, hi, has_null


@kernel_jit(nogil=True)
def count_distinct(col, bounds, dom):
    """Distinct codes of ``col`` within each block of ``bounds``."""
    n_cls = bounds.shape[0] - 1
    stamp = np.full(dom + 1, -1, np.int64)
    out = np.zeros(n_cls, np.int64)
    for c in range(n_cls):
        cnt = 0
        for i in range(bounds[c], bounds[c + 1]):
            v = col[i]
            if stamp[v] != c:
                stamp[v] = c
                cnt += 1
        out[c] = cnt
    return out


@kernel_jit(nogil=True)
def class_distinct(col, bounds, dom, skip):
    """Sorted distinct codes of ``col`` per block, excluding code ``skip``.

    Returns ``(offsets, codes)``: block ``c`` owns ``codes[offsets[c]:offsets[c + 1]]``.
    """
    n_cls = bounds.shape[0] - 1
    stamp = np.full(dom + 1, -1, np.int64)
    offsets = np.zeros(n_cls + 1, np.int64)
    codes = np.empty(col.shape[0], np.int64)
    pos = 0
    for c in range(n_cls):
        first = pos
        for i in range(bounds[c], bounds[c + 1]):
            v = col[i]
            if v != skip and stamp[v] != c:
                stamp[v] = c
                codes[pos] = v
                pos += 1
        codes[first:pos].sort()
        offsets[c + 1] = pos
    return offsets, codes[:pos].copy()


@kernel_jit(nogil=True)
def class_max_of(col, bounds, lookup):
    """Per block, the maximum of ``lookup[code]`` over its rows."""
    n_cls = bounds.shape[0] - 1
    out = np.zeros(n_cls, np.int64)
    for c in range(n_cls):
        best = 0
        for i in range(bounds[c], bounds[c + 1]):
            v = lookup[col[i]]
            if v > best:
                best = v
        out[c] = best
    return out


@kernel_jit(nogil=True)
def shuffle_blocks(perm, bounds, rand):
    """Shuffle each block ``bounds[c]:bounds[c + 1]`` of ``perm`` in place
    (Fisher-Yates), drawing from ``rand``: one non-negative random integer
    per position. Returns ``perm``."""
    for c in range(bounds.shape[0] - 1):
        first = bounds[c]
        for i in range(bounds[c + 1] - 1, first, -1):
            j = first + rand[i] % (i - first + 1)
            tmp = perm[i]
            perm[i] = perm[j]
            perm[j] = tmp
    return perm


def warm_up() -> None:
    """Load (or compile) every kernel function on tiny inputs.

    Loading numba's on-disk cache takes about half a second per process; the
    API runs this in a thread while DuckDB reads the input, so the two overlap.
    """
    X = np.zeros((4, 1), np.int32)
    S = np.zeros((4, 1), np.int32)
    off = np.array([0, 2], np.int64)
    none = np.full(1, -1, np.int64)
    perm, bounds = partition(X, S, 2, 1, np.zeros(1, np.bool_), np.zeros(2), off[:1], np.ones(1), off, off,
                             none, np.zeros(1, np.int64), off, off, off, off)
    class_ranges(X, bounds, np.full(1, -1, np.int64))
    col = np.zeros(4, np.int32)
    count_distinct(col, bounds, 1)
    class_distinct(col, bounds, 1, -1)
    class_max_of(col, bounds, np.zeros(2, np.int64))
    shuffle_blocks(perm, bounds, np.zeros(4, np.int64))
