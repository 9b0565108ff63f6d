"""The coordinator/worker pipeline end to end on real DuckDB and real processes."""

from __future__ import annotations

import csv
import dataclasses
import datetime
import decimal
import json
import math
import os
import random
import re
import signal
import stat
import subprocess
import sys
import shutil
import tempfile
import textwrap
import time
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from procs import descendants, kill_a_worker_when, session_members  # a helper module next to the tests
import sqlanon
from sqlanon import PrivacyError
from sqlanon.engine import anonymize_table, column_stats

ROOT = Path(__file__).resolve().parent.parent
QI = ["age", "zip", "day", "city"]


def people(n: int, seed: int = 0) -> pa.Table:
    """A table with ints, strings (hostile ones too), dates and NULLs."""
    rng = np.random.default_rng(seed)
    cities = np.array(["Bergamo", "Milano", "O'Brien", "x'); DROP TABLE t; --", 'a"b', "Zürich", "東京"])
    age = rng.integers(18, 90, n).astype(object)
    age[rng.random(n) < 0.02] = None
    zip_ = np.char.add("2", rng.integers(1000, 9999, n).astype(str)).astype(object)
    zip_[rng.random(n) < 0.01] = None
    day = np.datetime64("2020-01-01") + rng.integers(0, 1000, n)
    return pa.table(
        {
            "id": np.arange(n),
            "age": pa.array(age, pa.int64()),
            "zip": pa.array(zip_, pa.string()),
            "day": pa.array(day.astype("datetime64[D]")),
            "city": pa.array(cities[rng.integers(0, len(cities), n)]),
            "disease": pa.array(rng.choice(["flu", "cold", "covid", "none"], n)),
            "note": pa.array([f"row {i}" for i in range(n)]),
        }
    )


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("src") / "people.parquet"
    pq.write_table(people(20_000), path)
    return path


def run(src, out, **kw):
    kw.setdefault("qi", QI)
    kw.setdefault("k", 5)
    kw.setdefault("l", 2)
    kw.setdefault("sensitive", ["disease"])
    return sqlanon.anonymize(src, out, **kw)


def check_output(out, src_table: pa.Table, k=5, l=2, qi=QI):
    con = duckdb.connect()
    got = con.execute(f"SELECT * FROM read_parquet('{out}')").fetch_arrow_table()
    assert got.num_rows == src_table.num_rows
    # Non-QI columns unchanged: join on the row id.
    got = got.sort_by("id")
    for c in ("id", "disease", "note"):
        assert got.column(c).to_pylist() == src_table.column(c).to_pylist()
    v = sqlanon.verify(out, qi=qi, k=k, l=l, sensitive=["disease"])
    assert v.ok and v.rows == src_table.num_rows
    return got


@pytest.mark.parametrize("strategy", ["mondrian", "quantile"])
@pytest.mark.parametrize("fragments", [1, 2, 3, 5, 8])
def test_fragments_cover_the_source_and_output_verifies(source, tmp_path, strategy, fragments):
    out = tmp_path / "out.parquet"
    r = run(source, out, workers=2, fragments=fragments, fragmentation=strategy, sample=0.001, seed=7)
    src = pq.read_table(source)
    check_output(out, src)
    assert r.source_rows == 20_000
    # The metrics table: one row per fragment and a total; fragment rows add up.
    m = duckdb.sql(f"SELECT * FROM read_parquet('{r.metrics_location}')").fetch_arrow_table().to_pandas()
    frag = m[m.kind == "fragment"]
    assert len(frag) == len(r.plan.fragments)
    assert frag.rows.sum() == 20_000
    total = m[m.kind == "total"].iloc[0]
    assert total.rows == 20_000 and total.min_class_size >= 5
    # l as requested, and as achieved (the published classes' fewest distinct sensitive values)
    assert total.l == 2 and total.achieved_l == r.metrics.achieved_l >= 2 and (frag.achieved_l >= 2).all()
    assert total.dp == r.metrics.dp and abs(total.ncp - r.metrics.ncp) < 1e-6
    assert abs(frag.ncp.sum() - total.ncp) < 1e-6 * max(1.0, total.ncp)
    assert json.loads(total.plan)["strategy"] == strategy
    # Every fragment's stored WHERE clause selects exactly its rows.
    con = duckdb.connect()
    for row in frag.itertuples():
        n = con.execute(
            f"SELECT count(*) FROM read_parquet('{source}') WHERE {row.where_clause}", json.loads(row.where_params)
        ).fetchone()[0]
        assert n == row.rows


@pytest.mark.parametrize("output", ["out.parquet", "out_dir/", "out.csv", "db.duckdb"])
def test_fragments_of_many_and_of_few_labels_publish_together(tmp_path, output):
    """A worker's part holds a QI's dictionary indices in int16 where its
    labels fit, else int32 (one fragment here publishes 35,000 intervals of x,
    the other one label): every output takes both, row for row."""
    n = 70_000
    g = np.repeat([0, 1], n)
    x = np.where(g == 0, np.tile(np.arange(n), 2), 0)
    src = tmp_path / "src.parquet"
    pq.write_table(pa.table({"id": np.arange(2 * n), "g": g, "x": x}), src)
    out = f"{tmp_path}/{output}"
    kw = {"target_table": "anon"} if output.endswith(".duckdb") else {}
    r = sqlanon.anonymize(src, out, qi=["g", "x"], k=2, workers=2, fragments=2, **kw)
    assert r.metrics.rows == 2 * n and len(r.plan.fragments) == 2
    con = duckdb.connect()
    if output.endswith(".duckdb"):
        con.execute(f"ATTACH '{out}' AS db (READ_ONLY)")
        relation = "db.anon"
    else:
        reader = "read_csv" if output.endswith(".csv") else "read_parquet"
        relation = f"{reader}('{out}{'*.parquet' if output.endswith('/') else ''}')"
    got = con.execute(f"SELECT id, CAST(x AS VARCHAR) FROM {relation} ORDER BY id").fetchall()
    assert [i for i, _ in got] == list(range(2 * n))
    assert len({label for i, label in got if i < n}) > 32_767  # the fragment of many labels
    assert {label for i, label in got if i >= n} <= {"0", "[0, 1]"}  # and of one or two


def test_values_absent_from_the_sample_and_nulls_land_once(tmp_path):
    base = people(5_000, seed=1)
    # Extreme and unseen values the sample (0.1%: 5 rows) cannot have seen.
    extra = people(20, seed=2)
    extra = extra.set_column(1, "age", pa.array([None] * 10 + [-5, 500] * 5, pa.int64()))
    extra = extra.set_column(4, "city", pa.array(["Nowhere-" + str(i) for i in range(20)]))
    extra = extra.set_column(0, "id", pa.array(np.arange(5_000, 5_020)))
    full = pa.concat_tables([base, extra])
    src = tmp_path / "src.parquet"
    pq.write_table(full, src)
    out = tmp_path / "out.parquet"
    r = run(src, out, workers=2, fragments=5, sample=0.001, seed=3)
    check_output(out, full)
    assert r.metrics.rows == 5_020


def test_cuts_of_a_nanosecond_timestamp_qi_are_the_ones_recorded(tmp_path):
    """DuckDB bound a cut of a TIMESTAMP_NS QI (a pandas Timestamp) as a
    microsecond TIMESTAMP, below the value the plan, --explain and the
    metrics named: 2,000 rows in 5 fragments planned 400 each ran 0, 402,
    398, 403 and 797, and the recorded clauses selected other rows (helper-32)."""
    src, out = tmp_path / "in.parquet", tmp_path / "out.parquet"
    con = duckdb.connect()
    con.execute("COPY (SELECT i AS id, make_timestamp_ns(epoch_ns(TIMESTAMP '2020-01-01') + (i * 7919) % 5000) AS t, "
                "['a', 'b', 'c'][1 + i % 3] AS s FROM range(1, 2001) r(i)) TO ? (FORMAT parquet)", [str(src)])
    r = sqlanon.anonymize(src, out, qi=["t"], sensitive=["s"], k=5, l=2, fragments=5, fragmentation="quantile",
                          workers=2)
    planned = [f["estimated_rows"] for f in r.explain()["fragments"]]
    recorded = con.execute("SELECT rows, where_clause, where_params FROM read_parquet(?) WHERE kind = 'fragment' "
                           "ORDER BY fragment_id", [str(out.with_name("out__metrics.parquet"))]).fetchall()
    assert [rows for rows, _, _ in recorded] == [400] * 5 == planned
    # Fetched into Python, its zoned started_at needs pytz, which nothing else installed (helper-130).
    started = con.execute("SELECT started_at FROM read_parquet(?) WHERE kind = 'total'",
                          [str(out.with_name("out__metrics.parquet"))]).fetchone()[0]
    assert started.tzinfo is not None and started.utcoffset().total_seconds() == 0
    for rows, where, params in recorded:
        assert con.execute(f"SELECT count(*) FROM read_parquet(?) WHERE {where}",
                           [str(src), *json.loads(params)]).fetchone()[0] == rows


def test_explain_prints_the_plan_without_writing(source, tmp_path):
    out = tmp_path / "out.parquet"
    r = run(source, out, workers=2, fragments=3, explain=True, sample=500, seed=1)
    assert not out.exists()
    plan = r.explain()
    assert plan["sample_rows"] == 500 and plan["seed"] == 1 and len(plan["fragments"]) == 3
    assert plan["csv_copy"] is False and plan["executor"] == "local"  # a Parquet source, the local pool
    # The dry run's result names its input and start, as a run's does (both were '': helper-90).
    assert r.source == r.to_dict()["input"] == str(source) and r.to_dict()["started_at"].startswith("20")
    assert sum(f["estimated_rows"] for f in plan["fragments"]) == pytest.approx(20_000, rel=0.01)
    # Same seed, same plan.
    again = run(source, out, workers=2, fragments=3, explain=True, sample=500, seed=1).explain()
    assert [f["where"] for f in again["fragments"]] == [f["where"] for f in plan["fragments"]]
    assert [f["params"] for f in again["fragments"]] == [f["params"] for f in plan["fragments"]]
    # A job the run would refuse is refused by --explain too (it printed a plan, exit 0).
    for bad, kwargs, why in ((tmp_path / "no" / "x.parquet", {}, "does not exist"),
                             (tmp_path / "x.txt", {}, "cannot tell the output format"),
                             (tmp_path / "t.parquet", {"target_table": "t"}, "writes into a DuckDB file")):
        with pytest.raises(sqlanon.ConfigError, match=why):
            run(source, bad, workers=2, explain=True, **kwargs)
    # ... a metrics table that is not one too: the plan passed where the run failed before any work (helper-62)
    db = tmp_path / "m.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE other (a INTEGER)")
    with pytest.raises(sqlanon.ConfigError, match="table 'other' in .* is not a sqlanon metrics table"):
        run(source, db, workers=2, explain=True, target_table="t", metrics="other")
    (tmp_path / "plan__metrics.parquet").write_text("not parquet")
    with pytest.raises(sqlanon.ConfigError, match="metrics file '.*plan__metrics.parquet' exists and cannot be read"):
        run(source, tmp_path / "plan.parquet", workers=2, explain=True)


def test_default_sample_grows_with_the_fragments_within_its_memory_cap(source, tmp_path):
    from sqlanon.coordinator import default_sample_rows

    assert default_sample_rows(n_qi=10, n_fragments=2) == 20_000
    assert default_sample_rows(n_qi=10, n_fragments=40) == 80_000
    assert default_sample_rows(n_qi=10, n_fragments=1_000) == 16 * 2**20 // 80  # the cap: 16 MiB of QI values
    assert default_sample_rows(n_qi=1, n_fragments=1_000) == 2_000_000
    # A source smaller than the default is sampled whole.
    plan = run(source, tmp_path / "out.parquet", workers=2, fragments=3, explain=True).explain()
    assert plan["sample_rows"] == plan["source_rows"] == 20_000


def test_misleading_sample_is_repaired(tmp_path):
    # 1,000 rows at k = 300: 8 fragments asked, 3 planned (at least k rows
    # each); the sensitive value follows x, so the fragment of the smallest
    # x holds one sensitive value, fails l = 2 and is merged with its sibling.
    n = 1_000
    t = pa.table({"id": np.arange(n), "x": np.arange(n), "s": (np.arange(n) >= 500).astype(int)})
    src = tmp_path / "src.parquet"
    pq.write_table(t, src)
    out = tmp_path / "out.parquet"
    r = sqlanon.anonymize(src, out, qi=["x"], k=300, l=2, sensitive=["s"], workers=2, fragments=8, sample=50)
    assert r.repaired
    v = sqlanon.verify(out, qi=["x"], k=300, l=2, sensitive=["s"])
    assert v.ok and v.rows == n
    m = duckdb.sql(f"SELECT * FROM read_parquet('{r.metrics_location}') WHERE kind = 'fragment'").fetch_arrow_table().to_pandas()
    assert m.repaired.any() and m.rows.sum() == n
    # What a rerun passes: the fragments asked for, not those that ran after the
    # merge (a rerun with those cut another plan: helper-31); the input, absolute.
    total = duckdb.execute("SELECT source, parameters FROM read_parquet(?) WHERE kind = 'total'",
                           [r.metrics_location]).fetchone()
    params = json.loads(total[1])
    assert params["fragments"] == 8 and len(r.plan.fragments) < 8 and params["date_order"] is None
    assert total[0] == str(src) and os.path.isabs(total[0])
    again = sqlanon.anonymize(src, tmp_path / "again.parquet", qi=params["qi"], k=300, l=2, sensitive=params["sensitive"],
                              workers=1, fragments=params["fragments"], sample=params["sample"])
    assert sorted(pq.read_table(out).to_pylist(), key=str) == sorted(pq.read_table(tmp_path / "again.parquet")
                                                                       .to_pylist(), key=str)


@pytest.mark.parametrize("first", ["submitted", "reversed"])
def test_quantile_repairs_do_not_depend_on_which_fragment_finished_first(tmp_path, monkeypatch, first):
    """x holds 50/100/100/120 rows of 0/1/2/3 and one sensitive value for 1
    and for 2: fragments 1 and 2 fail l = 2. Repaired as their results came
    in, 1 first merged with 0 (fewer rows) and 2 with 3, 2 first merged with
    1: the same seed published [0-1], [2-3] or 0, [1-2], 3 (helper-7)."""
    from sqlanon import coordinator

    i = np.arange(370)
    x = np.select([i < 50, i < 150, i < 250], [0, 1, 2], 3)
    s = np.where(x == 1, "a", np.where(x == 2, "b", np.array(["a", "b", "c"])[i % 3]))
    src = tmp_path / "src.parquet"
    pq.write_table(pa.table({"x": x, "s": s, "id": i}), src)
    real_wait = coordinator.wait

    def wait_in_order(futures, **kw):  # every result at once, handed over in the order asked
        real_wait(futures, return_when="ALL_COMPLETED")
        return (futures if first == "submitted" else futures[::-1]), set()

    monkeypatch.setattr(coordinator, "wait", wait_in_order)
    out = tmp_path / "out.parquet"
    r = sqlanon.anonymize(src, out, qi=["x"], sensitive=["s"], k=5, l=2, fragments=4, fragmentation="quantile",
                          workers=1, seed=0)
    assert r.repaired
    classes = duckdb.sql(f"SELECT x, count(*) FROM read_parquet('{out}') GROUP BY x ORDER BY x").fetchall()
    # In the plan's order: 1 merges with 0 (50 rows against 2's 100), then 2 with 3 (120 against 150).
    assert classes == [("[0, 1]", 150), ("[2, 3]", 220)]


def test_a_repair_repaired_again_is_not_reported_as_a_fragment(tmp_path):
    """x = 0 and x = 1 hold one sensitive value each: 0 merges with 1, and
    that merge, still 1-diverse, with 2. repaired_fragments listed the first
    merge too, a fragment that never ran and has no metrics row (helper-23)."""
    i = np.arange(400)
    s = np.where(i < 200, "a", np.array(["a", "b", "c"])[i % 3])
    src = tmp_path / "src.parquet"
    pq.write_table(pa.table({"x": i // 100, "s": s}), src)
    out = tmp_path / "out.parquet"
    r = sqlanon.anonymize(src, out, qi=["x"], sensitive=["s"], k=5, l=2, fragments=4, fragmentation="quantile",
                          workers=1, seed=0)
    m = duckdb.sql(f"SELECT fragment_id, repaired FROM read_parquet('{r.metrics_location}') WHERE kind = 'fragment'"
                   ).fetchall()
    assert len(r.plan.fragments) == 2 and len(r.repaired) == 1, r.repaired
    assert sorted(m) == sorted((f.id, f.id in r.repaired) for f in r.plan.fragments)


def test_far_more_fragments_than_k_allows_are_capped(tmp_path, caplog):
    """--fragments 100000 on 32,561 rows planned 2,189 fragments of ~1 row
    each (k = 10), every one merged again: the run took minutes."""
    out = tmp_path / "o.parquet"
    r = sqlanon.anonymize(ROOT / "examples" / "adults.csv", out, qi=["age", "education-num"], k=5_000, workers=2,
                          fragments=100_000)
    assert len(r.plan.fragments) <= 32_561 // 5_000
    assert "100000 fragments of 32561 rows would hold fewer than k=5000 rows each: planning at most 6" in caplog.text


def test_fewer_fragments_than_asked_are_said(tmp_path, caplog):
    """--fragments 64 with --sample 3 ran 3 fragments of a third of the rows
    each, without a word: fragments are asked for to bound a worker's
    memory (helper-164). A QI of few values says so too."""
    src, out = tmp_path / "s.parquet", tmp_path / "o.parquet"
    i = np.arange(20_000)
    pq.write_table(pa.table({"x": i % 1000, "c": i % 4, "s": i % 3}), src)
    r = sqlanon.anonymize(src, out, qi=["x"], sensitive=["s"], k=5, l=2, workers=1, fragments=64, sample=3)
    assert len(r.plan.fragments) == 3
    assert "64 fragments asked for, 3 planned (about 6667 rows each): the sample holds only 3 rows" in caplog.text
    caplog.clear()
    sqlanon.anonymize(src, out, qi=["c"], sensitive=["s"], k=5, l=2, workers=1, fragments=16, overwrite=True)
    assert "16 fragments asked for, 4 planned" in caplog.text and "allow no more cuts" in caplog.text
    caplog.clear()
    sqlanon.anonymize(src, out, qi=["s"], sensitive=["c"], k=3000, l=2, workers=1, fragments=100, overwrite=True)
    assert "planning at most 6" in caplog.text and "100 fragments asked for, 3 planned" in caplog.text  # not "6 asked"
    caplog.clear()
    sqlanon.anonymize(src, out, qi=["x"], sensitive=["s"], k=5, l=2, workers=1, sample=3, overwrite=True)
    assert "asked for" not in caplog.text  # the default (one per worker) is not asked for


def test_a_duration_qi_is_said_to_be_generalized_as_its_count(tmp_path, caplog):
    """A pandas timedelta QI was published as bare counts of microseconds
    ('[207000000, 2187000000]'), its unit named nowhere."""
    src, out = tmp_path / "d.parquet", tmp_path / "o.parquet"
    pq.write_table(pa.table({"d": pa.array(np.arange(100) * 60_000, pa.duration("ms")), "s": ["a", "b"] * 50}), src)
    sqlanon.anonymize(src, out, qi=["d"], sensitive=["s"], k=5, l=2, workers=1)
    assert "quasi-identifier 'd' is a duration that DuckDB reads as its count of milliseconds" in caplog.text
    caplog.clear()
    pq.write_table(pa.table({"d": pa.array(np.arange(100)), "s": ["a", "b"] * 50}), src)
    sqlanon.anonymize(src, out, qi=["d"], sensitive=["s"], k=5, l=2, workers=1, overwrite=True)
    assert "duration" not in caplog.text


def test_impossible_request_fails_and_writes_nothing(tmp_path):
    t = pa.table({"x": np.arange(10), "s": [1] * 10})
    src = tmp_path / "src.parquet"
    pq.write_table(t, src)
    out = tmp_path / "out.parquet"
    with pytest.raises(PrivacyError, match="'s'"):
        sqlanon.anonymize(src, out, qi=["x"], k=2, l=2, sensitive=["s"], workers=2)
    assert not out.exists()
    assert not list(tmp_path.glob(".out*"))


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "sqlanon.cli", *map(str, args)], capture_output=True, text=True, **kw)


PARSED_ONCE = "parsing the CSV input once for the fragments"


@pytest.mark.parametrize("workers", [1, 3])
def test_a_dropped_csv_column_that_its_guessed_type_cannot_read_is_never_read(tmp_path, workers):
    """'n/a' among numbers past the rows DuckDB guesses a column's type
    from: the run said to drop the column (--drop), and then failed the same
    way, each fragment reading every column (exit 2), or its one copy of
    the file (exit 1, naming a hidden file). A dropped column is not read."""
    t = people(30_000, seed=2).append_column("badge", pa.array([str(i) for i in range(30_000)]))
    src = tmp_path / "in.csv"
    duckdb.sql("SELECT * REPLACE (CASE WHEN id = 25000 THEN 'n/a' ELSE badge END AS badge) FROM t").write_csv(str(src))
    out = tmp_path / "out.parquet"
    result = run(src, out, workers=workers, fragments=3, drop=["badge"])
    assert result.metrics.rows == 30_000 and "badge" not in pq.read_schema(out).names


def test_a_dropped_column_of_a_duckdb_view_that_fails_to_compute_is_never_read(tmp_path):
    """A view's column whose expression fails on a row ('n/a' cast to an
    integer), left out with --drop: every fragment read it (SELECT *) and
    failed the run."""
    db = tmp_path / "src.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t AS SELECT i AS id, 20 + i % 40 AS age, CASE WHEN i = 2500 THEN 'n/a' "
                    "ELSE i::VARCHAR END AS w FROM range(3000) t(i)")
        con.execute('CREATE VIEW v AS SELECT id, age, CAST(w AS INTEGER) AS "b""ad" FROM t')
    for workers, fragments in ((1, 1), (2, 2)):
        out = tmp_path / f"o{workers}.parquet"
        result = sqlanon.anonymize(db, out, table="v", qi=["age"], k=5, drop=['b"ad'], workers=workers,
                                   fragments=fragments)
        assert result.metrics.rows == 3_000 and pq.read_schema(out).names == ["id", "age"]


def test_a_csv_input_that_breaks_while_it_is_copied_is_named_as_unreadable(tmp_path):
    """A CSV file rewritten as the run copies it for its fragments: its
    error is the file's (a value its guessed type cannot take: exit 2, by
    line and column), not 'cannot write' a hidden staging file."""
    t = people(30_000, seed=4)
    src = tmp_path / "in.csv"
    duckdb.sql("SELECT * FROM t").write_csv(str(src))
    out = tmp_path / "out.parquet"
    out.write_bytes(b"previous")

    def status(text):
        if text == PARSED_ONCE:
            rows = t  # noqa: F841 (read by DuckDB by its name)
            duckdb.sql("SELECT * REPLACE (CASE WHEN id = 29000 THEN 'n/a' ELSE CAST(age AS VARCHAR) END AS age) "
                       "FROM rows").write_csv(str(src))

    with pytest.raises(sqlanon.ConfigError) as err:
        run(src, out, workers=1, fragments=3, status=status, overwrite=True)
    assert str(err.value).startswith(f"column 'age' of {str(src)!r} holds, on line 29,002, a value that DuckDB"), err
    assert out.read_bytes() == b"previous" and sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "out.parquet"]


# Each pair of the three choices once in the default run, the rest with -m slow.
@pytest.mark.parametrize("workers, fragments, output, lake", [
    (2, 4, "out.parquet", False), (1, 3, "out.csv", False), (1, 3, "out.parquet", True), (2, 4, "out.csv", True),
    *(pytest.param(*p, marks=pytest.mark.slow) for p in [
        (2, 4, "out.csv", False), (1, 3, "out.parquet", False), (2, 4, "out.parquet", True), (1, 3, "out.csv", True)]),
])
def test_a_csv_source_of_more_fragments_than_workers_is_parsed_once_and_published_alike(
        tmp_path, lake, output, workers, fragments):
    """Each fragment's WHERE over a CSV file parsed all of it (16 fragments
    of 1M rows took 7.2 s, 2.9 s as Parquet). Where a worker would take more
    than one fragment (and in-process, where one takes them all), the
    fragments read one Parquet copy of the parsed file instead: the same
    output, every column, as fragments that each parse it (as many workers as
    fragments), a -0.0 passing through too, and no copy left behind. The
    copy holds no dropped column (direct identifiers never reach the disk)
    and is this user's only to read."""
    t = people(4_000, seed=11)
    i = np.arange(4_000)
    t = t.append_column("score", pa.array(np.where(i % 7 == 0, -0.0, np.where(i % 7 == 1, 0.0, i / 8))))
    t = t.append_column("seen", pa.array(np.datetime64("2021-03-04T05:06:07.123456") + np.arange(4_000) * 10**6,
                                         pa.timestamp("us")))
    if lake:  # hive-partitioned: its key a column of the copy
        src = tmp_path / "lake"
        for part, rows in enumerate((t.slice(0, 1_500), t.slice(1_500))):
            (src / f"batch={part}").mkdir(parents=True)
            duckdb.sql("SELECT * FROM rows").write_csv(str(src / f"batch={part}" / "data.csv"))
    else:
        src = tmp_path / "people.csv"
        duckdb.sql("SELECT * FROM t").write_csv(str(src))
    outputs = {}
    for name, w in (("once", workers), ("each", fragments)):
        steps: list[str] = []
        out = tmp_path / name / output
        out.parent.mkdir()
        copies, left = [], []

        def status(text):
            steps.append(text)
            if text == "anonymizing":  # the copy is made; the fragments are to read it
                copies.extend((pq.read_schema(f).names, stat.S_IMODE(f.stat().st_mode),
                               stat.S_IMODE(f.parent.stat().st_mode))  # in a directory of its own (helper-115)
                              for f in out.parent.glob(".*sqlanon-staging-*/private/input.parquet"))
            if text == "writing the output":  # its room is the output's now
                left.extend(out.parent.glob(".*sqlanon-staging-*/private"))

        # --explain says which the run does (and writes nothing, a copy neither)
        plan = run(src, out, workers=w, fragments=fragments, seed=3, drop=["note"], explain=True).explain()
        assert plan["csv_copy"] == (name == "once") and not list(out.parent.glob(".*sqlanon-staging-*"))
        result = run(src, out, workers=w, fragments=fragments, seed=3, status=status, drop=["note"])
        assert len(result.plan.fragments) == fragments and result.csv_copy == (name == "once")
        assert (PARSED_ONCE in steps) == (name == "once"), steps
        assert len(copies) == (name == "once") and not left
        for names, mode, directory in copies:
            assert "note" not in names and "disease" in names and mode == 0o600 and directory == 0o700
        assert sorted(p.name for p in out.parent.iterdir()) == sorted([output, "out__metrics.parquet"])
        outputs[name] = duckdb.sql(f"SELECT * FROM '{out}' ORDER BY id").fetch_arrow_table()
    assert outputs["once"].num_rows == 4_000 and outputs["once"].equals(outputs["each"])
    score = outputs["once"].column("score").to_pylist()
    assert [math.copysign(1, v) for v in score[:2]] == [-1, 1] or output.endswith(".csv")


CLUSTERED_ONCE = "copying the input once, its rows ordered by fragment"


def with_and_without_the_copy(tmp_path, monkeypatch, src, watch=lambda out, text: None, **kw) -> dict:
    """The outputs of a 16-fragment run on one worker, by name: ``copy``
    reading the ordered copy of its input, ``none`` the input itself, or a
    CSV input's copy in the file's order (as --explain says too);
    ``watch(output, step)`` sees each step."""
    from sqlanon import coordinator

    csv = str(src).endswith(".csv")

    outputs = {}
    for name, per_slot in (("copy", coordinator.CLUSTER_PER_SLOT), ("none", 10**9)):
        monkeypatch.setattr(coordinator, "CLUSTER_PER_SLOT", per_slot)
        steps: list[str] = []
        out = tmp_path / name / "out.parquet"
        out.parent.mkdir()

        def status(text, out=out, steps=steps):
            steps.append(text)
            watch(out, text)

        plan = run(src, out, workers=1, fragments=16, k=3, seed=3, explain=True, **kw).explain()
        assert (plan["ordered_copy"], plan["csv_copy"]) == (name == "copy", csv)
        result = run(src, out, workers=1, fragments=16, k=3, seed=3, status=status, **kw)
        assert len(result.plan.fragments) == 16 and (result.ordered_copy, result.csv_copy) == (name == "copy", csv)
        assert ((PARSED_ONCE + ", its rows ordered by fragment" if csv else CLUSTERED_ONCE) in steps) == (
            name == "copy"), steps
        outputs[name] = duckdb.sql(f"SELECT * FROM '{out}' ORDER BY id").fetch_arrow_table()
    return outputs


@pytest.mark.parametrize("lake", [False, True])
def test_a_parquet_source_of_many_fragments_is_read_from_one_copy_ordered_by_fragment(tmp_path, monkeypatch, lake):
    """Each fragment's WHERE over a Parquet file read all of it (no row
    group's statistics exclude unsorted values): 256 fragments of 1M rows
    took 20 s on 2 workers. From CLUSTER_PER_SLOT fragments per slot the
    fragments read one copy of the input ordered by fragment instead, in
    row groups each fragment's bounds skip most of: the same output as
    without it, a -0.0, a NaN and a NULL of a float column passing through,
    the hive key too; no dropped column in the copy, which is this user's
    only and gone before the output is written."""
    n = 6_000
    i = np.arange(n)
    score = np.where(i % 7 == 0, -0.0, np.where(i % 7 == 1, 0.0, np.where(i % 7 == 2, np.nan, i / 8)))
    t = people(n, seed=13).append_column("score", pa.array(score, mask=i % 11 == 3))
    if lake:
        src = tmp_path / "lake"
        for part in range(2):
            (src / f"batch={part}").mkdir(parents=True)
            rows = t.slice(part * 2_500, 2_500 if part == 0 else n - 2_500)
            pq.write_table(rows, src / f"batch={part}" / "d.parquet")
    else:
        src = tmp_path / "people.parquet"
        pq.write_table(t, src, row_group_size=1_000)
    copies, left = [], []

    def watch(out, text):
        if text == "anonymizing":
            copies.extend((out.parent.name, pq.ParquetFile(f).metadata, stat.S_IMODE(f.stat().st_mode))
                          for f in out.parent.glob(".*sqlanon-staging-*/private/input.parquet"))
        if text == "writing the output":
            left.extend(out.parent.glob(".*sqlanon-staging-*/private"))

    outputs = with_and_without_the_copy(tmp_path, monkeypatch, src, watch, drop=["note"])
    assert [name for name, *_ in copies] == ["copy"] and not left
    for _, meta, mode in copies:
        names = meta.schema.to_arrow_schema().names
        assert "note" not in names and "score" in names and ("batch" in names) == lake and mode == 0o600
        assert meta.num_row_groups > 1
    assert outputs["copy"].num_rows == n
    assert outputs["copy"].drop_columns(["score"]).equals(outputs["none"].drop_columns(["score"]))
    got = outputs["copy"].column("score").to_pylist()
    assert list(map(repr, got)) == list(map(repr, outputs["none"].column("score").to_pylist()))  # NaN, -0.0
    assert [math.copysign(1, v) for v in got[:2]] == [-1, 1] and math.isnan(got[2]) and got[3] is None


def test_a_duckdb_table_of_many_fragments_is_read_from_one_copy_ordered_by_fragment(tmp_path, monkeypatch):
    """Each fragment's WHERE over a DuckDB table scanned all of it, as over
    Parquet: 256 fragments of 1M poker rows took 10.0 s on 2 workers, 6.1 s
    over the ordered copy. The copy is made though the table's NOT NULL
    and key columns read back as nullable (names and types compared, not
    DESCRIBE's every field), and gives the same output as the table; not of
    a table whose text QI has a collation, which the copy's clauses would
    compare otherwise ('O'BRIEN' = 'o'brien' under NOCASE): DuckDB's
    DESCRIBE does not show it; nor of a table holding a type that Parquet
    gives back as another (a HUGEINT as DOUBLE), which the copy's check
    found only once made, and --explain said it would be used (helper-176);
    a column left out of the copy (--drop) does not count."""
    from sqlanon import coordinator

    db = tmp_path / "people.duckdb"
    con = duckdb.connect(str(db))
    t = people(6_000, seed=13)
    con.execute("CREATE TABLE people (id BIGINT PRIMARY KEY, age BIGINT, zip VARCHAR, day DATE, "
                "city VARCHAR NOT NULL, disease VARCHAR, note VARCHAR COLLATE NOCASE)")
    con.execute("INSERT INTO people SELECT * FROM t")
    con.execute("CREATE TABLE nocase AS SELECT * FROM people")
    con.execute("ALTER TABLE nocase ALTER city TYPE VARCHAR COLLATE NOCASE")
    con.execute("CREATE TABLE wide AS SELECT *, id::HUGEINT AS big FROM people")
    con.close()
    outputs = with_and_without_the_copy(tmp_path, monkeypatch, db, table="people")
    assert outputs["copy"].num_rows == 6_000 and outputs["copy"].equals(outputs["none"])
    monkeypatch.setattr(coordinator, "CLUSTER_PER_SLOT", 1)
    for table, drop, copied in (("nocase", [], False), ("wide", [], False), ("wide", ["big"], True)):
        steps = []
        kw = dict(table=table, workers=1, fragments=16, k=3, seed=3, drop=drop, overwrite=True)
        assert run(db, tmp_path / "o.parquet", explain=True, **kw).explain()["ordered_copy"] is copied
        result = run(db, tmp_path / "o.parquet", status=steps.append, **kw)
        assert len(result.plan.fragments) == 16 and (result.ordered_copy, CLUSTERED_ONCE in steps) == (copied, copied)


def test_a_duckdb_tables_interval_of_microseconds_is_not_copied_to_parquet(tmp_path, monkeypatch):
    """Parquet keeps an INTERVAL to the millisecond, in the same type: a
    DuckDB table's pass-through INTERVAL of microseconds, copied ordered by
    fragment, came back cut, and the run into a DuckDB table, which keeps
    it whole with few fragments, refused to publish ('did not come
    through unchanged'). A TIME_NS, BIT or UNION reads back as another
    type: found only once copied. None of them is copied now."""
    from sqlanon import coordinator

    db = tmp_path / "people.duckdb"
    con = duckdb.connect(str(db))
    con.register("t", people(3_000, seed=17))
    con.execute("CREATE TABLE people AS SELECT *, INTERVAL (id * 7) MICROSECONDS AS waited FROM t")
    con.close()
    monkeypatch.setattr(coordinator, "CLUSTER_PER_SLOT", 1)
    kw = dict(table="people", target_table="out", qi=["age", "zip"], workers=1, fragments=16, k=3, seed=3)
    assert run(db, tmp_path / "out.duckdb", explain=True, **kw).explain()["ordered_copy"] is False
    result = run(db, tmp_path / "out.duckdb", **kw)
    assert len(result.plan.fragments) == 16 and not result.ordered_copy
    with duckdb.connect(str(tmp_path / "out.duckdb")) as out:
        waited = out.execute("SELECT id, waited FROM out ORDER BY id").fetchall()
    assert waited[5] == (5, datetime.timedelta(microseconds=35)) and len(waited) == 3_000
    for typ in ("TIME_NS", "BIT", "UNION(n INTEGER, s VARCHAR)", "STRUCT(a INTERVAL)"):
        assert coordinator._UNCOPIED_TYPES.search(typ), typ


def test_a_quantile_plans_fragments_are_read_from_one_ordered_copy_too(tmp_path, monkeypatch):
    """Only a mondrian plan's fragments read an ordered copy: a quantile
    plan's each read the whole input (1M poker rows, 256 fragments, 2
    workers: BENCHMARKS). Its cuts, all on one column, order the copy as
    well: the same output as without it."""
    src = tmp_path / "people.parquet"
    pq.write_table(people(6_000, seed=13), src, row_group_size=1_000)
    outputs = with_and_without_the_copy(tmp_path, monkeypatch, src, fragmentation="quantile")
    assert outputs["copy"].num_rows == 6_000 and outputs["copy"].equals(outputs["none"])


def test_a_csv_sources_copy_for_many_fragments_is_ordered_by_fragment(tmp_path, monkeypatch):
    """A CSV input's copy for its fragments was in the file's order, which
    each fragment then read whole: 256 fragments of 1M poker rows took ~20 s
    on 2 workers, ~9 s from Parquet (whose copy was ordered by fragment).
    From CLUSTER_PER_SLOT fragments per slot the CSV's copy is ordered so,
    in small row groups: the same output."""
    src = tmp_path / "people.csv"
    pq.write_table(people(6_000, seed=13), tmp_path / "people.parquet")
    duckdb.sql(f"COPY (FROM '{tmp_path / 'people.parquet'}') TO '{src}' (HEADER)")
    groups = []

    def watch(out, text):
        if text == "anonymizing":
            groups.extend((out.parent.name, pq.ParquetFile(f).metadata.num_row_groups)
                          for f in out.parent.glob(".*sqlanon-staging-*/private/input.parquet"))

    outputs = with_and_without_the_copy(tmp_path, monkeypatch, src, watch)
    assert outputs["copy"].num_rows == 6_000 and outputs["copy"].equals(outputs["none"])
    assert dict(groups)["copy"] > 1 and dict(groups)["none"] == 1, groups


@pytest.mark.parametrize(("fragments", "qi", "strategy"), [
    (16, ["age", "zip", "day", "city"], "mondrian"), (7, ["age", "city"], "mondrian"), (13, ["zip"], "mondrian"),
    (33, ["age", "day"], "mondrian"), (16, ["age", "zip"], "quantile"), (7, ["day"], "quantile"),
    (80, ["age"], "quantile"), (5, ["city"], "quantile")])
def test_the_copys_order_gives_each_row_its_fragments_position(tmp_path, fragments, qi, strategy):
    """The ordered copy only pays if each fragment's rows are together: the
    same output came whatever the order (a fragment's clause decides its
    rows), so a key whose parameters or branches went astray would have
    passed every other test. Each row's key is the position of the fragment
    whose clause takes it, in balanced and unbalanced cut trees (7, 13, 33
    fragments), NULLs and text QIs among the cuts; and in quantile plans'
    cuts of one column (a binary search): text, dates, a hierarchy's leaves,
    and a last cut between the values and NULL (age: 72 values)."""
    from sqlanon import fragmentation

    src = tmp_path / "people.parquet"
    pq.write_table(people(20_000, seed=5), src)
    tree = tmp_path / "city.csv"
    tree.write_text("Bergamo;IT;*\nMilano;IT;*\nO'Brien;IE;*\n\"x'); DROP TABLE t; --\";XX;*\n\"a\"\"b\";XX;*\n"
                    "Zürich;CH;*\n東京;JP;*\n")
    plan = run(src, tmp_path / "out.parquet", qi=qi, workers=1, fragments=fragments, seed=1, explain=True,
               fragmentation=strategy, hierarchies={"city": tree} if qi == ["city"] else None).plan
    assert len(plan.fragments) == min(fragments, 73) and plan.strategy == strategy
    if qi == ["age"]:
        assert plan.fragments[-2].predicates[-1].op == "not_null"
    sql, params = fragmentation.cluster_key(plan)
    con = duckdb.connect()
    rows = 0
    for position, fragment in enumerate(plan.fragments):
        where, more = fragmentation.where_sql(fragment.predicates)
        keys = con.execute(f"SELECT {sql}, count(*) FROM read_parquet(?) WHERE {where} GROUP BY ALL",
                           [*params, str(src), *more]).fetchall()
        assert [key for key, _ in keys] == [position], (position, fragment.path, keys)
        rows += keys[0][1]
    assert rows == 20_000


def test_a_clustered_copy_that_fails_leaves_the_fragments_reading_the_source(tmp_path, monkeypatch):
    """The copy is only faster: one DuckDB cannot write (or that would read
    back in other types) leaves the fragments reading the input, the same
    output, and no copy behind."""
    from sqlanon import coordinator, fragmentation

    src = tmp_path / "people.parquet"
    pq.write_table(people(4_000, seed=2), src)
    monkeypatch.setattr(fragmentation, "cluster_key", lambda plan: ("no_such_column", []))
    steps: list[str] = []
    out = tmp_path / "out.parquet"
    result = run(src, out, workers=1, fragments=16, k=3, status=steps.append)
    assert CLUSTERED_ONCE in steps and result.metrics.rows == 4_000
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.parquet", "out__metrics.parquet", "people.parquet"]


def test_no_ordered_copy_whose_order_binds_too_many_values(tmp_path, monkeypatch):
    """A large hierarchy's cuts list its leaves at every level of the copy's
    order: with 200,000 leaves the copy took 8 s of a 400k-row run, more
    than the reads it saved (helper-172). Past CLUSTER_KEY_VALUES bound
    values the fragments read the input, and --explain says so."""
    from sqlanon import fragmentation

    src = tmp_path / "people.parquet"
    pq.write_table(people(4_000, seed=2), src)
    plan = run(src, tmp_path / "out.parquet", workers=1, fragments=16, k=3, explain=True)
    values = len(fragmentation.cluster_key(plan.plan)[1])
    assert values >= 15
    for limit, copied in ((values, True), (values - 1, False)):
        monkeypatch.setattr(fragmentation, "CLUSTER_KEY_VALUES", limit)
        assert run(src, tmp_path / "out.parquet", workers=1, fragments=16, k=3, explain=True, overwrite=True
                   ).explain()["ordered_copy"] is copied
        steps: list[str] = []
        result = run(src, tmp_path / "out.parquet", workers=1, fragments=16, k=3, status=steps.append, overwrite=True)
        assert (CLUSTERED_ONCE in steps, result.ordered_copy) == (copied, copied)


def test_the_csv_copy_for_many_fragments_parses_the_file_once(tmp_path, monkeypatch):
    """Whether a column holds both -0.0 and 0.0 (which Parquet's
    dictionaries would make one) comes from the statistics' pass: the copy
    parsed the file a second time to find out, for every FLOAT or DOUBLE
    column (helper-78). It is written without dictionaries where needed."""
    from sqlanon import io

    probed = []
    real = io._negative_zero
    monkeypatch.setattr(io, "_negative_zero", lambda con, relation, *a, **kw: probed.append(relation) or real(
        con, relation, *a, **kw))
    for both in (False, True):
        score = [-0.0 if i == 0 else (0.0 if both and i == 1 else i / 8) for i in range(3_000)]
        t = people(3_000, seed=5).append_column("score", pa.array(score))
        src = tmp_path / f"in-{both}.csv"
        duckdb.sql("SELECT * FROM t").write_csv(str(src))
        out = tmp_path / f"out-{both}.parquet"
        steps: list[str] = []
        run(src, out, workers=1, fragments=3, status=steps.append)
        assert PARSED_ONCE in steps
        got = duckdb.sql(f"SELECT score FROM '{out}' ORDER BY id").fetchall()
        assert [math.copysign(1, v) for (v,) in got[:2]] == [-1, 1]
        assert got[1][0] == (0.0 if both else 1 / 8)
    assert not [r for r in probed if "read_csv" in r], probed


@pytest.mark.parametrize("kind", ["parquet", "csv", "glob", "duckdb", "directory"])
def test_cli_end_to_end(tmp_path, kind):
    t = people(3_000, seed=5)
    args: list = []
    if kind == "parquet":
        src = tmp_path / "p.parquet"
        pq.write_table(t, src)
    elif kind == "csv":
        src = tmp_path / "p.csv"
        duckdb.sql("SELECT * FROM t").write_csv(str(src))
    elif kind in ("glob", "directory"):
        (tmp_path / "lake").mkdir()
        for i in range(3):
            pq.write_table(t.slice(i * 1000, 1000), tmp_path / "lake" / f"part-{i}.parquet")
        src = tmp_path / "lake" / "*.parquet" if kind == "glob" else tmp_path / "lake"
    else:
        src = tmp_path / "w.duckdb"
        con = duckdb.connect(str(src))
        con.execute("CREATE SCHEMA hr")
        con.execute('CREATE TABLE hr."the people" AS SELECT * FROM t')
        con.close()
        args = ["--table", 'hr."the people"', "--target-table", "hr.people_anon"]
    out = src if kind == "duckdb" else tmp_path / "out.parquet"
    p = _cli("anonymize", src, "-o", out, "--qi", ",".join(QI), "-k", 5, "-l", 2, "--sensitive", "disease",
             "--workers", 2, "--fragments", 3, "--json", *args)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["rows"] == 3_000 and doc["fragments"] == 3 and doc["workers"] == 2
    assert set(doc["timings"]) >= {"read", "fragmentation", "anonymize", "write", "verify", "total"}
    if kind == "duckdb":
        v = _cli("verify", src, "--table", "hr.people_anon", "--qi", ",".join(QI), "-k", 5, "-l", 2, "--sensitive", "disease")
        assert v.returncode == 0, v.stderr
        con = duckdb.connect(str(src), read_only=True)
        assert con.execute('SELECT count(*) FROM hr."the people"').fetchone()[0] == 3_000
        assert con.execute("SELECT count(*) FROM hr.people_anon__metrics WHERE kind = 'fragment'").fetchone()[0] == 3
    else:
        v = _cli("verify", out, "--qi", ",".join(QI), "-k", 5, "-l", 2, "--sensitive", "disease")
        assert v.returncode == 0, v.stderr


def test_config_file_and_flag_override(tmp_path, source):
    cfg = tmp_path / "job.yml"
    cfg.write_text(
        f"input: {source}\noutput: out.parquet\nqi: [age, zip, day, city]\nk: 5\nl: 2\n"
        "sensitive: disease\nworkers: 2\nfragments: 2\n"
    )
    p = _cli("anonymize", "--config", cfg, "-k", 7, "--json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["k"] == 7 and doc["fragments"] == 2
    assert (tmp_path / "out.parquet").exists()
    bad = tmp_path / "bad.yml"
    bad.write_text("input: x.parquet\nfragmentaton: quantile\n")
    p = _cli("anonymize", "--config", bad)
    assert p.returncode == 2
    assert "fragmentaton" in p.stderr and "fragmentation" in p.stderr and "Traceback" not in p.stderr


def _run_to_interrupt(
    tmp_path, seed: int, sigint_ignored: bool = False, executor: str = "local"
) -> tuple[list, Path, subprocess.Popen]:
    """A 300,000-row run over an existing target, 16 fragments on 2 workers:
    long enough to interrupt once its first parts are staged. ``sigint_ignored``:
    started as ``cmd &`` starts it without job control. It runs in a session
    of its own, as a command at a terminal runs in its own process group."""
    src = tmp_path / "big.parquet"
    pq.write_table(people(300_000, seed=seed), src)
    out = tmp_path / "out.parquet"
    out.write_bytes(b"previous target")
    args = ["anonymize", src, "-o", out, "--qi", ",".join(QI), "-k", 5, "-l", 2, "--sensitive", "disease",
            "--workers", 2, "--fragments", 16, "--overwrite", "--quiet", "--executor", executor]
    proc = subprocess.Popen(
        [sys.executable, "-m", "sqlanon.cli", *map(str, args)], stderr=subprocess.PIPE, text=True,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None,
        start_new_session=True,
    )
    return args, out, proc


def _staged_parts(tmp_path) -> list[Path]:
    return list(tmp_path.glob(".out.parquet.sqlanon-staging-*/parts/*.parquet"))


def test_killed_worker_leaves_the_previous_target_and_next_run_succeeds(tmp_path):
    args, out, proc = _run_to_interrupt(tmp_path, seed=9)
    killed = kill_a_worker_when(proc, lambda: bool(_staged_parts(tmp_path)))
    _, err = proc.communicate(timeout=120)
    assert killed, "the run finished before a worker could be killed"
    assert proc.returncode == 1, err
    assert "worker process died" in err and "Traceback" not in err
    assert out.read_bytes() == b"previous target"
    assert not list(tmp_path.glob(".out.parquet.sqlanon-staging-*"))
    p = _cli(*args)
    assert p.returncode == 0, p.stderr
    assert pq.read_metadata(out).num_rows == 300_000


def test_killed_coordinator_leaves_target_and_stale_staging_is_cleaned(tmp_path):
    args, out, proc = _run_to_interrupt(tmp_path, seed=10)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        if _staged_parts(tmp_path):
            break
        time.sleep(0.02)
    left = descendants(proc.pid)
    assert left, "expected the run's fork server and workers"
    proc.kill()  # the coordinator only, as the OOM killer would
    proc.wait()
    # Its workers and fork server follow it (they would otherwise wait on
    # their task queue forever); a zombie is a process that has ended.
    deadline = time.time() + 10
    while time.time() < deadline and any(_state(pid) not in (None, "Z") for pid in left):
        time.sleep(0.05)
    assert all(_state(pid) in (None, "Z") for pid in left), [(pid, _state(pid)) for pid in left]
    assert out.read_bytes() == b"previous target"
    assert list(tmp_path.glob(".out.parquet.sqlanon-staging-*")), "expected the dead run's staging"
    p = _cli(*args)
    assert p.returncode == 0, p.stderr
    assert not list(tmp_path.glob(".out.parquet.sqlanon-staging-*"))
    assert pq.read_metadata(out).num_rows == 300_000


@pytest.mark.parametrize("executor", ["local", "dask"])
def test_a_ctrl_c_at_the_terminal_prints_one_line_and_ends_the_run(tmp_path, executor):
    """A Ctrl-C at a terminal reaches the run's whole process group, its
    workers too. A Dask LocalCluster's workers each printed a
    KeyboardInterrupt traceback (~60 lines under the CLI's one line), and
    the cluster's close then waited up to 4 s for a worker still busy with
    a task before killing it. Now: the one line, at once, and no process of
    the run left behind."""
    args, out, proc = _run_to_interrupt(tmp_path, seed=12, executor=executor)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not _staged_parts(tmp_path):
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)
    t0 = time.monotonic()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err == "Interrupted; nothing was published.\n", err
    assert time.monotonic() - t0 < 4  # it took up to 4 s more, and 10 once, before
    assert out.read_bytes() == b"previous target"
    deadline = time.time() + 10
    while time.time() < deadline and session_members(proc.pid):
        time.sleep(0.05)
    assert session_members(proc.pid) == []


def test_a_ctrl_c_while_the_dask_cluster_starts_prints_one_line(tmp_path):
    """A Ctrl-C while the LocalCluster's workers were still starting left
    the cluster half-built: Dask's own exit hook then failed to close it
    (~30 lines of 'AssertionError: Status.init' under the CLI's one line).
    Now: the one line, and none of the cluster's processes left."""
    args, out, proc = _run_to_interrupt(tmp_path, seed=13, executor="dask")
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None and not _dask_workers_starting(proc.pid):
        time.sleep(0.01)
    assert proc.poll() is None and not _staged_parts(tmp_path), "the cluster started before it could be interrupted"
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and err == "Interrupted; nothing was published.\n", err
    assert out.read_bytes() == b"previous target"
    deadline = time.time() + 10
    while time.time() < deadline and session_members(proc.pid):
        time.sleep(0.05)
    assert session_members(proc.pid) == []


def _dask_workers_starting(pid: int) -> bool:
    """Whether a worker process of the run's LocalCluster has been launched."""
    for child in descendants(pid):
        try:
            if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["", "sigint-ignored"])
def test_terminated_run_cleans_up_like_an_interrupt(tmp_path, sigint_ignored):
    """SIGTERM (timeout, systemd, Kubernetes) stops the run as Ctrl-C does:
    the previous target stays, the staging goes, exit 143 with one line. It
    used to kill the coordinator on the spot, staging left behind; and still
    did when started with SIGINT ignored (a script's ``sqlanon … &``)."""
    args, out, proc = _run_to_interrupt(tmp_path, seed=11, sigint_ignored=sigint_ignored)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None and not _staged_parts(tmp_path):
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be terminated"
    proc.terminate()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "Terminated; nothing was published.", err
    assert "Traceback" not in err
    assert out.read_bytes() == b"previous target"
    assert not list(tmp_path.glob(".out.parquet.sqlanon-staging-*"))


def test_hung_up_run_cleans_up_like_an_interrupt(tmp_path):
    """The terminal or SSH session a run was started from went away: the
    hangup reaches its whole process group. It killed the coordinator on
    the spot, silently (exit 129), its staging left behind; now the run
    stops as on SIGTERM, workers included, and says so (if anyone hears)."""
    from procs import session_members

    args, out, proc = _run_to_interrupt(tmp_path, seed=12)
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None and not _staged_parts(tmp_path):
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be hung up"
    os.killpg(proc.pid, signal.SIGHUP)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 129, err
    assert err.strip().splitlines()[-1] == "Hung up; nothing was published.", err
    assert "Traceback" not in err
    assert out.read_bytes() == b"previous target"
    assert not list(tmp_path.glob(".out.parquet.sqlanon-staging-*"))
    deadline = time.time() + 10
    while time.time() < deadline and session_members(proc.pid):
        time.sleep(0.05)
    assert session_members(proc.pid) == []


def _state(pid: int) -> str | None:
    """A process's state letter (``Z``: ended, not yet reaped), None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_failed_run_stops_the_fork_server_it_started(tmp_path):
    """The CLI starts the pool's fork server before anything can fail; a run
    that fails stops it, rather than leave it loading (and holding the CLI's
    stdout/stderr) after the CLI has exited."""
    from procs import children

    missing = tmp_path / "no_such_file.parquet"
    args = [sys.executable, "-m", "sqlanon.cli", "anonymize", str(missing), "-o", str(tmp_path / "o.parquet"),
            "--qi", "age", "-k", "5", "--workers", "2"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    servers: set[int] = set()
    while proc.poll() is None:
        for pid in children(proc.pid):
            try:
                if b"forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    servers.add(pid)
            except OSError:
                continue
        time.sleep(0.005)
    # Right as the CLI has exited, before reading its output to the end
    # (which would wait for a server left running). A server left alone only
    # ends once the CLI has (it then sees its pipe close), so anything but
    # killed (gone, or a zombie not yet reaped) means it was left running.
    states = [_state(pid) for pid in servers]
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "no_such_file" in err and len(err.strip().splitlines()) == 1, err
    assert servers, "the CLI did not start the fork server before the run failed"
    assert all(s in (None, "Z") for s in states), states


def _on_a_terminal(args: list) -> tuple[int, str, str]:
    """Run the CLI with its stderr on a pseudo-terminal: its exit code, its
    stdout, and what the terminal got."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))  # 80 columns
    proc = subprocess.Popen([sys.executable, "-m", "sqlanon.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 4096)
        except OSError:  # EIO: the last writer closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    stdout = proc.stdout.read().decode()
    return proc.wait(timeout=120), stdout, b"".join(chunks).decode()


def test_progress_bar_on_a_terminal_and_quiet(tmp_path, source):
    def run_on_tty(*extra):
        out = tmp_path / f"o{len(extra)}.parquet"
        code, _, shown = _on_a_terminal(["anonymize", source, "-o", out, "--qi", ",".join(QI), "-k", 5, "-l", 2,
                                         "--sensitive", "disease", "--workers", 2, "--fragments", 4, *extra])
        assert code == 0, shown
        return shown

    shown = run_on_tty()
    assert "4/4 fragments" in shown and "1/4 fragments" in shown
    assert run_on_tty("--quiet") == ""


def test_the_progress_line_names_each_step_of_a_run(tmp_path, source):
    """On a terminal the line showed only finished fragments: the statistics
    pass before them and the assembly, check and publication after them (a
    third of a 10M-row run) went by with nothing on the screen."""
    code, stdout, term = _on_a_terminal(
        ["anonymize", source, "-o", tmp_path / "o.parquet", "--qi", ",".join(QI), "-k", 5, "-l", 2,
         "--sensitive", "disease", "--workers", 2, "--fragments", 4])
    assert code == 0, term
    shown = [s.replace("\x1b[K", "").strip() for s in term.replace("\n", "\r").split("\r")]
    for expected in ("reading statistics", "planning", "0/4 fragments", "4/4 fragments", "checking k=5 l=2",
                     "publishing"):
        assert any(expected in s for s in shown), (expected, shown)
    # The line ends before the summary: the last thing shown is the bar alone.
    assert term.endswith("] 4/4 fragments\r\n") and stdout.startswith("wrote "), (term, stdout)
    assert not any("CSV" in s for s in shown), shown
    csv = tmp_path / "people.csv"
    pq.write_table(people(2_000), tmp_path / "p.parquet")
    duckdb.sql(f"COPY (FROM '{tmp_path / 'p.parquet'}') TO '{csv}'")
    code, stdout, term = _on_a_terminal(["anonymize", csv, "-o", tmp_path / "c.parquet", "--qi", ",".join(QI),
                                         "-k", 5, "--workers", 1])
    assert code == 0 and "checking the CSV input's text" in term, term  # a pass of ~0.6 s per million rows
    # One row of the terminal (a longer line wrapped, and \r went back to its
    # last row only); a warning starts a line of its own (helper-36).
    assert max(len(s) for s in shown) < 80, shown
    small = tmp_path / "small.parquet"
    pq.write_table(people(60), small)  # 60 rows, k = 5: at most 12 fragments, 20 asked
    _, _, term = _on_a_terminal(["anonymize", small, "-o", tmp_path / "w.parquet", "--qi", ",".join(QI), "-k", 5,
                                 "--workers", 2, "--fragments", 20])
    assert "\nWarning: " in term and "...Warning" not in term, term


def test_reserved_column_prefix_is_refused(tmp_path):
    """The verification's own columns and CTEs are named __sqlanon_…: a QI so
    named is refused by name (exit 2), nothing is written."""
    src = tmp_path / "t.parquet"
    pq.write_table(pa.table({"__sqlanon_rows": [1, 2, 3] * 4, "s": ["a", "b"] * 6}), src)
    p = _cli("anonymize", src, "-o", tmp_path / "o.parquet", "--qi", "__sqlanon_rows", "-k", 2)
    assert p.returncode == 2 and "'__sqlanon_rows'" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "o.parquet").exists()


# --------------------------------------------------------------------------- pass-through checksums


def _tampering(monkeypatch, how: str) -> None:
    """Make the engine damage its output's pass-through columns, as a bug would."""
    from sqlanon import engine

    real = engine.anonymize_fragment  # what a worker runs

    def anonymize_fragment(table, spec, stats, given=False, narrow=False):
        result = real(table, spec, stats, given, narrow)
        out = result.table
        if how == "value":  # one note changes
            notes = out.column("note").to_pylist()
            notes[0] = notes[0] + " "
            out = out.set_column(out.schema.get_field_index("note"), "note", pa.array(notes))
        else:  # two ids trade places: every column keeps its values, two rows do not
            ids = out.column("id").to_pylist()
            ids[0], ids[1] = ids[1], ids[0]
            out = out.set_column(out.schema.get_field_index("id"), "id", pa.array(ids, out.schema.field("id").type))
        return dataclasses.replace(result, table=out)

    monkeypatch.setattr(engine, "anonymize_fragment", anonymize_fragment)


@pytest.mark.parametrize("how, named", [("value", "'note'"), ("rows", "their rows")])
@pytest.mark.parametrize("out_name", ["o.parquet", "o.csv", "o.duckdb"])
def test_pass_through_values_are_compared_with_the_input(tmp_path, source, monkeypatch, how, named, out_name):
    """The input's pass-through columns are checksummed in the statistics pass
    and the output's after writing; a difference refuses to publish."""
    _tampering(monkeypatch, how)
    out = tmp_path / out_name
    extra = {"target_table": "people"} if out_name.endswith(".duckdb") else {}
    with pytest.raises(sqlanon.VerificationError, match="did not come through unchanged") as err:
        run(source, out, workers=1, **extra)  # in this process, where the engine is patched
    assert named in str(err.value)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == []  # no staging left


def _nan_table(n: int = 2000) -> pa.Table:
    rng = np.random.default_rng(3)
    x = rng.normal(50, 10, n)
    x[rng.choice(n, 40, replace=False)] = np.nan
    return pa.table({"id": np.arange(n), "x": x, "age": rng.integers(20, 60, n), "disease": rng.integers(0, 5, n)})


def test_nan_in_a_float_qi_keeps_its_span(tmp_path):
    """NaN sorts after every number, so the dataset's max was NaN and the span
    (Range(a) of Eq. 3) of the column NaN: every NCP came out 0. The span now
    ends at the largest number (where the engine places NaN), in the
    coordinator's statistics and in the engine's own alike."""
    table = _nan_table()
    src = tmp_path / "nan.parquet"
    pq.write_table(table, src)
    spec = sqlanon.AnonymizationSpec(
        (sqlanon.QuasiIdentifier("x"), sqlanon.QuasiIdentifier("age")), k=5, l=2, sensitive=("disease",))
    finite = np.nanmax(table.column("x").to_numpy())
    assert column_stats(table, spec)["x"].max == finite
    engine_only = anonymize_table(table, spec)
    for workers in (1, 2):
        r = run(src, tmp_path / f"o{workers}.parquet", qi=["x", "age"], workers=workers, fragments=workers)
        assert r.metrics.ncp > 0
        if workers == 1:  # one fragment: the engine's result, with the coordinator's statistics
            assert r.metrics.ncp == pytest.approx(engine_only.metrics.ncp, rel=1e-12)
            assert r.metrics.classes == engine_only.metrics.classes


@pytest.mark.parametrize("fragmentation", ["quantile", "mondrian"])
def test_a_nan_below_a_float_cut_in_a_view_over_parquet_lands_in_one_fragment(tmp_path, fragmentation):
    """pyarrow's Parquet statistics leave NaN out (min = max = 9.0): DuckDB,
    trusting them in a table's view of the file (sqlanon's own reads tell it
    can_have_nan), took `x <= 9.0` for true of every row and skipped it, and
    the NaN rows landed below the cut too: '500 rows written, 400 in the
    source (did the input change during the run?)', exit 1 (helper-178).
    The side below a float cut now says NOT isnan()."""
    n = 400
    pq.write_table(pa.table({"id": np.arange(n), "x": [9.0 if i % 4 else math.nan for i in range(n)],
                             "y": np.arange(n) % 50}), tmp_path / "t.parquet")
    db = tmp_path / "v.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE VIEW v AS SELECT * FROM read_parquet('{tmp_path / 't.parquet'}')")
    r = run(db, tmp_path / "o.parquet", table="v", qi=["x"], k=2, l=1, sensitive=[], workers=1, fragments=2,
            fragmentation=fragmentation, generalization={"x": "set"})
    assert r.metrics.rows == n
    assert duckdb.sql(f"SELECT count(DISTINCT id) FROM '{tmp_path / 'o.parquet'}'").fetchone()[0] == n


def test_timestamptz_generalizations_do_not_depend_on_the_machine_time_zone(tmp_path):
    """The text of a generalized timestamp with a time zone used to follow the
    zone of the machine that ran (DuckDB's session zone), so the same input
    published different strings on two machines. It is written in UTC."""
    n = 60
    ts = np.datetime64("2020-03-29T01:30:00", "us") + np.arange(n) * 17 * 60_000_000
    src = tmp_path / "tz.parquet"
    pq.write_table(pa.table({"id": np.arange(n), "ts": pa.array(ts, pa.timestamp("us", tz="Europe/Rome")),
                             "zone": pa.array(ts, pa.timestamp("us", tz="Asia/Tokyo"))}), src)
    outs = []
    for zone in ("America/New_York", "Asia/Kolkata"):
        out = tmp_path / f"{zone.replace('/', '_')}.parquet"
        p = subprocess.run(
            [sys.executable, "-m", "sqlanon.cli", "anonymize", str(src), "-o", str(out), "--qi", "ts,zone", "-k", "5",
             "--generalization", "zone=prefix", "--workers", "2", "--quiet"],
            capture_output=True, text=True, env={**os.environ, "TZ": zone}, timeout=300,
        )
        assert p.returncode == 0, p.stderr
        outs.append(pq.read_table(out).sort_by("id"))
    assert outs[0].equals(outs[1])
    first = outs[0].column("ts")[0].as_py()
    assert first.startswith("[2020-03-29 01:30:00") and first.endswith("Z]"), first  # the instants are UTC ones
    assert all(v.endswith("Z") or v.endswith("*") for v in outs[0].column("zone").to_pylist())


def test_a_hosts_timeout_while_publishing_comes_after_the_output_and_its_metrics(tmp_path, monkeypatch):
    """A task runner's timeout (SIGALRM, its handler raising) that fired
    between the output's swap and its metrics left the output published
    without its metrics for good (helper-35). It is held while publishing
    and raised once both are in place."""
    from sqlanon import io

    src, out = tmp_path / "src.parquet", tmp_path / "out.parquet"
    pq.write_table(people(1_000), src)
    run(src, out, workers=1)
    replace = os.replace

    def replace_then_time_out(a, b, *args, **kwargs):
        replace(a, b, *args, **kwargs)
        if str(b) == str(out):  # the output is in place: the metrics are next
            signal.raise_signal(signal.SIGALRM)

    class Timeout(Exception):
        pass

    def on_alarm(signum, frame):
        raise Timeout

    monkeypatch.setattr(io.os, "replace", replace_then_time_out)
    old = signal.signal(signal.SIGALRM, on_alarm)
    try:
        with pytest.raises(Timeout):
            run(src, out, workers=1, overwrite=True, seed=5)
    finally:
        signal.signal(signal.SIGALRM, old)
    seeds = duckdb.sql(f"SELECT sample_seed FROM read_parquet('{tmp_path / 'out__metrics.parquet'}') "
                       "WHERE kind = 'total' ORDER BY started_at").fetchall()
    assert seeds == [(0,), (5,)]


class _HostTimeout(Exception):
    """A task runner's timeout (Airflow's AirflowTaskTimeout, timeout-decorator's TimeoutError)."""


@pytest.fixture
def host_alarm():
    """A host's SIGALRM handler that raises, as task runners time tasks out; its calls."""
    calls = []

    def on_alarm(signum, frame):
        calls.append(time.monotonic())
        raise _HostTimeout("the task timed out")

    old = signal.signal(signal.SIGALRM, on_alarm)
    try:
        yield calls
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _staged(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if ".sqlanon-staging-" in p.name)


def test_a_hosts_timeout_during_a_query_raises_the_hosts_exception(tmp_path, monkeypatch, host_alarm):
    """DuckDB runs a signal's handler inside its query and turns what it
    raises into RuntimeError('Query interrupted'): a task runner's timeout
    came out as that, not as its own exception, and the query went on
    (helper-60). The handler is called as the signal arrives, the query is
    interrupted, and the host's exception comes out; the previous output
    stays, nothing is staged."""
    from sqlanon import coordinator

    src, out = tmp_path / "src.parquet", tmp_path / "out.parquet"
    pq.write_table(people(1_000), src)
    run(src, out, workers=1)
    before = out.read_bytes()
    domain_stats = coordinator.domain_stats

    def slow_stats(con, *args, **kwargs):
        signal.setitimer(signal.ITIMER_REAL, 0.2)
        # Seconds, unless interrupted (DuckDB's "Query interrupted" did not stop it: the next
        # statement, the cleanup's, ran it to its end first).
        con.execute("SELECT count(*) FROM range(10000000000) a").fetchall()
        return domain_stats(con, *args, **kwargs)

    monkeypatch.setattr(coordinator, "domain_stats", slow_stats)
    t0 = time.monotonic()
    with pytest.raises(_HostTimeout):
        run(src, out, workers=1, overwrite=True, seed=5)
    assert time.monotonic() - t0 < 60 and len(host_alarm) == 1
    assert out.read_bytes() == before and _staged(out) == []
    assert signal.getsignal(signal.SIGALRM).__name__ == "on_alarm"  # the host's handler is back


def test_a_ctrl_c_during_a_long_query_stops_it(tmp_path, monkeypatch):
    """DuckDB turns a Ctrl-C inside a query into "Query interrupted" but
    leaves the query running: the clean-up's next statement on the
    connection (its ROLLBACK) ran it to its end before the run stopped
    (helper-60). The query is interrupted."""
    import threading

    from sqlanon import coordinator

    src, out = tmp_path / "src.parquet", tmp_path / "out.parquet"
    pq.write_table(people(1_000), src)

    def slow_stats(con, *args, **kwargs):
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        # ~15 s uninterrupted on any machine (DuckDB counts on every core): longer than the test allows
        con.execute(f"SELECT count(*) FROM range({25_000_000_000 * (os.cpu_count() or 1)}) a").fetchall()
        pytest.fail("not interrupted")

    monkeypatch.setattr(coordinator, "domain_stats", slow_stats)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run(src, out, workers=1)
    assert time.monotonic() - t0 < 6
    assert not out.exists() and _staged(out) == []


def test_a_hosts_timeout_that_something_swallows_still_stops_the_run(tmp_path, monkeypatch, host_alarm):
    """A timeout whose exception was raised where something swallowed it
    (DuckDB's lazy import of pandas, cut short, counts the module missing
    and goes on) was lost: the run published as if no timeout had come
    (helper-60: 1 in 11 runs under an alarm at 1 s); such an import could
    also leave the import lock held and the worker pool's start waited on
    it for ever. The handler's exception is raised from the run's next step."""
    from sqlanon import coordinator

    src, out = tmp_path / "src.parquet", tmp_path / "out.parquet"
    pq.write_table(people(1_000), src)
    run(src, out, workers=1)
    before = out.read_bytes()
    draw_sample = coordinator.draw_sample

    def swallowing(*args, **kwargs):
        try:
            signal.raise_signal(signal.SIGALRM)  # as if it came inside an import that code like this made
        except Exception:  # noqa: BLE001 - the swallowing under test
            pass
        return draw_sample(*args, **kwargs)

    monkeypatch.setattr(coordinator, "draw_sample", swallowing)
    with pytest.raises(_HostTimeout):
        run(src, out, workers=1, overwrite=True, seed=5)
    assert len(host_alarm) == 1
    assert out.read_bytes() == before and _staged(out) == []


def test_a_hosts_timeout_is_not_raised_inside_an_import(tmp_path, monkeypatch, host_alarm):
    """A host's exception raised at whatever bytecode the signal found cut
    imports short (where CPython may leave its import lock held, on which
    every other thread's import then waits: the worker pool's start, for
    ever). During a call the module imports to its end and the exception
    comes from sqlanon's code afterwards."""
    from sqlanon import interrupts

    (tmp_path / "slow_to_import.py").write_text(textwrap.dedent("""
        import signal
        signal.raise_signal(signal.SIGALRM)
        COMPLETE = True
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "slow_to_import", raising=False)
    with pytest.raises(_HostTimeout):
        with interrupts.watching():
            try:
                import slow_to_import
            except _HostTimeout:
                pytest.fail("raised inside the import")
            assert slow_to_import.COMPLETE
            interrupts.check()
            pytest.fail("not raised by check()")
    assert len(host_alarm) == 1


def test_a_hosts_timeout_during_the_librarys_first_import_leaves_nothing_half_imported():
    """``sqlanon.anonymize`` imports the API (DuckDB, Arrow, numpy) on first
    use: a task runner's timeout then cut numpy's import short, and the next
    call failed with "module 'numpy' has no attribute 'nonzero'" (helper-60).
    The imports end first; the host's exception comes right after them."""
    code = textwrap.dedent("""
        import signal, sys
        import sqlanon

        class Timeout(Exception):
            pass

        def on_alarm(signum, frame):
            raise Timeout

        class AlarmAtNumpy:  # the timeout comes as numpy's import begins
            def find_spec(self, name, path=None, target=None):
                if name == "numpy":
                    sys.meta_path.remove(self)
                    signal.raise_signal(signal.SIGALRM)
                return None

        signal.signal(signal.SIGALRM, on_alarm)
        sys.meta_path.insert(0, AlarmAtNumpy())
        try:
            sqlanon.anonymize
        except Timeout:
            print("timed out")
        import numpy
        print("sqlanon.api" in sys.modules, hasattr(numpy, "nonzero"), callable(sqlanon.anonymize))
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[:2] == ["timed out", "True True True"], (p.stdout, p.stderr)


def test_a_hosts_handler_that_returns_runs_at_once_and_the_run_goes_on(tmp_path):
    """A host's handler that does not raise (a heartbeat, a stack dump on
    SIGUSR1) is called as its signal arrives, and the run is not stopped.
    A handler the host installs during the call is left in place."""
    src, out = tmp_path / "src.parquet", tmp_path / "out.parquet"
    pq.write_table(people(1_000), src)
    seen, replaced = [], []

    def beat(signum, frame):
        seen.append(signum)

    def status(text):
        if text == "reading statistics":
            signal.raise_signal(signal.SIGUSR2)
            assert seen == [signal.SIGUSR2]  # at once, not at a later step
        if text == "publishing":
            signal.signal(signal.SIGUSR1, lambda signum, frame: replaced.append(signum))

    old = {s: signal.signal(s, beat) for s in (signal.SIGUSR1, signal.SIGUSR2)}
    try:
        result = run(src, out, workers=1, status=status)
        assert result.metrics.rows == 1_000 and seen == [signal.SIGUSR2]
        assert signal.getsignal(signal.SIGUSR2) is beat
        assert signal.getsignal(signal.SIGUSR1) is not beat  # the host's new one
        signal.raise_signal(signal.SIGUSR1)
        assert replaced == [signal.SIGUSR1]
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@pytest.mark.parametrize("output", ["out.parquet", "out/"])
def test_a_run_killed_between_its_output_and_its_metrics_has_them_written_next(tmp_path, output):
    """Killed after its output was swapped in and before its metrics were,
    a run left the output without its metrics rows, and the next run
    deleted them as stale staging (helper-9). The next run writes them."""
    src = tmp_path / "src.parquet"
    pq.write_table(pa.table({"x": np.arange(200) % 50, "id": np.arange(200)}), src)
    out = tmp_path / output
    kw = dict(qi=["x"], k=5, workers=1, overwrite=True)
    first = sqlanon.anonymize(src, out, **kw)
    killed = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import os, sqlanon
        from sqlanon import io
        io.StagedMetrics.after_publishing = lambda self, output: os._exit(9)  # as a kill -9 there
        sqlanon.anonymize({str(src)!r}, {str(out)!r}, qi=["x"], k=5, workers=1, overwrite=True)
    """)], capture_output=True, text=True, timeout=120)
    assert killed.returncode == 9, killed.stderr
    runs = lambda: duckdb.sql(f"SELECT DISTINCT run_id FROM read_parquet('{first.metrics_location}')").fetchall()
    assert len(runs()) == 1  # the output is the second run's, its metrics wait aside
    # ... where no one else may read them (they were 0644 beside it), and are put in with the file's mode (helper-22)
    waiting = [p for p in tmp_path.iterdir() if p.name.startswith(".out__metrics.parquet.sqlanon-staging-")]
    assert [stat.S_IMODE(p.stat().st_mode) for p in waiting if p.is_dir()] == [0o700], waiting
    os.chmod(first.metrics_location, 0o600)
    sqlanon.anonymize(src, out, **kw)
    assert len(runs()) == 3 and stat.S_IMODE(os.stat(first.metrics_location).st_mode) == 0o600
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    # Killed before its output was swapped in: its staged metrics are not written.
    subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import os, sqlanon
        from sqlanon import io
        io.StagedMetrics.belongs_to = lambda self, output, staged: os._exit(9)
        sqlanon.anonymize({str(src)!r}, {str(out)!r}, qi=["x"], k=5, workers=1, overwrite=True)
    """)], capture_output=True, text=True, timeout=120)
    sqlanon.anonymize(src, out, **kw)
    assert len(runs()) == 4
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_a_directory_outputs_parts_are_named_after_their_run(tmp_path):
    """The parts had the same names every run: a reader that listed out/,
    then opened its files after the next run's swap, read some of the new
    parts beside old ones, some people twice (helper-9). Its old names now
    name nothing."""
    src = tmp_path / "src.parquet"
    pq.write_table(pa.table({"x": np.arange(400) % 80, "id": np.arange(400)}), src)
    out = tmp_path / "out"
    sqlanon.anonymize(src, f"{out}/", qi=["x"], k=5, workers=2, fragments=2)
    listed = sorted(out.iterdir())
    assert len(listed) == 2
    sqlanon.anonymize(src, f"{out}/", qi=["x"], k=5, workers=2, fragments=2, overwrite=True)
    assert not any(p.exists() for p in listed) and len(list(out.iterdir())) == 2


def test_a_duckdb_file_is_locked_as_the_file_it_is_and_its_table_checked_again(tmp_path, monkeypatch):
    """Two runs into one DuckDB file, one through a symlink, both published,
    the second over the first's table without --overwrite (helper-9)."""
    from sqlanon import io

    db, link = tmp_path / "db.duckdb", tmp_path / "alias.duckdb"
    duckdb.connect(str(db)).close()
    link.symlink_to(db)
    first = io.open_target(db, overwrite=False, table="t")
    try:
        with pytest.raises(sqlanon.InputError, match="another sqlanon run"):
            io.open_target(link, overwrite=False, table="t")
    finally:
        first.release()
    # A table of the name created during the run (by another program) is not replaced without --overwrite.
    publish = io.DuckDBTarget.publish_with_metrics

    def created_meanwhile(self, con, *args):
        con.execute('CREATE TABLE "__sqlanon_dst"."T" (x INT)')
        return publish(self, con, *args)

    monkeypatch.setattr(io.DuckDBTarget, "publish_with_metrics", created_meanwhile)
    src = tmp_path / "src.parquet"
    pq.write_table(pa.table({"x": np.arange(100) % 20}), src)
    with pytest.raises(sqlanon.InputError, match="table 't' was created in .* during the run; nothing was published"):
        sqlanon.anonymize(src, link, target_table="t", qi=["x"], k=5, workers=1)
    with duckdb.connect(str(db)) as con:
        assert con.execute("SELECT table_name FROM duckdb_tables()").fetchall() == []


def test_metrics_table_of_an_older_shape_takes_new_columns(tmp_path):
    """A DuckDB metrics table written by an older sqlanon (without the
    columns added since) takes this run's rows by name, adding the missing
    columns; every run used to fail at publishing."""
    src = tmp_path / "people.parquet"
    pq.write_table(people(500), src)
    out = tmp_path / "t.duckdb"
    run(src, out, target_table="anon", workers=1)
    con = duckdb.connect(str(out))
    con.execute("CREATE OR REPLACE TABLE anon__metrics AS SELECT * EXCLUDE (worker_pid, worker_peak_rss_mb, plan) "
                "FROM anon__metrics")
    con.close()
    run(src, out, target_table="anon", workers=1, overwrite=True)
    with duckdb.connect(str(out), read_only=True) as con:
        assert con.execute("SELECT count(*), count(plan) FROM anon__metrics WHERE kind = 'total'").fetchone() == (2, 1)


def test_a_long_csv_metrics_file_keeps_taking_runs(tmp_path):
    """A CSV metrics file is appended to as the text it holds. Read with
    DuckDB's guessed types, its columns were typed by the first 20,480
    rows: after that many rows of one-fragment runs (``where_clause``
    ``TRUE``, read as BOOLEAN) every later run failed on a real clause
    past them, after all its work, naming a hidden staging file (helper-41)."""
    src = tmp_path / "people.parquet"
    pq.write_table(people(400), src)
    metrics = tmp_path / "m.csv"
    run(src, tmp_path / "one.parquet", workers=1, metrics=str(metrics))
    with duckdb.connect() as con:  # a year of nightly one-fragment jobs sharing the file
        con.execute(f"CREATE TABLE m AS SELECT * FROM read_csv('{metrics}', all_varchar = true)")
        con.execute("COPY (SELECT * REPLACE (printf('%016x', i) AS run_id) FROM m, range(10300) t(i)) "
                    f"TO '{metrics}' (HEADER)")
        before = con.execute(f"SELECT * FROM read_csv('{metrics}', all_varchar = true)").fetchall()
    for _ in range(2):  # the first appends past the guessed rows; the next read them
        run(src, tmp_path / "two.parquet", workers=2, fragments=2, metrics=str(metrics), overwrite=True)
    with duckdb.connect() as con:
        after = con.execute(f"SELECT * FROM read_csv('{metrics}', all_varchar = true)").fetchall()
        clauses = con.execute(f"SELECT DISTINCT where_clause FROM read_csv('{metrics}', all_varchar = true) "
                              "WHERE kind = 'fragment'").fetchall()
    assert after[:len(before)] == before  # the earlier rows' text as it was ('TRUE' stays 'TRUE')
    assert len(after) == len(before) + 2 * 3
    assert len(clauses) == 3


def test_checksums_agree_on_every_lake_type(tmp_path, caplog):
    """No false alarm: pass-through columns of many types, through Parquet,
    CSV (strings that look like numbers), a directory and a DuckDB table."""
    n = 400
    i = np.arange(n)
    floats = (i / 7).astype(float)
    floats[:3] = [np.nan, -0.0, np.inf]
    table = pa.table({
        "age": pa.array(18 + i % 50),
        "disease": pa.array(np.array(["flu", "cold", "covid"])[i % 3]),
        "code": pa.array([f"{v:03d}" if v % 9 else None for v in i]),  # "007": CSV reads it back as 7
        "f": pa.array(floats),
        "dec": pa.array([decimal.Decimal(int(v)) / 100 for v in i], pa.decimal128(12, 2)),
        "ts": pa.array((np.datetime64("2020-03-29T01:30:00", "us") + i * 3_600_000_001).astype("datetime64[us]")),
        "tz": pa.array(np.datetime64("2020-03-29T01:30:00", "us") + i, pa.timestamp("us", tz="Europe/Rome")),
        "flag": pa.array(i % 2 == 0),
        "blob": pa.array([bytes([v % 256, 0, 255]) for v in i]),
        "tags": pa.array([[int(v), None] for v in i], pa.list_(pa.int64())),
        "pt": pa.array([{"x": int(v), "y": "é"} for v in i]),
    })
    src = tmp_path / "src.parquet"
    pq.write_table(table, src)
    caplog.set_level("INFO", logger="sqlanon")
    for name, extra in [("o.parquet", {}), ("o.csv", {}), ("odir/", {}), ("o.duckdb", {"target_table": "t"})]:
        caplog.clear()
        r = run(src, tmp_path / name, qi=["age"], workers=2, fragments=3, **extra)
        assert r.metrics.rows == n and r.pass_through_checked
        assert "pass-through columns unchanged (checksums of 10 column(s) match)" in caplog.text, name
        # each fragment's phases, to tell a slow read from a slow write
        assert re.search(r"fragment 2 done: \d+ rows in [\d.]+s \(read [\d.]+s, anonymize [\d.]+s, write [\d.]+s\)",
                         caplog.text), name


def test_parquet_outputs_keep_the_arrow_types_pyarrow_wrote(tmp_path):
    """DuckDB reads a pyarrow duration as its int64 count, a zoned timestamp
    without its zone's name, a categorical as plain strings: pass-through
    columns of a pandas-written Parquet input came back as int64, UTC and
    strings. The output's ARROW:schema gives them back as they were, in a
    file and in a directory's parts; a column the lake's files disagree on
    is left as DuckDB writes it."""
    n = 300
    i = np.arange(n)
    first = pa.table({
        "id": pa.array(i),
        "age": pa.array(18 + i % 50),
        "disease": pa.array(np.array(["flu", "cold", "covid"])[i % 3]).dictionary_encode(),
        "wait": pa.array(i * 1_000_000_007, pa.duration("ns")),
        "stay": pa.array(i * 3, pa.duration("s")),
        "seen": pa.array(np.datetime64("2020-03-29T01:30:00", "us") + i * 60_000_001,
                         pa.timestamp("us", tz="Europe/Rome")),
        "note": pa.array([f"n{v}" if v % 7 else None for v in i], pa.large_string()),
        "ward": pa.array(np.array(["a", "b"])[i % 2]).dictionary_encode(),
        # ordered: DuckDB gives the categories back in another order, which would compare wrongly (helper-46)
        "grade": pa.DictionaryArray.from_arrays(pa.array(i % 3, pa.int8()), pa.array(["low", "mid", "high"]),
                                                ordered=True),
    })
    lake = tmp_path / "lake"
    lake.mkdir()
    pq.write_table(first.slice(0, 200), lake / "a.parquet")
    pq.write_table(first.slice(200).set_column(7, "ward", first.column("ward").slice(200).cast(pa.string())),
                   lake / "b.parquet")
    for src in (lake / "a.parquet", lake):
        want = pq.read_table(src).sort_by("id")
        for out in (tmp_path / "o.parquet", tmp_path / "odir"):
            run(src, out, qi=["age"], workers=2, fragments=3, overwrite=True)
            got = pq.read_table(out).sort_by("id")
            for c in ("disease", "wait", "stay", "seen", "note") + (("ward",) if src != lake else ()):
                assert got.schema.field(c) == want.schema.field(c), (src, out, c)
                assert got.column(c).to_pylist() == want.column(c).to_pylist(), (src, out, c)
            assert got.schema.field("grade").type == pa.string()
            assert got.column("grade").to_pylist() == want.column("grade").cast(pa.string()).to_pylist()
            if src == lake:  # dictionary in one file, strings in the other: DuckDB's strings
                assert got.schema.field("ward").type == pa.string()
                assert got.column("ward").to_pylist() == want.column("ward").cast(pa.string()).to_pylist()
    frame = pd.read_parquet(tmp_path / "o.parquet")
    assert str(frame["wait"].dtype) == "timedelta64[ns]" and str(frame["seen"].dtype).endswith("Europe/Rome]")
    assert isinstance(frame["disease"].dtype, pd.CategoricalDtype)


def test_pandas_nullable_columns_read_back_as_they_were_written(tmp_path):
    """pandas keeps a nullable dtype (Int64, boolean, string, Float32) in
    its own metadata, not in the Arrow type: an Int64 id with NULLs came
    back from the output as float64, 2^53 + 1 as 2^53 (helper-41). The
    output carries those columns' entries; a QI's (published as text) and
    a plain int64's are not carried."""
    n = 300
    i = np.arange(n)
    frame = pd.DataFrame({
        "age": pd.array(18 + i % 50, dtype="Int64"),  # a QI: published as text
        "plain": 2**53 + i,
        "id": pd.array([2**53 + v if v % 5 else None for v in i], dtype="Int64"),
        "ok": pd.array([bool(v % 2) if v % 3 else None for v in i], dtype="boolean"),
        "s": pd.array([f"x{v}" if v % 4 else None for v in i], dtype="string"),
        "f": pd.array([v / 4 if v % 6 else None for v in i], dtype="Float32"),
    })
    src = tmp_path / "src.parquet"
    frame.to_parquet(src)
    for out in (tmp_path / "o.parquet", tmp_path / "odir"):
        run(src, out, qi=["age"], sensitive=[], l=1, workers=2, fragments=2)
        got = pd.read_parquet(out)
        assert got["age"].dtype != frame["age"].dtype and got["plain"].dtype == np.int64
        for c in ("id", "ok", "s", "f"):
            assert got[c].dtype == frame[c].dtype, (out, c)
            assert sorted(got[c].astype(object).map(repr)) == sorted(frame[c].astype(object).map(repr)), (out, c)


def test_intervals_travel_exactly_or_not_at_all(tmp_path):
    """Parquet keeps an INTERVAL's time in 32-bit milliseconds: the parts on
    the way to a table or a CSV file carry intervals as text, exactly; into
    a Parquet output the checksums refuse what it would change."""
    db = tmp_path / "src.duckdb"
    with duckdb.connect(str(db)) as con:  # up to 600 days and 666 hours + 1 us per row
        con.execute("""CREATE TABLE t AS SELECT g AS id, 18 + g % 50 AS age,
                       (['flu', 'cold', 'covid'])[1 + g % 3] AS disease,
                       to_days(g::INT) + to_microseconds(g * 4000000001) AS iv FROM range(1, 601) r(g)""")
        want = con.execute("SELECT id, iv FROM t ORDER BY id").fetchall()
    run(db, tmp_path / "o.duckdb", table="t", target_table="t", qi=["age"], workers=2, fragments=2)
    run(db, tmp_path / "o.csv", table="t", qi=["age"], workers=2, fragments=2)
    with duckdb.connect(str(tmp_path / "o.duckdb"), read_only=True) as con:
        assert con.execute("SELECT id, iv FROM t ORDER BY id").fetchall() == want
        assert dict(con.execute("SELECT column_name, data_type FROM information_schema.columns "
                                "WHERE table_name = 't'").fetchall())["iv"] == "INTERVAL"
    got = duckdb.sql(f"SELECT id, iv::INTERVAL FROM read_csv('{tmp_path / 'o.csv'}') ORDER BY id").fetchall()
    assert got == want
    why = "'iv' did not come through unchanged.*INTERVAL with a fraction of a millisecond into Parquet"
    with pytest.raises(sqlanon.VerificationError, match=why):
        run(db, tmp_path / "o.parquet", table="t", qi=["age"], workers=1)
    assert not (tmp_path / "o.parquet").exists()


def test_class_sizes_are_those_of_the_published_classes(tmp_path):
    """Fragments can generalize to the same values (one published class): the
    summary's class count, DP and min/max sizes are the output's, not the fragments' sums."""
    out = tmp_path / "adults.parquet"
    repo = Path(__file__).resolve().parents[1]
    h = repo / "hierarchies" / "adult"
    r = sqlanon.anonymize(
        repo / "examples" / "adults.csv", out, qi=["age", "marital-status", "sex"], sensitive=["income"], k=10, l=2,
        hierarchies={"age": h / "age.csv", "marital-status": h / "marital-status.csv"}, workers=2, fragments=6,
    )
    qi = '"age", "marital-status", "sex"'
    sizes = duckdb.sql(f"SELECT count(*) AS n FROM '{out}' GROUP BY {qi}").fetchnumpy()["n"]
    fragment_classes = duckdb.sql(
        f"SELECT sum(classes) FROM '{tmp_path / 'adults__metrics.parquet'}' WHERE kind = 'fragment'"
    ).fetchone()[0]
    assert fragment_classes > len(sizes), "the data should make fragments share a published class"
    assert (r.metrics.classes, r.metrics.min_class_size, r.metrics.max_class_size) == (
        len(sizes), sizes.min(), sizes.max()
    )
    assert r.metrics.dp == int((sizes.astype(np.int64) ** 2).sum())


def test_a_sensitive_column_null_in_every_row_is_named_so(tmp_path):
    """'has only 1 distinct value(s)' of a column gone NULL upstream sent an
    on-call engineer looking for the one value (helper-158)."""
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"age": list(range(40)), "dx": pa.array([None] * 40, pa.string()),
                             "one": ["a"] * 40}), src)
    with pytest.raises(sqlanon.PrivacyError, match=r"^cannot reach l=2: sensitive column 'dx' is NULL in every row of "
                                                   r"'.*in\.parquet'$"):
        sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["age"], sensitive=["dx"], k=5, l=2, workers=1)
    with pytest.raises(sqlanon.PrivacyError, match=r"^cannot reach l=2: sensitive column 'one' has only 1 distinct "):
        sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["age"], sensitive=["one"], k=5, l=2, workers=1)


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_a_nan_and_a_null_of_a_sensitive_float_are_one_value(tmp_path, suffix):
    """A class whose sensitive float held a NaN and a NULL was published as
    2-diverse and verified so, while pandas reads both as NaN: to it, and to
    anyone who reads them as "not recorded", one value (helper-21)."""
    n = 40
    lab = pa.array([float("nan") if i % 2 else None for i in range(n)], pa.float64())
    src = tmp_path / "src.parquet"
    pq.write_table(pa.table({"id": range(n), "age": [20 + i for i in range(n)], "lab": lab,
                             "lab32": lab.cast(pa.float32()), "dx": [i % 3 + 0.5 for i in range(n)], "g": ["x"] * n}),
             src)
    out = tmp_path / f"out{suffix}"
    for sensitive in (["lab"], ["lab32"], ["lab", "dx"]):
        with pytest.raises(sqlanon.PrivacyError, match=f"cannot reach l=2: sensitive column '{sensitive[0]}' has only 1"):
            sqlanon.anonymize(src, out, qi=["age"], k=2, l=2, sensitive=sensitive, workers=1)
        assert not out.exists()
        # and verify, of a table another tool wrote, counts them as the run does
        v = sqlanon.verify(src, qi=["g"], k=2, l=2, sensitive=sensitive)
        assert not v.ok and v.min_distinct[sensitive[0]] == 1
    pq.write_table(pa.table({"age": [20 + i for i in range(n)], "lab": pc.if_else(pa.array([i % 4 == 0 for i in range(n)]),
                                                                                   pa.scalar(2.5), lab)}), src)
    r = sqlanon.anonymize(src, out, qi=["age"], k=2, l=2, sensitive=["lab"], workers=1)
    read = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
    assert read.groupby("age")["lab"].nunique(dropna=False).min() >= 2 and r.metrics.rows == n
    # Beside numbers, pyarrow's statistics leave the NaN out (min = max = 5.0, as Parquet asks): DuckDB,
    # trusting them, folded NULLIF(lab, 'NaN') to lab, and verify counted 3 values (helper-68)
    pq.write_table(pa.table({"g": ["x"] * 4, "lab": [math.nan, None, 5.0, 5.0]}), src)
    v = sqlanon.verify(src, qi=["g"], k=2, l=3, sensitive=["lab"])
    assert not v.ok and v.min_distinct == {"lab": 2}


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_signed_zeros_come_through(tmp_path, suffix):
    """DuckDB's Parquet writer keeps one of -0.0 and 0.0 in a column holding
    both (its dictionary takes them for one value, duckdb/duckdb#25781): the
    checksums refused such a column, whatever the output (the parts are
    Parquet). Where a float column holds a -0.0, Parquet is now written
    without dictionaries, and both signs arrive."""
    src = tmp_path / "z.parquet"
    pq.write_table(pa.table({"age": [20 + i % 5 for i in range(20)], "f": [-0.0, 0.0] * 10}), src)
    out = tmp_path / f"o{suffix}"
    sqlanon.anonymize(src, out, qi=["age"], k=2, workers=2, fragments=2)
    got = duckdb.sql(f"SELECT count(*) FILTER (WHERE signbit(f)), count(*) FROM '{out}'").fetchone()
    assert got == (10, 20)


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_signed_zeros_in_a_list_or_struct_come_through(tmp_path, suffix):
    """Inside a list or struct they collapsed too: the checksums refused to
    publish (and from PostgreSQL, where none compares, they were published
    with one sign: helper-179). A column nesting floats is now written
    without dictionaries, as one of floats holding a -0.0 is."""
    src = tmp_path / "z.parquet"
    pq.write_table(pa.table({"age": [20 + i % 5 for i in range(20)], "f": [[-0.0], [0.0]] * 10,
                             "s": [{"a": -0.0}, {"a": 0.0}] * 10}), src)
    out = tmp_path / f"o{suffix}"
    sqlanon.anonymize(src, out, qi=["age"], k=2, workers=2, fragments=2)
    if suffix == ".csv":
        got = duckdb.sql(f"SELECT f, s FROM read_csv('{out}', all_varchar = true)").fetchall()
        assert sorted(got) == [("[-0.0]", "{'a': -0.0}")] * 10 + [("[0.0]", "{'a': 0.0}")] * 10
    else:
        got = duckdb.sql(f"SELECT count(*) FILTER (WHERE signbit(f[1])), count(*) FILTER (WHERE signbit(s.a)), "
                         f"count(*) FROM '{out}'").fetchone()
        assert got == (10, 10, 20)


def test_signed_zeros_into_a_duckdb_table_are_refused_before_any_work(tmp_path):
    """A DuckDB table's storage (compressed at a checkpoint, after the
    checksums compared the rows) changed the sign of some zeros of a float
    column holding both: published with exit 0. Now refused by name before
    any work; a column holding one kind of zero still arrives exactly."""
    n = 3000
    src = tmp_path / "z.parquet"
    mixed = [(-0.0, 0.0, i * 1.5)[i % 3] for i in range(n)]
    pq.write_table(pa.table({"age": [20 + i % 5 for i in range(n)], "f": mixed, "g": [-0.0] * n}), src)
    out = tmp_path / "o.duckdb"
    with pytest.raises(sqlanon.ConfigError, match=r"column 'f' holds both -0\.0 and 0\.0, whose signs a DuckDB table"):
        sqlanon.anonymize(src, out, target_table="t", qi=["age"], k=2, workers=2, fragments=2)
    assert not out.exists()
    sqlanon.anonymize(src, out, target_table="t", qi=["age"], k=2, workers=2, fragments=2, drop=["f"])
    with duckdb.connect(str(out), read_only=True) as con:
        assert con.execute("SELECT count(*) FILTER (WHERE signbit(g)) FROM t").fetchone()[0] == n


@pytest.mark.parametrize("strategy", ["mondrian", "quantile"])
def test_fragments_of_text_under_a_collation_are_cut_in_the_tables_order(tmp_path, strategy):
    """A NOCASE column orders 'b' between 'A' and 'C'; the plan cut its
    sample by the bytes ('C' < 'b'), so the SQL's '<=' of a cut value took
    other rows than the sample's: 8 fragments of these 8,000 names held
    11 to 16 rows in four, ~2,000 in the others (mondrian), or none in four
    (quantile): correct rows, but the work of 4 fragments in 8 (helper-49).
    The sample now carries each value's rank in the table's order, and the
    plan cuts by it."""
    rng = np.random.default_rng(1)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
    names = ["".join(w) for w in letters[rng.integers(0, 52, (8_000, 5))]]
    db = tmp_path / "src.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t (name VARCHAR COLLATE NOCASE, age INT, dx VARCHAR)")
        rows = pa.table({"name": names, "age": [18 + i % 70 for i in range(8000)], "dx": list("abc" * 2667)[:8000]})
        con.execute("INSERT INTO t SELECT * FROM rows")
    r = sqlanon.anonymize(db, tmp_path / "o.parquet", table="t", qi=["name", "age"], sensitive=["dx"], k=5, l=2,
                          fragments=8, fragmentation=strategy, sample=1.0, workers=2)
    rows = duckdb.sql(f"SELECT rows FROM read_parquet('{tmp_path / 'o__metrics.parquet'}') "
                      "WHERE kind = 'fragment'").fetchall()
    assert len(rows) == 8 and all(700 <= n <= 1300 for n, in rows), rows  # a table of 8,000 in eight
    assert r.source_rows == 8000 and not r.repaired
    if strategy == "quantile":  # cuts in the table's order are above each other there: the one before is enough
        assert [len(f.predicates) for f in r.plan.fragments] == [1] + [2] * 6 + [1], r.plan.fragments


def test_a_prefix_domain_counts_the_texts_it_publishes(tmp_path):
    """A prefix column's domain was read with SELECT DISTINCT, which put a
    NOCASE column's 'AB', 'Ab' and 'ab' in one value, and a float column's
    -0.0 and 0.0: NCP was charged over 3 values where the output shows 5
    (helper-8)."""
    db = tmp_path / "c.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t (id INT, p VARCHAR COLLATE NOCASE)")
        con.execute("INSERT INTO t SELECT i, (['AB', 'AB', 'AB', 'AB', 'AB', 'AB', 'Ab', 'Ab', 'ab', 'ac', 'ac', 'ad', "
                    "'ad'])[i + 1] FROM range(13) r(i)")
    r = sqlanon.anonymize(db, tmp_path / "o.parquet", table="t", qi=["p"], generalization={"p": "prefix"}, k=5,
                          workers=1)
    assert r.metrics.ncp_by_attribute["p"] == pytest.approx(8 * 2 / 5 + 5 * 3 / 5)  # 'A*' covers 2 of 5, 'a*' 3
    src = tmp_path / "f.parquet"  # (a DuckDB table's storage keeps no -0.0)
    pq.write_table(pa.table({"f": [-0.0, -0.0, -0.0, -0.5, 0.0, 0.0, 0.0, 0.5, 0.125, 1.5, 0.75, 0.25, 0.25]}), src)
    r = sqlanon.anonymize(src, tmp_path / "fo.parquet", qi=["f"], generalization={"f": "prefix"}, k=3, workers=1)
    labels = duckdb.sql(f"SELECT f, count(*) FROM read_parquet('{tmp_path / 'fo.parquet'}') GROUP BY f").fetchall()
    texts = ["-0", "-0.5", "0", "0.125", "0.25", "0.5", "0.75", "1.5"]  # as the engine writes them
    expected = sum(n * (sum(t.startswith(label.rstrip("*")) for t in texts) / len(texts) if label.endswith("*") else 0)
                   for label, n in labels)
    assert r.metrics.ncp_by_attribute["f"] == pytest.approx(expected)


def test_a_nan_costs_the_same_ncp_in_every_plan(tmp_path):
    """NaN sits at the dataset's largest number (README); the engine put it
    at its fragment's, so the same published class [0, nan] cost 20.37 with
    one fragment and 0.73 with two."""
    x = [float(i) for i in range(19)] + [math.nan] + [1000.0 + i for i in range(20)]
    src = tmp_path / "nan.parquet"
    pq.write_table(pa.table({"id": list(range(40)), "g": list(range(40)), "x": x}), src)
    runs = [sqlanon.anonymize(src, tmp_path / f"o{f}.parquet", qi=["g", "x"], k=20, fragments=f, workers=1)
            for f in (1, 2)]
    outs = [sorted(set(pq.read_table(tmp_path / f"o{f}.parquet").column("x").to_pylist())) for f in (1, 2)]
    assert outs[0] == outs[1] == ["[0, nan]", "[1000, 1019]"]
    assert [r.metrics.ncp_by_attribute["x"] for r in runs] == pytest.approx([20 + 20 * 19 / 1019] * 2)


@pytest.mark.parametrize("interval_format", ["text", "bounds"])
def test_a_class_of_the_largest_number_and_nan_is_charged_as_generalized(tmp_path, interval_format):
    """NaN sits at the largest number, so a class '[9, nan]' with 9 the
    largest spanned nothing: a generalized value at NCP 0, which the README
    says only an ungeneralized one costs (helper-102). It costs 1, as a class
    of values and NULLs does; a class of NaN alone costs 0."""
    src = tmp_path / "nanmax.parquet"
    f = [0.0] * 6 + [9.0] * 3 + [math.nan] * 3
    pq.write_table(pa.table({"rid": list(range(12)), "f": pa.array(f, from_pandas=False), "dx": ["p", "q"] * 6}), src)
    r = sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["f"], sensitive=["dx"], k=6, l=2, workers=1,
                          interval_format=interval_format)
    assert r.metrics.classes == 2 and r.metrics.ncp == 6.0
    f = [0.0] * 6 + [math.nan] * 6
    pq.write_table(pa.table({"rid": list(range(12)), "f": pa.array(f, from_pandas=False), "dx": ["p", "q"] * 6}), src)
    r = sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["f"], sensitive=["dx"], k=6, l=2, workers=1,
                          interval_format=interval_format, overwrite=True)
    assert r.metrics.classes == 2 and r.metrics.ncp == 0.0


def test_verify_tells_a_float_qis_signed_zeros_apart(tmp_path):
    """A rounded -0.3 kg is -0.0, which pandas and every reader print apart
    from 0.0: verify, grouping as SQL compares, counted it in a class of
    0.0s (helper-68: a class of one, the only one who lost weight, passed)."""
    src = tmp_path / "w.parquet"
    pq.write_table(pa.table({"w": [-0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 2.0, 2.0, 2.0, 2.0],
                             "w32": pa.array([-0.0] + [0.0] * 4 + [2.0] * 5, pa.float32()),
                             "dx": list("abcdeabcde")}), src)
    for qi in ("w", "w32"):
        v = sqlanon.verify(src, qi=[qi], k=5, sensitive=["dx"])
        assert (v.ok, v.classes, v.min_class_size) == (False, 3, 1), v
        assert {(str(c[qi]), c["__rows"]) for c in v.violations} == {("-0.0", 1), ("0.0", 4)}
    assert sqlanon.verify(src, qi=["w"], k=1, l=1, sensitive=["dx"]).classes == 3
    assert sqlanon.verify(src, qi=["dx"], k=2).ok  # a float elsewhere is no key


def test_verify_tells_intervals_apart_as_written_and_refuses_floats_inside_a_qi(tmp_path):
    """DuckDB holds INTERVAL '1 month' equal to '30 days' and '1 day' to
    '24 hours', and a list's or struct's -0.0 equal to 0.0, which readers
    tell apart: verify passed a class of four of them (helper-181). An
    interval QI is grouped by its text; a nested one holding floats or
    intervals is refused by name (its text cannot tell every value apart)."""
    db = tmp_path / "iv.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (INTERVAL '1 month'), (INTERVAL '1 month'), "
                    "(INTERVAL '30 days'), (INTERVAL '24 hours'), (INTERVAL '1 day')) v(wait)")
        con.execute(f"COPY t TO '{tmp_path / 'iv.parquet'}'")
        con.execute(f"""COPY (SELECT [x] AS l, {{'a': x}} AS s, [INTERVAL '1 month'] AS li FROM (VALUES (0.0::DOUBLE),
                        (0.0::DOUBLE), (-0.0::DOUBLE)) v(x)) TO '{tmp_path / 'n.parquet'}'""")
    for where, table in ((db, "t"), (tmp_path / "iv.parquet", None)):
        v = sqlanon.verify(where, table=table, qi=["wait"], k=2)
        assert (v.ok, v.classes) == (False, 4), v
        assert sorted(c["wait"] for c in v.violations) == ["1 day", "24:00:00", "30 days"]
    for qi, typ in (("l", "DOUBLE[]"), ("s", "STRUCT(a DOUBLE)"), ("li", "INTERVAL[]")):
        with pytest.raises(sqlanon.ConfigError, match=rf"^quasi-identifier '{qi}' is {re.escape(typ)}, whose values "
                                                      r"DuckDB holds equal where its readers tell them apart"):
            sqlanon.verify(tmp_path / "n.parquet", qi=[qi], k=3)
    with duckdb.connect(str(db)) as con:  # named so, not holding them: read as they are (helper-183)
        con.execute("""CREATE TABLE e AS SELECT 'FLOAT'::ENUM('FIXED', 'FLOAT') AS r, {'REAL': 1} AS s,
                       [1.5::DECIMAL(4, 1)] AS d FROM range(3)""")
    assert sqlanon.verify(db, table="e", qi=["r", "s", "d"], k=3).ok


def test_verify_reads_a_csv_files_quotes_as_its_readers_do(tmp_path):
    """A backslash before a quote somewhere in the file made DuckDB's sniffer
    take it for the escape of the whole file: verify read "C:\\\\temp"
    (quoted, a doubled backslash: two characters to pandas and Python's csv)
    and C:\\temp as one class of 3 (helper-181). It reads a doubled quote as
    the escape: such a file is refused, read two ways."""
    src = tmp_path / "e.csv"
    src.write_text('q,dx\n"C:\\\\temp",1\n"C:\\\\temp",2\nC:\\temp,3\n')
    assert [r[0] for r in csv.reader(src.open())][1:] == ["C:\\\\temp", "C:\\\\temp", "C:\\temp"]
    v = sqlanon.verify(src, qi=["q"], k=2)
    assert (v.ok, v.classes, v.violations) == (False, 2, [{"q": "C:\\temp", "__rows": 1}]), v
    src.write_text('q,dx\n"say ""hi""",4\n"say ""hi""",5\n')  # as sqlanon writes a quote
    assert sqlanon.verify(src, qi=["q"], k=2).ok
    src.write_text('q,dx\n"C:\\\\temp",1\n"C:\\\\temp",2\nC:\\temp,3\n"x\\"y",4\n"x\\"y",5\n')  # read 2 ways
    sniffed = duckdb.sql(f"SELECT count(DISTINCT q) FROM read_csv('{src}', header = true, all_varchar = true)")
    assert sniffed.fetchone() == (2,)  # DuckDB's own guess: C:\\temp and x"y, a class of 3 and one of 2
    with pytest.raises(sqlanon.InputError, match=r"to verify, a quote escaped by a backslash where CSV doubles it"):
        sqlanon.verify(src, qi=["q"], k=2)


def test_verify_counts_a_sensitive_column_named_twice_once(tmp_path):
    """``sensitive=["dx", "dx"]`` (or ``--sensitive dx,dx``) listed each
    violation with a second count, ``___distinct_dx``, a column of no
    table (helper-122); the qi's duplicates were already taken once."""
    src = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": [1] * 4 + [2] * 4, "dx": list("aaaaabcd")}), src)
    v = sqlanon.verify(src, qi=["a"], k=2, l=2, sensitive=["dx", "dx"])
    assert not v.ok and [sorted(c) for c in v.violations] == [["__distinct_dx", "__rows", "a"]], v.violations


def test_verify_warns_of_sensitive_values_written_two_ways(tmp_path, caplog):
    """'HIV' and 'HIV ', a composed and a decomposed 'Hépatite C', 'HIV' and
    'HIV' with a zero-width space: two values as written, one diagnosis to
    a reader; verify passed such a table at l=2 without a word (helper-68)."""
    import unicodedata

    nfc, nfd = (unicodedata.normalize(f, "Hépatite C") for f in ("NFC", "NFD"))
    src = tmp_path / "s.parquet"
    # a NUL or another control character too, which readers of C strings stop at or strip (helper-199)
    pq.write_table(pa.table({"zip": ["1**"] * 3 + ["2**"] * 3 + ["3**"] * 3 + ["4**"] * 3 + ["5**"] * 3,
                             "dx": ["HIV", "HIV ", "HIV", nfc, nfd, nfc, "hiv", "HIV\u200b", "HIV", "HIV", "Flu",
                                    None, "HIV", "HIV\x00", "HIV\x01"]}), src)
    with caplog.at_level("WARNING", logger="sqlanon"):
        assert sqlanon.verify(src, qi=["zip"], k=3, l=2, sensitive=["dx"]).ok  # as written: a warning, not a verdict
    assert "l=2 holds as the values are written, but 4 class(es) hold fewer than 2 values of 'dx' once case" in (
        caplog.text), caplog.text
    caplog.clear()
    pq.write_table(pa.table({"zip": ["1**"] * 3, "dx": ["Flu", "HIV", "hiv"]}), src)
    with caplog.at_level("WARNING", logger="sqlanon"):  # the two that are one, not the class's first and last
        assert sqlanon.verify(src, qi=["zip"], k=3, l=3, sensitive=["dx"]).ok
    assert "(one holds 'HIV' and 'hiv')" in caplog.text, caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="sqlanon"):
        assert sqlanon.verify(src, qi=["zip"], k=3, l=1, sensitive=["dx"]).ok
        pq.write_table(pa.table({"zip": ["1**"] * 3, "dx": ["HIV", "Flu", None]}), src)
        assert sqlanon.verify(src, qi=["zip"], k=3, l=3, sensitive=["dx"]).ok
    assert "written two ways" not in caplog.text


def test_verify_warns_of_a_class_that_holds_k_and_l_only_across_files(tmp_path, caplog):
    """Two files, both [30, 39] / 123**, one of them all 'hiv': one class of
    6 rows to SQL, two of 3 to a reader who knows what the files are split
    by; verify passed it without a word (helper-68). A run's own directory
    of parts (one class never split across them) draws no warning."""
    lake = tmp_path / "lake"
    lake.mkdir()
    pq.write_table(pa.table({"age": ["[30, 39]"] * 3, "dx": ["hiv", "flu", "cold"]}), lake / "part-0.parquet")
    pq.write_table(pa.table({"age": ["[30, 39]"] * 3, "dx": ["hiv"] * 3}), lake / "part-1.parquet")
    with caplog.at_level("WARNING", logger="sqlanon"):
        assert sqlanon.verify(lake, qi=["age"], k=6, l=2, sensitive=["dx"]).ok
    assert re.search(r"k=6/l=2 hold across the files, but 2 part\(s\) of classes in one file break them \(age='\[30, "
                     r"39\]': 3 row\(s\) in '.*part-[01].parquet'\)", caplog.text), caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="sqlanon"):
        assert sqlanon.verify(lake, qi=["age"], k=3, l=1, sensitive=["dx"]).ok  # each part holds k and l itself
        out = tmp_path / "out"
        sqlanon.anonymize(ROOT / "examples" / "adults.csv", f"{out}/", qi=["age", "race"], k=10, l=2,
                          sensitive=["income"], workers=2, fragments=4)
        assert len(list(out.glob("*.parquet"))) == 4
        assert sqlanon.verify(out, qi=["age", "race"], k=10, l=2, sensitive=["income"]).ok
    assert "across the files" not in caplog.text, caplog.text


def test_nans_above_a_cut_are_read_from_parquet(tmp_path):
    """DuckDB skips the Parquet row groups whose statistics (which leave NaN
    out) have nothing above a cut: the fragment "x > 1.0 OR x IS NULL" lost
    the NaN rows of a float QI holding NaN, NULL and 1.0, as pyarrow and
    pandas write it, and the run failed ('75 rows written, 100 in the
    source')."""
    x = [1.0 if i % 2 else (math.nan if i % 4 else None) for i in range(100)]
    src = tmp_path / "nn.parquet"
    pq.write_table(pa.table({"id": list(range(100)), "x": x}), src)
    r = sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["x"], k=5, fragments=2, workers=2)
    assert r.metrics.rows == 100 and len(r.plan.fragments) == 2
    published = pq.read_table(tmp_path / "o.parquet").column("x").to_pylist()
    assert sum("nan" in v for v in published if v) == 25


def test_nans_above_a_cut_are_read_through_a_view_of_parquet(tmp_path):
    """A DuckDB source's view reads Parquet without ``can_have_nan`` (the
    file sources' own read_parquet has it): only the fragment's ``OR
    isnan()`` keeps DuckDB from skipping the row groups whose statistics
    leave NaN out ("x > 1.0 OR x IS NULL" held the NULLs alone: '75 rows
    written, 100 in the source'). The test above no longer tells."""
    x = [1.0 if i % 2 else (math.nan if i % 4 else None) for i in range(100)]
    src = tmp_path / "nn.parquet"
    pq.write_table(pa.table({"id": list(range(100)), "x": x}), src)
    db = tmp_path / "v.duckdb"
    with duckdb.connect(str(db)) as c:
        c.execute(f"CREATE VIEW v AS SELECT * FROM read_parquet('{src}')")
    r = sqlanon.anonymize(db, tmp_path / "o.parquet", table="v", qi=["x"], k=5, fragments=2, workers=1)
    assert r.metrics.rows == 100 and len(r.plan.fragments) == 2
    published = pq.read_table(tmp_path / "o.parquet").column("x").to_pylist()
    assert sum("nan" in v for v in published if v) == 25


@pytest.mark.parametrize("sensitive", [["s1"], ["s1", "s2"]])
def test_verify_counts_a_null_as_a_sensitive_value_with_one_or_more_columns(tmp_path, sensitive):
    """A NULL is one sensitive value, with one sensitive column or several
    (the SQL differs: with several, a NULL's own term in each column's
    count; only the 6-minute property tests told when it went: helper-128)."""
    src = tmp_path / "v.parquet"
    pq.write_table(pa.table({"g": ["a", "a", "b", "b"], "s1": ["x", None, "x", "y"], "s2": ["p", "q", "p", "q"]}), src)
    v = sqlanon.verify(src, qi=["g"], k=2, l=2, sensitive=sensitive)
    assert v.ok and v.achieved_l == 2
    assert not sqlanon.verify(src, qi=["g"], k=2, l=3, sensitive=sensitive).ok


def test_an_output_short_of_the_sources_rows_is_not_published(tmp_path, monkeypatch):
    """A fragment that lost rows (a read that skipped a row group, the input
    changed) may still publish k-anonymous classes: only the count of rows
    against the source's refuses it. Here every column is a QI, so no
    checksum of a pass-through column would tell either."""
    from sqlanon import engine

    src = tmp_path / "a.parquet"
    pq.write_table(pa.table({"age": [20 + i % 40 for i in range(400)]}), src)
    out = tmp_path / "o.parquet"
    out.write_bytes(b"old")
    real = engine.anonymize_fragment  # the worker imports it when it runs a fragment (in this process: workers=1)
    monkeypatch.setattr(engine, "anonymize_fragment", lambda table, *a, **kw: real(table.slice(1), *a, **kw))
    with pytest.raises(sqlanon.VerificationError, match="398 rows written, 400 in the source"):
        sqlanon.anonymize(src, out, qi=["age"], k=5, fragments=2, workers=1, overwrite=True)
    assert out.read_bytes() == b"old"


def test_library_takes_column_names_as_one_string_too(tmp_path):
    """qi="age" was read as its characters (column 'a' is not in ...); a
    string is comma-separated names, as on the command line."""
    src = tmp_path / "in.parquet"
    pq.write_table(people(400, seed=3), src)
    out = tmp_path / "out.parquet"
    r = sqlanon.anonymize(src, out, qi="age, zip", sensitive="disease", drop="note", k=5, l=2, workers=1)
    assert r.metrics.rows == 400
    assert pq.read_schema(out).names == ["id", "age", "zip", "day", "city", "disease"]
    assert sqlanon.verify(out, qi="age,zip", sensitive="disease", k=5, l=2).ok


def test_time_24_00_is_published_as_such(tmp_path):
    """TIME '24:00:00' (SQL's end of a day) is one unit past Arrow's range:
    the QI was published as '<value out of range: 86400000000>'."""
    src = tmp_path / "t.parquet"
    duckdb.sql(f"""COPY (SELECT CASE WHEN i % 2 = 0 THEN TIME '24:00:00' ELSE TIME '23:59:59' END AS t,
                   (i % 4)::VARCHAR AS s FROM range(100) r(i)) TO '{src}'""")
    for k, want in ((5, {"23:59:59.000000", "24:00:00.000000"}), (60, {"[23:59:59.000000, 24:00:00.000000]"})):
        out = tmp_path / f"o{k}.parquet"
        sqlanon.anonymize(src, out, qi=["t"], sensitive=["s"], k=k, l=2, workers=1)
        assert set(pq.read_table(out).column("t").to_pylist()) == want


def test_time_with_time_zone_is_refused_as_qi_or_sensitive(tmp_path):
    """Its offset does not reach Arrow: 12:00+05:30 and 12:00+00 were
    published as one exact 12:00 (NCP 0)."""
    db = tmp_path / "z.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("""CREATE TABLE t AS SELECT i AS id, (CASE i % 2 WHEN 0 THEN '12:00:00+05:30'
                       ELSE '12:00:00+00' END)::TIMETZ AS tz, i % 3 AS s FROM range(40) r(i)""")
    with pytest.raises(sqlanon.ConfigError, match="'tz' is TIME WITH TIME ZONE.*cannot be a quasi-identifier"):
        sqlanon.anonymize(db, tmp_path / "o.parquet", table="t", qi=["tz"], k=10, workers=1)
    with pytest.raises(sqlanon.ConfigError, match="'tz' is TIME WITH TIME ZONE.*cannot be a sensitive column"):
        sqlanon.anonymize(db, tmp_path / "o.parquet", table="t", qi=["s"], sensitive=["tz"], k=10, l=2, workers=1)


@pytest.mark.parametrize("out", ["o.parquet", "o.csv", "o.duckdb"])
def test_types_arrow_cannot_carry_are_refused_before_any_work(tmp_path, out):
    """A pass-through BIT, UHUGEINT or TIME WITH TIME ZONE, as a column or
    inside one, failed after all the work whatever its values (exit 1, 'the
    input may have changed... rerun then'), every night (helper-108): refused
    by name before any work. A struct's field or an enum's label of such a
    name is no such type; a column of NULLs only passes, as it did (helper-112)."""
    db = tmp_path / "t.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("""CREATE TABLE t AS SELECT i AS id, i % 30 AS age, '101'::BIT AS flags, i::UHUGEINT AS big,
                       '12:00:00+02'::TIMETZ AS tz, [{'a': i::UHUGEINT}] AS nested, {'BIT': i} AS named,
                       'BIT'::ENUM('BIT', 'UHUGEINT') AS label, NULL::BIT AS no_flags FROM range(300) r(i)""")
    odd = ["flags", "big", "tz", "nested"]
    target = dict(target_table="o") if out.endswith(".duckdb") else {}
    for col in odd:
        with pytest.raises(sqlanon.ConfigError, match=f"^column '{col}' is .*: a (BIT|UHUGEINT|TIME WITH TIME "
                                                      r"ZONE) cannot travel to any output exactly .*; drop it "
                                                      r"\(drop=\) or make it text"):
            sqlanon.anonymize(db, tmp_path / out, table="t", qi=["age"], k=5, workers=1,
                              drop=[c for c in odd if c != col], **target)
        assert not (tmp_path / out).exists()
    r = sqlanon.anonymize(db, tmp_path / out, table="t", qi=["age"], k=5, workers=1, drop=odd, **target)
    assert r.verification.ok and r.metrics.rows == 300


def test_intervals_of_one_length_are_one_sensitive_value(tmp_path):
    """DuckDB and PostgreSQL compare intervals by length ('1 day' = '24
    hours', '1 mon' = '30 days'); the engine counted their parts, so a CSV
    output published classes holding only '1 day' and '24:00:00' as
    2-diverse, exit 0 (helper-14). l now counts lengths, as the servers do."""
    db = tmp_path / "iv.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("""CREATE TABLE t AS SELECT i AS id, i // 2 AS age, (CASE
                       WHEN i < 20 THEN ['1 day', '24 hours'][1 + i % 2] ELSE ['1 month', '30 days'][1 + i % 2]
                       END)::INTERVAL AS wait FROM range(40) r(i)""")
    out = tmp_path / "o.csv"
    r = sqlanon.anonymize(db, out, table="t", qi=["age"], sensitive=["wait"], k=2, l=2, workers=1)
    assert r.verification.ok
    per_class = duckdb.execute("SELECT age, count(DISTINCT wait::INTERVAL) FROM read_csv(?, all_varchar = true) "
                               "GROUP BY age", [str(out)]).fetchall()
    assert min(n for _, n in per_class) >= 2, per_class  # was 1 in every class: one length per age
    assert len(per_class) < 20


def test_spans_past_2_63_and_dates_before_year_1(tmp_path, caplog):
    """Spans over 2**63 units (1677..2009 in nanoseconds, -5e18..5e18)
    overflowed int64: the QI was never cut and its NCP was 0. A UBIGINT of
    2**63 or more failed the run ('not in range'). A date before year 1 has
    no Python form to bind as a cut: two fragments failed the run; the QI is
    left uncut, which is said (the run was one fragment without a word:
    helper-34)."""
    from sqlanon.domain import span_values

    assert list(span_values(pa.array([-5 * 10**18, 0, 5 * 10**18], pa.int64()))) == [0.0, 5e18, 1e19]
    assert list(span_values(pa.array([2**63, 2**64 - 1], pa.uint64()))) == [0.0, float(2**63 - 1)]
    db = tmp_path / "w.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("""CREATE TABLE t AS SELECT i AS id, (18446744073709551615 - i * 1000)::UBIGINT AS ub,
                       ([-5000000000000000000, 0, 5000000000000000000])[1 + i % 3]::BIGINT + i AS big,
                       CASE WHEN i % 2 = 0 THEN DATE '0050-01-01 (BC)' + i::INT
                            ELSE DATE '1950-01-01' + i::INT END AS d,
                       (i % 3)::VARCHAR AS s FROM range(600) r(i)""")
    for qi in (["ub"], ["big"], ["d"]):
        r = sqlanon.anonymize(db, tmp_path / "o.parquet", table="t", qi=qi, sensitive=["s"], k=5, l=2, workers=2,
                              fragments=2, overwrite=True)
        assert r.verification.ok and r.metrics.rows == 600
        assert 0 < r.metrics.ncp_by_attribute[qi[0]] < 600, r.metrics.ncp_by_attribute
        uncut = "quasi-identifier 'd' holds dates or timestamps outside years 1-9999, which cannot be a cut's value"
        assert (uncut in caplog.text) == (qi == ["d"]) and len(r.plan.fragments) == (1 if qi == ["d"] else 2)
        caplog.clear()
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE o AS SELECT id, (id * 1000)::UHUGEINT AS uh, id::VARCHAR::BIGNUM AS bn, s FROM t")
    for qi, sensitive, name in ((["uh"], ["s"], "UHUGEINT"), (["id"], ["bn"], "BIGNUM")):  # were internal errors
        with pytest.raises(sqlanon.ConfigError, match=f"has type {name}, which Arrow cannot compare or group"):
            sqlanon.anonymize(db, tmp_path / "o.parquet", table="o", qi=qi, sensitive=sensitive, k=5, l=2,
                              workers=1, overwrite=True)


def test_wide_decimals_span_exactly(tmp_path):
    """A decimal's positions were its value as a double: 24-digit values 0.01
    apart were one double, and every class's NCP 0 (helper-14)."""
    from sqlanon.domain import span_values

    wide = pa.array([decimal.Decimal("123456789012345678901234.01"), decimal.Decimal("123456789012345678901234.05"),
                     decimal.Decimal("123456789012345678901235.01")], pa.decimal128(30, 2))
    assert list(span_values(wide)) == pytest.approx([0.0, 0.04, 1.0])
    edge = pa.array([decimal.Decimal("-" + "9" * 28 + ".9999999999"), decimal.Decimal("9" * 28 + ".9999999999")],
                    pa.decimal128(38, 10))
    assert list(span_values(edge)) == [0.0, 2e28]
    src = tmp_path / "w.parquet"
    pq.write_table(pa.table({"w": pa.array([decimal.Decimal("123456789012345678901234.01") + decimal.Decimal(i) / 100
                                            for i in range(40)], pa.decimal128(30, 2)),
                             "s": [str(i % 3) for i in range(40)]}), src)
    r = sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["w"], sensitive=["s"], k=4, l=2, workers=1)
    assert 0 < r.metrics.gcp < 1 and r.metrics.classes > 1


def test_hugeint_bounds_of_39_digits_are_refused(tmp_path):
    """--interval-format bounds on a HUGEINT wrote its 39-digit values into a
    DuckDB table's DECIMAL(38,0) _lo/_hi: invalid decimals no query could read."""
    db = tmp_path / "h.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("""CREATE TABLE t AS SELECT i AS id, CASE WHEN i % 2 = 0
                       THEN 170141183460469231731687303715884105727::HUGEINT ELSE i::HUGEINT END AS h,
                       (i % 4)::VARCHAR AS s FROM range(100) r(i)""")
    with pytest.raises(sqlanon.ConfigError, match="'h' is a HUGEINT holding values of 39 digits"):
        sqlanon.anonymize(db, db, table="t", target_table="t_anon", qi=["h"], sensitive=["s"], k=5, l=2,
                          interval_format="bounds", workers=1)
    with duckdb.connect(str(db)) as con:
        con.execute("UPDATE t SET h = 10 ^ 37 WHERE id % 2 = 0")
    sqlanon.anonymize(db, db, table="t", target_table="t_anon", qi=["h"], sensitive=["s"], k=5, l=2,
                      interval_format="bounds", workers=1)
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM t JOIN t_anon USING (id) WHERE t.h BETWEEN h_lo AND h_hi").fetchone() \
            == (100,)


def test_dates_and_timestamps_past_year_9999_are_published_as_dates(tmp_path):
    """Arrow writes a date past year 32767 as '<value out of range: 13890172>'
    and a zoned timestamp there as a wrapped-around year (40000 as -25536):
    those were the published intervals and sets (helper-39)."""
    db = tmp_path / "far.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("""CREATE TABLE t AS SELECT i AS id,
            CASE WHEN i % 2 = 0 THEN DATE '2020-01-01' + i::INT ELSE DATE '40000-01-01' + i::INT END AS d,
            CASE WHEN i % 2 = 0 THEN TIMESTAMPTZ '2020-01-01 00:00:00+00' ELSE TIMESTAMPTZ '40000-01-01 00:00:00+00' END
                + i * INTERVAL 1 HOUR AS ts
            FROM range(40) r(i)""")
    for kind in ("interval", "set"):
        out = tmp_path / f"{kind}.parquet"
        sqlanon.anonymize(db, out, table="t", qi=["d", "ts"], k=4, workers=1, generalization={"d": kind, "ts": kind})
        got = duckdb.sql(f"SELECT id, d, ts FROM '{out}'").fetchall()
        assert len(got) == 40 and not any("out of range" in d or "out of range" in ts for _, d, ts in got)
        source = dict(duckdb.connect(str(db), read_only=True).execute(
            "SELECT id, [strftime(d, '%Y-%m-%d'), strftime(ts AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S')] FROM t").fetchall())
        for i, d, ts in got:
            day, stamp = source[i]
            if kind == "set":
                assert day in d and stamp in ts, (i, d, ts, source[i])
            else:  # within the published interval, compared as dates by DuckDB
                lo, hi = d.strip("[]").split(", ") if d.startswith("[") else (d, d)
                assert duckdb.sql(f"SELECT DATE '{lo}' <= DATE '{day}' AND DATE '{day}' <= DATE '{hi}'").fetchone()[0]
        assert any(d.startswith("[40000-01-") or d.startswith("40000-01-") or "40000-01-" in d for _, d, _ in got)


def test_infinite_dates_and_timestamps_of_a_set_qi_are_published_as_infinity(tmp_path):
    """'infinity' and '-infinity' (DuckDB's, and PostgreSQL's through it) reach
    Arrow as the type's largest integer and its negation: a set published them
    as {294247-01-10 04:00:54.775807, …}, -290308-12-21 19:59:05.224193 and
    the dates 5881580-07-11 and -5877641-06-24 (beyond PostgreSQL's range),
    where the refusal of an interval says to use a set (helper-135)."""
    db = tmp_path / "inf.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("""CREATE TABLE t AS SELECT i AS id,
            CASE i % 10 WHEN 0 THEN 'infinity'::DATE WHEN 1 THEN '-infinity'::DATE
                 ELSE DATE '2020-01-01' + i::INT END AS d,
            CASE i % 10 WHEN 0 THEN 'infinity'::TIMESTAMPTZ WHEN 1 THEN '-infinity'::TIMESTAMPTZ
                 ELSE TIMESTAMPTZ '2020-01-01 00:00:00+00' + i * INTERVAL 1 HOUR END AS ts
            FROM range(40) r(i)""")
    out = tmp_path / "o.parquet"
    sqlanon.anonymize(db, out, table="t", qi=["d", "ts"], k=4, workers=1, generalization={"d": "set", "ts": "set"})
    got = duckdb.sql(f"SELECT id, d, ts FROM '{out}'").fetchall()
    assert len(got) == 40
    for i, d, ts in got:
        assert "294247" not in ts and "290308" not in ts and "5881580" not in d and "5877641" not in d, (i, d, ts)
        if i % 10 in (0, 1):
            want = "infinity" if i % 10 == 0 else "-infinity"
            assert want in d.strip("{}").split(", ") and want in ts.strip("{}").split(", "), (i, d, ts)


def test_a_duckdb_column_arrow_cannot_take_is_named(tmp_path):
    """A TIME_NS column (or a list of them) of a DuckDB table failed every
    run, --drop or not, with DuckDB's 'Unsupported type in DuckDB -> Arrow
    Conversion: TIME_NS' and no column named (helper-133): named, exit 2."""
    db = tmp_path / "t.duckdb"
    with duckdb.connect(str(db)) as c:
        c.execute("CREATE TABLE t AS SELECT i AS a, [CAST('01:00' AS TIME_NS)] AS l FROM range(20) r(i)")
    with pytest.raises(sqlanon.ConfigError, match=r"column 'l' of .* is TIME_NS\[\], which DuckDB cannot hand over"):
        sqlanon.anonymize(db, tmp_path / "o.parquet", table="t", qi=["a"], k=2, workers=1, drop=["l"])
    assert not (tmp_path / "o.parquet").exists()


def test_the_duckdb_column_arrow_cannot_take_is_the_one_named(tmp_path):
    """A struct's field or an enum's value spelt like the type Arrow cannot
    take ('STRUCT(TIME_NS INTEGER)') named that column, not the TIME_NS one."""
    db = tmp_path / "t.duckdb"
    with duckdb.connect(str(db)) as c:
        c.execute("CREATE TABLE t AS SELECT i AS a, {'TIME_NS': 1} AS s, CAST('TIME_NS' AS ENUM('TIME_NS')) AS e, "
                  "CAST('01:00' AS TIME_NS) AS real_one FROM range(20) r(i)")
    with pytest.raises(sqlanon.ConfigError, match=r"column 'real_one' of .* is TIME_NS, which DuckDB cannot"):
        sqlanon.anonymize(db, tmp_path / "o.parquet", table="t", qi=["a"], k=2, workers=1)


def test_parquet_nanoseconds_duckdb_reads_coarser_are_refused(tmp_path):
    """DuckDB reads a Parquet timestamp[ns, tz] to microseconds: 100 distinct
    instants came out as 1, and the checksums (both sides read by DuckDB)
    said the column came through unchanged."""
    src = tmp_path / "ev.parquet"
    pq.write_table(pa.table({"age": [i % 10 for i in range(100)], "s": [str(i % 3) for i in range(100)],
                             "at": pa.array([1_600_000_000_000_000_000 + i for i in range(100)],
                                            pa.timestamp("ns", "UTC"))}), src)
    with pytest.raises(sqlanon.ConfigError, match="'at' holds nanosecond timestamps with a time zone"):
        sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["age"], sensitive=["s"], k=5, l=2, workers=1)
    assert sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["age"], sensitive=["s"], k=5, l=2, workers=1,
                             drop=["at"]).metrics.rows == 100
    # As a QI its intervals' upper bounds fell below the rows' values (helper-39); a nanosecond time too
    with pytest.raises(sqlanon.ConfigError, match="'at' holds nanosecond timestamps .* cannot be generalized "
                                                  "truthfully as a quasi-identifier"):
        sqlanon.anonymize(src, tmp_path / "q.parquet", qi=["age", "at"], sensitive=["s"], k=5, l=2, workers=1)
    clock = tmp_path / "clock.parquet"
    pq.write_table(pa.table({"age": [i % 10 for i in range(100)], "t": pa.array(
        [36_007_000_000_999 + i for i in range(100)], pa.time64("ns"))}), clock)
    for qi in (["age"], ["age", "t"]):
        with pytest.raises(sqlanon.ConfigError, match="'t' holds nanosecond times, which DuckDB reads to microseconds"):
            sqlanon.anonymize(clock, tmp_path / "c.parquet", qi=qi, k=5, workers=1)
    assert not (tmp_path / "c.parquet").exists()
    # INT96 (Impala's, legacy Spark's) holds nanoseconds too
    legacy = tmp_path / "int96.parquet"
    pq.write_table(pa.table({"age": [i % 10 for i in range(100)], "at": pa.array(
        [1_600_000_000_000_000_000 + i for i in range(100)], pa.timestamp("ns"))}), legacy,
        use_deprecated_int96_timestamps=True)
    with pytest.raises(sqlanon.ConfigError, match=r"'at' holds nanosecond timestamps \(INT96\), which DuckDB reads"):
        sqlanon.anonymize(legacy, tmp_path / "l.parquet", qi=["age"], k=5, workers=1)
    pq.write_table(pa.table({"age": [i % 10 for i in range(100)], "at": pa.array(
        [1_600_000_000_000_000_000 + i * 1000 for i in range(100)], pa.timestamp("ns"))}), legacy,
        use_deprecated_int96_timestamps=True)
    assert sqlanon.anonymize(legacy, tmp_path / "l.parquet", qi=["age"], k=5, workers=1).metrics.rows == 100
    # In a lake, the file that holds them is named (a thousand files: which one?) (helper-58)
    (tmp_path / "lake").mkdir()
    shutil.copy(legacy, tmp_path / "lake" / "a.parquet")
    pq.write_table(pa.table({"age": [i % 10 for i in range(100)], "at": pa.array(
        [1_600_000_000_000_000_000 + i for i in range(100)], pa.timestamp("ns"))}), tmp_path / "lake" / "b.parquet",
        use_deprecated_int96_timestamps=True)
    with pytest.raises(sqlanon.ConfigError, match=r"^column 'at' of '.*/lake/b\.parquet' holds nanosecond timestamps"):
        sqlanon.anonymize(tmp_path / "lake", tmp_path / "l.parquet", qi=["age"], k=5, workers=1, overwrite=True)
    # ... read by the name DuckDB matches: whole microseconds in a file spelling it 'AT' were refused as finer
    pq.write_table(pa.table({"age": [i % 10 for i in range(100)], "AT": pa.array(
        [1_600_000_000_000_000_000 + i * 1000 for i in range(100)], pa.timestamp("ns"))}),
        tmp_path / "lake" / "b.parquet", use_deprecated_int96_timestamps=True)
    assert sqlanon.anonymize(tmp_path / "lake", tmp_path / "l.parquet", qi=["age"], k=5, workers=1,
                             overwrite=True).metrics.rows == 200
    # Whole microseconds (pandas' zoned datetime64[ns], mostly) read exactly: taken, as a QI too (helper-41)
    whole = tmp_path / "whole.parquet"
    pq.write_table(pa.table({"age": [i % 10 for i in range(100)], "at": pa.array(
        [1_600_000_000_000_000_000 + i * 1000 for i in range(99)] + [None], pa.timestamp("ns", "UTC")),
        "t": pa.array([36_007_000_000_000 + i * 1000 for i in range(100)], pa.time64("ns"))}), whole)
    r = sqlanon.anonymize(whole, tmp_path / "w.parquet", qi=["age", "at"], k=5, workers=1)
    assert r.metrics.rows == 100 and sorted(pq.read_table(tmp_path / "w.parquet").column("t").to_pylist()) == \
        sorted(pq.read_table(whole).column("t").cast(pa.time64("us")).to_pylist())


def test_csv_numbers_a_double_would_round_are_refused(tmp_path):
    """DuckDB guesses DOUBLE for a CSV column of 30-digit numbers: 200
    account numbers were published as one 1.2345678901234568e+29 into
    Parquet, and the checksums (both sides read as DOUBLE) agreed."""
    src = tmp_path / "acct.csv"
    src.write_text("age,acct,price,padded\n" + "".join(
        f"{20 + i % 30},{123456789012345678901234567890 + i},{i * 1.5},1.500000000000000000000\n" for i in range(200)))
    with pytest.raises(sqlanon.ConfigError, match="'acct' of .* more than 15 significant digits"):
        sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["age"], k=5, workers=1)
    # Decimals with many zeros round-trip; into CSV the text passes through as it is.
    r = sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["age"], k=5, workers=1, drop=["acct"])
    assert r.metrics.rows == 200
    sqlanon.anonymize(src, tmp_path / "o.csv", qi=["age"], k=5, workers=1)
    published = duckdb.sql(f"SELECT min(acct) FROM read_csv('{tmp_path / 'o.csv'}', all_varchar = true)").fetchone()
    assert published == ("123456789012345678901234567890",)
    # As a QI it is read typed, CSV to CSV too: intervals missed their rows' values (helper-39)
    for out in ("q.csv", "q.parquet"):
        with pytest.raises(sqlanon.ConfigError, match="'acct' of .* more than 15 significant digits"):
            sqlanon.anonymize(src, tmp_path / out, qi=["age", "acct"], k=5, workers=1)
        assert not (tmp_path / out).exists()
    # Doubles as pandas writes them (their shortest text, up to 17 digits) read back exactly (helper-41)
    floats = tmp_path / "bmi.csv"
    floats.write_text("age,bmi\n" + "".join(f"{20 + i % 30},{repr(i / 10 + 0.1 + 0.2 - 0.3)}\n" for i in range(200)))
    assert "0.30000000000000004" in floats.read_text() or "0.3000000000000001" in floats.read_text()
    for out in ("f.csv", "f.parquet"):
        assert sqlanon.anonymize(floats, tmp_path / out, qi=["age", "bmi"], k=5, workers=1).metrics.rows == 200


def test_csv_times_finer_than_microseconds_are_refused(tmp_path):
    """DuckDB reads a CSV timestamp or time of nanoseconds to microseconds:
    they were published cut, as pass-through, QI or sensitive values, and
    the checksums (both sides read by DuckDB) agreed (helper-34)."""
    src = tmp_path / "ev.csv"
    src.write_text("age,at,clock,s\n" + "".join(
        f"{20 + i % 30},2020-01-01 12:34:56.{123456000 + i},12:00:00.{1234567 + i},{i % 3}\n" for i in range(200)))
    run = dict(k=5, l=2, sensitive=["s"], workers=1)
    with pytest.raises(sqlanon.ConfigError, match="'at' of .* finer than microseconds"):
        sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["age"], **run)
    with pytest.raises(sqlanon.ConfigError, match="'clock' of .* finer than microseconds"):
        sqlanon.anonymize(src, tmp_path / "o.csv", qi=["age", "clock"], **run)  # as a QI, into CSV too
    assert not list(tmp_path.glob("o*"))
    # Seven decimals that end in a zero (SQL Server's datetime2 exports) lose nothing.
    exact = tmp_path / "exact.csv"
    exact.write_text("age,at,s\n" + "".join(f"{20 + i % 30},2020-01-01 12:34:56.{1234560 + i * 10},{i % 3}\n"
                                             for i in range(200)))
    assert sqlanon.anonymize(exact, tmp_path / "exact.parquet", qi=["age"], **run).metrics.rows == 200
    # Into CSV the pass-through text travels as it is.
    sqlanon.anonymize(src, tmp_path / "o.csv", qi=["age"], **run)
    published = duckdb.sql(f"""SELECT max("at") FROM read_csv('{tmp_path / 'o.csv'}', all_varchar = true)""").fetchone()
    assert published == ("2020-01-01 12:34:56.123456199",)


def test_csv_values_past_the_sniffed_rows_that_the_guessed_type_would_change_are_refused(tmp_path):
    """DuckDB guesses a CSV column's type from its first ~20,000 rows: a
    later 112.03 in an integer column was published as 112, 32.5 in a QI as
    33, a later '2021-03-13 19:46:00' in a date column as the date alone,
    exit 0, the checksums (both sides read typed) agreeing (helper-48)."""
    src = tmp_path / "late.csv"

    def write(amount: str, age: str, visit: str, seen: str = "2021-03-13 10:00:00", at: str = "10:00:00") -> None:
        src.write_text("id,age,dx,amount,visit,seen,at\n" + "".join(
            f"{i},{20 + i % 50},{('Flu', 'Cold')[i % 2]},{i % 500},2021-03-13,2021-03-13 10:00:00,10:00:00\n"
            for i in range(25_000)) + f"25000,{age},Flu,{amount},{visit},{seen},{at}\n")

    run = dict(qi=["age"], k=5, l=2, sensitive=["dx"], workers=1)
    # A UTC offset in a column of timestamps (or times) without one was
    # dropped: 10:00+05:00 published as 10:00 (helper-53).
    # A later 0123 (a ZIP code), 0x10 or 1_000 in an integer column lost its text: 123, 16, 1000 (helper-58).
    for (amount, age, visit, *more), column in ((("112.03", "30", "2021-03-13"), "amount"),
                                                (("112", "32.5", "2021-03-13"), "age"),
                                                (("0123", "30", "2021-03-13"), "amount"),
                                                (("0x10", "30", "2021-03-13"), "amount"),
                                                (("1_000", "30", "2021-03-13"), "amount"),
                                                (("112", "030", "2021-03-13"), "age"),
                                                (("112", "30", "2021-03-13 19:46:00"), "visit"),
                                                (("112", "30", "2021-03-13", "2021-03-13 10:00:00+05:00"), "seen"),
                                                (("112", "30", "2021-03-13", "2021-03-13 10:00:00", "10:00:00-0230"),
                                                 "at")):
        write(amount, age, visit, *more)
        for out in ("o.parquet", "o.csv"):
            if out == "o.csv" and column != "age":
                continue  # CSV to CSV, a pass-through column's text travels as it is
            with pytest.raises(sqlanon.ConfigError, match=rf"column '{column}' of .* DuckDB reads .* as "):
                sqlanon.anonymize(src, tmp_path / out, **run)
            assert not (tmp_path / out).exists()
    # No number at all where DuckDB reads numbers: its reading failed (exit 1), as if a retry could
    # succeed; the same file fails the same way every night (helper-67).
    # So are blanks, and in integers 'inf' or a number past BIGINT (helper-69).
    for (amount, age), column in ((("n/a", "30"), "amount"), (("112", "unknown"), "age"), (('" "', "30"), "amount"),
                                  (("inf", "30"), "amount"), (("99999999999999999999", "30"), "amount")):
        write(amount, age, "2021-03-13")
        with pytest.raises(sqlanon.ConfigError, match=rf"column '{column}' of .*late.csv' holds, on line 25,002, a "
                                                      r"value that DuckDB, reading the column as BIGINT .* cannot "
                                                      r"read") as caught:
            sqlanon.anonymize(src, tmp_path / "o.parquet", **run)
        assert "n/a" not in str(caught.value) and "unknown" not in str(caught.value)  # the data stays out of it
    # What the type holds exactly is read: 1e3, +42 in an integer column, a midnight in a date column,
    # a zero offset.
    write("1e3", "+42", "2021-03-13 00:00:00", "2021-03-13T10:00:00.5+00:00", "10:00:00-00")
    assert sqlanon.anonymize(src, tmp_path / "o.parquet", **run).metrics.rows == 25_001


def test_the_csv_integer_checks_over_the_rows_they_could_flag_count_as_over_every_row():
    """csv_lossy_reads.sql counts the integers' fractions and written forms
    only over the rows where a value does not read back as written: the
    counts must be those of the same conditions over every row."""
    from sqlanon.sql import ident, render

    texts = ["12", "-12", "0", "-0", "00", "0123", " 0123", "+0123", "-0123", "0x10", "0X1f", "0b101", "0o17",
             "1_000", "+1_000", "112.03", "112.0", "1.50", " 7 ", "+42", "1e3", "1.5e1", "1e-1", "9" * 20,
             "-" + "9" * 19, "", None, "n/a", "1 000", "٣", "0.", ".5"]
    rng = random.Random(7)
    names = ["n", 'a"; DROP TABLE x; --']
    rows = [[rng.choice(texts) for _ in names] for _ in range(2_000)]
    con = duckdb.connect()
    con.execute(f'CREATE TABLE t ({", ".join(ident(c) + " VARCHAR" for c in names)})')
    con.executemany(f"INSERT INTO t VALUES ({', '.join('?' for _ in names)})", rows)
    stmt = render("csv_lossy_reads.sql", relation='"t"', doubles=[], times=[], integers=names, dates=[], naive=[],
                  booleans=[], worded=[])
    result = con.execute(stmt.sql, stmt.params)
    got = dict(zip([d[0] for d in result.description], result.fetchone()))
    for i, c in enumerate(names):
        q = ident(c)
        want = con.execute(
            f"SELECT count(*) FILTER (WHERE TRY_CAST(trim({q}) AS DOUBLE) <> trunc(TRY_CAST(trim({q}) AS DOUBLE))), "
            f"count(*) FILTER (WHERE regexp_matches(trim({q}), '^[+-]?(0[0-9]|0[xXbBoO]|[0-9]+_)')) FROM t"
        ).fetchone()
        assert (got[f"i{i}"], got[f"l{i}"]) == want and min(want) > 0, (c, got, want)


def test_a_qi_generalized_otherwise_than_by_the_last_run_is_warned_about(tmp_path, caplog):
    """A lake's file written by another tool made a nightly job's ages text:
    published as sets where the night before had intervals, exit 0, the
    output's readers left to find out (helper-67). The last run publishing
    the same output, from its metrics (a file, or a DuckDB table)."""
    ages = pa.array([20 + i % 50 for i in range(400)])
    src = tmp_path / "in.parquet"
    run = dict(qi=["age"], k=5, l=2, sensitive=["dx"], workers=1, overwrite=True)
    dx = pa.array([("Flu", "Cold")[i % 2] for i in range(400)])
    for out, other, more in ((tmp_path / "o.parquet", tmp_path / "x.parquet", {}),
                             (tmp_path / "o.duckdb", tmp_path / "o.duckdb", {"target_table": "t"}),
                             (tmp_path / "p.parquet", tmp_path / "x.parquet", {"metrics": str(tmp_path / "m.csv")})):
        caplog.clear()
        pq.write_table(pa.table({"age": ages, "dx": dx}), src)
        with caplog.at_level("WARNING", logger="sqlanon"):
            sqlanon.anonymize(src, out, **run, **more)
            sqlanon.anonymize(src, out, **run, **more)
            assert "generalized" not in caplog.text, caplog.text  # the same type: no word
            pq.write_table(pa.table({"age": pc.cast(ages, pa.string()), "dx": dx}), src)
            sqlanon.anonymize(src, other, **run, **{**more, "target_table": "u"} if "target_table" in more else more)
            assert "generalized" not in caplog.text, caplog.text  # another output: not compared
            sqlanon.anonymize(src, out, **run, **more)
        assert re.search(r"quasi-identifier 'age' is generalized as sets by its type \(string\), where the last run "
                         r"publishing '.*' \(20\d\d-.*\) generalized it as intervals: .* pin it "
                         r"\(generalization=\{'age': 'interval'\}", caplog.text), caplog.text
        caplog.clear()
        with caplog.at_level("WARNING", logger="sqlanon"):  # the job's own change: no word
            sqlanon.anonymize(src, out, **run, **more)  # (last night's sets, now compared with)
            pq.write_table(pa.table({"age": ages, "dx": dx}), src)
            sqlanon.anonymize(src, out, **{**run, "generalization": {"age": "interval"}}, **more)
        assert "generalized" not in caplog.text, caplog.text
    # Input and output in one DuckDB file: the file attached as the input is read (a second attach failed).
    db = tmp_path / "w.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE src AS SELECT 20 + i % 50 AS age, ['Flu', 'Cold'][1 + i % 2] AS dx FROM range(400) "
                    "t(i)")
    caplog.clear()
    with caplog.at_level("WARNING", logger="sqlanon"):
        sqlanon.anonymize(db, db, table="src", target_table="t", **run)
        with duckdb.connect(str(db)) as con:
            con.execute("ALTER TABLE src ALTER age TYPE VARCHAR")
        sqlanon.anonymize(db, db, table="src", target_table="t", **run)
    assert "quasi-identifier 'age' is generalized as sets by its type (string)" in caplog.text, caplog.text


def test_a_column_new_since_the_last_run_and_dates_turned_timestamps_are_warned_about(tmp_path, caplog):
    """A column added upstream ('ssn') went out raw with a job without keep:,
    and a QI of dates turned timestamps wrote its intervals otherwise
    ('[1950-07-03 00:00:00, …]'), not a word (helper-158). Compared with
    the last run publishing the output, as its metrics record it."""
    n = 400
    dob = pa.array([datetime.date(1950, 1, 1) + datetime.timedelta(days=37 * i) for i in range(n)])
    first = pa.table({"age": [20 + i % 50 for i in range(n)], "dob": dob,
                      "dx": [("Flu", "Cold")[i % 2] for i in range(n)], "ward": ["a"] * n})
    src, out = tmp_path / "in.parquet", tmp_path / "o.parquet"
    run = dict(qi=["age", "dob"], sensitive=["dx"], k=5, l=2, workers=1, overwrite=True)
    pq.write_table(first, src)
    with caplog.at_level("WARNING", logger="sqlanon"):
        sqlanon.anonymize(src, out, **run)
        sqlanon.anonymize(src, out, **run)
    assert not caplog.messages, caplog.messages  # the same input: no word
    later = first.append_column("ssn", pa.array([f"{i:09d}" for i in range(n)])).set_column(
        1, "dob", dob.cast(pa.timestamp("us")))
    pq.write_table(later, src)
    with caplog.at_level("WARNING", logger="sqlanon"):
        sqlanon.anonymize(src, out, **run, drop=["ssn"])  # dropped: nothing new goes out
        assert [m for m in caplog.messages if "unchanged" not in m] == caplog.messages
        sqlanon.anonymize(src, out, **run)
    said = [m for m in caplog.messages if "passes through unchanged" in m]
    assert len(said) == 1 and said[0].startswith(f"column 'ssn' passes through unchanged into {str(out)!r}, where the "
                                                 "last run publishing"), caplog.messages
    assert sum("quasi-identifier 'dob' holds timestamps (timestamp[us]), where the last run publishing" in m and
               "found dates (date32[day])" in m for m in caplog.messages) == 1, caplog.messages
    caplog.clear()
    with caplog.at_level("WARNING", logger="sqlanon"):
        sqlanon.anonymize(src, out, **run)  # as the last run: no word
        pq.write_table(later.append_column("email", pa.array(["x"] * n)), src)
        sqlanon.anonymize(src, out, **run, keep=["ward", "ssn", "email"])  # listed: the job's own choice
    assert not caplog.messages, caplog.messages


def test_a_csv_qi_of_numbers_read_as_text_for_a_few_words_is_warned_about(tmp_path, caplog):
    """An 'n/a' among the rows DuckDB guesses a type from made a nightly
    job's ages text: published as sets instead of intervals, exit 0, the
    published format changed under its readers (helper-67)."""
    src = tmp_path / "ages.csv"
    rows = [f"{i},{20 + i % 50},{('Flu', 'Cold')[i % 2]}" for i in range(400)]
    rows[3] = "3,n/a,Flu"
    src.write_text("id,age,dx\n" + "\n".join(rows) + "\n")
    run = dict(qi=["age"], k=5, l=2, sensitive=["dx"], workers=1)
    with caplog.at_level("WARNING", logger="sqlanon"):
        sqlanon.anonymize(src, tmp_path / "o.parquet", **run)
    assert re.search(r"quasi-identifier 'age' of '.*ages.csv' reads as text, so it is generalized as a set, not by "
                     r"intervals: 399 of its 400 values are numbers, 1 is not", caplog.text), caplog.text
    # pinned, such a file is refused, naming it (not only "column 'age' has type string": helper-158)
    with pytest.raises(sqlanon.ConfigError, match=r"^quasi-identifier 'age' of '.*ages\.csv' reads as string, and "
                                                  r"'interval', asked for it, needs numbers, dates or timestamps"):
        sqlanon.anonymize(src, tmp_path / "p.parquet", generalization={"age": "interval"}, **run)
    caplog.clear()
    rows[3] = "3,,Flu"  # an empty field: numbers, no warning
    src.write_text("id,age,dx\n" + "\n".join(rows) + "\n")
    with caplog.at_level("WARNING", logger="sqlanon"):
        sqlanon.anonymize(src, tmp_path / "o.parquet", overwrite=True, **run)
    assert "reads as text" not in caplog.text
    # A file of text columns only (the id dropped): said too, where no other check read the file's text
    # (helper-105, helper-107)
    rows[3] = "3,n/a,Flu"
    src.write_text("id,age,dx\n" + "\n".join(rows) + "\n")
    caplog.clear()
    with caplog.at_level("WARNING", logger="sqlanon"):
        sqlanon.anonymize(src, tmp_path / "o.csv", drop=["id"], **run)
    assert "quasi-identifier 'age' of" in caplog.text and "reads as text" in caplog.text, caplog.text


def test_a_csv_qi_of_dates_read_as_text_for_a_few_other_formats_is_warned_about(tmp_path, caplog):
    """A few dates written another way ('10.01.1950' among ISO ones) made
    the column text: published as sets of dates, exit 0, not a word
    (helper-107). Said as the 'n/a' among numbers is; a decimal comma's hint."""
    src = tmp_path / "born.csv"
    rows = [f"{i},19{50 + i % 40}-0{1 + i % 9}-1{i % 9},\"{1000 + i % 50}.5\",{('Flu', 'Cold')[i % 2]}"
            for i in range(400)]
    rows[3] = '3,10.01.1950,"1003,5",Flu'
    src.write_text("id,born,income,dx\n" + "\n".join(rows) + "\n")
    with caplog.at_level("WARNING", logger="sqlanon"):
        sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["born", "income"], k=5, l=2, sensitive=["dx"], workers=1)
    assert re.search(r"quasi-identifier 'born' of '.*born.csv' reads as text, so it is generalized as a set, not by "
                     r"intervals: 399 of its 400 values are ISO dates or timestamps, 1 is not \(another date "
                     r"format\?\); write every date one way \(YYYY-MM-DD\)", caplog.text), caplog.text
    assert re.search(r"quasi-identifier 'income' .* 399 of its 400 values are numbers, 1 is not \(an 'n/a', a "
                     r"decimal comma\?\)", caplog.text), caplog.text


def test_a_duckdb_target_schema_that_is_missing_is_refused_before_any_work(tmp_path):
    """It failed after all the fragments ('Catalog Error: Schema with name hr
    does not exist', exit 1); --explain did not notice."""
    src = tmp_path / "src.parquet"
    pq.write_table(people(200), src)
    out = tmp_path / "o.duckdb"
    args = ["anonymize", src, "-o", out, "--target-table", "hr.anon", "--qi", ",".join(QI), "-k", 5, "-v"]
    for extra in ([], ["--explain"]):
        p = _cli(*args, *extra)
        assert p.returncode == 2 and "schema 'hr' does not exist in the new DuckDB file" in p.stderr, p.stderr
        assert "fragment" not in p.stderr and not out.exists()
    with duckdb.connect(str(out)) as con:
        con.execute("CREATE TABLE t AS SELECT 1 AS x")
    p = _cli(*args)
    assert p.returncode == 2 and f"schema 'hr' does not exist in '{out}'" in p.stderr, p.stderr
    with duckdb.connect(str(out)) as con:
        con.execute("CREATE SCHEMA HR")  # names match case-insensitively, as DuckDB's do
    p = _cli(*args, "--metrics", "audit.runs")  # the metrics table's schema too
    assert p.returncode == 2 and f"schema 'audit' does not exist in '{out}'" in p.stderr, p.stderr
    p = _cli(*args)
    assert p.returncode == 0, p.stderr
    with duckdb.connect(str(out), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM hr.anon").fetchone()[0] == 200


def test_a_worker_spills_into_the_runs_staging_area(tmp_path, monkeypatch):
    """DuckDB spills into .tmp in the working directory by default: a
    scheduled job's may be read-only ('Failed to create directory .tmp'),
    and a crashed worker's files stayed there for good. Each worker spills
    into a directory of the run's staging area, which goes with it; the
    coordinator, which reads before there is one, into one of its own in
    the temporary directory, which DuckDB removes."""
    from sqlanon import io

    spills = []
    real = io.connect

    def connect(*args, temp_directory=None, **kwargs):
        con = real(*args, temp_directory=temp_directory, **kwargs)
        spill = con.execute("SELECT current_setting('temp_directory')").fetchone()[0] if temp_directory else None
        # a worker's by a name that stays its directory (/proc/self/fd/N: helper-115), resolved while open
        spills.append(os.path.realpath(spill) if spill and spill.startswith("/proc/") else spill)
        return con

    monkeypatch.setattr(io, "connect", connect)
    src = tmp_path / "src.parquet"
    pq.write_table(people(2_000), src)
    run(src, tmp_path / "o.parquet", workers=1, fragments=2)  # the fragments run in this process
    spills = [Path(s) for s in spills if s]  # (a connection that only looks at a file's columns spills nothing)
    coordinator = [s for s in spills if s.parent == Path(tempfile.gettempdir())]  # it reads before any staging
    workers = [s for s in spills if s not in coordinator]
    assert len(coordinator) == 1 and coordinator[0].name.startswith("sqlanon-spill-"), spills
    assert not coordinator[0].exists()
    assert len(workers) == 2, spills
    for s in workers:
        assert Path(s).parent.name.startswith(".o.parquet.sqlanon-staging-") and Path(s).name.startswith("spill-")
    assert not list(tmp_path.glob(".o.parquet.sqlanon-staging-*"))  # gone with the staging
    # A run killed outright left its spill directory for good (helper-50): the next run removes those of dead runs.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = Path(tempfile.mkdtemp(prefix=f"sqlanon-spill-{dead.pid}-"))
    live = Path(tempfile.mkdtemp(prefix=f"sqlanon-spill-{os.getpid()}-"))
    run(src, tmp_path / "o.parquet", workers=1, overwrite=True)
    assert not stale.exists() and live.exists()
    live.rmdir()


def test_a_temporary_directory_too_long_for_a_socket_still_runs_local_workers(tmp_path):
    """The fork server's socket lives in TMPDIR; past ~75 characters its
    path is too long for a socket, and the run failed as 'internal error
    (OSError: AF_UNIX path too long)'. Its directory goes to /tmp then."""
    tmp = tmp_path / ("t" * 80)
    tmp.mkdir()
    src = tmp_path / "src.parquet"
    pq.write_table(people(2_000), src)
    done = _cli("anonymize", src, "-o", tmp_path / "o.parquet", "--qi", ",".join(QI), "-k", "5", "--workers", "2",
                env={**os.environ, "TMPDIR": str(tmp)})
    assert done.returncode == 0, done.stderr
    assert pq.read_table(tmp_path / "o.parquet").num_rows == 2_000 and not list(tmp.iterdir())


def test_an_input_file_replaced_during_the_run_is_not_published(tmp_path):
    """An upstream job that replaces the input (write aside, mv) while a run
    reads it: fragments read before held the old rows, those after the new
    ones, and with the same row count and pass-through columns (a QI
    shifted) the blend was published with exit 0. The input's files are
    checked before publishing."""
    args, out, proc = _run_to_interrupt(tmp_path, seed=13)
    src = tmp_path / "big.parquet"
    shifted = pq.read_table(src)
    shifted = shifted.set_column(shifted.column_names.index("age"), "age", pc.add(shifted.column("age"), 1))
    pq.write_table(shifted, tmp_path / "next.parquet")
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None and not _staged_parts(tmp_path):
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before its input could be replaced"
    os.replace(tmp_path / "next.parquet", src)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, err
    assert f"the input file {str(src)!r} changed during the run" in err and len(err.splitlines()) == 1, err
    assert out.read_bytes() == b"previous target"
    assert not list(tmp_path.glob(".out.parquet.sqlanon-staging-*"))


@pytest.mark.parametrize("change", ["rewritten", "removed"])
def test_an_input_file_changed_while_read_fails_the_run_saying_so(tmp_path, change):
    """A file of a directory input rewritten in place (or removed) while the
    statistics read it failed the run with DuckDB's words about the
    directory ("cannot read 'lake': TProtocolException: Invalid data", "No
    such file"), which read as a corrupt input; now as a file replaced
    later in the run, naming the file (helper-80)."""
    src = tmp_path / "lake"
    src.mkdir()
    t = people(6_000, seed=2)
    pq.write_table(t.slice(0, 3_000), src / "a.parquet")
    pq.write_table(t.slice(3_000), src / "b.parquet")
    out = tmp_path / "out.parquet"
    out.write_bytes(b"previous")

    def status(text):
        if text == "reading statistics":
            if change == "removed":
                (src / "b.parquet").unlink()
            else:
                (src / "b.parquet").write_bytes(b"PAR1" + b"\0" * 100)

    with pytest.raises(sqlanon.InputError, match=f"the input file {re.escape(repr(str(src / 'b.parquet')))} "
                       r"changed during the run \(replaced, rewritten or removed\), and reading it failed \("):
        run(src, out, workers=1, overwrite=True, status=status)
    assert out.read_bytes() == b"previous"


@pytest.mark.parametrize("when", ["opening", "fingerprinting", "describing"])
def test_a_directory_input_swapped_as_the_run_starts_fails_saying_so(tmp_path, monkeypatch, when):
    """A directory input swapped whole (another run's --overwrite of its
    directory output, whose parts are named anew each run) after the run
    listed its files and before it fingerprinted them failed with DuckDB's
    words: "cannot read 'a/': IO Error: No files found that match the
    pattern 'a/part-00000-….parquet'", the change told nowhere (helper-170:
    3 of 14 chained runs, most while the run opened the lake), or, later, as
    "internal error (IOException: …" over three lines; now as a file changed
    during the run."""
    from sqlanon import io

    src = tmp_path / "a"
    src.mkdir()
    pq.write_table(people(2_000, seed=2), src / "part-00000-old.parquet")
    out = tmp_path / "out.parquet"
    out.write_bytes(b"previous")
    name = {"opening": "_check_file_columns", "fingerprinting": "fingerprint",
            "describing": "refuse_altered_hive_values"}[when]
    real = getattr(io, name)
    swapped = []

    def swap_then_fingerprint(*args):
        if not swapped:  # the other run's swap lands in between
            swapped.append(True)
            new = tmp_path / "a.new"
            new.mkdir()
            pq.write_table(people(2_500, seed=3), new / "part-00000-new.parquet")
            src.rename(tmp_path / "a.old")
            new.rename(src)
        return real(*args)

    monkeypatch.setattr(io, name, swap_then_fingerprint)
    old = re.escape(repr(str(src / "part-00000-old.parquet")))
    with pytest.raises(sqlanon.InputError, match=f"the input file {old} "
                       r"changed during the run \(replaced, rewritten or removed\)(, and reading it failed \(.*\))?; rerun"):
        run(src, out, workers=1, overwrite=True)
    assert swapped and out.read_bytes() == b"previous"


def test_an_output_failure_after_the_input_was_read_is_not_blamed_on_it(tmp_path, monkeypatch):
    """Once the input is read and found unchanged, a failure writing the
    output is the output's, even if an upstream job rewrites the input
    meanwhile (helper-85: it read as 'the input file changed')."""
    from sqlanon import io

    src = tmp_path / "in.parquet"
    pq.write_table(people(2_000, seed=3), src)

    def full_disk(self, con, staging, empty):
        os.utime(src, (1, 1))  # the next version lands
        raise sqlanon.InputError(f"cannot write {self.path!r} from the parts: No space left on device")

    monkeypatch.setattr(io.FileTarget, "assemble", full_disk)
    with pytest.raises(sqlanon.InputError, match="No space left on device"):
        run(src, tmp_path / "out.parquet", workers=1)


def test_a_low_open_file_limit_is_raised_or_refused_before_any_work(tmp_path):
    """With ``ulimit -n 16`` a run failed half-way ('internal error
    (OSError: [Errno 24] Too many open files)'), the fork server printing
    an EOFError traceback. A low soft limit is raised as far as the hard
    one allows; a low hard limit is refused at the start, in one line."""
    import resource

    src = tmp_path / "in.parquet"
    pq.write_table(people(2_000), src)
    out = tmp_path / "o.parquet"
    args = [sys.executable, "-m", "sqlanon.cli", "anonymize", str(src), "-o", str(out), "--qi", ",".join(QI),
            "-k", "5", "--workers", "2", "--fragments", "4", "--quiet"]

    def limit(soft, hard):
        return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    p = subprocess.run(args, capture_output=True, text=True, preexec_fn=limit(16, 16), timeout=120)
    assert p.returncode == 1 and p.stderr == (
        "Error: the limit on open files (ulimit -n) is 16: sqlanon needs at least 64; raise it\n"), p.stderr
    assert sorted(f.name for f in tmp_path.iterdir()) == ["in.parquet"]
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 256:
        pytest.skip(f"the hard limit here is {hard}")
    p = subprocess.run(args, capture_output=True, text=True, preexec_fn=limit(16, hard), timeout=120)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert pq.read_metadata(out).num_rows == 2_000


def test_library_arguments_and_documents_hold_up(tmp_path):
    """helper-16: drop naming a column twice failed in Arrow (an internal
    error on the command line too); executor=None and friends raised
    AttributeError; qi={"age": "set"} ignored its "set"; verify refused the
    QuasiIdentifier objects anonymize takes; to_dict() of a failed check and
    explain() held dates and decimals that json.dumps refused."""
    import datetime as dt
    import decimal
    from pathlib import Path

    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": list(range(40)), "name": [f"n{i}" for i in range(40)],
                             "day": [dt.date(2020, 1, 1 + i % 28) for i in range(40)],
                             "amount": [decimal.Decimal(i) / 4 for i in range(40)], "s": [str(i % 3) for i in range(40)]}),
                   src)
    r = sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["day", "amount"], k=4, drop="name,name", workers=1,
                          fragments=2, interval_format="bounds")
    assert "name" not in pq.read_schema(tmp_path / "o.parquet").names
    json.dumps(r.to_dict())
    assert sqlanon.config.plain({"n": np.int64(5), "a": np.array([1, 2]), math.nan: 1}) == {"n": 5, "a": [1, 2],
                                                                                          "nan": 1}
    json.dumps(sqlanon.anonymize(src, tmp_path / "x.parquet", qi=["day", "amount"], k=4, fragments=3, workers=1,
                                 explain=True).explain())
    failed = sqlanon.verify(tmp_path / "o.parquet", qi=[sqlanon.QuasiIdentifier("day"), "amount"], k=40)
    assert not failed.ok and json.loads(json.dumps(failed.to_dict()))["n_violations"] > 0
    for kwargs, message in ((dict(executor=None), "unknown executor None"),
                            (dict(fragmentation=None), "unknown fragmentation None"),
                            (dict(interval_format=None), "unknown interval format None"),
                            (dict(generalization={"day": Path("set")}), "the unknown kind PosixPath"),
                            (dict(qi={"day": "set"}), r"qi takes column names, got a mapping .*generalization=")):
        args = dict(qi=["day"], k=4, workers=1, overwrite=True) | kwargs
        with pytest.raises(sqlanon.ConfigError, match=message):
            sqlanon.anonymize(src, tmp_path / "o.parquet", **args)


def test_duckdb_sources_and_targets_keep_what_they_hold(tmp_path):
    """helper-17: a DuckDB table's column generated from a QI passed through
    (its exact value beside the interval), as PostgreSQL's is refused; a
    0-byte target file failed after every fragment; a target referenced by a
    foreign key failed at publish; a replaced table's comments went with it,
    silently, as its indexes and constraints do (now said)."""
    db = tmp_path / "w.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("""CREATE TABLE people (id INTEGER, age INTEGER DEFAULT 30, dx VARCHAR,
                       age_months INTEGER GENERATED ALWAYS AS (age * 12) VIRTUAL)""")
        con.execute("INSERT INTO people (id, age, dx) SELECT i, 18 + i % 40, ['a', 'b'][1 + i % 2] FROM range(200) r(i)")
    args = dict(table="people", qi=["age"], k=5, workers=1)
    with pytest.raises(sqlanon.ConfigError, match="column 'age_months' is generated from quasi-identifier 'age'"):
        sqlanon.anonymize(db, tmp_path / "o.parquet", **args)
    sqlanon.anonymize(db, tmp_path / "o.parquet", drop=["age_months"], **args)  # a DEFAULT reads no column
    # helper-20: an expression written AGE, a column generated from a generated one, a view that leaves them out
    with duckdb.connect(str(db)) as con:
        con.execute("""CREATE TABLE p2 (id INTEGER, age INTEGER, m INTEGER GENERATED ALWAYS AS (AGE * 12),
                       y INTEGER GENERATED ALWAYS AS (m + 1))""")
        con.execute("INSERT INTO p2 (id, age) SELECT i, 18 + i % 40 FROM range(200) r(i)")
        con.execute("CREATE VIEW v2 AS SELECT id, age FROM p2")
    for drop, named in (([], "m"), (["m"], "y")):
        with pytest.raises(sqlanon.ConfigError, match=f"column '{named}' is generated from quasi-identifier 'age'"):
            sqlanon.anonymize(db, tmp_path / "o.parquet", table="p2", qi=["age"], k=5, workers=1, drop=drop,
                              overwrite=True)
    assert sqlanon.anonymize(db, tmp_path / "o.parquet", table="v2", qi=["age"], k=5, workers=1,
                             overwrite=True).metrics.rows == 200
    # the other way: a QI computed from a column published unchanged, which computes it again (helper-197)
    for drop, named in (([], "m"), (["m"], "age"), (["age"], "m")):
        with pytest.raises(sqlanon.ConfigError, match=f"quasi-identifier 'y' is generated from column '{named}', which "
                                                     "would be published unchanged"):
            sqlanon.anonymize(db, tmp_path / "o.parquet", table="p2", qi=["y"], k=5, workers=1, drop=drop,
                              overwrite=True)
    assert sqlanon.anonymize(db, tmp_path / "o.parquet", table="p2", qi=["y"], k=5, workers=1, drop=["age", "m"],
                             overwrite=True).verification.ok
    assert sqlanon.anonymize(db, tmp_path / "o.parquet", table="p2", qi=["age", "m", "y"], k=5, workers=1,
                             overwrite=True).verification.ok
    # computed also from a column left out, it is not given away (helper-198)
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE p3 (id INTEGER, w DOUBLE, h DOUBLE, bmi DOUBLE GENERATED ALWAYS AS (w / (h * h)))")
        con.execute("INSERT INTO p3 (id, w, h) SELECT i, 50 + i % 40, 1.5 + (i % 9) / 20 FROM range(200) r(i)")
    with pytest.raises(sqlanon.ConfigError, match="quasi-identifier 'bmi' is generated from columns 'h', 'w', which"):
        sqlanon.anonymize(db, tmp_path / "o.parquet", table="p3", qi=["bmi"], k=5, workers=1, overwrite=True)
    assert sqlanon.anonymize(db, tmp_path / "o.parquet", table="p3", qi=["bmi"], k=5, workers=1, drop=["w"],
                             overwrite=True).verification.ok
    empty = tmp_path / "empty.duckdb"
    empty.touch()
    p = _cli("anonymize", db, "--table", "people", "-o", empty, "--target-table", "anon", "--qi", "age", "-k", 5,
             "--drop", "age_months")
    assert p.returncode == 2 and "is an empty file, which DuckDB does not open as a database" in p.stderr, p.stderr
    out = tmp_path / "out.duckdb"
    with duckdb.connect(str(out)) as con:
        con.execute("CREATE TABLE anon (id INTEGER PRIMARY KEY, age VARCHAR, dx VARCHAR)")
        con.execute("COMMENT ON TABLE anon IS 'published nightly'")
        con.execute("COMMENT ON COLUMN anon.dx IS 'diagnosis'")
        con.execute("CREATE TABLE child (pid INTEGER REFERENCES anon (id))")
    ran = []
    with pytest.raises(sqlanon.ConfigError, match="'anon' in .* is referenced by a foreign key of table 'child'"):
        sqlanon.anonymize(db, out, target_table="anon", drop=["age_months"], overwrite=True,
                          progress=lambda *a: ran.append(a), **args)
    assert not ran
    with duckdb.connect(str(out)) as con:
        con.execute("DROP TABLE child")
        con.execute("ALTER TABLE anon ADD COLUMN parent INTEGER")  # its own foreign key does not stop DROP TABLE
    with duckdb.connect(str(tmp_path / "self.duckdb")) as con:
        con.execute("CREATE TABLE anon (id INTEGER PRIMARY KEY, parent INTEGER REFERENCES anon (id))")
    sqlanon.anonymize(db, tmp_path / "self.duckdb", target_table="anon", drop=["age_months"], overwrite=True, **args)
    p = _cli("anonymize", db, "--table", "people", "-o", out, "--target-table", "anon", "--qi", "age", "-k", 5,
             "--drop", "age_months", "--overwrite")
    assert p.returncode == 0, p.stderr
    assert re.search(r"Warning: .* the replaced table's NOT NULL, PRIMARY KEY were not carried over",
                     p.stderr), p.stderr
    # A column someone added to the output goes with the old table: said, naming it (helper-100)
    assert re.search(r"Warning: .* the replaced table's column 'parent' was not in the output and went with it, "
                     r"values and all", p.stderr), p.stderr
    p = _cli("anonymize", db, "--table", "people", "-o", out, "--target-table", "anon", "--qi", "age", "-k", 5,
             "--drop", "age_months", "--overwrite")
    assert p.returncode == 0 and "not in the output" not in p.stderr, p.stderr  # the same columns again
    with duckdb.connect(str(out), read_only=True) as con:
        assert con.execute("SELECT comment FROM duckdb_tables() WHERE table_name = 'anon'").fetchone()[0] == \
            "published nightly"
        assert con.execute("SELECT comment FROM duckdb_columns() WHERE table_name = 'anon' AND column_name = 'dx'"
                           ).fetchone()[0] == "diagnosis"
        assert con.execute("SELECT count(*) FROM anon").fetchone()[0] == 200


def test_a_hugeint_of_39_digits_reaches_a_csv_output_as_written(tmp_path):
    """A CSV output takes the text of a 39-digit HUGEINT exactly; the check
    made for Parquet parts (DECIMAL(38,0)) refused it there too (helper-18)."""
    db = tmp_path / "h.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("""CREATE TABLE t AS SELECT i AS id, 20 + i AS age,
                       (170141183460469231731687303715884105727 - i)::HUGEINT AS h FROM range(12) r(i)""")
    sqlanon.anonymize(db, tmp_path / "o.csv", table="t", qi=["age"], k=3, workers=1)
    got = duckdb.execute("SELECT h FROM read_csv(?, all_varchar = true) ORDER BY h", [str(tmp_path / "o.csv")])
    assert got.fetchall()[-1][0] == "170141183460469231731687303715884105727"
    with pytest.raises(sqlanon.ConfigError, match="'h' is a HUGEINT holding values of 39 digits, which Parquet"):
        sqlanon.anonymize(db, tmp_path / "o.parquet", table="t", qi=["age"], k=3, workers=1)


@pytest.mark.parametrize("target", ["o.csv", "o.duckdb"])
def test_the_smallest_hugeint_is_refused_by_name_where_it_cannot_travel(tmp_path, target):
    """-2**127 failed the run after all its work, into CSV or a DuckDB
    table ("Negation of HUGEINT is out of range!", no column named): Arrow's
    decimal128 on the way holds it, DuckDB cannot read it back (helper-27)."""
    db = tmp_path / "h.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("""CREATE TABLE t AS SELECT i AS id, 20 + i AS age, CASE WHEN i = 3
                       THEN -170141183460469231731687303715884105727::HUGEINT - 1 ELSE i::HUGEINT END AS h
                       FROM range(12) r(i)""")
    out = dict(target_table="anon") if target.endswith(".duckdb") else {}
    with pytest.raises(sqlanon.ConfigError, match=r"^column 'h' holds -170141183460469231731687303715884105728, the "
                                                 r"smallest HUGEINT, which cannot travel to '.*o\.(csv|duckdb table anon)'"):
        sqlanon.anonymize(db, tmp_path / target, table="t", qi=["age"], k=3, workers=1, **out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.duckdb"]


@pytest.mark.parametrize("target", ["o.parquet", "out/"])
def test_a_negative_interval_is_refused_by_name_into_parquet(tmp_path, target):
    """Parquet's INTERVAL has no sign: the run failed after all its work on a
    staging part ("Parquet files do not support negative intervals", no
    column named; helper-27). CSV takes it."""
    db = tmp_path / "i.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("""CREATE TABLE t AS SELECT i AS id, 20 + i AS age, CASE WHEN i = 3
                       THEN INTERVAL '1 month' - INTERVAL '1 day' ELSE INTERVAL '1 day' * i END AS iv
                       FROM range(12) r(i)""")
    for explain in (True, False):  # its plan too: it passed (helper-180)
        with pytest.raises(sqlanon.ConfigError, match=r"^column 'iv' holds negative INTERVALs, which a Parquet "
                                                     r"output \('.*(o\.parquet|out)'\) cannot hold: write CSV"):
            sqlanon.anonymize(db, tmp_path / target, table="t", qi=["age"], k=3, workers=1, explain=explain)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["i.duckdb"]
    sqlanon.anonymize(db, tmp_path / "o.csv", table="t", qi=["age"], k=3, workers=1)
    assert '\n3,"[23, 25]",1 month -1 day\n' in (tmp_path / "o.csv").read_text()


@pytest.mark.parametrize("target", ["o.csv", "o.parquet"])
def test_a_negative_interval_in_a_list_names_its_column(tmp_path, target):
    """In a list it fails at the parts (Parquet on the way to every output),
    naming a staging part only (helper-30); the column is named now."""
    db = tmp_path / "i.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("""CREATE TABLE t AS SELECT i AS id, 20 + i AS age,
                       [INTERVAL '1 day', CASE WHEN i = 3 THEN INTERVAL '-1 day' ELSE INTERVAL '2 days' END] AS ivs
                       FROM range(12) r(i)""")
    with pytest.raises(sqlanon.InputError, match=r"Parquet files do not support negative intervals \(column 'ivs': an "
                                                 r"INTERVAL with a negative part, which Parquet cannot hold"):
        sqlanon.anonymize(db, tmp_path / target, table="t", qi=["age"], k=3, workers=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["i.duckdb"]


def test_an_interval_qi_is_refused_by_its_sql_type(tmp_path):
    """It was named by Arrow's type, month_day_nano_interval (helper-27)."""
    db = tmp_path / "i.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t AS SELECT i AS id, INTERVAL '1 day' * (i % 5) AS iv FROM range(40) r(i)")
    with pytest.raises(sqlanon.ConfigError, match=r"^column 'iv' has type INTERVAL \(intervals, which have no order\) "
                                                  r"and cannot be a quasi-identifier"):
        sqlanon.anonymize(db, tmp_path / "o.parquet", table="t", qi=["iv"], k=2, workers=1)


def test_tasks_carry_neither_hierarchy_nor_domain_the_workers_load_them_once(tmp_path, monkeypatch):
    """A large hierarchy or a prefix domain went with every task: pickled by
    the coordinator once per fragment (0.46 s and 26 MB each for a million
    e-mails' domain) and sent through the pool. The run's spec and
    statistics are written once; what the workers publish is the same."""
    import pickle

    from sqlanon import coordinator

    n, leaves = 6_000, 20_000
    tree = tmp_path / "codes.csv"
    tree.write_text("".join(f"c{i:05d};m{i // 50:04d};t{i // 2500:02d};*\n" for i in range(leaves)))
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"code": [f"c{(i * 7919) % leaves:05d}" for i in range(n)],
                             "email": [f"user{(i * 104729) % 99991}@{('a.org', 'b.com')[i % 2]}" for i in range(n)],
                             "dx": [f"dx{i % 5}" for i in range(n)]}), src)
    made = []
    real = coordinator._task
    monkeypatch.setattr(coordinator, "_task", lambda *a, **kw: made.append(real(*a, **kw)) or made[-1])
    run = dict(qi=["code", "email"], hierarchies={"code": str(tree)}, generalization={"email": "prefix"}, k=5, l=2,
               sensitive=["dx"], fragments=4, overwrite=True)
    pooled = sqlanon.anonymize(src, tmp_path / "pooled.parquet", workers=2, **run)
    assert len(made) >= 4 and all(t.spec is None and t.stats is None for t in made)
    # Beside its clause's values (a cut of the hierarchy lists leaves), a task is small:
    # the hierarchy alone pickles to ~700 KB.
    assert max(len(pickle.dumps(t)) - len(pickle.dumps(t.params)) for t in made) < 5_000
    alone = sqlanon.anonymize(src, tmp_path / "alone.parquet", workers=1, **run)  # in this process: no file
    assert (pooled.metrics.ncp, pooled.metrics.classes) == (alone.metrics.ncp, alone.metrics.classes)
    published = [pq.read_table(tmp_path / f).sort_by([("code", "ascending"), ("email", "ascending"),
                                                     ("dx", "ascending")]) for f in ("pooled.parquet", "alone.parquet")]
    assert published[0].equals(published[1])


def test_a_nan_leaf_of_a_hierarchy_cut_lands_in_its_fragment(tmp_path):
    """`v IN (…, NaN)` skipped the Parquet row groups holding the NaN rows
    (their statistics leave NaN out) and the other side's NOT IN left them
    out: 50 of 300 rows in no fragment, the run refused (helper-19)."""
    values = [0.0, math.nan, 18.0, 18.5, 1e20, 1e-7]
    src = tmp_path / "v.parquet"
    pq.write_table(pa.table({"v": pa.array([values[i % 6] for i in range(300)], pa.float64())}), src)
    tree = tmp_path / "v.csv"
    tree.write_text("0;a;*\nnan;a;*\n18;b;*\n18.5;b;*\n1e+20;c;*\n1e-7;c;*\n")
    r = sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["v"], k=5, hierarchies={"v": tree}, workers=2, fragments=4)
    assert r.metrics.rows == 300 and len(r.plan.fragments) > 1


def test_a_nan_leaf_of_a_hierarchy_cut_is_read_through_a_view_of_parquet(tmp_path):
    """A DuckDB view reads Parquet without ``can_have_nan``: ``v IN (0.0,
    NaN)`` skipped the row groups whose statistics (18.5 to 18.5: NaN left
    out) hold no 0.0, and the other side's NOT IN leaves NaN out. Only the
    cut's ``OR isnan(v)`` reads them (helper-141: without it, '300 rows
    written, 400 in the source'; the test above reads the file itself)."""
    v = [0.0] * 100 + ([math.nan] * 50 + [18.5] * 50) * 2 + [18.0] * 100
    src = tmp_path / "v.parquet"
    pq.write_table(pa.table({"v": pa.array(v, pa.float64())}), src, row_group_size=100)
    db = tmp_path / "v.duckdb"
    with duckdb.connect(str(db)) as c:
        c.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet('{src}')")
    tree = tmp_path / "v.csv"
    tree.write_text("0;a;*\nnan;a;*\n18;b;*\n18.5;b;*\n")
    r = sqlanon.anonymize(db, tmp_path / "o.parquet", table="t", qi=["v"], k=5, hierarchies={"v": tree},
                          fragments=2, workers=1)
    assert [f.to_dict()["predicates"][0]["value"] for f in r.plan.fragments] == [[0.0, "nan"]] * 2
    assert r.metrics.rows == 400


def test_a_fragment_larger_than_a_workers_memory_says_so(tmp_path):
    """A worker's DuckDB running out of its --worker-memory said 'cannot read
    the input: Out of Memory Error', as if the input were broken (helper-26);
    and a limit past 2**64 bytes wrapped to none at all, exit 1."""
    src = tmp_path / "big.parquet"
    pq.write_table(pa.table({"age": [20 + i % 8 for i in range(40)],
                             "blob": [os.urandom(1_000_000).hex() for _ in range(40)]}), src)
    with pytest.raises(sqlanon.InputError, match=r"a fragment of '.*big.parquet' did not fit in a worker's memory "
                                                 r"\(Out of Memory Error.*\): raise worker_memory="):
        sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["age"], k=5, workers=2, worker_memory="64MiB")
    assert not (tmp_path / "o.parquet").exists()
    with pytest.raises(sqlanon.ConfigError, match="worker_memory= must be at most 1PiB, got '20000000TB'"):
        sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["age"], k=5, worker_memory="20000000TB")


def test_a_swallowed_stop_signal_ends_the_wait_for_tasks():
    """A SIGTERM that cut an import short (and that py4j swallowed) left the
    import's lock held; a Spark task's thread waited on it for good, and the
    run with it, SIGTERM'd, for 40 minutes: the wait looks at the signal."""
    from concurrent.futures import Future

    from sqlanon import coordinator, interrupts

    never = Future()
    done, _ = coordinator._wait_or_stop([never], 0.2)  # a deadline still ends it
    assert not done
    interrupts._received.set()
    try:
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            coordinator._wait_or_stop([never], None)
        assert time.monotonic() - t0 < 5
    finally:
        interrupts._received.clear()


def test_a_csv_output_with_a_line_past_2_mb_is_checked_and_published(tmp_path):
    """A text value of 3 MB passing through into a CSV output made a line
    past DuckDB's CSV reader's 2,000,000 bytes: the run failed at its check,
    after all its work ("cannot verify: … Maximum line size"), and `verify`
    could not read the file. Both read it with a larger limit now; as an
    input it was refused with the way out (helper-58), and is read so too,
    by the fragments and by the copy that many fragments read."""
    n = 60
    pq.write_table(pa.table({"id": list(range(n)), "age": [20 + i % 12 for i in range(n)],
                             "dx": ["a" if i % 2 else "b" for i in range(n)],
                             "doc": ["x" * (3 << 20) if i == 7 else "y" for i in range(n)]}), tmp_path / "in.parquet")
    out = tmp_path / "o.csv"
    run = dict(qi=["age"], k=4, l=2, sensitive=["dx"])
    sqlanon.anonymize(tmp_path / "in.parquet", out, workers=1, **run)
    got = duckdb.execute("SELECT id, length(doc) FROM read_csv(?, max_line_size = 8000000) WHERE id = 7",
                         [str(out)]).fetchall()
    assert got == [(7, 3 << 20)]
    assert sqlanon.verify(out, **run).ok
    for workers, fragments in ((2, 2), (1, 3)):  # each fragment reading the file; one copy of it
        again = tmp_path / f"again-{workers}.parquet"
        sqlanon.anonymize(out, again, workers=workers, fragments=fragments, **run)
        assert duckdb.execute("SELECT length(doc) FROM read_parquet(?) WHERE id = 7", [str(again)]).fetchall() \
            == [(3 << 20,)]


@pytest.mark.parametrize("row", [7, 30_000])
def test_a_csv_input_with_a_line_past_2_mb_is_read_with_a_larger_limit(tmp_path, row):
    """A 3 MB text value in a CSV input, among the rows DuckDB's sniffer
    reads (its size was only in our hint) or far past them (where the run's
    statistics met it), and its run's CSV output verified: both were
    refused (helper-78)."""
    src = tmp_path / "in.csv"
    duckdb.sql(f"COPY (SELECT i AS id, 20 + i % 12 AS age, CASE WHEN i % 2 = 1 THEN 'a' ELSE 'b' END AS dx, CASE WHEN "
               f"i = {row} THEN repeat('x', {3 << 20}) ELSE 'short' END AS doc FROM range(30_100) t(i)) TO '{src}'")
    job = dict(qi=["age"], k=5, l=2, sensitive=["dx"])
    for workers, fragments in ((2, 2), (1, 3)):  # each fragment reading the file; one copy of it
        out = tmp_path / f"out-{workers}.csv"
        sqlanon.anonymize(src, out, workers=workers, fragments=fragments, **job)
        assert duckdb.execute("SELECT length(doc) FROM read_csv(?, max_line_size = 8000000) WHERE id = ?",
                              [str(out), row]).fetchall() == [(3 << 20,)]
        assert sqlanon.verify(out, **job).ok


def test_a_csv_outputs_qi_named_with_blanks_around_is_refused_before_any_work(tmp_path):
    """DuckDB trims a CSV header's names: a QI named 'zip ' failed the run's
    own check of the written file after all the work ("Referenced column
    "zip " not found", exit 1; helper-60); a pass-through ' age' beside the
    QI age was read back as the QI, or published for verify to find two
    columns named age (helper-62)."""
    n = 40
    pq.write_table(pa.table({"zip ": [str(10000 + i % 8) for i in range(n)], "age": [20 + i % 10 for i in range(n)],
                             "note ": ["x"] * n}), tmp_path / "in.parquet")
    for explain in (False, True):  # --explain's plan passed where the run was refused (helper-63)
        with pytest.raises(sqlanon.ConfigError, match=r"^column 'zip ' has blanks around its name, which DuckDB "
                                                      r"drops reading a CSV header \(as 'zip'\)"):
            sqlanon.anonymize(tmp_path / "in.parquet", tmp_path / "o.csv", qi=["zip ", "age"], k=5, workers=1,
                              explain=explain)
    with pytest.raises(sqlanon.ConfigError, match=r"^column 'note ' has blanks around its name"):
        sqlanon.anonymize(tmp_path / "in.parquet", tmp_path / "o.csv", qi=["age"], k=5, workers=1, drop=["zip "])
    assert not (tmp_path / "o.csv").exists()
    assert sqlanon.anonymize(tmp_path / "in.parquet", tmp_path / "o.parquet", qi=["age"], k=5,
                             workers=1).metrics.rows == n


def test_a_sample_of_rows_given_as_a_float_is_recorded_as_the_cli_records_it(tmp_path):
    """sample=500.0 was recorded as 500.0 in the metrics' parameters, the
    same run's --sample 500 as 500 (helper-60)."""
    out = tmp_path / "o.parquet"
    sqlanon.anonymize(ROOT / "examples" / "adults.csv", out, qi=["age"], k=5, sample=500.0, workers=1)
    params = duckdb.execute("SELECT parameters FROM read_parquet(?)", [str(tmp_path / "o__metrics.parquet")])
    assert '"sample": 500,' in params.fetchall()[-1][0]


def test_publishing_over_a_metrics_table_is_refused(tmp_path):
    """-o a__metrics.parquet --overwrite replaced a.parquet's run history
    with anonymized rows, and a.parquet's next run failed ("is not a sqlanon
    metrics table"); --target-table x__metrics likewise (helper-62)."""
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"id": list(range(60)), "age": [20 + i % 12 for i in range(60)]}), src)
    run = dict(qi=["age"], k=5, workers=1)
    sqlanon.anonymize(src, tmp_path / "a.parquet", **run)
    history = (tmp_path / "a__metrics.parquet").read_bytes()
    with pytest.raises(sqlanon.ConfigError, match=r"^output '.*a__metrics\.parquet' holds sqlanon's metrics"):
        sqlanon.anonymize(src, tmp_path / "a__metrics.parquet", overwrite=True, **run)
    assert (tmp_path / "a__metrics.parquet").read_bytes() == history
    db = tmp_path / "w.duckdb"
    sqlanon.anonymize(src, db, target_table="x", **run)
    with pytest.raises(sqlanon.ConfigError, match=r"^table 'x__metrics' in '.*w\.duckdb' holds sqlanon's metrics"):
        sqlanon.anonymize(src, db, target_table="x__metrics", overwrite=True, **run)
    assert sqlanon.anonymize(src, tmp_path / "a.parquet", overwrite=True, **run).metrics.rows == 60


def test_the_coordinators_duckdb_has_a_memory_limit(tmp_path, monkeypatch):
    """The coordinator's DuckDB (a CSV input's parsed copy, the output's
    assembly, the verification's GROUP BY over all rows) had no memory
    limit: DuckDB's default, 80 % of the cgroup, beside the coordinator's
    Python and the idle workers; 40M poker rows into one Parquet file in a
    2 GiB cgroup were killed by the kernel without a word (helper-123).
    It takes half of the run's memory, and spills past it."""
    from sqlanon import coordinator, executors

    monkeypatch.setattr(executors, "total_memory", lambda: 2 * 2**30)
    limits = []
    real = coordinator.io.connect

    def connect(*args, **kwargs):
        con = real(*args, **kwargs)
        if "sqlanon-spill" in str(kwargs.get("temp_directory")):  # the coordinator's own, not a probe's
            limits.append(con.execute("SELECT current_setting('memory_limit')").fetchone()[0])
        return con

    monkeypatch.setattr(coordinator.io, "connect", connect)
    src = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": list(range(100))}), src)
    sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["a"], k=5, workers=2)
    assert limits == ["976.5 MiB"], limits  # 1024MB, as DuckDB prints it


def test_a_column_sensitive_no_more_is_not_warned_about_as_new(tmp_path, caplog):
    """A sensitive column goes out as it is: one the job no more names
    sensitive was published by the last run, and is no new column."""
    src, out = tmp_path / "in.parquet", tmp_path / "o.parquet"
    pq.write_table(pa.table({"age": [20 + i % 50 for i in range(400)],
                             "dx": [("Flu", "Cold")[i % 2] for i in range(400)],
                             "dy": [("a", "b")[i % 2] for i in range(400)]}), src)
    sqlanon.anonymize(src, out, qi=["age"], sensitive=["dx", "dy"], k=5, l=2, workers=1)
    with caplog.at_level("WARNING", logger="sqlanon"):
        sqlanon.anonymize(src, out, qi=["age"], sensitive=["dx"], k=5, l=2, workers=1, overwrite=True)
    assert not [m for m in caplog.messages if "passes through unchanged" in m], caplog.messages


def test_default_fragments_grow_where_one_per_worker_would_not_fit_its_memory():
    from sqlanon.coordinator import fragments_for_memory

    poker = pa.schema([(f"c{i}", pa.int16()) for i in range(11)])  # 22 bytes a row: ~190 held, with 10 QIs
    assert fragments_for_memory(10_000_000, poker, 10, 10e9, 2) == 2  # 5M rows a worker fit 10 GB
    assert fragments_for_memory(100_000_000, poker, 10, 1.6e9, 4) == 16  # a multiple of the workers
    assert fragments_for_memory(0, poker, 10, 1e9, 3) == 3
    text = pa.schema([("a", pa.string()), ("b", pa.int64())])
    assert fragments_for_memory(10_000_000, text, 1, 1e9, 1) > fragments_for_memory(10_000_000, poker, 1, 1e9, 1)


def test_the_memory_estimate_counts_text_and_bytes_by_their_measured_width(tmp_path):
    """Text was counted at 64 bytes a value from its type alone: a column of
    2,000-byte notes was estimated 30 times too small, and the default
    fragments too few for a worker's memory (a nightly run killed for it).
    The first rows' values are measured where the data lives."""
    from sqlanon import coordinator, io

    n = 3_000
    table = pa.table({"age": [20 + i % 50 for i in range(n)], 'a"; DROP TABLE x; --': ["x" * 2_000] * n,
                      "half": ["é" * 100 if i % 2 else None for i in range(n)], "blob": [b"\0" * 300] * n,
                      "short": ["ab"] * n})
    pq.write_table(table, tmp_path / "w.parquet")
    con = duckdb.connect()
    src = io.open_source(str(tmp_path / "w.parquet"))
    schema = src.arrow_schema(con)
    widths = coordinator.value_widths(con, src, schema)
    # bytes ("é" is two; a NULL 0), but no fewer than the type's 60 (and an offset's 4) from the first rows
    assert widths == {'a"; DROP TABLE x; --': 2_000, "half": 100, "blob": 300, "short": 60}
    assert coordinator.value_widths(con, src, pa.schema([schema.field("age")])) == {}  # nothing to measure
    assert coordinator.value_widths(con, src, schema, {"short": 2.0})["short"] == 2.0  # measured by the statistics
    # The statistics' pass measures the columns it reads over every row, not the first 1,000
    grown = pa.table({"age": list(range(n)), "memo": ["x" * (10 if i < 1_000 else 2_000) for i in range(n)]})
    pq.write_table(grown, tmp_path / "g.parquet")
    src = io.open_source(str(tmp_path / "g.parquet"))
    spec = sqlanon.build_spec(["age"], k=5)
    *_, summed = coordinator.domain_stats(con, src, spec, src.arrow_schema(con), ["memo"], widths=["memo"])
    assert summed == {"memo": (1_000 * 10 + 2_000 * 2_000) / n}
    assert coordinator.value_widths(con, src, src.arrow_schema(con)) == {"memo": 60}  # the first rows: 10 each
    by_type = coordinator.fragments_for_memory(10_000_000, schema, 1, 4e9, 2)
    assert by_type == 2 and coordinator.fragments_for_memory(10_000_000, schema, 1, 4e9, 2, widths) == 14


def test_the_default_fragments_hold_long_text_within_a_workers_memory(tmp_path, monkeypatch, caplog):
    from sqlanon import executors

    src = tmp_path / "notes.parquet"
    n = 4_000
    base = people(n)
    pq.write_table(base.append_column("memo", pa.array([f"{i:06d}" + "z" * 20_000 for i in range(n)])), src)
    monkeypatch.setattr(executors, "total_memory", lambda: 300 * 2**20)  # a worker's room: 64 MB, the least
    with caplog.at_level("INFO", logger="sqlanon"):
        r = run(src, tmp_path / "out.parquet", workers=2)
    # 4,000 rows of ~40 KB held (twice 20 KB): ~160 MB, three 64 MB workers' worth: four fragments on two
    assert len(r.plan.fragments) == 4, caplog.text
    assert "planning 4 fragments, not 2" in caplog.text
    notes = pq.read_table(tmp_path / "out.parquet", columns=["memo"]).column(0).to_pylist()
    assert sorted(notes) == [f"{i:06d}" + "z" * 20_000 for i in range(n)]  # passed through, none lost
    r = run(src, tmp_path / "dropped.parquet", workers=2, drop=["memo"])  # a column the fragments never read
    assert len(r.plan.fragments) == 2


def test_a_run_says_how_many_workers_its_fragments_ran_on(tmp_path):
    """'2 fragments on 65536 workers' (--workers 65536 --fragments 2): two ran (helper-188)."""
    src = tmp_path / "src.parquet"
    pq.write_table(people(2_000), src)
    r = run(src, tmp_path / "out.parquet", workers=8, fragments=2)
    assert len(r.plan.fragments) == 2 and r.workers == 2
    plan = run(src, tmp_path / "plan.parquet", workers=8, fragments=3, explain=True)
    assert plan.workers == 3 and plan.explain()["workers"] == 3


def test_the_default_fragments_follow_the_memory_estimate_and_fragments_override_it(tmp_path, monkeypatch, caplog):
    from sqlanon import coordinator

    src = tmp_path / "src.parquet"
    pq.write_table(people(4_000), src)
    asked = []
    monkeypatch.setattr(coordinator, "fragments_for_memory", lambda rows, *a: asked.append(rows) or 4)
    with caplog.at_level("INFO", logger="sqlanon"):
        r = run(src, tmp_path / "out.parquet", workers=2)
    assert asked == [4_000] and len(r.plan.fragments) == 4
    assert "planning 4 fragments, not 2: 4000 rows in 2 would not fit a worker's" in caplog.text
    # what a rerun passes: the fragments cut, not the workers (helper-196)
    params = duckdb.execute("SELECT parameters FROM read_parquet(?) WHERE kind = 'total'",
                            [r.metrics_location]).fetchone()[0]
    assert json.loads(params)["fragments"] == 4
    r = run(src, tmp_path / "again.parquet", workers=2, fragments=2)
    assert asked == [4_000] and len(r.plan.fragments) == 2
