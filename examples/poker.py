"""Deterministic generator of the UCI Poker Hand data set.

The distributed Mondrian paper (§8.1) uses the UCI Poker Hand data set: each
record is a uniformly random 5-card hand dealt from a standard 52-card deck,
described by the suit (1-4) and rank (1-13, 1 = ace) of each card plus the
poker hand class (0-9).  This module regenerates such data at any size,
deterministically for a given ``(n, seed)``, with fully vectorized numpy.

Columns, in the UCI order (all ``int16``)::

    s1, r1, s2, r2, s3, r3, s4, r4, s5, r5, hand

Hand classes (UCI encoding): 0 nothing, 1 one pair, 2 two pairs, 3 three of a
kind, 4 straight, 5 flush, 6 full house, 7 four of a kind, 8 straight flush,
9 royal flush.  Aces count high or low for straights (A-2-3-4-5 and
10-J-Q-K-A are both straights); a royal flush is 10-J-Q-K-A of one suit.

Determinism: rows are produced in chunks of :data:`CHUNK_ROWS`; chunk ``i``
draws from ``numpy.random.default_rng(SeedSequence(seed, spawn_key=(i,)))``
(i.e. the ``i``-th child spawned from ``default_rng(seed)``'s seed sequence),
and each row consumes exactly five uniforms in row-major order.  Hence the
table depends only on ``(n, seed)`` and ``poker_table(m, s)`` is a prefix of
``poker_table(n, s)`` for ``m <= n``; :func:`write_poker` writes exactly the
rows of :func:`poker_table`.

CLI::

    python3 -m examples.poker --rows 1000000 --seed 0 -o poker.parquet
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

__all__ = [
    "CHUNK_ROWS",
    "COLUMNS",
    "HAND_NAMES",
    "classify",
    "deal",
    "iter_poker_batches",
    "main",
    "poker_schema",
    "poker_table",
    "write_poker",
]

#: Rows generated per chunk (and per Parquet row group / CSV batch).  Part of
#: the determinism contract: changing it changes the data for a given seed.
CHUNK_ROWS: int = 1 << 20

#: Output column names in UCI order.
COLUMNS: tuple[str, ...] = (
    "s1", "r1", "s2", "r2", "s3", "r3", "s4", "r4", "s5", "r5", "hand",
)

#: Human-readable names of the hand classes, indexed by class code.
HAND_NAMES: tuple[str, ...] = (
    "nothing",
    "one pair",
    "two pairs",
    "three of a kind",
    "straight",
    "flush",
    "full house",
    "four of a kind",
    "straight flush",
    "royal flush",
)

_DTYPE = np.int16
# Number of pairs of equal ranks among the five cards -> class code.
# 0 nothing, 1 pair, 2 two pairs, 3 trips, 4 full house, 6 quads (5 impossible).
_EQUAL_PAIRS_TO_CLASS = np.array([0, 1, 2, 3, 6, -1, 7], dtype=_DTYPE)
_PAIRS = [(i, j) for i in range(5) for j in range(i + 1, 5)]
_SUIT_OF_CARD = (np.arange(52) // 13 + 1).astype(_DTYPE)
_RANK_OF_CARD = (np.arange(52) % 13 + 1).astype(_DTYPE)


def poker_schema() -> pa.Schema:
    """Returns the Arrow schema of the generated table.

    Returns:
        A schema with the 11 :data:`COLUMNS`, all ``int16`` (never null).
    """
    return pa.schema([pa.field(c, pa.int16()) for c in COLUMNS])


def classify(suits: np.ndarray, ranks: np.ndarray) -> np.ndarray:
    """Classifies 5-card poker hands (vectorized).

    Args:
        suits: Integer array of shape ``(n, 5)`` with suits (any 4 distinct
            codes; only equality is used).
        ranks: Integer array of shape ``(n, 5)`` with ranks 1-13 (1 = ace).
            The five cards of a hand are assumed distinct.

    Returns:
        ``int16`` array of shape ``(n,)`` with the UCI hand class 0-9.

    Raises:
        ValueError: If the shapes are not ``(n, 5)`` or differ.
    """
    suits = np.asarray(suits)
    ranks = np.asarray(ranks)
    if suits.ndim != 2 or suits.shape[1] != 5 or suits.shape != ranks.shape:
        raise ValueError(
            f"suits and ranks must both have shape (n, 5); got {suits.shape} "
            f"and {ranks.shape}"
        )
    return _classify_columns(
        [suits[:, k] for k in range(5)],
        [np.ascontiguousarray(ranks[:, k], dtype=_DTYPE) for k in range(5)],
    )


# Optimal sorting network for 5 elements (9 comparators).
_SORT5 = ((0, 1), (3, 4), (2, 4), (2, 3), (0, 3), (0, 2), (1, 4), (1, 3), (1, 2))


def _classify_columns(
    suits: Sequence[np.ndarray], ranks: Sequence[np.ndarray]
) -> np.ndarray:
    """Classifies hands given as five suit columns and five rank columns."""
    rs = list(ranks)
    for i, j in _SORT5:
        lo = np.minimum(rs[i], rs[j])
        rs[j] = np.maximum(rs[i], rs[j])
        rs[i] = lo
    # Number of pairs of cards with equal rank (a group of L equal ranks adds
    # L*(L-1)/2).  Sorted, the pair (0, 4) can never be equal (no 5 of a kind).
    equal_pairs = np.zeros(rs[0].shape[0], dtype=np.int8)
    for i, j in _PAIRS:
        if (i, j) != (0, 4):
            equal_pairs += rs[i] == rs[j]
    hand = _EQUAL_PAIRS_TO_CLASS[equal_pairs]

    distinct = equal_pairs == 0
    # A-10-J-Q-K (ace high): sorted ranks are exactly 1, 10, 11, 12, 13.
    broadway = (rs[0] == 1) & (rs[1] == 10)
    broadway &= distinct
    straight = distinct & ((rs[4] - rs[0]) == 4)
    straight |= broadway
    flush = suits[0] == suits[1]
    for k in (2, 3, 4):
        flush &= suits[0] == suits[k]

    hand[straight] = 4
    hand[flush] = 5
    hand[straight & flush] = 8
    hand[broadway & flush] = 9
    return hand


def deal(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Deals ``n`` uniformly random 5-card hands (cards in dealing order).

    Each card is drawn uniformly from the cards not yet dealt in its hand, so
    every ordered 5-tuple of distinct cards is equally likely.  Consumes the
    ``rng`` stream as ``rng.random((n, 5))`` (row-major), so the first ``m``
    hands do not depend on ``n``.

    Args:
        rng: Random generator.
        n: Number of hands.

    Returns:
        ``(suits, ranks)``: ``int16`` arrays of shape ``(n, 5)``, suits 1-4 and
        ranks 1-13.
    """
    cards = _deal_columns(rng, n)
    suits = np.stack([_SUIT_OF_CARD[c] for c in cards], axis=1)
    ranks = np.stack([_RANK_OF_CARD[c] for c in cards], axis=1)
    return suits, ranks


def _deal_columns(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """Deals ``n`` hands; returns 5 card columns (codes 0-51, dealing order)."""
    u = rng.random((n, 5))
    cards: list[np.ndarray] = []
    dealt: list[np.ndarray] = []  # cards dealt so far, sorted per row
    for k in range(5):
        # Index of the card among the 52 - k not yet dealt ...
        x = (u[:, k] * (52 - k)).astype(_DTYPE)
        np.minimum(x, 51 - k, out=x)  # guard against rounding at u -> 1
        # ... mapped to the card: skip over the dealt cards in ascending order.
        for d in dealt:
            x += x >= d
        cards.append(x)
        if k < 4:
            dealt = _insert_sorted(dealt, x)
    return cards


def _insert_sorted(cols: list[np.ndarray], x: np.ndarray) -> list[np.ndarray]:
    """Inserts ``x`` into row-wise sorted columns (values all distinct)."""
    if not cols:
        return [x]
    out: list[np.ndarray] = []
    prev = None  # x > cols[j - 1]
    for j, c in enumerate(cols):
        below = x < c  # x goes at or before position j
        if prev is None:
            out.append(np.where(below, x, c))
        else:
            # Position j holds: c if x is after it, x if x goes exactly here,
            # else the previous column shifted right.
            out.append(np.where(below, np.where(prev, x, cols[j - 1]), c))
        prev = ~below
    out.append(np.where(prev, x, cols[-1]))
    return out


def _chunk_rng(seed: int, index: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))


def _check_n(n: int) -> int:
    n = int(n)
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    return n


def _chunk_columns(seed: int, index: int, m: int) -> list[np.ndarray]:
    cards = _deal_columns(_chunk_rng(seed, index), m)
    suits = [_SUIT_OF_CARD[c] for c in cards]
    ranks = [_RANK_OF_CARD[c] for c in cards]
    hand = _classify_columns(suits, ranks)
    cols: list[np.ndarray] = []
    for s, r in zip(suits, ranks):
        cols += [s, r]
    cols.append(hand)
    return cols


def iter_poker_batches(n: int, seed: int = 0) -> Iterator[pa.RecordBatch]:
    """Yields the rows of :func:`poker_table` as record batches.

    Args:
        n: Total number of rows.
        seed: Random seed.

    Yields:
        Record batches of at most :data:`CHUNK_ROWS` rows each, with schema
        :func:`poker_schema`.
    """
    n = _check_n(n)
    schema = poker_schema()
    chunk = CHUNK_ROWS
    for index, start in enumerate(range(0, n, chunk)):
        m = min(chunk, n - start)
        cols = _chunk_columns(seed, index, m)
        yield pa.RecordBatch.from_arrays([pa.array(c) for c in cols], schema=schema)


def poker_table(n: int, seed: int = 0) -> pa.Table:
    """Generates ``n`` random poker hands as an Arrow table.

    Args:
        n: Number of rows (hands).
        seed: Random seed; the result is a deterministic function of
            ``(n, seed)``.

    Returns:
        Table with the ``int16`` columns ``s1, r1, ..., s5, r5, hand``.

    Raises:
        ValueError: If ``n`` is negative.
    """
    n = _check_n(n)
    out = [np.empty(n, dtype=_DTYPE) for _ in COLUMNS]
    chunk = CHUNK_ROWS
    for index, start in enumerate(range(0, n, chunk)):
        m = min(chunk, n - start)
        for dst, src in zip(out, _chunk_columns(seed, index, m)):
            dst[start : start + m] = src
    return pa.Table.from_arrays([pa.array(c) for c in out], schema=poker_schema())


def _infer_format(path: Path, fmt: str | None) -> str:
    if fmt is None:
        suffix = path.suffix.lower()
        if suffix in (".parquet", ".pq"):
            return "parquet"
        if suffix == ".csv":
            return "csv"
        raise ValueError(
            f"cannot infer format from {path.name!r}; use a .parquet or .csv "
            "extension or pass fmt='parquet' / fmt='csv'"
        )
    fmt = fmt.lower()
    if fmt not in ("parquet", "csv"):
        raise ValueError(f"unsupported format {fmt!r}; expected 'parquet' or 'csv'")
    return fmt


def write_poker(
    path: str | Path, n: int, seed: int = 0, fmt: str | None = None
) -> Path:
    """Writes ``poker_table(n, seed)`` to a Parquet or CSV file in chunks.

    Memory stays bounded by one chunk (:data:`CHUNK_ROWS` rows) regardless
    of ``n``; each chunk becomes one Parquet row group.

    Args:
        path: Output file path (overwritten if present).
        n: Number of rows.
        seed: Random seed.
        fmt: ``"parquet"`` or ``"csv"``; inferred from the extension of
            ``path`` (``.parquet``/``.pq``/``.csv``) when ``None``.

    Returns:
        The output path.

    Raises:
        ValueError: If ``n`` is negative or the format is unknown.
    """
    path = Path(path)
    fmt = _infer_format(path, fmt)
    n = _check_n(n)
    schema = poker_schema()
    if fmt == "parquet":
        with pq.ParquetWriter(path, schema) as writer:
            for batch in iter_poker_batches(n, seed):
                writer.write_batch(batch, row_group_size=batch.num_rows)
            if n == 0:
                writer.write_table(schema.empty_table())
    else:
        with pacsv.CSVWriter(path, schema) as writer:
            for batch in iter_poker_batches(n, seed):
                writer.write_batch(batch)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point.

    Args:
        argv: Arguments (defaults to ``sys.argv[1:]``).

    Returns:
        Process exit status (0 on success).
    """
    parser = argparse.ArgumentParser(
        prog="python3 -m examples.poker",
        description="Generate a UCI Poker Hand-like data set (random 5-card hands).",
    )
    parser.add_argument("--rows", "-n", type=int, default=1_000_000,
                        help="number of hands (default: 1000000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    parser.add_argument("-o", "--output", required=True,
                        help="output file (.parquet or .csv)")
    parser.add_argument("--format", choices=("parquet", "csv"), default=None,
                        help="output format (default: from the extension)")
    args = parser.parse_args(argv)
    if args.rows < 0:
        parser.error("--rows must be >= 0")
    try:
        path = write_poker(args.output, args.rows, args.seed, args.format)
    except ValueError as exc:
        parser.error(str(exc))
    print(path, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
