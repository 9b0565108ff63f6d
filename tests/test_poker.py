"""Tests for the UCI Poker Hand generator (examples/poker.py)."""

from __future__ import annotations

import itertools
import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples import poker  # noqa: E402
from examples.poker import classify, poker_table, write_poker  # noqa: E402

SUIT_COLS = [f"s{i}" for i in range(1, 6)]
RANK_COLS = [f"r{i}" for i in range(1, 6)]

# Number of 5-card hands of each class among all C(52, 5) = 2,598,960.
EXACT_COUNTS = [1302540, 1098240, 123552, 54912, 10200, 5108, 3744, 624, 36, 4]
TOTAL_HANDS = math.comb(52, 5)


def _arrays(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    suits = np.column_stack([table[c].to_numpy() for c in SUIT_COLS])
    ranks = np.column_stack([table[c].to_numpy() for c in RANK_COLS])
    return suits, ranks, table["hand"].to_numpy()


def reference_class(suits: list[int], ranks: list[int]) -> int:
    """Straightforward per-hand classifier, independent of the vectorized one."""
    counts = sorted(Counter(ranks).values(), reverse=True)
    flush = len(set(suits)) == 1
    distinct = sorted(set(ranks))
    straight = False
    royal = False
    if len(distinct) == 5:
        high_ace = sorted(14 if r == 1 else r for r in ranks)
        if distinct[4] - distinct[0] == 4 or high_ace[4] - high_ace[0] == 4:
            straight = True
        royal = high_ace == [10, 11, 12, 13, 14]
    if straight and flush:
        return 9 if royal else 8
    if counts[0] == 4:
        return 7
    if counts[:2] == [3, 2]:
        return 6
    if flush:
        return 5
    if straight:
        return 4
    if counts[0] == 3:
        return 3
    if counts[:2] == [2, 2]:
        return 2
    if counts[0] == 2:
        return 1
    return 0


def test_schema_and_ranges() -> None:
    t = poker_table(10_000, seed=3)
    assert t.num_rows == 10_000
    assert t.column_names == [
        "s1", "r1", "s2", "r2", "s3", "r3", "s4", "r4", "s5", "r5", "hand"
    ]
    assert all(f.type == pa.int16() for f in t.schema)
    assert all(t[c].null_count == 0 for c in t.column_names)
    suits, ranks, hand = _arrays(t)
    assert suits.min() == 1 and suits.max() == 4
    assert ranks.min() == 1 and ranks.max() == 13
    assert hand.min() >= 0 and hand.max() <= 9


def test_empty_table() -> None:
    t = poker_table(0)
    assert t.num_rows == 0
    assert t.schema == poker.poker_schema()
    with pytest.raises(ValueError):
        poker_table(-1)


def test_deterministic() -> None:
    a = poker_table(5_000, seed=7)
    b = poker_table(5_000, seed=7)
    c = poker_table(5_000, seed=8)
    assert a.equals(b)
    assert not a.equals(c)
    # Different seeds give (almost entirely) different hands.
    sa, ra, _ = _arrays(a)
    sc, rc, _ = _arrays(c)
    assert (np.all(sa == sc, axis=1) & np.all(ra == rc, axis=1)).mean() < 0.01


def test_prefix_stable() -> None:
    assert poker_table(1_000, seed=5).equals(poker_table(3_000, seed=5).slice(0, 1_000))


def test_cards_distinct_per_hand() -> None:
    suits, ranks, _ = _arrays(poker_table(100_000, seed=1))
    cards = np.sort((suits.astype(np.int32) - 1) * 13 + (ranks - 1), axis=1)
    assert cards.min() >= 0 and cards.max() <= 51
    assert np.all(np.diff(cards, axis=1) > 0)


def test_cards_uniform() -> None:
    """Every card is about equally likely in every dealing position."""
    n = 104_000
    suits, ranks, _ = _arrays(poker_table(n, seed=2))
    cards = (suits.astype(np.int32) - 1) * 13 + (ranks - 1)
    expected = n / 52  # 2000 per card and position; sd ~ 44
    for k in range(5):
        counts = np.bincount(cards[:, k], minlength=52)
        assert np.abs(counts - expected).max() < 6 * math.sqrt(expected)


def test_classes_match_reference() -> None:
    suits, ranks, hand = _arrays(poker_table(20_000, seed=11))
    expected = [
        reference_class(s.tolist(), r.tolist()) for s, r in zip(suits, ranks)
    ]
    np.testing.assert_array_equal(hand, np.array(expected))


HANDS = [
    # (cards as (suit, rank), expected class)
    ([(1, 2), (2, 5), (3, 9), (4, 11), (1, 13)], 0),  # nothing
    ([(1, 1), (2, 10), (3, 11), (4, 12), (1, 9)], 0),  # A-high, no straight
    ([(1, 1), (2, 2), (3, 3), (4, 4), (1, 6)], 0),  # A-2-3-4-6: nothing
    ([(1, 11), (2, 12), (3, 13), (4, 1), (1, 2)], 0),  # Q-K-A-2 wrap: nothing
    ([(1, 1), (2, 1), (3, 9), (4, 11), (1, 13)], 1),  # one pair
    ([(1, 4), (2, 4), (3, 9), (4, 9), (1, 13)], 2),  # two pairs
    ([(1, 7), (2, 7), (3, 7), (4, 9), (1, 13)], 3),  # three of a kind
    ([(1, 5), (2, 6), (3, 7), (4, 8), (1, 9)], 4),  # straight
    ([(1, 1), (2, 2), (3, 3), (4, 4), (1, 5)], 4),  # wheel A-2-3-4-5
    ([(1, 10), (2, 11), (3, 12), (4, 13), (1, 1)], 4),  # broadway 10-A
    ([(2, 2), (2, 5), (2, 9), (2, 11), (2, 13)], 5),  # flush
    ([(3, 1), (3, 10), (3, 11), (3, 12), (3, 9)], 5),  # flush, not straight
    ([(1, 3), (2, 3), (3, 3), (4, 12), (1, 12)], 6),  # full house
    ([(1, 8), (2, 8), (3, 8), (4, 8), (1, 2)], 7),  # four of a kind
    ([(4, 9), (4, 5), (4, 7), (4, 6), (4, 8)], 8),  # straight flush 5-9
    ([(3, 4), (3, 1), (3, 3), (3, 5), (3, 2)], 8),  # steel wheel A-5
    ([(1, 9), (1, 10), (1, 11), (1, 12), (1, 13)], 8),  # 9-K straight flush
    ([(2, 12), (2, 1), (2, 10), (2, 13), (2, 11)], 9),  # royal flush
]


@pytest.mark.parametrize("cards, expected", HANDS)
def test_handwritten_hands(cards: list[tuple[int, int]], expected: int) -> None:
    suits = np.array([[s for s, _ in cards]])
    ranks = np.array([[r for _, r in cards]])
    assert reference_class(suits[0].tolist(), ranks[0].tolist()) == expected
    # Every permutation of the cards gets the same class.
    perms = np.array(list(itertools.permutations(range(5))))
    got = classify(suits[0][perms], ranks[0][perms])
    assert got.dtype == np.int16
    np.testing.assert_array_equal(got, expected)


def test_handwritten_hands_batch() -> None:
    suits = np.array([[s for s, _ in cards] for cards, _ in HANDS], dtype=np.int16)
    ranks = np.array([[r for _, r in cards] for cards, _ in HANDS], dtype=np.int8)
    np.testing.assert_array_equal(classify(suits, ranks), [e for _, e in HANDS])
    assert set(e for _, e in HANDS) == set(range(10))


def test_classify_rejects_bad_shape() -> None:
    with pytest.raises(ValueError):
        classify(np.ones((3, 4)), np.ones((3, 4)))
    with pytest.raises(ValueError):
        classify(np.ones((3, 5)), np.ones((2, 5)))
    assert classify(np.ones((0, 5)), np.ones((0, 5))).shape == (0,)


def test_classify_all_hands_exact() -> None:
    """Classifying all C(52, 5) hands gives the textbook counts exactly."""
    flat = np.fromiter(
        itertools.chain.from_iterable(itertools.combinations(range(52), 5)),
        dtype=np.int8,
        count=5 * TOTAL_HANDS,
    )
    cards = flat.reshape(-1, 5)
    got = np.bincount(classify(cards // 13 + 1, cards % 13 + 1), minlength=10)
    assert got.tolist() == EXACT_COUNTS


def test_class_frequencies() -> None:
    n = 200_000
    hand = poker_table(n, seed=0)["hand"].to_numpy()
    freq = np.bincount(hand, minlength=10) / n
    # Known probabilities: nothing ~0.5012, one pair ~0.4226, two pairs
    # ~0.0475, three of a kind ~0.0211, ...  Tolerance: 6 standard errors
    # (a chance failure has probability ~1e-9) and at most 0.006.
    for cls in range(8):
        p = EXACT_COUNTS[cls] / TOTAL_HANDS
        tol = min(0.006, 6 * math.sqrt(p * (1 - p) / n))
        assert abs(freq[cls] - p) < tol, (cls, freq[cls], p)


def test_multiple_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(poker, "CHUNK_ROWS", 1_000)
    t = poker_table(2_500, seed=4)
    assert t.num_rows == 2_500
    assert t.slice(0, 1_000).equals(poker_table(1_000, seed=4))
    suits, ranks, hand = _arrays(t)
    cards = np.sort((suits.astype(np.int32) - 1) * 13 + (ranks - 1), axis=1)
    assert np.all(np.diff(cards, axis=1) > 0)
    np.testing.assert_array_equal(hand, classify(suits, ranks))
    # Chunks use independent streams.
    assert not t.slice(0, 1_000).equals(t.slice(1_000, 1_000))


@pytest.mark.parametrize("chunk_rows", [1_000, poker.CHUNK_ROWS])
def test_write_parquet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk_rows: int
) -> None:
    monkeypatch.setattr(poker, "CHUNK_ROWS", chunk_rows)
    path = write_poker(tmp_path / "poker.parquet", 2_500, seed=9)
    assert path == tmp_path / "poker.parquet"
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups == (3 if chunk_rows == 1_000 else 1)
    assert pq.read_table(path).equals(poker_table(2_500, seed=9))


def test_write_csv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(poker, "CHUNK_ROWS", 1_000)
    path = write_poker(tmp_path / "poker.csv", 2_500, seed=9)
    lines = path.read_text().splitlines()
    assert lines[0].replace('"', "") == ",".join(poker.COLUMNS)
    assert len(lines) == 2_501
    opts = pacsv.ConvertOptions(column_types=poker.poker_schema())
    got = pacsv.read_csv(path, convert_options=opts)
    assert got.equals(poker_table(2_500, seed=9))


def test_write_format_and_empty(tmp_path: Path) -> None:
    path = write_poker(tmp_path / "data.bin", 10, fmt="parquet")
    assert pq.read_table(path).equals(poker_table(10))
    with pytest.raises(ValueError):
        write_poker(tmp_path / "data.txt", 10)
    with pytest.raises(ValueError):
        write_poker(tmp_path / "data.csv", 10, fmt="json")
    empty = write_poker(tmp_path / "empty.parquet", 0)
    assert pq.read_table(empty).schema == poker.poker_schema()
    assert pq.read_table(empty).num_rows == 0


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "poker.parquet"
    assert poker.main(["--rows", "1234", "--seed", "3", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert pq.read_table(out).equals(poker_table(1234, seed=3))
