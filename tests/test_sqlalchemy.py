"""Other SQLAlchemy databases as the input, on a real SQLite database file.

What these tests prove (sqlanon.sqla):

1. end to end through the CLI in a subprocess, with worker processes, both
   fragmentation strategies: the output is k-anonymous and l-diverse (checked
   by ``sqlanon verify``), has every row, and the non-QI columns are the
   source's, value for value;
2. pushdown: the statistics, the portable sample and every fragment's
   ``SELECT … WHERE`` are statements run by the database (captured from
   SQLAlchemy's cursor events); no statement reads the whole table;
3. the portable sample is repeatable for a seed and about the size asked;
4. hostile table, column and value names; sentinel tables survive;
5. quoting and binds follow the dialect (backticks, and ``%s`` once
   SQLAlchemy compiles for pymysql; brackets for SQL Server; ``?`` for SQLite);
   SQLite's loose types (NUMERIC, TIME as text) and column names that clash
   with the statistics' aliases;
6. bad input: a missing table or column is one line (exit 2); a SQLite URL
   as the output or as the table to verify is refused (exit 2).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import sqlanon
from sqlanon import coordinator, io, sqla, warehouse
from sqlanon.fragmentation import Predicate, where_sql

HOSTILE_COL = 'a"; DROP TABLE x; --'
ODD_COL = "c:x 50%"
HOSTILE_VALUES = ["O'Brien", "x'); DROP TABLE t; --", 'say "hi"', "50%", ":name"]


def _cli(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sqlanon.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300
    )


def make_db(path: Path, table: str = "people", n: int = 3000) -> Path:
    """id, age (some NULL), zip (text), day (a DATE column: SQLite keeps the
    text), disease (some NULL), note (no declared type), and a hostile column."""
    c = sqlite3.connect(path)
    c.execute("CREATE TABLE x (keep INTEGER)")
    c.execute("CREATE TABLE t (keep INTEGER)")
    t = '"' + table.replace('"', '""') + '"'
    h = '"' + HOSTILE_COL.replace('"', '""') + '"'
    c.execute(f'CREATE TABLE {t} (id INTEGER, age INTEGER, zip TEXT, day DATE, disease TEXT, note, {h} TEXT, "{ODD_COL}" INTEGER)')
    rows = [
        (
            i,
            None if i % 97 == 0 else 18 + (i * 7919) % 70,
            f"z{(i * 104729) % 199}",
            f"2020-{1 + i % 12:02d}-{1 + (i * 7) % 28:02d}",
            ["flu", "cold", "covid", "none", None][i % 5],
            f"row {i}",
            HOSTILE_VALUES[i % len(HOSTILE_VALUES)],
            i % 17,
        )
        for i in range(n)
    ]
    c.executemany(f"INSERT INTO {t} VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    c.commit()
    c.close()
    return path


def sqlite_rows(path: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(path) as c:
        return c.execute(sql).fetchall()


@pytest.fixture()
def db(tmp_path) -> Path:
    return make_db(tmp_path / "hr.db")


# --------------------------------------------------------------------------- 1. end to end


@pytest.mark.parametrize("strategy", ["mondrian", "quantile"])
def test_cli_sqlite_to_parquet(db, tmp_path, strategy):
    out = tmp_path / "out.parquet"
    r = _cli("anonymize", f"sqlite:///{db}", "--table", "people", "-o", out, "--qi", "age,zip,day",
             "--sensitive", "disease", "-k", 5, "-l", 2, "--workers", 2, "--fragments", 3,
             "--fragmentation", strategy, "--json", "--quiet")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["rows"] == 3000 and doc["fragments"] >= 2 and doc["achieved_k"] >= 5
    v = _cli("verify", out, "--qi", "age,zip,day", "--sensitive", "disease", "-k", 5, "-l", 2, "--json")
    assert v.returncode == 0, v.stdout + v.stderr
    assert json.loads(v.stdout)["rows"] == 3000
    # Non-QI columns, value for value (the source read by sqlite3 itself).
    got = duckdb.execute(
        f"SELECT id, disease, note, \"{HOSTILE_COL.replace(chr(34), chr(34) * 2)}\" FROM read_parquet(?) ORDER BY id",
        [str(out)],
    ).fetchall()
    want = sqlite_rows(db, f'SELECT id, disease, note, "{HOSTILE_COL.replace(chr(34), chr(34) * 2)}" FROM people ORDER BY id')
    assert got == want


def test_tiny_sample_still_covers_every_row(db, tmp_path):
    """Fragments planned on a 12-row sample: NULLs and values the sample never
    saw still land in exactly one fragment (every row published, once)."""
    out = tmp_path / "o.parquet"
    r = sqlanon.anonymize(f"sqlite:///{db}", out, table="people", qi=["age", "zip", "day"], k=5, l=2,
                          sensitive=["disease"], workers=1, fragments=5, sample=12, seed=3)
    assert r.verification.rows == 3000 and len(r.plan.fragments) >= 3
    assert duckdb.execute("SELECT count(*), count(DISTINCT id) FROM read_parquet(?)", [str(out)]).fetchone() == (3000, 3000)


# --------------------------------------------------------------------------- 2. pushdown


def test_statistics_sample_and_fragments_run_in_the_database(db, tmp_path):
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    seen: list[tuple[str, tuple]] = []

    def capture(conn, cursor, statement, parameters, context, executemany):
        seen.append((statement, tuple(parameters or ())))

    event.listen(Engine, "before_cursor_execute", capture)
    try:
        r = sqlanon.anonymize(f"sqlite:///{db}", tmp_path / "o.parquet", table="people", qi=["age", "zip", "day"],
                              k=5, l=2, sensitive=["disease"], workers=1, fragments=4, sample=0.2, seed=7)
    finally:
        event.remove(Engine, "before_cursor_execute", capture)
    statements = [s for s, _ in seen]
    assert any("count(DISTINCT" in s for s in statements), "statistics not computed by the database"
    samples = [s for s in statements if "ROW_NUMBER() OVER ()" in s]
    assert len(samples) == 1 and "4294967296" in samples[0]
    fragments = [(s, p) for s, p in seen if s.startswith("SELECT") and " WHERE " in s and "ROW_NUMBER" not in s
                 and "count(" not in s and "DISTINCT" not in s and "sqlite_master" not in s]
    assert len(fragments) == len(r.plan.fragments) == 4
    for (s, params), frag in zip(fragments, r.plan.fragments):
        where, want = where_sql(frag.predicates, "sqla:sqlite")
        # as the driver receives it: SQLAlchemy turned the :pN binds into sqlite3's ?
        assert s.endswith(" WHERE " + re.sub(r":p\d+", "?", where)) and list(params) == want
    # Nothing pulled the whole table: every full-row read has a WHERE or a LIMIT.
    for s in statements:
        if '"id"' in s and '"note"' in s:
            assert " WHERE " in s or " LIMIT " in s, s


def test_the_memory_estimate_reads_text_widths_in_the_database(tmp_path):
    """As on a lake or PostgreSQL: the first rows' text and blob values are
    measured by their bytes where they live (SQLite's length() counts a
    text's characters: its bytes are counted as a BLOB's)."""
    path = tmp_path / "w.db"
    with sqlite3.connect(path) as c:
        c.execute('CREATE TABLE w (id INTEGER, "a""b; --" TEXT, half TEXT, data BLOB, short TEXT)')
        c.executemany("INSERT INTO w VALUES (?, ?, ?, ?, ?)",
                      [(i, "é" * 500, "x" * 300 if i % 2 else None, b"\0" * 300, "ab") for i in range(3000)])
    src = warehouse.open_source(f"sqlite:///{path}", "w")
    con = duckdb.connect()
    assert coordinator.value_widths(con, src, src.arrow_schema(con)) == {
        'a"b; --': 1_000, "half": 150, "data": 300, "short": 60}  # no fewer than the type's 60 from the first rows


def test_a_sample_that_keeps_no_row_plans_one_fragment(tmp_path):
    """A seeded hash that keeps no row of a small table (--sample 2) failed
    as an internal error, 'DataType expected, got Field' (helper-52): the
    empty result is typed by the QIs' fields too. The run goes on as one
    fragment, as a PostgreSQL view's empty sample does; its text QI under
    NOCASE ranked as the database orders it."""
    db = tmp_path / "s.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE t (id INTEGER, name TEXT COLLATE NOCASE, dx TEXT)")
        c.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, f"v{i % 300:03d}", "abc"[i % 3]) for i in range(5000)])
    for sample in (2, 0.4):
        r = sqlanon.anonymize(f"sqlite:///{db}", tmp_path / "o.parquet", table="t", qi=["name"], sensitive=["dx"],
                              k=5, l=2, fragments=4, sample=sample, workers=2, overwrite=True)
        assert r.source_rows == 5000 and len(r.plan.fragments) == (1 if sample == 2 else 4), (sample, r.plan)


# --------------------------------------------------------------------------- 3. the portable sample


def test_portable_sample_is_repeatable_and_sized(db):
    src = sqla.open_source(warehouse.Conn(f"sqlite:///{db}"), "people")
    spec = sqlanon.build_spec(["id", "zip"], k=5)
    con = io.connect()
    schema = src.arrow_schema(con)

    def draw(seed, sample):
        return coordinator.draw_sample(con, src, spec, schema, 3000, sample, seed)[0]

    try:
        a, b, c = draw(1, 600), draw(1, 600), draw(2, 600)
        assert a.equals(b)
        assert 450 <= a.num_rows <= 750 and 450 <= c.num_rows <= 750
        # Another seed keeps other rows (about 20 % of them again, as two
        # independent 20 % samples would), not the same rows shifted by one.
        ids_a, ids_c = set(a.column("id").to_pylist()), set(c.column("id").to_pylist())
        assert len(ids_a & ids_c) < 0.4 * len(ids_a)
        assert len(ids_a & {i + 1 for i in ids_c}) < 0.4 * len(ids_a)
        assert a.schema.field("id").type == schema.field("id").type
        assert draw(1, 5000).num_rows == 3000  # more than the table: all of it
    finally:
        con.close()


# --------------------------------------------------------------------------- 4. hostile names


def test_hostile_table_column_and_values(tmp_path):
    db = make_db(tmp_path / "h.db", table='pe"ople; DROP TABLE x; --')
    table = '"pe""ople; DROP TABLE x; --"'
    for qi, cut_on in (([HOSTILE_COL, "age"], HOSTILE_COL), ([ODD_COL, "age"], ODD_COL)):
        out = tmp_path / "o.parquet"
        r = sqlanon.anonymize(f"sqlite:///{db}", out, table=table, qi=qi, k=5, l=2, sensitive=["disease"],
                              workers=1, fragments=3, overwrite=True)  # mondrian: cuts on several QIs
        assert r.verification.ok and r.verification.rows == 3000
        cuts = [p for f in r.plan.fragments for p in f.predicates if p.column == cut_on]
        assert cuts, f"no fragment was cut on {cut_on!r}"
        if cut_on == HOSTILE_COL:  # the hostile values were bound in a cut
            values = {v for p in cuts for v in (p.value if isinstance(p.value, tuple) else (p.value,))}
            assert values & set(HOSTILE_VALUES)
    assert sqlite_rows(db, "SELECT name FROM sqlite_master WHERE name IN ('x', 't') ORDER BY name") == [("t",), ("x",)]


def test_sqlite_columns_generated_from_a_qi_are_refused_where_they_pass_through(tmp_path):
    """age + 0 STORED and age / 10 VIRTUAL were published unchanged beside
    the generalized age, giving it away (helper-197), as DuckDB's and
    PostgreSQL's are refused. SQLAlchemy's text of the first runs on into
    the second's DDL; a column generated from another does not count."""
    db = tmp_path / "g.db"
    with sqlite3.connect(db) as con:
        con.execute('CREATE TABLE t (id INTEGER, age INTEGER, dx TEXT, "Age s" INTEGER GENERATED ALWAYS AS '
                    "(AGE + 0) STORED, decade INTEGER AS (\"age\" / 10) VIRTUAL, tag TEXT AS ('age:' || id), "
                    "twice INTEGER AS (decade * 2))")
        con.executemany("INSERT INTO t (id, age, dx) VALUES (?, ?, ?)",
                        [(i, 20 + i % 40, "abc"[i % 3]) for i in range(300)])
    run = dict(table="t", qi=["age"], k=5, l=2, sensitive=["dx"], workers=1)
    out = tmp_path / "o.parquet"
    for drop, named in (((), "Age s"), (("Age s",), "decade"), (("Age s", "decade"), "twice")):
        with pytest.raises(sqlanon.ConfigError, match=f"column '{named}' is generated from quasi-identifier 'age'"):
            sqlanon.anonymize(f"sqlite:///{db}", out, drop=list(drop), **run)
        assert not out.exists()
    r = sqlanon.anonymize(f"sqlite:///{db}", out, drop=["Age s", "decade", "twice"], **run)
    assert r.verification.ok and duckdb.sql(f"SELECT count(DISTINCT tag) FROM '{out}'").fetchone()[0] == 300
    r = sqlanon.anonymize(f"sqlite:///{db}", tmp_path / "all.parquet", **{**run, "qi": ["age", "Age s", "decade",
                                                                                        "twice"]})
    assert r.verification.ok
    # comments in the DDL (a quote or parenthesis there hid the column), a view over the table (helper-198)
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE c (id INTEGER, age INTEGER, dx TEXT, date TEXT, -- don't (\n a INTEGER /* ) */ "
                    "AS -- x\n (age + 0), d INTEGER AS (length(date(id, 'unixepoch'))))")
        con.execute("INSERT INTO c (id, age, dx, date) SELECT id, age, dx, 'x' FROM t")
        con.execute("CREATE VIEW v AS SELECT id, age, dx, decade FROM t")
    run["overwrite"] = True
    with pytest.raises(sqlanon.ConfigError, match="column 'a' is generated from quasi-identifier 'age'"):
        sqlanon.anonymize(f"sqlite:///{db}", out, **{**run, "table": "c"})
    with pytest.raises(sqlanon.ConfigError, match="column 'decade' is generated from quasi-identifier 'age'"):
        sqlanon.anonymize(f"sqlite:///{db}", out, **{**run, "table": "v"})
    # date(id, …) is a function's call, not the published column date: the QI d reads id only
    assert sqlanon.anonymize(f"sqlite:///{db}", out, **{**run, "table": "c", "qi": ["d"], "drop": ["a", "id"]}
                             ).verification.ok


def test_loose_sqlite_types_and_clashing_names(tmp_path):
    """NUMERIC(10,2) as a QI (SQLite stores floats), TIME kept as text, and
    columns named like the statistics' aliases (n_rows, min0, d1)."""
    db = tmp_path / "t.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE pay (n_rows INTEGER, salary NUMERIC(10,2), at TIME, min0 TEXT, d1 TEXT, dept TEXT)")
        c.executemany("INSERT INTO pay VALUES (?, ?, ?, ?, ?, ?)", [
            (i % 40, (i * 37) % 500 + (0.5 if i % 2 else 0), f"{i % 24:02d}:{i % 60:02d}:00", f"m{i}",
             f"z{i % 30}", ["a", "b", "c"][i % 3]) for i in range(2000)])
    out = tmp_path / "o.parquet"
    r = sqlanon.anonymize(f"sqlite:///{db}", out, table="pay", qi=["n_rows", "salary", "d1"], k=5, l=2,
                          sensitive=["dept"], workers=1, fragments=4)
    assert r.verification.ok and r.verification.rows == 2000
    assert {p.column for f in r.plan.fragments for p in f.predicates} & {"salary", "n_rows"}
    got = duckdb.execute("SELECT \"at\", min0 FROM read_parquet(?) ORDER BY min0", [str(out)]).fetchall()
    assert got == sqlite_rows(db, "SELECT at, min0 FROM pay ORDER BY min0")


# --------------------------------------------------------------------------- 5. dialect quoting


@pytest.mark.parametrize(("decl", "value", "shown"), [
    ("INTEGER", 50.9, "float values such as 50.9"),  # Arrow would publish 50
    pytest.param("DATE", 18000, "int values such as 18000", marks=pytest.mark.slow),  # days since 1970
    pytest.param("DATETIME", 1600000000, "int values such as 1600000000", marks=pytest.mark.slow),  # us since 1970
    pytest.param("BOOLEAN", 2, "int values such as 2", marks=pytest.mark.slow),  # true
    ("BOOLEAN", "yes", "str values such as 'yes'"),  # was StopIteration: the 0/1 around it are no example
])
def test_values_that_would_change_are_refused_by_name(tmp_path, decl, value, shown):
    """SQLite lets a column hold any value. One that its declared type would
    change on the way (a silent truncation or reinterpretation, as a QI or
    passing through) fails the run naming the column; nothing is written.
    Exit 2, as a CSV value its column's type cannot take: every retry
    meets it (it was exit 1, read by a scheduler as 'retry later')."""
    path = tmp_path / "loose.db"
    with sqlite3.connect(path) as c:
        c.execute(f"CREATE TABLE t (id INTEGER, age INTEGER, odd {decl})")
        good = {"INTEGER": 7, "DATE": "2020-01-02", "DATETIME": "2020-01-02 03:04:05", "BOOLEAN": 1}[decl]
        c.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, 20 + i % 30, value if i == 77 else good) for i in range(300)])
    out = tmp_path / "o.parquet"
    for qi in ("age", "age,odd"):
        p = _cli("anonymize", f"sqlite:///{path}", "--table", "t", "-o", out, "--qi", qi, "-k", 5, "--workers", 2)
        assert p.returncode == 2, p.stderr
        assert p.stderr.startswith("Error: column 'odd'") and len(p.stderr.splitlines()) == 1, p.stderr
        if qi == "age":  # passing through: read by the workers
            assert shown in p.stderr, p.stderr
        assert not out.exists()
    # SQLite's booleans (0/1) and integral floats in an INTEGER column read exactly; --drop skips a column.
    p = _cli("anonymize", f"sqlite:///{path}", "--table", "t", "-o", out, "--qi", "age", "-k", 5, "--drop", "odd")
    assert p.returncode == 0, p.stderr
    assert duckdb.sql(f"SELECT count(*) FROM read_parquet('{out}')").fetchone()[0] == 300


def test_the_value_named_is_one_that_would_change():
    """An INTEGER column holding 3.0 (read exactly) and 'oops' was refused
    for 'float values such as 3.0' (helper-13)."""
    import pyarrow as pa

    with pytest.raises(sqlanon.ConfigError, match=r"declared int64 but holds str values such as 'oops'"):
        sqla._exact("c", (1, 3.0, None, "oops"), pa.int64())
    sqla._exact("c", (1, 3.0, None), pa.int64())


def test_untyped_sqlite_columns_are_typed_by_every_value(tmp_path):
    """helper-13: an untyped column was typed from its first 1,000 rows: all
    NULL there, its later integers were published as text ('1501'); with
    ints first, a REAL 2000.0 later came out as the BIGINT 2000. And a TEXT
    column's blob b'blob' was published as the text 'blob'."""
    import pyarrow.parquet as pq

    db = tmp_path / "u.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE t (id INTEGER, age INTEGER, late, mixed, note TEXT)")
        c.executemany("INSERT INTO t VALUES (?, ?, ?, ?, ?)", [
            (i, 20 + i % 30, i if i >= 1500 else None, 2000.0 if i == 1999 else i, "n") for i in range(2000)])
    out = tmp_path / "o.parquet"
    sqlanon.anonymize(f"sqlite:///{db}", out, table="t", qi=["age"], k=5, workers=1)
    t = pq.read_table(out)
    assert str(t.schema.field("late").type) == "int64" and str(t.schema.field("mixed").type) == "double"
    assert sorted(v for v in t.column("late").to_pylist() if v is not None) == list(range(1500, 2000))
    with sqlite3.connect(db) as c:
        c.execute("UPDATE t SET note = CAST('blob' AS BLOB) WHERE id = 7")
    with pytest.raises(sqlanon.ConfigError, match=r"column 'note' is declared string but holds bytes values"):
        sqlanon.anonymize(f"sqlite:///{db}", out, table="t", qi=["age"], k=5, workers=1, overwrite=True)


def test_case_insensitive_columns_are_counted_by_their_bytes(tmp_path):
    """Under COLLATE NOCASE, SQLite counts 'a' and 'A' as one value; the
    engine publishes them apart. The statistics count bytes as the engine
    does, so NCP stays within [0, 1] per value and a prefix's domain holds
    both spellings."""
    path = tmp_path / "nocase.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE t (id INTEGER, name TEXT COLLATE NOCASE, code TEXT COLLATE NOCASE)")
        c.executemany("INSERT INTO t VALUES (?, ?, ?)",
                      [(i, "aAbB"[i % 4], ["ab1", "AB2", "ab3", "Ab4"][i % 4]) for i in range(16)])
    r = sqlanon.anonymize(f"sqlite:///{path}", tmp_path / "o.parquet", table="t", qi=["name", "code"], k=16,
                          generalization={"code": "prefix"}, workers=1)
    assert r.metrics.gcp == pytest.approx(1.0)  # one class holding every value of both columns (was 2.0)


def test_missing_sqlite_file_is_an_error_and_is_not_created(tmp_path):
    missing = tmp_path / "nosuch.db"
    p = _cli("anonymize", f"sqlite:///{missing}", "--table", "t", "-o", tmp_path / "o.parquet", "--qi", "a", "-k", 2)
    assert p.returncode == 1 and p.stderr.strip() == f"Error: SQLite database {str(missing)!r} does not exist"
    assert not missing.exists()  # SQLite would have created an empty database file
    missing.mkdir()
    p = _cli("anonymize", f"sqlite:///{missing}", "--table", "t", "-o", tmp_path / "o.parquet", "--qi", "a", "-k", 2)
    assert p.returncode == 1 and p.stderr.strip() == f"Error: SQLite database {str(missing)!r} is a directory, not a " \
        "database file"


def test_sqlite_file_uris_and_bad_url_options_are_one_line(tmp_path):
    """helper-13: a missing database named as a 'file:' URI was created (empty)
    and left behind; a URL option of the wrong type and a dialect SQLAlchemy
    lacks were internal errors or runtime failures (exit 1), not usage ones."""
    for url, made in ((f"sqlite:///file:{tmp_path}/nosuch.db?uri=true", tmp_path / "nosuch.db"),
                      ("sqlite:///file:nosuch.db", tmp_path / "file:nosuch.db")):
        p = _cli("anonymize", url, "--table", "t", "-o", tmp_path / "o.parquet", "--qi", "a", "-k", 2, cwd=tmp_path)
        assert p.returncode == 1 and p.stderr.strip() == f"Error: SQLite database {str(made)!r} does not exist"
        assert not made.exists()
    db = tmp_path / "d.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE t (a INTEGER)")
        c.executemany("INSERT INTO t VALUES (?)", [(i % 7,) for i in range(50)])
    p = _cli("anonymize", f"sqlite:///file:{db}?mode=ro&uri=true", "--table", "t", "-o", tmp_path / "o.parquet",
             "--qi", "a", "-k", 2)
    assert p.returncode == 0, p.stderr
    # SQLAlchemy's warning of an option it ignores: was two lines from each of three processes
    p = _cli("anonymize", f"sqlite:///{db}?foo=1", "--table", "t", "-o", tmp_path / "o.parquet", "--qi", "a", "-k", 2,
             "--overwrite", "--workers", 2, "--quiet")
    assert p.returncode == 0 and p.stderr.startswith("Warning: sqlite:///") and "'foo' are not accepted" in p.stderr
    assert len(p.stderr.splitlines()) == 1, p.stderr
    for url, message in ((f"sqlite:///{db}?timeout=abc", "could not convert string to float: 'abc'"),
                         (f"sqlite:///{db}?check_same_thread=maybe", "String is not true/false: 'maybe'"),
                         (f"duckdb:///{db}", "SQLAlchemy has no dialect 'duckdb'")):
        p = _cli("anonymize", url, "--table", "t", "-o", tmp_path / "x.parquet", "--qi", "a", "-k", 2)
        assert p.returncode == 2 and len(p.stderr.splitlines()) == 1 and message in p.stderr, p.stderr
    assert not (tmp_path / "x.parquet").exists()


def test_signed_zeros_of_an_untyped_sqlite_column_are_refused_into_a_duckdb_table(tmp_path):
    """A DuckDB table's storage does not keep -0.0 and 0.0 of one column
    apart; from SQLite (whose SQL prints -0.0 as 0.0) 1,000 of 2,000 signs
    changed, exit 0 (helper-13). The parts are asked instead."""
    db = tmp_path / "z.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE t (id INTEGER, age INTEGER, z)")  # untyped: keeps -0.0 (REAL stores 0.0)
        c.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, 20 + i % 30, -0.0 if i % 2 else 0.0) for i in range(400)])
    out = tmp_path / "w.duckdb"
    p = _cli("anonymize", f"sqlite:///{db}", "--table", "t", "-o", out, "--target-table", "t", "--qi", "age", "-k", 5)
    assert p.returncode == 2 and p.stderr.startswith("Error: column 'z' holds both -0.0 and 0.0"), p.stderr
    assert not out.exists()
    p = _cli("anonymize", f"sqlite:///{db}", "--table", "t", "-o", tmp_path / "o.parquet", "--qi", "age", "-k", 5)
    assert p.returncode == 0, p.stderr
    assert duckdb.sql(f"SELECT count(*) FILTER (WHERE signbit(z)) FROM '{tmp_path / 'o.parquet'}'").fetchone()[0] == 200


def test_explain_and_metrics_show_the_sql_the_database_runs(tmp_path):
    """A colon in a column name is escaped for SQLAlchemy's text() (\\:); the
    database never sees the backslash, and neither should --explain or the
    metrics table, whose WHERE clauses people rerun."""
    path = tmp_path / "c.db"
    with sqlite3.connect(path) as c:
        c.execute('CREATE TABLE t (id INTEGER, "q:1" INTEGER)')
        c.executemany("INSERT INTO t VALUES (?, ?)", [(i, i % 50) for i in range(500)])
    r = sqlanon.anonymize(f"sqlite:///{path}", tmp_path / "o.parquet", table="t", qi=["q:1"], k=5, workers=2,
                          fragments=2, sample=500)
    wheres = [f["where"] for f in r.explain()["fragments"]]
    assert all('"q:1"' in w and "\\" not in w for w in wheres), wheres
    stored = duckdb.sql(f"SELECT where_clause FROM read_parquet('{tmp_path / 'o__metrics.parquet'}') "
                        "WHERE kind = 'fragment' ORDER BY fragment_id").fetchall()
    assert [w for (w,) in stored] == wheres
    with sqlite3.connect(path) as c:  # and they run as shown (binds aside)
        params = [f["params"] for f in r.explain()["fragments"]]
        counts = [c.execute(f"SELECT count(*) FROM t WHERE {w}", {f"p{i}": v for i, v in enumerate(ps)}).fetchone()[0]
                  for w, ps in zip(wheres, params)]
    assert sum(counts) == 500


def test_a_column_without_a_name_is_refused_by_name(tmp_path):
    path = tmp_path / "n.db"
    with sqlite3.connect(path) as c:
        c.execute('CREATE TABLE t (id INTEGER, "" INTEGER, age INTEGER)')
        c.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, i, i % 20) for i in range(100)])
    p = _cli("anonymize", f"sqlite:///{path}", "--table", "t", "-o", tmp_path / "o.parquet", "--qi", "age", "-k", 5)
    assert p.returncode == 2 and p.stderr.startswith("Error: ") and "column without a name" in p.stderr, p.stderr
    assert len(p.stderr.splitlines()) == 1  # was 'internal error (ValueError: not an identifier)'


def test_sqlite_text_timestamps_span_by_their_instants(tmp_path):
    """SQLite keeps timestamps as text, and '2021-01-01T00:00' sorts after
    '2021-01-01 06:00': the statistics' span came from the text's min/max
    and NCP came out above 1 (GCP 1.33 here). One class of all four rows
    spans the whole day: GCP 1."""
    path = tmp_path / "ts.db"
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE t (id INTEGER, ts DATETIME)")
        c.executemany("INSERT INTO t VALUES (?, ?)", [(0, "2021-01-01T00:00:00"), (1, "2021-01-01 06:00:00"),
                                                      (2, "2021-01-02 00:00:00"), (3, "2021-01-01 12:00:00")])
    r = sqlanon.anonymize(f"sqlite:///{path}", tmp_path / "o.parquet", table="t", qi=["ts"], k=4, workers=1)
    assert r.metrics.classes == 1 and r.metrics.gcp == pytest.approx(1.0)
    # strftime() cut microseconds to milliseconds (GCP 1.8) and made '2021-01-01 05' NULL (GCP 0) (helper-13)
    for stamps in (["2021-01-01 00:00:00.000600", "2021-01-01 00:00:00.002400", "2021-01-01 00:00:00.000700",
                    "2021-01-01 00:00:00.001000"], ["2021-01-01 05", "2021-01-01 07", "2021-01-01 23", "2021-01-01 17"]):
        with sqlite3.connect(path) as c:
            c.execute("DELETE FROM t")
            c.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(stamps)))
        r = sqlanon.anonymize(f"sqlite:///{path}", tmp_path / "o.parquet", table="t", qi=["ts"], k=4, workers=1,
                              overwrite=True)
        assert r.metrics.classes == 1 and r.metrics.gcp == pytest.approx(1.0), stamps


@pytest.mark.parametrize("scheme", ["sqlite", "sqlite+pysqlite"])
def test_sqlite_text_timestamps_land_in_the_fragment_their_instant_is_planned_in(tmp_path, scheme):
    """SQLite compares its timestamp text as text: a cut bound as
    '2020-01-21 19:47:00' sent a cut day's '2020-01-21T05:00:00' rows, and a
    row at the cut written '2020-01-21 19:47:00.000000' (SQLAlchemy's form),
    to the fragment above the one the plan counted them in (helper-144):
    each row still in one fragment, the fragments uneven and the recorded
    clauses not what the plan says. With the whole table as the sample,
    each clause run on SQLite holds the rows the plan estimated; so with
    the driver named in the URL (sqlite+pysqlite:// rendered as another
    database, its cuts bound as before: helper-151)."""
    path = tmp_path / "ts.db"
    forms = ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.000000", "%Y-%m-%dT%H:%M:%S.000",
             "%Y-%m-%d %H:%M"]
    base = dt.datetime(2020, 1, 1)
    stamps = [(base + dt.timedelta(hours=(i * 37) % 2000, minutes=i % 60)).strftime(forms[i % 5]) for i in range(4000)]
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE t (id INTEGER, at TIMESTAMP, dx TEXT)")
        c.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, s, "abc"[i % 3]) for i, s in enumerate(stamps)])
    r = sqlanon.anonymize(f"{scheme}:///{path}", tmp_path / "o.parquet", table="t", qi=["at"], k=5, l=2,
                          sensitive=["dx"], workers=1, fragments=4, sample=1.0, seed=7)
    planned = r.explain()["fragments"]
    with sqlite3.connect(path) as c:
        counts = [c.execute(f"SELECT count(*) FROM t WHERE {f['where']}",
                            {f"p{i}": v for i, v in enumerate(f["params"])}).fetchone()[0] for f in planned]
    assert counts == [f["estimated_rows"] for f in planned] == [1000] * 4, counts
    # An index on the column serves each clause, as it served the plain comparisons (helper-151)
    with sqlite3.connect(path) as c:
        c.execute("CREATE INDEX ix ON t (at)")
        plans = [c.execute(f"EXPLAIN QUERY PLAN SELECT * FROM t WHERE {f['where']}",
                           {f"p{i}": v for i, v in enumerate(f["params"])}).fetchall() for f in planned]
    assert all("USING INDEX ix" in str(plan) for plan in plans), plans


def test_sqlite_text_timestamps_meet_their_hierarchy_leaf_in_the_planned_fragment(tmp_path):
    """A hierarchy's cut lists its leaves (IN …): bound as pysqlite writes a
    datetime, '2020-01-01 01:00:00', they matched no row spelled
    '2020-01-01T01:00', '… 01:00:00.000000' or '2020-01-01 01', and such
    rows all went to the fragment of the cut's other side (372 rows of 400
    in the last of four; helper-151). With the whole table as the sample,
    each clause run on SQLite holds the rows the plan estimated."""
    path = tmp_path / "h.db"
    forms = ["%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.000000", "%Y-%m-%d %H", "%Y-%m-%dT%H:%M:%S.0"]
    hours = [dt.datetime(2020, 1, 1) + dt.timedelta(hours=h) for h in range(80)]
    with sqlite3.connect(path) as c:
        c.execute("CREATE TABLE t (id INTEGER, at DATETIME, dx TEXT)")
        c.executemany("INSERT INTO t VALUES (?, ?, ?)", [(i, hours[i % 80].strftime(forms[i % 5]), "abc"[i % 3])
                                                         for i in range(400)])
    tree = tmp_path / "at.csv"
    tree.write_text("".join(f"{h.isoformat(sep=' ', timespec='microseconds')};day{h.day};*\n" for h in hours))
    r = sqlanon.anonymize(f"sqlite:///{path}", tmp_path / "o.parquet", table="t", qi=["at"], k=5,
                          hierarchies={"at": tree}, workers=1, fragments=4, sample=1.0, seed=7)
    planned = r.explain()["fragments"]
    assert any(" IN (" in f["where"] for f in planned), planned
    with sqlite3.connect(path) as c:
        counts = [c.execute(f"SELECT count(*) FROM t WHERE {f['where']}",
                            {f"p{i}": v for i, v in enumerate(f["params"])}).fetchone()[0] for f in planned]
    assert counts == [f["estimated_rows"] for f in planned] and sum(counts) == 400, counts


def test_quoting_and_binds_follow_the_dialect():
    """Names are quoted the dialect's way, a ``:`` in a name is escaped for
    text(), values are named binds; compiled for a driver that formats with
    ``%``, SQLAlchemy then doubles the ``%`` and uses its placeholders."""
    from sqlalchemy import text
    from sqlanon.sql.render import sqlalchemy_dialect

    preds = (Predicate('we"ird%`col]', "le", 5), Predicate("c:x", "in", ("it's", "b")))
    mysql, params = where_sql(preds, "sqla:mysql+pymysql")
    assert mysql == '(`we"ird%``col]` <= :p0 AND `c\\:x` IN (:p1, :p2))' and params == [5, "it's", "b"]
    assert str(text(mysql).compile(dialect=sqlalchemy_dialect("sqla:mysql+pymysql"))) == (
        '(`we"ird%%``col]` <= %s AND `c:x` IN (%s, %s))')
    assert where_sql(preds, "sqla:mssql+pyodbc")[0] == '([we"ird%`col]]] <= :p0 AND [c\\:x] IN (:p1, :p2))'
    assert where_sql(preds, "sqla:sqlite")[0] == '("we""ird%`col]" <= :p0 AND "c\\:x" IN (:p1, :p2))'


def test_mysql_counts_text_by_its_bytes_and_reads_time_as_a_time_of_day():
    """Under MySQL's default case-insensitive collations the server counted
    'Flu' and 'flu' as one value, so -l 3 was refused on data with six
    spellings and a set's NCP went above 1; a hierarchy's or prefix's domain
    lost spellings. PyMySQL returns TIME as a duration, which failed any
    run over a table with a TIME column, and BIGINT UNSIGNED past 2**63 did
    not fit an int64. (Checked against MariaDB 10.11 by
    hand; no MySQL server runs in the test suite.)"""
    import datetime as dt

    import pyarrow as pa

    from sqlanon.sql import render

    stats = render("domain_stats.sql", dialect="sqla:mysql+pymysql", relation="`t`", qi=["city"], interval=[],
                   floats=[], nan_sets=[], stamps=[], texts=["city", "dx"], sensitive=["dx"], checksum=[], signed_zeros=[],
                   loose=[], decimals={}, far=[], nul=[], nul_cast=[]).sql
    assert "count(DISTINCT CAST(`city` AS BINARY))" in stats and "count(DISTINCT CAST(`dx` AS BINARY))" in stats
    widths = render("value_widths.sql", dialect="sqla:mysql+pymysql", relation="`t`", widths=["city"], rows=1000)
    assert "sum(length(`city`))" in widths.sql  # MySQL's length() counts bytes (char_length() characters)
    values = render("distinct_values.sql", dialect="sqla:mariadb+pymysql", relation="`t`", column="city", text=True)
    assert values.sql.endswith("GROUP BY CAST(`city` AS BINARY)")
    from sqlalchemy.dialects import mysql

    assert sqla.arrow_type(mysql.BIGINT(unsigned=True), "mysql") == pa.uint64()  # up to 2**64 - 1
    assert sqla.arrow_type(mysql.BIGINT(), "mysql") == pa.int64()
    times = sqla._column("tm", (dt.timedelta(hours=13, seconds=16), None), pa.time64("us"))
    assert times.to_pylist() == [dt.time(13, 0, 16), None]
    # The statistics' and the sample's columns too, as their QI's field (a QI's min and max were
    # read untyped: a duration that no cast made a time, an int past 2**63 that no int64 holds)
    assert sqla._column("min0", (dt.timedelta(hours=1),), pa.field("tq", pa.time64("us"))).to_pylist() == [
        dt.time(1)]
    assert sqla._column("max0", (2**64 - 1,), pa.field("uq", pa.uint64())).to_pylist() == [2**64 - 1]
    for outside in (dt.timedelta(hours=24), dt.timedelta(seconds=-1)):  # MySQL's TIME holds -838:59:59..838:59:59
        with pytest.raises(sqlanon.ConfigError, match="column 'tm' is a TIME holding durations outside one day"):
            sqla._column("tm", (outside,), pa.time64("us"))


# --------------------------------------------------------------------------- 6. bad input


def test_missing_table_and_column_are_one_line(db, tmp_path):
    r = _cli("anonymize", f"sqlite:///{db}", "--table", "nope", "-o", tmp_path / "o.parquet", "--qi", "age", "-k", 2)
    # exit 2, the tables it has named, as a DuckDB file's or PostgreSQL's (it was 1: helper-51)
    assert r.returncode == 2 and r.stderr.startswith(f"Error: --table: table 'nope' is not in sqlite:///{db}; it has: ")
    assert "'people'" in r.stderr and len(r.stderr.splitlines()) == 1
    r = _cli("anonymize", f"sqlite:///{db}", "--table", "peeple", "-o", tmp_path / "o.parquet", "--qi", "age", "-k", 2)
    assert r.returncode == 2 and "(did you mean 'people'?)" in r.stderr
    r = _cli("anonymize", f"sqlite:///{db}", "--table", "hr.people", "-o", tmp_path / "o.parquet", "--qi", "age", "-k", 2)
    assert r.returncode == 2 and r.stderr.strip() == f"Error: --table: schema 'hr' is not in sqlite:///{db}; it has: " \
        "'main'"  # (it was SQLite's 'unknown database "hr"', exit 1: helper-52)
    r = _cli("anonymize", f"sqlite:///{db}", "--table", "people", "-o", tmp_path / "o.parquet", "--qi", "agee", "-k", 2)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "'agee'" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "o.parquet").exists()


def test_other_databases_are_inputs_only(db, tmp_path):
    r = _cli("anonymize", f"sqlite:///{db}", "--table", "people", "-o", f"sqlite:///{tmp_path / 'out.db'}",
             "--target-table", "t", "--qi", "age", "-k", 2)
    assert r.returncode == 2 and "must be a postgresql:// URL, not 'sqlite'" in r.stderr
    assert "write to a Parquet or CSV file or a DuckDB file, or PostgreSQL" in r.stderr  # not PostgreSQL only (helper-38)
    assert not (tmp_path / "out.db").exists()
    r = _cli("verify", f"sqlite:///{db}", "--table", "people", "--qi", "age", "-k", 2)
    assert r.returncode == 2 and "must be a postgresql:// URL" in r.stderr
    # named as a file, it was told to name the URL just refused (helper-60)
    r = _cli("verify", db, "--table", "people", "--qi", "age", "-k", 2)
    assert r.returncode == 2 and "is a SQLite database, which sqlanon verify does not read" in r.stderr


@pytest.mark.postgres
def test_sqlite_to_postgres(db, pg_url):
    """Another database's table published into PostgreSQL, verified on the server."""
    psycopg = pytest.importorskip("psycopg")
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS public.from_sqlite, public.from_sqlite__metrics")
    r = _cli("anonymize", f"sqlite:///{db}", "--table", "people", "-o", pg_url, "--target-table", "public.from_sqlite",
             "--qi", "age,zip,day", "--sensitive", "disease", "-k", 5, "-l", 2, "--workers", 2, "--json", "--quiet")
    assert r.returncode == 0, r.stderr
    v = _cli("verify", pg_url, "--table", "public.from_sqlite", "--qi", "age,zip,day", "--sensitive", "disease",
             "-k", 5, "-l", 2, "--json")
    assert v.returncode == 0, v.stdout + v.stderr
    with psycopg.connect(pg_url) as c:
        got = c.execute("SELECT id, note FROM public.from_sqlite ORDER BY id").fetchall()
    assert got == sqlite_rows(db, "SELECT id, note FROM people ORDER BY id")


def test_sqlite_text_with_a_nul_byte_is_refused_into_postgresql_before_the_work(tmp_path, pg_url):
    """SQLite's text holds a NUL byte, PostgreSQL's cannot: the run failed at
    the write, after every fragment, with DuckDB's words, exit 1 (helper-93).
    SQLite's text functions stop at the byte: its bytes are searched."""
    db = tmp_path / "nul.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE p (id INT, age INT, note TEXT)")
        c.executemany("INSERT INTO p VALUES (?, ?, ?)", [(i, 20 + i % 40, "bad\x00byte" if i == 7 else "fine")
                                                         for i in range(200)])
    args = ["anonymize", f"sqlite:///{db}", "--table", "p", "-o", pg_url, "--target-table", "public.nul_sqlite",
            "--qi", "age", "-k", 5, "--workers", 1, "--overwrite"]
    r = _cli(*args)
    assert r.returncode == 2, r.stderr
    assert r.stderr == ("Error: column 'note' holds text with a NUL byte, which a PostgreSQL table cannot hold: remove "
                        "it in a view (replace(\"note\", char(0), '')), or write a file\n")
    assert _cli(*args, "--drop", "note").returncode == 0


def test_drop_spares_an_untyped_column_of_mixed_values(tmp_path):
    """SQLite lets a column without a type hold ints and strings: the type
    probe read every column, and the run failed ('cannot read its values')
    even with --drop on it."""
    db = tmp_path / "hr.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE p (id INT, age INT, mixed)")
        c.executemany("INSERT INTO p VALUES (?, ?, ?)", [(i, 20 + i % 40, i if i % 2 else "x") for i in range(400)])
    url = f"sqlite:///{db}"
    r = sqlanon.anonymize(url, tmp_path / "o.parquet", table="p", qi=["age"], k=5, drop=["mixed"], workers=1)
    assert r.metrics.rows == 400
    with pytest.raises(sqlanon.ConfigError, match="column 'mixed': cannot read its values"):
        sqlanon.anonymize(url, tmp_path / "o2.parquet", table="p", qi=["age"], k=5, workers=1)


@pytest.mark.parametrize("qi", ["mixed", "age"])
def test_an_untyped_column_of_mixed_values_fails_though_a_read_holds_one_kind(tmp_path, qi):
    """Integers and a few texts in a column without a type: typed as text, a
    sample or fragment holding only its integers read them as text, and the
    run published them so (one catching a text failed): it fails by name
    wherever the column is read (helper-134)."""
    db = tmp_path / "hr.db"
    with sqlite3.connect(db) as c:
        c.execute("CREATE TABLE p (id INT, age INT, mixed)")
        c.executemany("INSERT INTO p VALUES (?, ?, ?)",
                      [(i, 20 + i % 40, i % 50 if i < 3000 else "zz") for i in range(3006)])
    with pytest.raises(sqlanon.ConfigError, match="column 'mixed': cannot read its values as one type: it declares "
                       "none and holds integer and text values"):
        sqlanon.anonymize(f"sqlite:///{db}", tmp_path / "o.parquet", table="p", qi=[qi], k=5, workers=1,
                          fragments=2, fragmentation="quantile", sample=20)
    assert not (tmp_path / "o.parquet").exists()


@pytest.mark.parametrize("url, name", [("mssql+pyodbc://me:secret@db/hr", "SQL Server"),
                                       ("oracle+oracledb://me:secret@db/hr", "Oracle")])
def test_sql_server_and_oracle_are_refused_by_name(tmp_path, url, name):
    """Documented as not supported, they were tried: a missing driver said to
    install it, and with one the run would fail in the database's SQL after
    its statistics (helper-24)."""
    with pytest.raises(sqlanon.ConfigError, match=rf"\*\*\*@db/hr: {name} is not supported as an input yet") as err:
        sqlanon.anonymize(url, tmp_path / "o.parquet", table="people", qi=["age"], k=2)
    assert "secret" not in str(err.value) and not (tmp_path / "o.parquet").exists()
