"""Hand-worked examples of the engine: the expected classes and values are
written out by hand here, from the paper's §2 narrative and small cases."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from sqlanon import AnonymizationSpec, ConfigError, InputError, PrivacyError, QuasiIdentifier, anonymize_table
from sqlanon import engine
from sqlanon.domain import distinct
from sqlanon.engine import column_stats
from sqlanon.errors import HierarchyError
from sqlanon.generalization import _one_per_range
from sqlanon.hierarchies import load_hierarchy
from sqlanon.metrics import Metrics

FIG1 = {
    "cat": "World",
    "subcats": [
        {"cat": "Europe", "subcats": [{"cat": c, "subcats": None} for c in ("Italy", "France", "Spain")]},
        {"cat": "North America", "subcats": [{"cat": c, "subcats": None} for c in ("USA", "Canada", "Greenland")]},
        {"cat": "Asia", "subcats": [{"cat": c, "subcats": None} for c in ("China", "Japan", "India")]},
    ],
}


@pytest.fixture
def fig1(tmp_path):
    path = tmp_path / "country.json"
    path.write_text(json.dumps(FIG1))
    return load_hierarchy(path)


@pytest.fixture
def fig2():
    """The dataset of the paper's Fig. 2(a) as its §2 text describes it."""
    return pa.table(
        {
            "Age": [25, 25, 30, 42, 50, 43, 38, 38, 38],
            "Country": ["Italy", "Italy", "France", "Canada", "USA", "Canada", "USA", "USA", "USA"],
            "TopSpeed": [132, 140, 150, 160, 170, 180, 120, 130, 140],
        }
    )


def test_paper_fig2_classes_and_values(fig1, fig2):
    spec = AnonymizationSpec(
        (QuasiIdentifier("Age"), QuasiIdentifier("Country", hierarchy=fig1)), k=3, l=2, sensitive=("TopSpeed",)
    )
    r = anonymize_table(fig2, spec)
    # First cut: Age (most distinct values) at its median 38; then the left
    # side on Country (representativity 3/4 > 13/25) into {Italy, France} and {USA}.
    published = sorted(zip(*(r.table.column(c).to_pylist() for c in ("Age", "Country", "TopSpeed"))))
    assert published == sorted(
        [("[25, 30]", "Europe", v) for v in (132, 140, 150)]
        + [("[42, 50]", "North America", v) for v in (160, 170, 180)]
        + [("38", "USA", v) for v in (120, 130, 140)]
    )
    m = r.metrics
    assert (m.rows, m.classes, m.min_class_size, m.dp) == (9, 3, 3, 27)
    # NCP by hand: Range(Age) = 50 - 25; Europe and North America cover 3 of 9 leaves.
    assert m.ncp_by_attribute["Age"] == pytest.approx(3 * 5 / 25 + 3 * 8 / 25)
    assert m.ncp_by_attribute["Country"] == pytest.approx(3 * 3 / 9 + 3 * 3 / 9)
    assert m.ncp == pytest.approx(1.56 + 2.0)
    assert m.gcp == pytest.approx(3.56 / 18)
    assert m.achieved_l == 3  # every class holds three distinct speeds
    assert m.c_avg == pytest.approx(1.0)


def test_l_diversity_blocks_a_cut(fig1, fig2):
    # The three USA/38 rows share one TopSpeed: they cannot form a 2-diverse
    # class, so the left side (Age <= 38) must stay whole.
    speeds = [132, 140, 150, 160, 170, 180, 120, 120, 120]
    t = fig2.set_column(2, "TopSpeed", pa.array(speeds))
    spec = AnonymizationSpec(
        (QuasiIdentifier("Age"), QuasiIdentifier("Country", hierarchy=fig1)), k=3, l=2, sensitive=("TopSpeed",)
    )
    r = anonymize_table(t, spec)
    rows = zip(*(r.table.column(c).to_pylist() for c in ("Age", "Country", "TopSpeed")))
    left = sorted(speed for age, country, speed in rows if (age, country) == ("[25, 38]", "World"))
    assert left == sorted([132, 140, 150, 120, 120, 120])
    assert r.metrics.classes == 2 and r.metrics.dp == 36 + 9


def test_prefix_generalization_and_ncp():
    t = pa.table({"zip": ["10010", "10020", "10030", "20010", "20020", "20031"]})
    spec = AnonymizationSpec((QuasiIdentifier("zip", "prefix"),), k=3)
    r = anonymize_table(t, spec)
    assert r.table.column("zip").to_pylist() == ["100**"] * 3 + ["200**"] * 3
    # 3 of the 6 domain values start with each prefix.
    assert r.metrics.ncp == pytest.approx(6 * 3 / 6)


def test_prefix_pads_to_the_longest_value():
    t = pa.table({"code": ["ab", "abcd", "abx"]})
    r = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("code", "prefix"),), k=3))
    assert r.table.column("code").to_pylist() == ["ab**"] * 3


def test_a_prefix_value_ending_with_a_star_is_quoted():
    """A class of the already masked 'ab*' and one of abc and abd were both
    published 'ab*': one class of 20 rows to every reader, whose NCP (20)
    is not the run's (10): helper-50. The value is quoted."""
    t = pa.table({"code": ["ab*"] * 10 + ["abc"] * 5 + ["abd"] * 5})
    r = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("code", "prefix"),), k=10))
    assert sorted(set(r.table.column("code").to_pylist())) == ['"ab*"', "ab*"]
    assert r.metrics.ncp == pytest.approx(10 * 3 / 3)  # 'ab*' covers all 3 values (ab* too); "ab*" costs 0
    assert r.metrics.classes == 2


def test_a_prefix_ending_with_a_literal_star_costs_what_it_reads_as():
    """Classes of *a and *b (prefix '*') and of ab and bc (no prefix) were
    both published '**': one class to every reader, of no prefix (NCP 8),
    but the run reported the first's prefix '*' (NCP 6); so '021*5' beside
    '021**' published '021**' at the cost of '021*' (helper-59)."""
    t = pa.table({"s": ["*a", "*a", "*b", "*b", "ab", "ab", "bc", "bc"]})
    r = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("s", "prefix"),), k=4))
    assert set(r.table.column("s").to_pylist()) == {"**"}
    assert r.metrics.ncp == pytest.approx(8 * 4 / 4)
    t = pa.table({"zip": ["021**", "021*5", "02345", "02346"] * 2})
    r = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("zip", "prefix"),), k=4))
    assert sorted(set(r.table.column("zip").to_pylist())) == ["021**", "0234*"]
    assert r.metrics.ncp == pytest.approx(4 * 2 / 4 + 4 * 2 / 4)  # '021' starts 2 of the 4 values, '0234' 2


def test_set_generalization():
    t = pa.table({"color": ["red", "blue", "red", "green", "green", "green"]})
    r = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("color"),), k=3))
    # Codes blue < green < red; sorted 0,1,1,1,2,2: the median cut "<= green"
    # leaves 2 rows on the right and "< green" 1 on the left: no valid cut.
    assert r.table.column("color").to_pylist() == ["{blue, green, red}"] * 6
    assert r.metrics.ncp == pytest.approx(6 * 3 / 3)


def test_set_generalization_exact():
    t = pa.table({"color": ["b", "b", "b", "a", "c", "a"]})
    r = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("color"),), k=3))
    # sorted codes a,a,b,b,b,c: median b -> left {a,a,b,b,b} (5 rows) leaves 1: invalid;
    # "< b" -> left {a, a}: invalid; no cut: one class.
    assert set(r.table.column("color").to_pylist()) == {"{a, b, c}"}
    assert r.metrics.ncp == pytest.approx(6 * 3 / 3)


def test_dates_and_bounds():
    days = [dt.date(2024, 1, d) for d in (1, 2, 3, 20, 21, 22)]
    t = pa.table({"day": days, "v": list(range(6))})
    text = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("day"),), k=3))
    assert text.table.column("day").to_pylist() == ["[2024-01-01, 2024-01-03]"] * 3 + ["[2024-01-20, 2024-01-22]"] * 3
    assert text.metrics.ncp == pytest.approx(3 * 2 / 21 + 3 * 2 / 21)
    b = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("day"),), k=3, interval_format="bounds"))
    assert b.table.column_names == ["day_lo", "day_hi", "v"]
    assert b.table.schema.field("day_lo").type == pa.date32()
    assert b.table.column("day_lo").to_pylist() == [dt.date(2024, 1, 1)] * 3 + [dt.date(2024, 1, 20)] * 3
    assert b.table.column("day_hi").to_pylist() == [dt.date(2024, 1, 3)] * 3 + [dt.date(2024, 1, 22)] * 3


def test_nulls_are_a_value_of_their_own():
    t = pa.table({"age": [1, 2, 3, None, None, None]})
    r = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("age"),), k=3))
    # NULL ranks after every value: the median cut separates the NULLs.
    assert r.table.column("age").to_pylist() == ["[1, 3]"] * 3 + [None] * 3
    assert r.metrics.ncp == pytest.approx(3 * 2 / 2)


def test_null_mixed_with_values():
    t = pa.table({"age": [1, 2, None, 4], "s": ["x", "y", "x", "y"]})
    r = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("age"),), k=4))
    assert set(r.table.column("age").to_pylist()) == {"[1, 4] or NULL"}
    assert r.metrics.ncp == pytest.approx(4.0)  # a mixed class costs 1 per row


def test_constant_column_is_never_cut_and_costs_nothing():
    t = pa.table({"c": [7] * 6, "a": [1, 2, 3, 4, 5, 6]})
    r = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("c"), QuasiIdentifier("a")), k=2))
    assert r.table.column("c").to_pylist() == ["7"] * 6
    assert r.metrics.ncp_by_attribute["c"] == 0
    # Median cut of 1..6 at 3; halves of 3 rows cannot be cut again at k = 2.
    assert r.table.column("a").to_pylist() == ["[1, 3]"] * 3 + ["[4, 6]"] * 3
    assert r.metrics.classes == 2


def test_identical_generalizations_merge_into_one_class(fig1):
    # Two classes whose hierarchy LCA is the same node are one published class.
    t = pa.table(
        {
            "n": [1, 1, 1, 1, 1, 1],
            "c": ["Italy", "USA", "China", "France", "Canada", "Japan"],
        }
    )
    spec = AnonymizationSpec((QuasiIdentifier("n"), QuasiIdentifier("c", hierarchy=fig1)), k=3)
    r = anonymize_table(t, spec)
    # Leaf order Italy France | USA Canada | China Japan; median cut -> {Italy, France, USA}
    # and {Canada, China, Japan}: both generalize to World.
    assert set(r.table.column("c").to_pylist()) == {"World"}
    assert r.metrics.classes == 1 and r.metrics.dp == 36
    assert len(set(r.class_of_row.tolist())) == 1


def test_classes_that_publish_alike_are_cut_again_on_the_other_qis(tmp_path):
    """Asia's 20 rows were cut at the median leaf (China, Japan | Korea,
    Vietnam): both sides under Asia with ages 30-39, neither cut again (10
    rows each, k = 10), one published class of 20 rows that a cut on age
    splits into two valid ones (Adult: age [33, 37] in Asia, 25 rows;
    helper-124)."""
    tree = tmp_path / "h.json"
    tree.write_text(json.dumps({"cat": "*", "subcats": [
        {"cat": "Asia", "subcats": [{"cat": c, "subcats": None} for c in ("China", "Japan", "Korea", "Vietnam")]},
        {"cat": "Europe", "subcats": [{"cat": c, "subcats": None} for c in ("France", "Germany", "Italy", "Spain")]},
    ]}))
    ages = {"China": range(30, 35), "Japan": range(35, 40), "Korea": range(30, 35), "Vietnam": range(35, 40),
            "France": range(60, 65), "Germany": range(65, 70), "Italy": range(70, 75), "Spain": range(75, 80)}
    t = pa.table({"age": [a for c in ages for a in ages[c]], "country": [c for c in ages for _ in ages[c]],
                  "dx": ["a", "b"] * 20, "id": range(40)})
    spec = AnonymizationSpec((QuasiIdentifier("age"), QuasiIdentifier("country", hierarchy=load_hierarchy(tree))),
                             k=10, l=2, sensitive=("dx",))
    r = anonymize_table(t, spec)
    published = sorted(set(zip(r.table.column("age").to_pylist(), r.table.column("country").to_pylist())))
    assert published == [("[30, 34]", "Asia"), ("[35, 39]", "Asia"), ("[60, 69]", "Europe"),
                         ("[70, 79]", "Europe")], published
    assert r.metrics.classes == 4 and r.metrics.min_class_size == 10 and r.metrics.dp == 4 * 10 * 10
    assert sorted(Counter(r.class_of_row.tolist()).values()) == [10] * 4
    for i, label in zip(r.table.column("id").to_pylist(), r.table.column("age").to_pylist()):
        lo, hi = map(int, label.strip("[]").split(", "))  # each row's own age within its published interval
        assert lo <= t.column("age")[i].as_py() <= hi


def test_classes_cut_again_never_join_another_published_class(tmp_path):
    """X (A P 0, B Q 1) and Y (C Q 0, D P 1) publish [0, 1], Asia, Europe
    and merge; cut again on age, their halves published as K0 (A R 0, B S 0)
    and K1 (C R 1, D S 1) did and joined them: 3 classes of DP 24 became 2
    of DP 32 (helper-125). They stay one class."""
    for name, root, leaves in (("c1", "Asia", "ABCD"), ("c2", "Europe", "PQRS")):
        (tmp_path / f"{name}.json").write_text(json.dumps(
            {"cat": root, "subcats": [{"cat": c, "subcats": None} for c in leaves]}))
    rows = [("A", "P", 0), ("B", "Q", 1), ("A", "R", 0), ("B", "S", 0),
            ("C", "Q", 0), ("D", "P", 1), ("C", "R", 1), ("D", "S", 1)]
    t = pa.table({"c1": [r[0] for r in rows], "c2": [r[1] for r in rows], "age": [r[2] for r in rows]})
    spec = AnonymizationSpec((QuasiIdentifier("c1", hierarchy=load_hierarchy(tmp_path / "c1.json")),
                              QuasiIdentifier("c2", hierarchy=load_hierarchy(tmp_path / "c2.json")),
                              QuasiIdentifier("age")), k=2)
    r = anonymize_table(t, spec)
    published = Counter(zip(*(r.table.column(c).to_pylist() for c in ("age", "c1", "c2"))))
    assert sorted(published.values()) == [2, 2, 4], published
    assert r.metrics.classes == 3 and r.metrics.dp == 24


def test_a_hierarchy_is_cut_at_a_child_boundary_of_its_lca(tmp_path):
    """The median leaf (a2) split A's leaves: {a1, a2} | {a3, b1}, the
    latter published as '*' (20 rows of NCP 1). Cut at the boundary of the
    LCA's child holding the median (A | B), every side keeps whole subtrees:
    a1, {a2, a3} as A, b1 (helper-126's measure on Adult: NCP 19 % lower,
    median of 30 configurations)."""
    tree = tmp_path / "h.json"
    tree.write_text(json.dumps({"cat": "*", "subcats": [
        {"cat": "A", "subcats": [{"cat": c, "subcats": None} for c in ("a1", "a2", "a3")]},
        {"cat": "B", "subcats": [{"cat": "b1", "subcats": None}]},
    ]}))
    t = pa.table({"c": ["a1"] * 10 + ["a2"] * 10 + ["a3"] * 5 + ["b1"] * 15})
    r = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("c", hierarchy=load_hierarchy(tree)),), k=10))
    assert sorted(Counter(r.table.column("c").to_pylist()).items()) == [("A", 15), ("a1", 10), ("b1", 15)]
    assert r.metrics.ncp == pytest.approx(15 * 3 / 4)


@pytest.mark.parametrize("wide", [False, True], ids=["histogram", "scan"])
def test_a_hierarchy_holding_null_is_cut_at_a_child_boundary_too(tmp_path, wide):
    """A block holding NULL (its code after the leaves) was never snapped:
    {a, b, c} | {d, e, NULL} by the median, published as '*' and 'G2 or
    NULL' (NCP 60). Snapped among its leaves, NULL on the right as any cut
    puts it: G1, G2, 'e or NULL' (helper-194). ``wide``: a hierarchy of
    many more leaves than rows (the block's last leaf found by a scan,
    not from the median's histogram)."""
    extra = [{"cat": f"z{i:03d}", "subcats": None} for i in range(300)] if wide else []
    tree = tmp_path / "h.json"
    tree.write_text(json.dumps({"cat": "*", "subcats": [
        {"cat": "G1", "subcats": [{"cat": c, "subcats": None} for c in "ab"]},
        {"cat": "G2", "subcats": [{"cat": c, "subcats": None} for c in "cde"]},
        *([{"cat": "Z", "subcats": extra}] if wide else []),
    ]}))
    t = pa.table({"h": [v for v in ["a", "b", "c", "d", "e", None] for _ in range(10)]})
    r = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("h", hierarchy=load_hierarchy(tree)),), k=20))
    assert sorted(Counter(r.table.column("h").to_pylist()).items()) == [("G1", 20), ("G2", 20), ("e or NULL", 20)]


def test_with_l_a_snapped_cut_must_not_strand_a_side_short_of_sensitive_values(tmp_path):
    """The child boundary A | B leaves b1's 10 rows one value 1 of s: with
    l = 2 they are one class, however cut. The median cut {a1, a2} |
    {a3, b1} leaves 3 there, and a3 | b1 can then be cut on age: the
    snapped cut's least reachable DP (196/6 + 100) is over 1.1 times the
    median's (144/4 + 144/3): DP 150 -> 108, NCP 16 -> 12 (helper-129: on
    Adult's eight QIs with l = 2 DP rose 44-47 % from such cuts)."""
    tree = tmp_path / "h.json"
    tree.write_text(json.dumps({"cat": "*", "subcats": [
        {"cat": "A", "subcats": [{"cat": c, "subcats": None} for c in ("a1", "a2", "a3")]},
        {"cat": "B", "subcats": [{"cat": "b1", "subcats": None}]},
    ]}))
    t = pa.table({"c": ["a1"] * 6 + ["a2"] * 6 + ["a3"] * 2 + ["b1"] * 10,
                  "age": [0, 1, 0, 0, 1, 1] * 2 + [0, 1] + [0] * 5 + [1] * 5,
                  "s": [1, 1, 0, 0, 0, 0] * 2 + [1, 1] + [1] + [0] * 9})
    r = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("c", hierarchy=load_hierarchy(tree)),
                                              QuasiIdentifier("age")), k=2, l=2, sensitive=("s",)))
    assert (r.metrics.dp, r.metrics.ncp) == (108, pytest.approx(12.0))
    published = Counter(zip(r.table.column("c").to_pylist(), r.table.column("age").to_pylist()))
    assert published[("*", "0")] == published[("*", "1")] == 6


def test_fragments_add_up(fig1, fig2):
    spec = AnonymizationSpec(
        (QuasiIdentifier("Age"), QuasiIdentifier("Country", hierarchy=fig1)), k=3, l=2, sensitive=("TopSpeed",)
    )
    stats = column_stats(fig2, spec)
    whole = anonymize_table(fig2, spec).metrics
    ages = np.array(fig2.column("Age").to_pylist())
    parts = [
        anonymize_table(fig2.filter(pa.array(mask)), spec, stats).metrics for mask in (ages <= 38, ages > 38)
    ]
    total = Metrics.combine(parts)
    assert (total.rows, total.classes, total.dp, total.min_class_size) == (9, 3, 27, 3)
    assert math.isclose(total.ncp, whole.ncp)


@pytest.mark.parametrize(
    "spec_kwargs, error, text",
    [
        (dict(k=10), PrivacyError, "k=10"),
        (dict(k=2, l=9, sensitive=("TopSpeed",)), PrivacyError, "TopSpeed"),
    ],
)
def test_impossible_requests_fail_clearly(fig2, spec_kwargs, error, text):
    with pytest.raises(error, match=text):
        anonymize_table(fig2, AnonymizationSpec((QuasiIdentifier("Age"),), **spec_kwargs))


def test_bad_specs():
    with pytest.raises(ConfigError, match="k must be"):
        AnonymizationSpec((QuasiIdentifier("a"),), k=1)
    with pytest.raises(ConfigError, match="both a quasi-identifier and sensitive"):
        AnonymizationSpec((QuasiIdentifier("a"),), k=2, sensitive=("a",))
    with pytest.raises(ConfigError, match="needs at least one sensitive"):
        AnonymizationSpec((QuasiIdentifier("a"),), k=2, l=2)
    with pytest.raises(ConfigError, match="did you mean 'interval'"):
        QuasiIdentifier("a", "intervall")


def test_missing_column_and_empty_table(fig2):
    with pytest.raises(ConfigError, match="'Speed'"):
        anonymize_table(fig2, AnonymizationSpec((QuasiIdentifier("Speed"),), k=2))
    with pytest.raises(InputError, match="no rows"):
        anonymize_table(fig2.slice(0, 0), AnonymizationSpec((QuasiIdentifier("Age"),), k=2))


def test_interval_on_text_is_a_config_error():
    t = pa.table({"name": ["a", "b"]})
    with pytest.raises(ConfigError, match="'name'.*interval"):
        anonymize_table(t, AnonymizationSpec((QuasiIdentifier("name", "interval"),), k=2))


def test_a_half_float_qi_and_sensitive_column_are_anonymized():
    """Arrow has no arithmetic on half floats: a float16 QI failed with
    ArrowNotImplementedError (helper-8). The sensitive column passes through
    as it was."""
    t = pa.table({"x": pa.array(np.arange(10, dtype=np.float16) / 3),
                  "s": pa.array((np.arange(10) % 3).astype(np.float16))})
    r = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("x"),), k=2, l=2, sensitive=("s",)))
    assert r.metrics.min_class_size >= 2 and r.table.schema.field("s").type == pa.float16()


def test_float32_intervals_hold_their_values_read_as_doubles():
    """float32 bounds were written in float32's shortest text: '6.6951504'
    reads as a double above the value it bounds (6.695150375366211), and 16 %
    of a column's rows lay outside their published interval (helper-8)."""
    x = np.random.default_rng(3).uniform(0, 100, 2_000).astype(np.float32)
    t = pa.table({"x": pa.array(x, pa.float32()), "id": np.arange(len(x))})
    out = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("x"),), k=5)).table
    got = dict(zip(out.column("id").to_pylist(), out.column("x").to_pylist()))
    for i, value in enumerate(x.astype(np.float64)):
        lo, _, hi = got[i].strip("[]").partition(", ")
        assert float(lo) <= value <= float(hi or lo), (got[i], value)
    # and its bounds, which a CSV file wrote in float32's text (helper-19): the double it is
    out = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("x"),), k=5, interval_format="bounds")).table
    lo, hi = (np.array([float(v) for v in out.column(c).cast(pa.string()).to_pylist()]) for c in ("x_lo", "x_hi"))
    value = x.astype(np.float64)[out.column("id").to_numpy()]
    assert ((lo <= value) & (value <= hi)).all()


def test_an_empty_string_class_is_quoted_under_prefix_and_hierarchy(tmp_path):
    """A class of '' was published as '' under prefix and hierarchy, which a
    CSV file writes as "" and DuckDB and pandas read as NULL: it merged with
    the class of NULLs (helper-8). Quoted, as a set's empty member is."""
    t = pa.table({"code": pa.array([""] * 4 + [None] * 4 + ["ab", "ac", "ad", "ae"], pa.string()),
                  "g": [1] * 8 + [2] * 4})
    out = anonymize_table(t, AnonymizationSpec((QuasiIdentifier("code", "prefix"), QuasiIdentifier("g")), k=2)).table
    assert sorted(map(str, out.column("code").to_pylist())) == sorted(['""'] * 4 + ["a*"] * 4 + ["None"] * 4)
    tree = tmp_path / "h.json"
    tree.write_text(json.dumps({"cat": "*", "subcats": [{"cat": ""}, {"cat": "x"}]}))
    h = pa.table({"code": ["", "", "x", "x"]})
    out = anonymize_table(h, AnonymizationSpec((QuasiIdentifier("code", hierarchy=load_hierarchy(tree)),), k=2)).table
    assert sorted(out.column("code").to_pylist()) == ['""', '""', "x", "x"]


def test_a_group_sharing_its_ancestors_label_costs_what_it_reads_as(tmp_path):
    """a;*;* b;*;* c;G;* d;G;*: the class {a, b} is published as '*', which
    reads as the root (4 leaves), but was charged NCP for its own group's 2
    (helper-8)."""
    tree = tmp_path / "h.csv"
    tree.write_text("a;*;*\nb;*;*\nc;G;*\nd;G;*\n")
    t = pa.table({"v": ["a", "b"] * 3 + ["a", "c", "a", "d", "b", "c"], "g": [1] * 6 + [2] * 6})
    spec = AnonymizationSpec((QuasiIdentifier("v", hierarchy=load_hierarchy(tree)), QuasiIdentifier("g")), k=3)
    r = anonymize_table(t, spec)
    labels = r.table.column("v").to_pylist()
    assert labels.count("*") == 3 and labels.count("G") == 3
    assert r.metrics.ncp_by_attribute["v"] == pytest.approx(3 * 4 / 4 + 3 * 2 / 4)


def test_rows_are_published_by_class_in_a_random_order():
    """In the input's order, whoever knows that order (here: sorted by age)
    pairs each class's rows with the people in it (Sweeney's unsorted
    matching attack). Rows come out grouped by class, shuffled within each
    class from fresh entropy: two runs differ."""
    n = 2_000
    t = pa.table({"age": sorted(np.random.default_rng(1).integers(18, 90, n).tolist()), "id": list(range(n))})
    spec = AnonymizationSpec((QuasiIdentifier("age"),), k=10)
    runs = [anonymize_table(t, spec) for _ in range(2)]
    for r in runs:
        labels = r.table.column("age").to_pylist()
        ids = r.table.column("id").to_pylist()
        assert sorted(ids) == list(range(n))
        starts = [i for i in range(n) if i == 0 or labels[i] != labels[i - 1]]
        assert len(starts) == len(set(labels)) == r.metrics.classes  # each class's rows together
        runs_in_input_order = sum(
            ids[a:b] == sorted(ids[a:b]) for a, b in zip(starts, starts[1:] + [n])
        )
        assert runs_in_input_order < len(starts) // 2
        assert list(r.class_of_row[1:] != r.class_of_row[:-1]).count(True) == len(starts) - 1
    assert runs[0].table.column("id").to_pylist() != runs[1].table.column("id").to_pylist()


def test_a_pandas_dataframe_is_taken_too():
    """It used to fail with AttributeError: 'DataFrame' object has no attribute 'column_names'."""
    import pandas as pd

    df = pd.DataFrame({"age": [30, 31, 40, 41], "id": [1, 2, 3, 4]})
    r = anonymize_table(df, AnonymizationSpec((QuasiIdentifier("age"),), k=2))
    assert sorted(r.table.column("age").to_pylist()) == ["[30, 31]", "[30, 31]", "[40, 41]", "[40, 41]"]
    with pytest.raises(ConfigError, match="Arrow table or a pandas DataFrame, got int"):
        anonymize_table(3, AnonymizationSpec((QuasiIdentifier("age"),), k=2))


def test_publication_order_groups_rows_by_class_in_a_fresh_order():
    """Classes that generalize alike merge into one published class: their
    rows are grouped from the class ids (not the kernel's blocks) and
    shuffled within each, as the kernel's blocks are."""
    from sqlanon.engine import publication_order

    class_of_row = np.random.default_rng(3).integers(0, 50, 5_000).astype(np.int32)
    orders = [publication_order(class_of_row) for _ in range(2)]
    for order in orders:
        assert sorted(order.tolist()) == list(range(5_000))
        assert np.all(np.diff(class_of_row[order]) >= 0)  # each class's rows together, classes in order
    assert not np.array_equal(orders[0], orders[1])
    # Within a class, the input's order is gone.
    first = orders[0][class_of_row[orders[0]] == 0]
    assert not np.array_equal(first, np.sort(first))


def test_labels_per_distinct_range_match_labels_per_class():
    """Interval and hierarchy labels built once per distinct code range are
    those built class by class; a column of more codes than the packed range
    holds (int64) is generalized class by class."""
    from sqlanon import generalization, kernel
    from sqlanon.engine import _encode_qi, _place_values, column_stats

    rng = np.random.default_rng(5)
    ages = rng.integers(18, 90, 3_000).astype(object)
    ages[rng.random(3_000) < 0.05] = None
    t = pa.table({"age": pa.array(ages.tolist(), pa.int64())})
    q = QuasiIdentifier("age")
    spec = AnonymizationSpec((q,), k=5)
    stats = column_stats(t, spec)["age"]
    e = _encode_qi(q, t.column("age"), "interval")
    _place_values(e, stats)
    X = np.ascontiguousarray(e.codes.reshape(-1, 1))
    order = np.argsort(X[:, 0], kind="stable")
    X = X[order]
    bounds = np.arange(0, len(X) + 1, 7, dtype=np.int64)
    bounds[-1] = len(X)
    null = np.array([e.null_code], np.int64)
    lo, hi, has_null = kernel.class_ranges(X, bounds, null)
    args = (e, stats, lo[:, 0], hi[:, 0], has_null[:, 0], X[:, 0], bounds, "text")
    packed = generalization.generalize_column(*args)
    per_class = generalization._generalize(*args)
    assert pa.types.is_dictionary(packed.columns[0][1].type)
    assert packed.columns[0][1].cast(pa.string()).to_pylist() == per_class.columns[0][1].to_pylist()
    np.testing.assert_array_equal(packed.ncp, per_class.ncp)
    assert "[" in "".join(filter(None, per_class.columns[0][1].to_pylist())) and any(
        v and v.endswith(" or NULL") for v in per_class.columns[0][1].to_pylist()
    )
    e.n_codes = generalization._MAX_RANGE_CODES  # past what one int64 packs: class by class
    wide = generalization.generalize_column(*args)
    assert pa.types.is_string(wide.columns[0][1].type)
    assert wide.columns[0][1].to_pylist() == per_class.columns[0][1].to_pylist()


# --------------------------------------------------------------------------- the library's edges (helper-16)


def test_object_columns_arrow_would_change_are_refused():
    """from_pandas made one type of an object column: dates mixed with times
    of day lost their times, zoned times next to naive ones were moved to
    UTC, text next to bytes became bytes; all passed through, no error."""
    import pandas as pd

    spec = AnonymizationSpec((QuasiIdentifier("age"),), k=2)
    zone = dt.timezone(dt.timedelta(hours=5))
    for values, mix in (([dt.date(2020, 1, 1), dt.datetime(2020, 1, 1, 23, 59), None, None], "dates and times of day"),
                        ([dt.datetime(2020, 1, 1, 10), dt.datetime(2020, 1, 1, 10, tzinfo=zone), None, None],
                         "times with and without a time zone"),
                        (["a", b"b", "c", None], "text and bytes")):
        with pytest.raises(ConfigError, match=f"column 'x' \\(dtype object\\) holds {mix}, which Arrow would"):
            anonymize_table(pd.DataFrame({"age": [1, 2, 3, 4], "x": values}), spec)
    r = anonymize_table(pd.DataFrame({"age": [1, 2, 3, 4], "x": [1, 2.5, 3, 4]}), spec)  # numbers keep their values
    assert sorted(r.table.column("x").to_pylist()) == [1, 2.5, 3, 4]
    with pytest.raises(ConfigError, match="more than one column named 'x'"):
        anonymize_table(pd.DataFrame([[1, 2, 3]] * 4, columns=["age", "x", "x"]), spec)
    with pytest.raises(ConfigError, match="more than one column named 'age'"):
        anonymize_table(pa.table([pa.array([1, 2]), pa.array([3, 4])], names=["age", "age"]), spec)
    with pytest.raises(ConfigError, match="a number too large for 64 bits"):
        anonymize_table(pd.DataFrame({"age": [1, 2, 3, 4], "x": [2**70, 1, 2, 3]}), spec)


def test_arrow_types_without_kernels_are_read_as_their_wider_kin():
    """string_view/binary_view (Polars' to_arrow()), decimal32/64 and a
    time32 QI failed with ArrowNotImplementedError."""
    import decimal

    t = pa.table({"age": [30, 31, 40, 41], "s": pa.array(["a", "b", "c", "d"], pa.string_view()),
                  "b": pa.array([b"x", b"y", b"z", b"w"], pa.binary_view()),
                  "tm": pa.array([1, 2, 3600, 3601], pa.time32("s")),
                  "d": pa.array([decimal.Decimal("1.5")] * 2 + [decimal.Decimal("2.5")] * 2, pa.decimal32(3, 1))})
    spec = AnonymizationSpec((QuasiIdentifier("age"), QuasiIdentifier("tm")), k=2, l=2, sensitive=("d",))
    r = anonymize_table(t, spec)
    assert r.table.column("s").to_pylist() and r.table.schema.field("s").type == pa.string()
    assert sorted(r.table.column("b").to_pylist()) == [b"w", b"x", b"y", b"z"]
    assert set(r.table.column("tm").to_pylist()) == {"[00:00:01.000000, 01:00:01.000000]"}  # one class: l = 2


def test_the_engines_arguments_are_checked_by_name():
    import pandas as pd

    spec = AnonymizationSpec((QuasiIdentifier("age"),), k=2)
    t = pa.table({"age": [1, 2, 3, 4]})
    with pytest.raises(ConfigError, match="quasi_identifiers takes QuasiIdentifier objects"):
        AnonymizationSpec(("age",), k=2)
    with pytest.raises(ConfigError, match="the hierarchy of column 's' must be a Hierarchy"):
        QuasiIdentifier("s", hierarchy="/path/countries.json")
    with pytest.raises(HierarchyError, match="load_hierarchy takes the path of a .json or .csv file, got NoneType"):
        load_hierarchy(None)
    assert column_stats(pd.DataFrame({"age": [1, 2, 3, 4]}), spec)["age"].max == 4  # was an AttributeError
    with pytest.raises(ConfigError, match="stats of 'age' must be a ColumnStats"):
        anonymize_table(t, spec, stats={"age": 5})
    # given statistics must cover the table: outside them NCP went past 1, and an inf was published
    with pytest.raises(ConfigError, match=r"the statistics given for 'age' span 1.0..4.0, but the table holds "
                                          r"values from 1.0 to 40.0"):
        anonymize_table(pa.table({"age": [1, 2, 3, 40]}), spec, stats=column_stats(t, spec))
    sets = AnonymizationSpec((QuasiIdentifier("age", "set"),), k=2)  # a set's NCP went to 2.0 per row (helper-20)
    with pytest.raises(ConfigError, match=r"the statistics given for 'age' count 2 distinct values, but the table"):
        anonymize_table(t, sets, stats=column_stats(pa.table({"age": [1, 2]}), sets))
    with pytest.raises(ConfigError, match="'age' holds infinite values"):
        anonymize_table(pa.table({"age": [1.0, 2, 3, math.inf]}), spec,
                        stats=column_stats(pa.table({"age": [1.0, 2, 3, 4]}), spec))


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint64])
def test_distinct_is_numpys_unique(dtype):
    rng = np.random.default_rng(3)
    for n in (0, 1, 2, 7, 1000):
        for high in (2, 50, 2**31 - 1):
            a = rng.integers(0, high, n).astype(dtype)
            if dtype != np.uint64:
                a[: n // 3] *= -1
            got = distinct(a)
            assert got.dtype == a.dtype
            assert np.array_equal(got, np.unique(a)), (n, high)


@pytest.mark.parametrize("n", [0, 1, engine._ROWS_BLOCK - 1, engine._ROWS_BLOCK, 2 * engine._ROWS_BLOCK + 5])
def test_rows_of_stacks_columns_by_block(n):
    rng = np.random.default_rng(n)
    columns = [rng.integers(-5, 5, n).astype(np.int32) for _ in range(3)]
    got = engine._rows_of(columns, n)
    assert got.dtype == np.int32 and got.flags.c_contiguous
    assert np.array_equal(got, np.column_stack(columns).reshape(n, 3))
    assert engine._rows_of([], n).shape == (n, 0)  # no sensitive column


@pytest.mark.parametrize("space", [4, 784, 1 << 16, 1 << 20, 1 << 23])
def test_one_per_range_numbers_ranges_as_numpys_unique(space):
    rng = np.random.default_rng(space)
    for n in (0, 1, 5, 300_000):
        ranges = rng.integers(0, min(space, 1 + n // 3 if n > 9 else space), n)
        first, inverse = _one_per_range(ranges, space)
        values, inverse0 = np.unique(ranges, return_inverse=True)
        assert np.array_equal(inverse, inverse0), (space, n)
        assert np.array_equal(ranges[first], values), (space, n)


def test_narrow_indices_are_int16_where_the_labels_fit_and_read_the_same():
    t = pa.table({"a": np.arange(40_000) % 20_000, "b": np.arange(40_000) // 7})
    spec = AnonymizationSpec((QuasiIdentifier("a"), QuasiIdentifier("b")), k=2)
    wide = engine.anonymize_fragment(t, spec).table
    narrow = engine.anonymize_fragment(t, spec, narrow=True).table
    assert [wide.schema.field(c).type.index_type for c in "ab"] == [pa.int32(), pa.int32()]
    assert narrow.schema.field("a").type.index_type == pa.int16()
    rows = [sorted(zip(*(table.column(c).cast(pa.string()).to_pylist() for c in "ab"))) for table in (wide, narrow)]
    assert rows[0] == rows[1]
