"""SQL safety: template lint, the quoting helpers, hostile names/values/paths on real DuckDB."""

from __future__ import annotations

import importlib
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import duckdb
import jinja2
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import sqlanon
from sqlanon.cli import main
from sqlanon.io import STAGING_MARK
from sqlanon.sql import ident, literal, render

REPO = Path(__file__).resolve().parents[1]
TEMPLATE_DIR = REPO / "sql_templates"
TEMPLATES = sorted(TEMPLATE_DIR.rglob("*.sql"))  # dialect overrides too
ADULTS = REPO / "examples" / "adults.csv"

# ``{{ ... }}`` expressions allowed without a quoting filter, with why:
RAW_ALLOWED = {
    "relation",  # a relation expression the caller rendered safely (quoted name or table function call)
    '", " if not loop.last',  # a constant separator
}

HOSTILE_NAMES = [
    'a"; DROP TABLE x; --',
    "O'Brien",
    "x'); DROP TABLE t; --",
    'tab"le.col',
    "sp ace",
    "ünïcødé 😀",
    '""',
    "'",
    "back\\slash",
    "new\nline",
    "semi;colon -- comment /* c */",
]
HOSTILE_VALUES = [
    "it's",
    'say "hi"',
    "a;b",
    "--c",
    "/* x */",
    "ünï€😀",
    "x'); DROP TABLE t; --",
    "''",
    "back\\slash",
    "new\nline",
    " pad ",
    "$$dollar$$",
    "{{ jinja }}",
]


# --------------------------------------------------------------------------- 1. template lint


def template_problems(source: str) -> list[str]:
    """What makes a template unsafe: quoted interpolation or unfiltered expressions."""
    problems = []
    code = re.sub(r"\{#.*?#\}", "", source, flags=re.S)  # comments are not rendered
    # Two safe tags: including another template (linted on its own), and a
    # block ``{% set name %}…{% endset %}`` whose body this lint checks like any
    # other text; ``{{ name }}`` then repeats already-checked SQL.
    block_sets = set(re.findall(r"\{%-?\s*set\s+(\w+)\s*-?%\}", code))
    tags = re.sub(r'\{%-?\s*include\s+"[\w.]+\.sql"\s*-?%\}', "", code)
    tags = re.sub(r"\{%-?\s*(set\s+\w+|endset)\s*-?%\}", "", tags)
    if "'{{" in code or '"{{' in code:
        problems.append("an expression inside a quoted SQL string: use | lit or p()")
    for m in re.finditer(r"\{\{-?(.*?)-?\}\}", code, flags=re.S):
        expr = " ".join(m.group(1).split())
        if expr in RAW_ALLOWED or expr in block_sets:
            continue
        if re.fullmatch(r".+\|\s*(ident|lit)", expr) and expr.count("|") == 1:
            continue
        if re.fullmatch(r"p\([^()]*\)", expr):
            continue
        problems.append(f"unsafe expression {{{{ {expr} }}}}")
    if re.search(r"\{%-?\s*(set|macro|include|import|extends|call|filter)\b", tags):
        problems.append("a tag that can build SQL text outside the checked expressions")
    return problems


def test_templates_exist():
    names = {p.name for p in TEMPLATES}
    assert {"copy_to.sql", "read_file.sql", "verify_summary.sql", "verify_violations.sql"} <= names
    # the templates the package loads are the files linted here
    from sqlanon.sql.render import DIALECTS, _env

    for dialect, folder in [*((d, d) for d in DIALECTS), ("sqla:sqlite", "sqlalchemy")]:
        env = _env(dialect)
        paths = [Path(p).resolve() for loader in env.loader.loaders for p in loader.searchpath]
        assert paths == [(TEMPLATE_DIR / folder).resolve(), TEMPLATE_DIR.resolve()]


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.name)
def test_template_lint(template):
    source = template.read_text()
    # Every template interpolates something (the lint has work to do), or
    # includes a partial that does, but a partial of plain SQL, included by others.
    assert "{{" in source or "{% include" in source or (template.name.startswith("_") and "{%" not in source)
    assert template_problems(source) == []


@pytest.mark.parametrize(
    "bad",
    [
        "SELECT * FROM t WHERE a = '{{ value }}'",
        'SELECT "{{ col }}" FROM t',
        "SELECT {{ col }} FROM t",
        "SELECT {{ col | upper }} FROM t",
        "SELECT {{ col | ident | replace('\"', '') }} FROM t",
        "SELECT {{ p(x) ~ y }}",
        "SELECT {{relation ~ ';DROP'}}",
        "{% set q = 'x' %}SELECT 1",
    ],
)
def test_lint_catches_unsafe_templates(bad):
    assert template_problems(bad)


@pytest.mark.parametrize(
    "good",
    ["SELECT {{ c | ident }} FROM {{ relation }} WHERE x = {{ p(v) }}", "COPY x TO {{ path | lit }}"],
)
def test_lint_accepts_safe_templates(good):
    assert template_problems(good) == []


def test_render_strict_undefined():
    with pytest.raises(jinja2.UndefinedError):
        render("verify_summary.sql", relation='"t"', qi=["a"])  # sensitive missing


def test_render_binds_values_as_parameters():
    r = render("verify_violations.sql", relation='"t"', qi=["a"], sensitive=["s"], k=7, l=3, limit=11, as_text=[],
               nan_null=[], signed=[])
    assert r.params == [7, 3, 11]
    assert "7" not in r.sql and "11" not in r.sql
    assert r.sql.count("?") == 3


def test_compiled_templates_are_cached_and_a_cache_that_cannot_be_written_is_only_slower(monkeypatch, tmp_path):
    """Compiled templates are kept in the cache directory (about 60 ms of
    compiling per process, 5 ms loaded); where no cache can be written
    (here: its path is under a file) templates still render, uncached."""
    module = importlib.import_module("sqlanon.sql.render")  # sqlanon.sql.render is also the function

    def rendered():
        module._env.cache_clear()  # as in a new process
        r = render("verify_violations.sql", relation='"t"', qi=["a"], sensitive=["s"], k=7, l=3, limit=11, as_text=[],
               nan_null=[], signed=[])
        return r.sql, r.params

    expected = rendered()
    try:
        monkeypatch.setenv("SQLANON_CACHE_DIR", str(tmp_path / "cache"))
        assert rendered() == expected
        assert list((tmp_path / "cache").glob("sql-template-*.cache"))
        compiled = []
        compile_ = jinja2.Environment.compile
        monkeypatch.setattr(jinja2.Environment, "compile", lambda *a, **kw: compiled.append(1) or compile_(*a, **kw))
        assert rendered() == expected and compiled == []  # loaded from the cache
        (tmp_path / "file").write_text("")
        monkeypatch.setenv("SQLANON_CACHE_DIR", str(tmp_path / "file" / "cache"))
        assert rendered() == expected
    finally:
        monkeypatch.undo()
        module._env.cache_clear()


@pytest.mark.parametrize("first", ["sqla:mysql+pymysql", "postgres"])
def test_a_template_compiled_for_one_dialect_is_not_loaded_for_another(tmp_path, first):
    """Jinja works out a filter of a constant (``{{ "__sqlanon_rn" | ident }}``)
    when it compiles, and the disk cache's key did not name the dialect:
    whichever dialect compiled a template first on a host fixed its quoting
    for the others (PostgreSQL's sample and width statements with MySQL's
    backticks, a syntax error on the server; MySQL's with double quotes,
    strings there: helper-187). Each process renders as a new run would."""
    script = textwrap.dedent('''
        import sys
        from sqlanon.sql.render import render
        dialect = sys.argv[1]
        stmt = render("value_widths.sql", dialect=dialect, inline=dialect == "postgres", relation="t",
                      widths=["c"], rows=1000, binary=[])
        print(stmt.sql)
    ''')
    env = {**os.environ, "SQLANON_CACHE_DIR": str(tmp_path / "cache")}
    second = "postgres" if first != "postgres" else "sqla:mysql+pymysql"
    got = {}
    for dialect in (first, second, first):
        got[dialect] = subprocess.run([sys.executable, "-c", script, dialect], env=env, capture_output=True,
                                      text=True, check=True).stdout
    assert 'AS "n_rows"' in got["postgres"] and 'AS "__sqlanon_first"' in got["postgres"]
    assert "AS `n_rows`" in got["sqla:mysql+pymysql"] and "AS `__sqlanon_first`" in got["sqla:mysql+pymysql"]


# --------------------------------------------------------------------------- 2. ident / literal


@pytest.mark.parametrize(
    "name, expected",
    [
        ("a", '"a"'),
        ('a"b', '"a""b"'),
        ('""', '""""""'),
        ('a"; DROP TABLE x; --', '"a""; DROP TABLE x; --"'),
        ("O'Brien", "\"O'Brien\""),
        ("with.dot", '"with.dot"'),
        (["s", "t"], '"s"."t"'),
        (("db", 'sch"ema', "t.x"), '"db"."sch""ema"."t.x"'),
    ],
)
def test_ident(name, expected):
    assert ident(name) == expected


@pytest.mark.parametrize("bad", ["", ["a", ""], ("",), None, 3, ["a", None]])
def test_ident_rejects(bad):
    with pytest.raises(ValueError):
        ident(bad)


@pytest.mark.parametrize("bad", [[], ()])
def test_ident_rejects_empty_dotted_name(bad):
    with pytest.raises(ValueError):
        ident(bad)


@pytest.mark.parametrize(
    "value, expected",
    [
        ("x", "'x'"),
        ("it's", "'it''s'"),
        ("''", "''''''"),
        ('"', "'\"'"),
        ("a\\b", "'a\\b'"),
        (None, "NULL"),
        (True, "TRUE"),
        (False, "FALSE"),
        (42, "42"),
        (-1, "-1"),
    ],
)
def test_literal(value, expected):
    assert literal(value) == expected


@pytest.mark.parametrize("bad", ["a\x00b", "\x00"])
def test_literal_rejects_nul(bad):
    with pytest.raises(ValueError):
        literal(bad)


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_doubles_are_typed_literals(value):
    """A fragment's cut may fall on one (PostgreSQL clauses carry literals)."""
    with duckdb.connect() as con:
        got = con.execute(f"SELECT {literal(value)}").fetchone()[0]
    assert got == value or (math.isnan(got) and math.isnan(value))


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_ident_roundtrip_on_duckdb(name):
    with duckdb.connect() as con:
        cur = con.execute(f"SELECT 1 AS {ident(name)}")
        assert [d[0] for d in cur.description] == [name]
        con.execute(f"CREATE TABLE {ident(name)} ({ident(name)} INTEGER)")
        con.execute(f"INSERT INTO {ident(name)} VALUES (5)")
        assert con.execute(f"SELECT {ident(name)} FROM {ident(name)}").fetchall() == [(5,)]
        assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchone()[0] == 1


@pytest.mark.parametrize("value", [*HOSTILE_VALUES, "", "\\'; SELECT 1; --"])
def test_literal_roundtrip_on_duckdb(value):
    with duckdb.connect() as con:
        assert con.execute(f"SELECT {literal(value)}").fetchone()[0] == value


# --------------------------------------------------------------------------- 3. hostile names, values, paths


QI = 'a"; DROP TABLE x; --'
QI_TEXT = "it's \"q\"; --"
SENSITIVE = "O'Brien"
PASS = "x'); DROP TABLE t; --"


def hostile_table(n: int = 66) -> pa.Table:
    return pa.table(
        {
            QI: pa.array([i % 10 for i in range(n)], pa.int64()),
            QI_TEXT: pa.array([HOSTILE_VALUES[(i * 3) % len(HOSTILE_VALUES)] for i in range(n)]),
            SENSITIVE: pa.array([["x'y", 'z"w', "é;--", "\n"][i % 4] for i in range(n)]),
            PASS: pa.array([HOSTILE_VALUES[i % len(HOSTILE_VALUES)] for i in range(n)]),
        }
    )


def write_table(table: pa.Table, path: Path) -> None:
    if path.suffix == ".parquet":
        pq.write_table(table, path)
    else:
        with duckdb.connect() as con:
            con.register("t", table)
            con.execute(f"COPY t TO {literal(str(path))} (FORMAT csv, HEADER true)")


def read_table(path: Path) -> pa.Table:
    fn = "read_parquet" if path.suffix == ".parquet" else "read_csv"
    with duckdb.connect() as con:
        return con.execute(f"SELECT * FROM {fn}(?)", [str(path)]).fetch_arrow_table()


def cli(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    return r


@pytest.mark.parametrize("in_ext", ["parquet", "csv"])
@pytest.mark.parametrize("out_ext", ["parquet", "csv"])
def test_hostile_names_values_and_paths_cli(tmp_path, in_ext, out_ext):
    d = tmp_path / "it's a dir; -- x"
    d.mkdir()
    src = d / f"i'n put.{in_ext}"
    out = d / f"o'ut.{out_ext}"
    table = hostile_table()
    write_table(table, src)
    assert read_table(src).equals(table)  # the fixture itself round-trips

    qi = f"{QI},{QI_TEXT}"
    r = cli("anonymize", src, "-o", out, "--qi", qi, "--sensitive", SENSITIVE, "-k", "4", "-l", "2", "--json")
    assert r.exit_code == 0, r.stderr
    assert "Error" not in r.stderr

    v = cli("verify", out, "--qi", qi, "--sensitive", SENSITIVE, "-k", "4", "-l", "2")
    assert v.exit_code == 0, v.stderr

    got = read_table(out)
    assert got.column_names == [QI, QI_TEXT, SENSITIVE, PASS]
    assert got.num_rows == table.num_rows
    # Rows come back fragment by fragment: compare (sensitive, pass-through) pairs as multisets.
    pairs = sorted(zip(got.column(SENSITIVE).to_pylist(), got.column(PASS).to_pylist()))
    assert pairs == sorted(zip(table.column(SENSITIVE).to_pylist(), table.column(PASS).to_pylist()))
    for col in (SENSITIVE, PASS):
        assert sorted(s.encode() for s in got.column(col).to_pylist()) == sorted(s.encode() for s in table.column(col).to_pylist())
    # the text QI was generalized (sets of the hostile values), the numeric one too
    assert got.column(QI_TEXT).to_pylist() != table.column(QI_TEXT).to_pylist()
    metrics = out.with_name(f"{out.name[: -len(out.suffix)]}__metrics.parquet")
    assert sorted(p.name for p in d.iterdir()) == sorted([src.name, out.name, metrics.name])
    assert not [p for p in tmp_path.rglob("*") if STAGING_MARK in p.name]


def test_hostile_names_api_bounds(tmp_path):
    d = tmp_path / "it's a dir"
    d.mkdir()
    src = d / "in.parquet"
    out = d / "o'ut.parquet"
    table = hostile_table()
    pq.write_table(table, src)
    result = sqlanon.anonymize(
        src, out, qi=[QI, QI_TEXT], sensitive=[SENSITIVE], k=4, l=2, interval_format="bounds",
    )
    assert result.verification.ok
    got = pq.read_table(out)
    assert got.column_names == [f"{QI}_lo", f"{QI}_hi", QI_TEXT, SENSITIVE, PASS]
    assert pa.types.is_integer(got.schema.field(f"{QI}_lo").type)
    assert sorted(got.column(PASS).to_pylist()) == sorted(table.column(PASS).to_pylist())
    check = sqlanon.verify(out, qi=[f"{QI}_lo", f"{QI}_hi", QI_TEXT], sensitive=[SENSITIVE], k=4, l=2)
    assert check.ok and check.rows == table.num_rows


def test_hostile_names_in_verify_violations(tmp_path):
    """Failing verification with hostile names: groups listed under the exact column names."""
    src = tmp_path / "o'raw.parquet"
    table = hostile_table()
    pq.write_table(table, src)
    check = sqlanon.verify(src, qi=[QI, PASS], sensitive=[SENSITIVE], k=50, l=2)
    assert not check.ok
    assert check.violations
    for v in check.violations:
        assert {QI, PASS, "__rows", f"__distinct_{SENSITIVE}"} <= v.keys()
        assert v[PASS] in HOSTILE_VALUES


def test_hostile_drop_column(tmp_path):
    src = tmp_path / "in.parquet"
    out = tmp_path / "o'ut.csv"
    pq.write_table(hostile_table(), src)
    r = cli("anonymize", src, "-o", out, "--qi", QI, "-k", "4", "--drop", PASS)
    assert r.exit_code == 0, r.stderr
    assert read_table(out).column_names == [QI, QI_TEXT, SENSITIVE]


def test_input_path_with_glob_metacharacters(tmp_path):
    src = tmp_path / "data[1].csv"
    src.write_text("age,sex\n" + "".join(f"{20 + i % 5},{'MF'[i % 2]}\n" for i in range(20)))
    r = cli("anonymize", src, "-o", tmp_path / "o.parquet", "--qi", "age", "-k", "2")
    assert r.exit_code == 0, r.stderr


@pytest.mark.parametrize("out", ["o.parquet", "o.csv", "o/", "o.duckdb"])
def test_output_below_a_directory_named_with_a_backslash(tmp_path, out):
    """DuckDB's glob finds no file below a directory whose name holds a
    backslash: the parts, read by a pattern, were 'No files found' after all
    the work (helper-71). Two workers, two parts. (With a glob character
    too, 'a\\b[1]', DuckDB cannot read a file there at all.)"""
    where = tmp_path / "we\\ird"
    where.mkdir()
    args = ["--target-table", "t"] if out.endswith(".duckdb") else []
    r = cli("anonymize", ADULTS, "-o", str(where / out), *args, "--qi", "age,sex", "-k", "5", "--workers", "2",
            "--fragments", "2")
    assert r.exit_code == 0, r.stderr
    assert "32561 rows" in r.stdout and not list(where.glob(".*staging*"))
