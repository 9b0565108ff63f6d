"""End-to-end tests of the ``sqlanon`` command line.

A few runs go through a real subprocess (``python -m sqlanon.cli`` and the
``sqlanon`` console script); the many error cases use click's ``CliRunner``
in-process, which is much faster.

The error contract checked everywhere: exactly one line on stderr, starting
with ``Error: `` and naming the culprit; exit code 2 for usage/configuration
errors and 1 for runtime errors; no traceback; nothing written (the output
path does not appear, an existing one stays byte-identical, and no staging
file is left behind).
"""

from __future__ import annotations

import bz2
import datetime
import datetime as dt
import glob
import gzip
import json
import logging
import lzma
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import tomllib
from collections import Counter
from pathlib import Path

import click
import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv  # noqa: F401 - pa.csv
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import sqlanon
from sqlanon import coordinator as sqlanon_coordinator
from sqlanon import executors
from sqlanon import interrupts
from sqlanon import io
from sqlanon.cli import main
from sqlanon.errors import ConfigError, InputError, redact_urls
from sqlanon.io import STAGING_MARK
from sqlanon.sql import ident
from sqlanon.verification import Verification

REPO = Path(__file__).resolve().parents[1]
ADULTS = REPO / "examples" / "adults.csv"
COUNTRIES = REPO / "hierarchies" / "countries.json"
US_STATES = REPO / "hierarchies" / "us_states.json"
ADULT_ROWS = 32561
ADULT_QI = ["age", "education-num", "race", "native-country"]
JSON_KEYS = {"rows", "classes", "min_class_size", "k", "l", "dp", "ncp", "gcp", "output", "timings"}
TIMING_KEYS = {"read", "anonymize", "write", "verify", "total"}


# --------------------------------------------------------------------------- helpers


def run_subprocess(*args, exe: list[str] | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    cmd = (exe or [sys.executable, "-m", "sqlanon.cli"]) + [str(a) for a in args]
    return subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, cwd=REPO, env={**os.environ, **env} if env else None
    )


def console_script() -> list[str]:
    """The installed ``sqlanon`` executable (next to this interpreter, or on PATH)."""
    candidate = Path(sys.executable).with_name("sqlanon")
    found = str(candidate) if candidate.exists() else shutil.which("sqlanon")
    assert found, "the sqlanon console script is not installed"
    return [found]


def cli(*args):
    """Run the CLI in-process; stdout and stderr are kept apart."""
    result = CliRunner().invoke(main, [str(a) for a in args])
    # An exception that escaped the CLI (instead of a clean sys.exit) is a bug.
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def test_a_directory_named_like_a_pattern_reads_its_own_files(tmp_path, monkeypatch):
    """Relative paths were made absolute as text and read as DuckDB globs: in a
    directory named team[a] (a job's, or the working one), people.parquet,
    lake/*.parquet and a job's ../lake/*.parquet read teama/'s files, and
    published a column of the other table raw, exit 0 (helper-188)."""
    people = pd.read_csv(ADULTS).head(2_000)
    for d, rows in (("team[a]", people), ("teama", people.head(500).assign(ssn="SECRET"))):
        (tmp_path / d / "lake").mkdir(parents=True)
        rows.to_parquet(tmp_path / d / "lake" / "p.parquet", index=False)
        rows.to_parquet(tmp_path / d / "people.parquet", index=False)
        rows.to_csv(tmp_path / d / "people.csv", index=False)
        rows.head(100).to_parquet(tmp_path / d / "out.parquet", index=False)  # as the output's name, elsewhere
    here = tmp_path / "team[a]"
    (here / "jobs").mkdir()
    (here / "jobs" / "job.yml").write_text("input: ../lake/*.parquet\noutput: ../job.parquet\nqi: [age, race]\nk: 5\n")
    monkeypatch.chdir(here)
    runs = [("people.parquet", "out.parquet"), ("people.csv", "out.csv"), ("lake/*.parquet", "glob.parquet"),
            ("--config", "jobs/job.yml")]
    for source, out in runs:
        if source == "--config":
            r, out = cli("anonymize", source, out), "job.parquet"
        else:
            r = cli("anonymize", source, "-o", out, "--qi", "age,race", "-k", 5, "--overwrite")
        assert r.exit_code == 0, r.output
        got = pd.read_csv(here / out) if out.endswith(".csv") else pd.read_parquet(here / out)  # (not a glob)
        assert len(got) == 2_000 and "ssn" not in got.columns, out
    r = cli("verify", "out.parquet", "--qi", "age,race", "-k", 5)
    assert r.exit_code == 0 and "2000 rows" in r.output, r.output
    # a job's input not there (yet) reads no sibling's of that name: teama/night.parquet (helper-192)
    people.head(57).assign(ssn="S").to_parquet(tmp_path / "teama" / "night.parquet")
    (here / "night.yml").write_text("input: night.parquet\noutput: night_o.parquet\nqi: [age, race]\nk: 5\n")
    r = cli("anonymize", "--config", "night.yml")
    assert r.exit_code == 1 and "no file matches" in r.stderr and not (here / "night_o.parquet").exists(), r.stderr
    # a job's input directory named lake[1] is a directory, not a pattern (helper-189)
    (here / "lake[1]").mkdir()
    people.to_parquet(here / "lake[1]" / "p.parquet")
    (here / "dir.yml").write_text("input: lake[1]\noutput: dir.parquet\nqi: [age, race]\nk: 5\n")
    r = cli("anonymize", "--config", "dir.yml")
    assert r.exit_code == 0, r.output
    # a glob is recorded as the pattern it is read as, from the command line as from a job file
    r = cli("anonymize", "lake/*.parquet", "-o", "rec.parquet", "--qi", "age,race", "-k", 5, "--json")
    assert json.loads(r.stdout)["input"] == f"{glob.escape(str(here))}/lake/*.parquet"


def test_the_output_may_not_replace_a_hierarchy_file_the_run_reads(tmp_path, monkeypatch):
    """-o race.csv --hierarchy race=race.csv --overwrite replaced the hierarchy
    with the anonymized rows, exit 0; the next night failed on it (helper-188)."""
    levels = "White;W;*\nBlack;O;*\nAsian-Pac-Islander;O;*\nAmer-Indian-Eskimo;O;*\nOther;O;*\n"
    (tmp_path / "jobs").mkdir()
    (tmp_path / "race.csv").write_text(levels)
    monkeypatch.chdir(tmp_path / "jobs")
    r = cli("anonymize", ADULTS, "-o", "../race.csv", "--qi", "age,race", "--hierarchy", f"race={tmp_path}/race.csv",
            "-k", 5, "--overwrite")
    assert r.exit_code == 2, r.output
    assert f"Error: output '../race.csv' is the hierarchy file of quasi-identifier 'race'" in r.output
    assert (tmp_path / "race.csv").read_text() == levels
    r = cli("anonymize", ADULTS, "-o", "../race.csv.parquet", "--qi", "age,race", "--hierarchy",
            f"race={tmp_path}/race.csv", "-k", 5)
    assert r.exit_code == 0, r.output


def test_the_bundled_job_publishes_what_the_readmes_first_command_does(tmp_path):
    """examples/adults.yml, the README's first command as a job (there was no
    job file to run: helper-201), run from a copy of the repository's layout:
    the same rows, classes and costs, and verify --config passes."""
    (tmp_path / "examples").mkdir()
    shutil.copy(REPO / "examples" / "adults.yml", tmp_path / "examples")
    (tmp_path / "examples" / "adults.csv").symlink_to(ADULTS)
    (tmp_path / "hierarchies").symlink_to(REPO / "hierarchies")
    job = tmp_path / "examples" / "adults.yml"
    r = cli("anonymize", "--config", job, "--json")
    assert r.exit_code == 0, r.stderr
    got = json.loads(r.stdout)
    assert (got["rows"], got["classes"], got["dp"], round(got["ncp"], 2)) == (32561, 727, 7072453, 7068.16)
    assert got["output"] == str(tmp_path / "adults_anon.parquet")
    r = cli("verify", "--config", job)
    assert r.exit_code == 0 and r.stdout.startswith("OK: 32561 rows in 727 classes"), r.stderr


def test_a_job_files_numbers_name_columns_as_they_are_written(tmp_path):
    """YAML read 1.10 as the number 1.1, and the name was its str(): `drop:
    [1.10]` dropped the column '1.1' and published '1.10' raw, exit 0; '+1990'
    named '1990'; `{1990: set, "1990": interval}` took the last (helper-188)."""
    n = 200
    pd.DataFrame({"age": [20 + i % 40 for i in range(n)], "1.10": ["SECRET"] * n, "1.1": ["x"] * n,
                  "+1990": [1] * n, "1e3": [2] * n, "dx": ["a", "b"] * (n // 2)}).to_parquet(tmp_path / "in.parquet")
    job = tmp_path / "job.yml"
    job.write_text("input: in.parquet\noutput: o.parquet\nqi: [age]\nsensitive: [dx]\nk: 5\nl: 2\n"
                   "drop: [1.10, +1990, 1e3]\nsample: 1e4\n")
    r = cli("anonymize", "--config", job)
    assert r.exit_code == 0, r.output
    assert pq.read_schema(tmp_path / "o.parquet").names == ["age", "1.1", "dx"]
    job.write_text("input: in.parquet\noutput: o2.parquet\nqi: [age, 1.1]\nk: 5\n"
                   "generalization: {1.1: set, \"1.1\": interval}\n")
    r = cli("anonymize", "--config", job)
    assert r.exit_code == 2 and "key '1.1' appears twice" in r.output, r.output
    job.write_text("input: in.parquet\noutput: o3.parquet\nqi: [age, 1.1, 1.10]\nk: 5\n"
                   "generalization: {1.1: prefix, 1.10: set}\n")  # two columns, each its own (helper-192)
    assert cli("anonymize", "--config", job).exit_code == 0
    params = json.loads(pq.read_table(tmp_path / "o3__metrics.parquet").column("parameters")[-1].as_py())
    assert params["generalization"] == {"1.1": "prefix", "1.10": "set", "age": "interval"}
    for setting, said in (("k: 1e1", "'k' in {job!r} must be a whole number, not 1e1"),
                          ("k: 5\nsample: .inf", "'sample' in {job!r} must be a fraction in (0, 1] or a whole row "
                                                 "count, got inf")):
        job.write_text(f"input: in.parquet\noutput: o4.parquet\nqi: [age]\n{setting}\n")
        r = cli("anonymize", "--config", job)
        assert r.exit_code == 2 and said.format(job=str(job)) in r.stderr, r.stderr


def test_the_librarys_warnings_are_seen_with_or_without_the_hosts_logging(tmp_path):
    """A library call's warnings go to the sqlanon loggers only: a host's
    logging gets them, and where it set up none Python shows them on stderr
    (a NullHandler hid that a new column passes through unchanged:
    helper-189); a job's warning names its key."""
    pd.DataFrame({"age": [20 + i % 40 for i in range(200)]}).to_parquet(tmp_path / "in.parquet")
    (tmp_path / "job.yml").write_text("input: in.parquet\noutput: o.parquet\nqi: [age]\nk: 5\nretries: 3\n"
                                      "overwrite: true\n")
    call = "import sqlanon; r = sqlanon.run_job('job.yml'); print(r.metrics.rows)"
    bare = subprocess.run([sys.executable, "-c", call], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert (bare.returncode, bare.stdout) == (0, "200\n") and bare.stderr.startswith("'retries' in 'job.yml' applies")
    logged = subprocess.run([sys.executable, "-c", "import logging; logging.basicConfig(); " + call], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert logged.returncode == 0 and "WARNING:sqlanon" in logged.stderr and "'retries'" in logged.stderr


def test_a_column_named_with_an_equals_sign_takes_a_hierarchy_and_a_kind(tmp_path):
    """COL=VALUE was split at the first '=': a column 'grp=code' could be
    given neither a hierarchy nor a kind on the command line (a job file's
    mapping could: helper-188). In double quotes, as in the lists of names;
    a kind, a word, splits at the last '='."""
    src, out = tmp_path / "in.parquet", tmp_path / "o.parquet"
    pd.DataFrame({"age": [20 + i % 40 for i in range(200)], "grp=code": ["A", "B", "C", "D"] * 50}).to_parquet(src)
    (tmp_path / "g.csv").write_text("A;AB;*\nB;AB;*\nC;CD;*\nD;CD;*\n")
    r = cli("anonymize", src, "-o", out, "--qi", 'age,"grp=code"', "--hierarchy", f'"grp=code"={tmp_path}/g.csv',
            "-k", 60)
    assert r.exit_code == 0, r.output
    assert set(pd.read_parquet(out)["grp=code"]) <= {"AB", "CD", "*"}
    r = cli("anonymize", src, "-o", out, "--qi", "age", "--generalization", "age=set=x", "-k", 5, "--overwrite")
    assert r.exit_code == 2 and "the unknown kind 'set=x' (did you mean 'set'?)" in r.stderr, r.stderr
    r = cli("anonymize", src, "-o", out, "--qi", 'age,"grp=code"', "--hierarchy", "grp=code=g.csv", "-k", 5)
    assert r.exit_code == 2 and "(a column whose name holds '=' is written in double quotes: '\"grp=code\"=g.csv')" \
        in r.stderr, r.stderr  # (helper-192)
    # a quoted name holding a comma too, first or last in a comma-separated list (helper-192)
    pd.DataFrame({"age": [20 + i % 40 for i in range(200)], "a=b,z": ["A", "B"] * 100}).to_parquet(src)
    for kinds in ('"a=b,z"=prefix,age=set', 'age=set, "a=b,z"=prefix'):
        r = cli("anonymize", src, "-o", out, "--qi", 'age,"a=b,z"', "--generalization", kinds, "-k", 5, "--overwrite")
        assert r.exit_code == 0, r.stderr
        params = json.loads(pq.read_table(tmp_path / "o__metrics.parquet").column("parameters")[-1].as_py())
        assert params["generalization"] == {"a=b,z": "prefix", "age": "set"}
    pd.DataFrame({"age": [20 + i % 40 for i in range(200)], "grp=code": ["A", "B", "C", "D"] * 50}).to_parquet(src)
    for kind in ("grp=code=prefix", '"grp=code"=prefix'):
        r = cli("anonymize", src, "-o", out, "--qi", 'age,"grp=code"', "--generalization", kind, "-k", 5,
                "--overwrite")
        assert r.exit_code == 0, r.output
        params = json.loads(pq.read_table(tmp_path / "o__metrics.parquet").column("parameters")[-1].as_py())
        assert params["generalization"] == {"age": "interval", "grp=code": "prefix"}


def test_a_column_named_in_another_unicode_form_says_so():
    """'café' written e + U+0301 beside 'café' written U+00E9 failed as a
    column not in the input, which listed one that looks the same (helper-188)."""
    import unicodedata

    composed, decomposed = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")
    said = sqlanon.config.missing_column(composed, "'in.parquet'", [decomposed, "age"], "--qi")
    assert said.startswith(f"--qi names column {composed!r}, which is not in 'in.parquet' ({decomposed!r} looks the "
                           "same but its accented letters are written otherwise in Unicode, as NFD")
    neither = "e\u0301\u0327"  # neither NFC nor NFD (the marks out of their canonical order)
    assert "written otherwise in Unicode, in neither NFC nor NFD" in sqlanon.config.missing_column(
        unicodedata.normalize("NFC", neither), "'in.parquet'", [neither])


def _people_and_decoy(tmp_path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """2,000 rows of Adult, and 500 of them with an ssn column: what a run must never read instead."""
    people = pd.read_csv(ADULTS).head(2_000)
    return people, people.head(500).assign(ssn="SECRET")


def test_paths_past_a_link_or_in_a_view_under_a_pattern_like_directory_are_their_own(tmp_path, monkeypatch):
    """More places a directory named like a pattern was read as one (helper-190):
    a DuckDB view's files (--overwrite replaced the view's raw input), a glob
    through link/.. whose target's parent is x[a] (read xa/), a job file's
    glob through a link in j[a]/ (read the job directory's own lake)."""
    people, decoy = _people_and_decoy(tmp_path)
    # A view over raw/*.parquet in team[a]: its raw file is no output
    for d in ("team[a]", "teama"):
        (tmp_path / d / "raw").mkdir(parents=True)
        people.to_parquet(tmp_path / d / "raw" / "p.parquet")
    monkeypatch.chdir(tmp_path / "team[a]")
    duckdb.connect("db.duckdb").execute("CREATE VIEW v AS SELECT * FROM read_parquet('raw/*.parquet')").close()
    before = (tmp_path / "team[a]" / "raw" / "p.parquet").read_bytes()
    r = cli("anonymize", "db.duckdb", "--table", "v", "-o", "raw/p.parquet", "--qi", "age,race", "-k", 5, "--overwrite")
    assert r.exit_code == 2 and "which the input 'db.duckdb table v' reads" in r.stderr, r.stderr
    assert (tmp_path / "team[a]" / "raw" / "p.parquet").read_bytes() == before
    # A glob through link/..
    (tmp_path / "x[a]" / "sub").mkdir(parents=True)
    (tmp_path / "xa").mkdir()
    people.to_parquet(tmp_path / "x[a]" / "p.parquet")
    decoy.to_parquet(tmp_path / "xa" / "p.parquet")
    (tmp_path / "here").mkdir()
    (tmp_path / "here" / "dl").symlink_to(tmp_path / "x[a]" / "sub")
    monkeypatch.chdir(tmp_path / "here")
    r = cli("anonymize", "dl/../*.parquet", "-o", "o.parquet", "--qi", "age,race", "-k", 5)
    assert r.exit_code == 0, r.stderr
    assert len(pd.read_parquet(tmp_path / "here" / "o.parquet").columns) == len(people.columns)
    # A job file's glob through a link, in j[a]/jobs
    jobs = tmp_path / "j[a]" / "jobs"
    (jobs / "lake").mkdir(parents=True)
    (tmp_path / "far" / "sub").mkdir(parents=True)
    (tmp_path / "far" / "lake").mkdir()
    people.to_parquet(tmp_path / "far" / "lake" / "p.parquet")
    decoy.to_parquet(jobs / "lake" / "p.parquet")
    (jobs / "dl").symlink_to(tmp_path / "far" / "sub")
    (jobs / "job.yml").write_text(f"input: dl/../lake/*.parquet\noutput: {tmp_path / 'job.parquet'}\n"
                                  "qi: [age, race]\nk: 5\n")
    r = cli("anonymize", "--config", jobs / "job.yml")
    assert r.exit_code == 0, r.stderr
    assert len(pd.read_parquet(tmp_path / "job.parquet")) == 2_000


def test_an_absolute_view_glob_through_dotdot_still_holds_its_outputs(tmp_path, monkeypatch):
    """A view's pattern '/…/x/../y/*.parquet' was left unnormalized, and an
    output in y/ was no longer refused as read back by the view (helper-192)."""
    people, _ = _people_and_decoy(tmp_path)
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    people.to_parquet(tmp_path / "y" / "raw.parquet")
    db = tmp_path / "db.duckdb"
    duckdb.connect(str(db)).execute(
        f"CREATE VIEW w AS SELECT * FROM read_parquet('{tmp_path}/x/../y/*.parquet')").close()
    r = cli("anonymize", db, "--table", "w", "-o", tmp_path / "y" / "new.parquet", "--qi", "age,race", "-k", 5)
    assert r.exit_code == 2 and "a later run would read it back" in r.stderr, r.stderr


def test_question_marks_and_percents_in_paths(tmp_path, monkeypatch):
    """DuckDB cuts a path at '?': a .csv.gz there was read as text (a
    compressed output failed its check after the work), and a DuckDB
    output's WAL went to 'x.wal?.duckdb', another file, deleted after; a
    relative SQLite URL in w%41/ read ../wA/'s database (helper-190)."""
    import sqlite3

    people, decoy = _people_and_decoy(tmp_path)
    odd = tmp_path / "w?"
    odd.mkdir()
    people.to_csv(odd / "a.csv.gz", index=False)
    monkeypatch.chdir(odd)
    r = cli("anonymize", "a.csv.gz", "-o", "o.csv.gz", "--metrics", "m.csv.gz", "--qi", "age,race", "-k", 5)
    assert r.exit_code == 0, r.stderr
    assert cli("verify", "o.csv.gz", "--qi", "age,race", "-k", 5).exit_code == 0
    (tmp_path / "plain").mkdir()
    monkeypatch.chdir(tmp_path / "plain")
    duckdb.connect("x.wal?.duckdb").execute("CREATE TABLE precious AS SELECT 42 AS answer").close()
    r = cli("anonymize", odd / "a.csv.gz", "-o", "x?.duckdb", "--target-table", "t", "--qi", "age,race", "-k", 5)
    assert r.exit_code == 2 and f"cannot write the DuckDB file '{tmp_path}/plain/x?.duckdb'" in r.stderr
    assert os.listdir() == ["x.wal?.duckdb"]
    monkeypatch.chdir(odd)  # a relative one under w?/ (helper-192)
    r = cli("anonymize", "a.csv.gz", "-o", "rel.duckdb", "--target-table", "t", "--qi", "age,race", "-k", 5)
    assert r.exit_code == 2 and "cannot write the DuckDB file" in r.stderr
    for d, rows in (("w%41", people), ("wA", decoy)):
        (tmp_path / d).mkdir()
        with sqlite3.connect(tmp_path / d / "hr.db") as c:
            rows.to_sql("people", c, index=False)
    monkeypatch.chdir(tmp_path / "w%41")
    r = cli("anonymize", "sqlite:///hr.db", "--table", "people", "-o", tmp_path / "s.parquet", "--qi", "age,race",
            "-k", 5)
    assert r.exit_code == 0, r.stderr
    assert len(pd.read_parquet(tmp_path / "s.parquet")) == 2_000


def test_a_partition_value_duckdb_would_cut_is_refused(tmp_path):
    """DuckDB's reading of a directory's name ends at a backslash: dept=R\\D
    and dept=R\\E both read 'R', one partition of 2,000 rows, exit 0 (helper-190)."""
    people, _ = _people_and_decoy(tmp_path)
    for i, v in enumerate(["R\\D", "R\\E"]):
        (tmp_path / "lake" / f"dept={v}").mkdir(parents=True)
        people.iloc[i * 1_000:(i + 1) * 1_000].to_parquet(tmp_path / "lake" / f"dept={v}" / "p.parquet")
    r = cli("anonymize", tmp_path / "lake", "-o", tmp_path / "o.parquet", "--qi", "age,race", "-k", 5)
    assert r.exit_code == 2 and "partition directory 'dept=R\\D'" in r.stderr and "holds '\\\\'" in r.stderr
    r = cli("anonymize", tmp_path / "lake", "-o", tmp_path / "o.parquet", "--qi", "age,race", "-k", 5, "--drop", "dept")
    assert r.exit_code == 0, r.stderr
    for i, v in enumerate(["a?b", "a?c"]):  # DuckDB loses a key at a '?': the column gone, exit 0 (helper-192)
        (tmp_path / "q" / f"region={v}").mkdir(parents=True)
        people.iloc[i * 1_000:(i + 1) * 1_000].to_parquet(tmp_path / "q" / f"region={v}" / "p.parquet")
    r = cli("anonymize", tmp_path / "q", "-o", tmp_path / "q.parquet", "--qi", "age,race", "-k", 5)
    assert r.exit_code == 2 and "partition directory 'region=a?b'" in r.stderr, r.stderr
    # DuckDB reads 'NULL' as a missing value, and '2020-1-1' beside '2020-01-01' as one date: pyarrow and
    # Spark read two values; anonymize and verify passed them as one class (helper-191)
    for name, dirs, said in (("n", ["city=NULL", f"city={io.HIVE_NULL}"], "holds the text 'NULL'"),
                             ("d", ["day=2020-1-1", "day=2020-01-01"], "dates not written as DuckDB reads them back")):
        for i, d in enumerate(dirs):
            (tmp_path / name / d).mkdir(parents=True)
            people.iloc[i * 1_000:(i + 1) * 1_000].to_parquet(tmp_path / name / d / "p.parquet")
        key = dirs[0].split("=")[0]
        r = cli("anonymize", tmp_path / name, "-o", tmp_path / f"{name}.parquet", "--qi", f"age,{key}", "-k", 5)
        assert r.exit_code == 2 and said in r.stderr and "or drop the key (--drop)" in r.stderr, r.stderr
        r = cli("verify", tmp_path / name, "--qi", key, "-k", 5)
        assert r.exit_code == 2 and said in r.stderr and "or leave the key out of the check" in r.stderr, r.stderr


def read_any(path: Path) -> pd.DataFrame:
    """Read a .csv or .parquet file with DuckDB (as sqlanon reads it)."""
    fn = "read_parquet" if path.suffix == ".parquet" else "read_csv"
    with duckdb.connect() as con:
        # Through Arrow: DuckDB 1.4's own .df() uses an argument pandas 3.1 deprecates (a Pandas4Warning).
        return con.execute(f"SELECT * FROM {fn}(?)", [str(path)]).fetch_arrow_table().to_pandas()


def read_arrow(path: Path) -> pa.Table:
    fn = "read_parquet" if path.suffix == ".parquet" else "read_csv"
    with duckdb.connect() as con:
        return con.execute(f"SELECT * FROM {fn}(?)", [str(path)]).fetch_arrow_table()


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (hidden ones too) with its bytes."""
    return {str(p.relative_to(directory)): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def staging_leftovers(root: Path) -> list[str]:
    return [str(p) for p in root.rglob("*") if STAGING_MARK in p.name]


def assert_one_line_error(stderr: str, *patterns: str) -> str:
    """stderr is exactly one line, ``Error: ...``, matching every regex in ``patterns``."""
    assert "Traceback" not in stderr
    lines = stderr.strip("\n").splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{stderr}"
    line = lines[0]
    assert line.startswith("Error: "), line
    assert "internal error" not in line, line
    for pat in patterns:
        assert re.search(pat, line), f"{pat!r} not in {line!r}"
    return line


def assert_usage_error(stderr: str, *patterns: str) -> str:
    """A usage error: one ``Error: `` line (click's usage banner, hint and
    blank line used to come first); a command line's points to the help."""
    line = assert_one_line_error(stderr, *patterns)
    assert ".yml" in line or re.search(r"\(see '\S+( \w+)? --help'\)$", line), line
    return line


def parse_interval(text: str) -> tuple[float, float]:
    """``'39'`` → (39, 39); ``'[18, 37]'`` → (18, 37)."""
    m = re.fullmatch(r"\[(-?[\d.]+), (-?[\d.]+)\]", text)
    if m:
        return float(m.group(1)), float(m.group(2))
    return float(text), float(text)


def hierarchy_parents(node: dict, parent: str | None = None, out: dict | None = None) -> dict[str, str | None]:
    out = {} if out is None else out
    out[node["cat"]] = parent
    for child in node.get("subcats") or []:
        hierarchy_parents(child, node["cat"], out)
    return out


def ancestors_or_self(value: str, parents: dict[str, str | None]) -> set[str]:
    seen = set()
    while value is not None:
        seen.add(value)
        value = parents[value]
    return seen


@pytest.fixture(scope="module")
def adults_df() -> pd.DataFrame:
    return read_any(ADULTS)


@pytest.fixture(scope="module")
def adults_rid(tmp_path_factory, adults_df) -> tuple[Path, pd.DataFrame]:
    """Adult with a row id ``rid``, to check each published row against its
    original: rows are published by class, in a random order within each."""
    df = adults_df.assign(rid=range(len(adults_df)))
    path = tmp_path_factory.mktemp("adults_rid") / "adults.csv"
    df.to_csv(path, index=False)
    return path, df


def by_rid(anon: pd.DataFrame) -> pd.DataFrame:
    return anon.sort_values("rid").reset_index(drop=True)


@pytest.fixture()
def out_dir(tmp_path: Path) -> Path:
    d = tmp_path / "out"
    d.mkdir()
    return d


# --------------------------------------------------------------------------- 1. Adult end to end


@pytest.mark.parametrize("workers", ["1", "2"])
def test_adult_end_to_end_subprocess(tmp_path, adults_rid, workers):
    src, adults_df = adults_rid
    out = tmp_path / "adults_anon.parquet"
    proc = run_subprocess(
        "anonymize", src, "-o", out, "--qi", ",".join(ADULT_QI),
        "--hierarchy", f"native-country={COUNTRIES}", "--sensitive", "income", "-k", "10", "-l", "2", "--json",
        "--workers", workers,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr

    # --json: exactly one JSON object on stdout
    doc = json.loads(proc.stdout)
    assert isinstance(doc, dict)
    assert proc.stdout.strip().count("\n") == 0
    assert JSON_KEYS <= doc.keys(), JSON_KEYS - doc.keys()
    assert TIMING_KEYS <= doc["timings"].keys(), TIMING_KEYS - doc["timings"].keys()
    assert doc["rows"] == ADULT_ROWS
    assert doc["k"] == 10 and doc["l"] == 2
    assert doc["min_class_size"] >= 10
    assert 1 < doc["classes"] <= ADULT_ROWS // 10
    assert doc["dp"] >= doc["rows"] * doc["min_class_size"]
    assert doc["ncp"] >= 0 and 0 <= doc["gcp"] <= 1
    assert Path(doc["output"]) == out and doc["input"] == os.path.abspath(src)
    # which night a line of a cron job's .jsonl is (helper-42)
    started = dt.datetime.fromisoformat(doc["started_at"])
    assert abs(started - dt.datetime.now(dt.timezone.utc)) < dt.timedelta(minutes=5)
    for key in TIMING_KEYS:
        assert isinstance(doc["timings"][key], (int, float)) and doc["timings"][key] >= 0
    for key in TIMING_KEYS - {"total"}:
        assert doc["timings"][key] <= doc["timings"]["total"]

    # verify the published file, with the installed console script
    ver = run_subprocess(
        "verify", out, "--qi", ",".join(ADULT_QI), "--sensitive", "income", "-k", "10", "-l", "2",
        exe=console_script(),
    )
    assert ver.returncode == 0, ver.stderr
    assert ver.stdout.startswith("OK")
    assert f"{ADULT_ROWS} rows" in ver.stdout

    anon = read_any(out)
    assert len(anon) == ADULT_ROWS
    assert list(anon.columns) == list(adults_df.columns)
    rest = [c for c in adults_df.columns if c not in ADULT_QI]
    # Same rows: a run of several fragments publishes them fragment by
    # fragment, so compare the rows as sorted multisets.
    pd.testing.assert_frame_equal(
        anon[rest].sort_values(rest).reset_index(drop=True), adults_df[rest].sort_values(rest).reset_index(drop=True)
    )

    # native-country: hierarchy labels only, each the original value or one of its ancestors
    parents = hierarchy_parents(json.loads(COUNTRIES.read_text()))
    published = set(anon["native-country"])
    assert published <= parents.keys(), published - parents.keys()
    assert published & (parents.keys() - {v for v in adults_df["native-country"]}), "nothing was generalized"
    assert anon["age"].str.startswith("[").any()
    anon = by_rid(anon)
    assert anon["rid"].tolist() == adults_df["rid"].tolist()
    for orig, gen in zip(adults_df["native-country"], anon["native-country"]):
        assert gen in ancestors_or_self(orig, parents), (orig, gen)

    # age: each published interval contains the original age
    for orig, gen in zip(adults_df["age"], anon["age"]):
        lo, hi = parse_interval(gen)
        assert lo <= orig <= hi, (orig, gen)


@pytest.mark.parametrize(("args", "code"), [(["--version"], 0), (["anonymize", "--no-such-option"], 2)])
def test_entry_runs_exit_handlers_and_keeps_the_exit_code(args, code):
    """The script's quick exit (``os._exit`` after the command) still runs the
    exit handlers, flushes what was printed and returns the command's code."""
    script = (
        "import atexit, sys\n"
        "from sqlanon.cli import entry\n"
        "atexit.register(lambda: print('exit handler ran', flush=True))\n"
        "entry(sys.argv[1:], 'sqlanon')\n"
        "print('not reached')\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == code, proc.stderr
    assert proc.stdout.rstrip().endswith("exit handler ran") and "not reached" not in proc.stdout
    if code == 0:
        assert proc.stdout.startswith("sqlanon, version")
    else:
        assert "No such option '--no-such-option'" in proc.stderr


@pytest.mark.parametrize("module", ["sqlanon.cli", "sqlanon"])
def test_module_invocation_prints_human_summary(tmp_path, module):
    """``python -m sqlanon`` too, with a worker pool (whose fork server imports
    the main module: it must not run the command a second time)."""
    out = tmp_path / "a.csv"
    proc = run_subprocess(
        "anonymize", ADULTS, "-o", out, "--qi", "age,sex", "-k", "25", "--workers", "2",
        exe=[sys.executable, "-m", module],
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote {out}") and proc.stdout.count("wrote") == 1
    assert f"{ADULT_ROWS} rows" in proc.stdout
    assert out.exists()


# --------------------------------------------------------------------------- 2. output formats


@pytest.mark.parametrize("ext", ["parquet", "csv"])
def test_text_intervals_roundtrip(tmp_path, adults_rid, ext):
    src, adults_df = adults_rid
    out = tmp_path / f"o.{ext}"
    qi = "age,education-num,race"
    r = cli("anonymize", src, "-o", out, "--qi", qi, "-k", "10", "--json", "--workers", "1")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["rows"] == ADULT_ROWS and doc["min_class_size"] >= 10
    anon = by_rid(read_any(out))
    assert len(anon) == ADULT_ROWS
    assert list(anon.columns) == list(adults_df.columns)
    for orig, gen in zip(adults_df["age"], anon["age"].astype(str)):
        lo, hi = parse_interval(gen)
        assert lo <= orig <= hi
    v = cli("verify", out, "--qi", qi, "-k", "10")
    assert v.exit_code == 0, v.stderr
    assert not staging_leftovers(tmp_path)


@pytest.mark.parametrize("ext", ["parquet", "csv"])
def test_bounds_interval_format(tmp_path, adults_rid, ext):
    src, adults_df = adults_rid
    out = tmp_path / f"b.{ext}"
    r = cli(
        "anonymize", src, "-o", out, "--qi", ",".join(ADULT_QI),
        "--hierarchy", f"native-country={COUNTRIES}", "-k", "10", "--interval-format", "bounds", "--workers", "1",
    )
    assert r.exit_code == 0, r.stderr
    table = read_arrow(out).sort_by("rid")
    names = table.column_names
    assert "age" not in names and "education-num" not in names
    assert names[:2] == ["age_lo", "age_hi"]
    for col in ("age_lo", "age_hi", "education-num_lo", "education-num_hi"):
        assert pa.types.is_integer(table.schema.field(col).type), (col, table.schema.field(col).type)
    lo = table.column("age_lo").to_numpy()
    hi = table.column("age_hi").to_numpy()
    orig = adults_df["age"].to_numpy()
    assert ((lo <= orig) & (orig <= hi)).all()
    assert (lo < hi).any(), "no age was generalized"
    qi_out = "age_lo,age_hi,education-num_lo,education-num_hi,race,native-country"
    v = cli("verify", out, "--qi", qi_out, "-k", "10", "--json")
    assert v.exit_code == 0, v.stderr
    # a QI by the name it was anonymized under means its bounds (helper-40: 'did you mean age_lo?')
    by_name = cli("verify", out, "--qi", ",".join(ADULT_QI), "-k", "10", "--json")
    assert by_name.exit_code == 0, by_name.stderr
    assert json.loads(by_name.stdout)["classes"] == json.loads(v.stdout)["classes"]
    assert cli("verify", out, "--qi", "ag", "-k", "10").exit_code == 2


# --------------------------------------------------------------------------- 3. --drop


def test_drop_removes_columns(tmp_path, adults_df):
    out = tmp_path / "d.parquet"
    r = cli(
        "anonymize", ADULTS, "-o", out, "--qi", "age", "-k", "10", "--drop", "workclass,sex",
        "--drop", "capital-gain", "--sensitive", "income", "-l", "2",
    )
    assert r.exit_code == 0, r.stderr
    names = pq.read_schema(out).names
    assert names == [c for c in adults_df.columns if c not in ("workclass", "sex", "capital-gain")]


@pytest.mark.parametrize(
    "extra, culprit",
    [
        (["--drop", "age"], "age"),  # a QI
        (["--drop", "sex,income", "--sensitive", "income", "-l", "2"], "income"),  # a sensitive column
        (["--drop", "no_such_column"], "no_such_column"),  # not in the input
    ],
    ids=["qi", "sensitive", "unknown"],
)
def test_drop_usage_errors(out_dir, extra, culprit):
    out = out_dir / "d.parquet"
    r = cli("anonymize", ADULTS, "-o", out, "--qi", "age", "-k", "10", *extra)
    # A column the input lacks is a runtime error (1), like a missing QI;
    # dropping a QI or sensitive column is a usage error (2).
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert_one_line_error(r.stderr, re.escape(repr(culprit)))
    assert r.stdout == ""
    assert snapshot(out_dir) == {}


ADULT_OTHERS = ["workclass", "marital-status", "occupation", "relationship", "sex", "capital-gain", "capital-loss",
                "hours-per-week", "native-country"]


def test_keep_publishes_exactly_the_columns_it_lists(out_dir, adults_df):
    out = out_dir / "k.parquet"
    r = cli("anonymize", ADULTS, "-o", out, "--qi", "age,education-num,race", "--sensitive", "income", "-l", "2",
            "-k", "10", "--keep", ",".join(ADULT_OTHERS[:4]), "--drop", ",".join(ADULT_OTHERS[4:]))
    assert r.exit_code == 0, r.stderr
    assert pq.read_schema(out).names == [c for c in adults_df.columns if c not in ADULT_OTHERS[4:]]
    total = read_any(out_dir / "k__metrics.parquet").query("kind == 'total'").iloc[0]
    assert json.loads(total["parameters"])["keep"] == ADULT_OTHERS[:4]


@pytest.mark.parametrize(
    "extra, pattern",
    [
        # The source gained a column the job does not know (a new `ssn`):
        # refused, not published raw.
        (["--keep", ",".join(ADULT_OTHERS[:-1])], r"^Error: --keep leaves out 'native-country', a column of .*adults.csv.* that is neither a quasi-identifier nor sensitive: list it in --keep to publish it unchanged, or in --drop"),
        (["--keep", ",".join(ADULT_OTHERS[2:])], r"--keep leaves out 'workclass', 'marital-status', columns of .* that are neither .*: list them in --keep"),
        (["--keep", ",".join([*ADULT_OTHERS, "ssn"])], r"'ssn'"),  # not in the input
        (["--keep", ",".join([*ADULT_OTHERS, "age"])], r"--keep names 'age', which is a quasi-identifier"),
        (["--keep", ",".join(ADULT_OTHERS), "--drop", "sex"], r"--keep and --drop both name 'sex'"),
    ],
    ids=["new-column", "two", "unknown", "qi", "dropped"],
)
def test_keep_refuses_columns_it_does_not_list(out_dir, extra, pattern):
    r = cli("anonymize", ADULTS, "-o", out_dir / "k.parquet", "--qi", "age,education-num,race", "-k", "10",
            "--sensitive", "income", "-l", "2", *extra)
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert_one_line_error(r.stderr, pattern)
    assert snapshot(out_dir) == {}


def test_keep_in_a_job_file_refuses_a_new_column_and_the_command_line_adds_to_it(tmp_path, out_dir):
    job = tmp_path / "job.yml"
    job.write_text("qi: [age, education-num, race]\nsensitive: [income]\nl: 2\nk: 10\n"
                   f"keep: [{', '.join(ADULT_OTHERS[:-1])}]\n")
    out = out_dir / "k.parquet"
    r = cli("anonymize", "--config", job, ADULTS, "-o", out)
    assert r.exit_code == 2
    # Its advice names the file's keys too (it said "list it in --keep", helper-51).
    assert_one_line_error(r.stderr, r"^Error: 'keep' in '.*job.yml' leaves out 'native-country', a column of .*: "
                                    r"list it in 'keep' to publish it unchanged, or in 'drop' to leave it out$")
    assert snapshot(out_dir) == {}
    r = cli("anonymize", "--config", job, ADULTS, "-o", out, "--keep", "native-country")
    assert r.exit_code == 0, r.stderr
    assert set(ADULT_OTHERS) <= set(pq.read_schema(out).names)


def test_an_l_in_a_job_file_without_sensitive_columns_names_the_keys(tmp_path, out_dir):
    """The advice of a message about a job file's value names its keys: it
    said "'l' in 'job.yml' = 2 needs … (--sensitive)" (helper-51)."""
    job = tmp_path / "job.yml"
    job.write_text("qi: [age, race]\nk: 10\nl: 2\n")
    r = cli("anonymize", "--config", job, ADULTS, "-o", out_dir / "l.parquet")
    assert r.exit_code == 2, r.stderr
    assert_one_line_error(r.stderr, r"^Error: 'l' in '.*job.yml' = 2 needs at least one sensitive column "
                                    r"\('sensitive'\)$")
    r = cli("anonymize", ADULTS, "-o", out_dir / "l.parquet", "--qi", "age,race", "-k", "10", "-l", "2")
    assert_one_line_error(r.stderr, r"^Error: l = 2 needs at least one sensitive column \(--sensitive\)$")
    assert snapshot(out_dir) == {}


def test_a_job_files_hierarchy_kind_without_a_file_and_its_timeout_name_its_keys(tmp_path, out_dir):
    """A job's ``generalization: {race: hierarchy}`` without a file said
    "pass --hierarchy race=FILE", and its task_timeout firing said
    "(--task-timeout)": flags the job's author did not write (stop 41's list)."""
    job = tmp_path / "job.yml"
    job.write_text("qi: [age, race]\nk: 5\ngeneralization: {race: hierarchy}\n")
    r = cli("anonymize", "--config", job, ADULTS, "-o", out_dir / "h.parquet")
    assert r.exit_code == 2, r.stderr
    assert_one_line_error(r.stderr, r"^Error: column 'race' uses generalization 'hierarchy' \('generalization' in "
                                    r"'.*job.yml'\) but no hierarchy file was given: map 'race' to one under "
                                    r"'hierarchy' in '.*job.yml'$")
    r = cli("anonymize", "--config", job, ADULTS, "-o", out_dir / "h.parquet", "--generalization", "race=hierarchy")
    assert_one_line_error(r.stderr, r"no hierarchy file was given: pass --hierarchy race=FILE$")
    job.write_text("qi: [age, race]\nk: 5\ntask_timeout: 0.001\n")
    r = cli("anonymize", "--config", job, ADULTS, "-o", out_dir / "t.parquet")
    assert r.exit_code == 1, r.stderr
    assert_one_line_error(r.stderr, r"^Error: fragment \d+ did not finish within 0.001 s \('task_timeout' in "
                                    r"'.*job.yml'\); nothing was published$")
    with pytest.raises(InputError, match=r"0.001 s \('task_timeout' in '.*job.yml'\);"):
        sqlanon.run_job(job, ADULTS, "-o", out_dir / "t.parquet")
    r = cli("anonymize", "--config", job, ADULTS, "-o", out_dir / "t.parquet", "--task-timeout", "0.001")
    assert_one_line_error(r.stderr, r"within 0.001 s \(--task-timeout\); nothing was published$")
    assert snapshot(out_dir) == {}


def test_a_job_files_hierarchy_of_no_qi_is_named_by_its_key_beside_another_on_the_command_line(tmp_path, out_dir):
    """``--hierarchy`` on the command line adds to the file's mapping; the
    file's entry for a column that is not a QI was blamed on the flag
    ("--hierarchy names column 'zip'")."""
    job = tmp_path / "job.yml"
    job.write_text(f"qi: [age, native-country]\nk: 10\nhierarchy: {{zip: {COUNTRIES}}}\n")
    extra = ("--hierarchy", f"native-country={COUNTRIES}")
    r = cli("anonymize", "--config", job, ADULTS, "-o", out_dir / "h.parquet", *extra)
    assert r.exit_code == 2, r.stderr
    assert_one_line_error(r.stderr, r"^Error: 'hierarchy' in '.*job.yml' names column 'zip', which is not a "
                                    r"quasi-identifier$")
    job.write_text(f"qi: [age, native-country]\nk: 10\nhierarchy: {{native-country: {COUNTRIES}}}\n")
    r = cli("anonymize", "--config", job, ADULTS, "-o", out_dir / "h.parquet", "--hierarchy", f"race={COUNTRIES}")
    assert r.exit_code == 2, r.stderr
    assert_one_line_error(r.stderr, r"^Error: --hierarchy names column 'race', which is not a quasi-identifier")
    assert snapshot(out_dir) == {}


def test_an_empty_keep_in_a_job_file_lets_no_other_column_pass(tmp_path, out_dir):
    """``keep: []`` (as ``--keep ''``): only QIs and sensitive columns may
    be published; it was refused ('must name at least one column')."""
    job = tmp_path / "job.yml"
    job.write_text("qi: [age, education-num, race]\nsensitive: [income]\nl: 2\nk: 10\nkeep: []\n")
    out = out_dir / "k.parquet"
    r = cli("anonymize", "--config", job, ADULTS, "-o", out)
    assert r.exit_code == 2, r.stderr
    assert_one_line_error(r.stderr, r"^Error: 'keep' in '.*job.yml' leaves out 'workclass', 'marital-status', .*columns of")
    others = [c for c in pd.read_csv(ADULTS, nrows=1).columns if c not in ("age", "education-num", "race", "income")]
    r = cli("anonymize", "--config", job, ADULTS, "-o", out, "--drop", ",".join(others))
    assert r.exit_code == 0, r.stderr
    assert pq.read_schema(out).names == ["age", "education-num", "race", "income"]


def test_keep_in_the_library(out_dir):
    with pytest.raises(sqlanon.ConfigError, match=r"keep= leaves out 'native-country', .*: list it in keep= to publish it unchanged, or in drop= to leave it out"):
        sqlanon.anonymize(ADULTS, out_dir / "k.parquet", qi=["age", "education-num", "race"], k=10,
                          sensitive=["income"], l=2, keep=ADULT_OTHERS[:-1])
    assert snapshot(out_dir) == {}
    sqlanon.anonymize(ADULTS, out_dir / "k.parquet", qi=["age", "education-num", "race"], k=10,
                      sensitive=["income"], l=2, keep=ADULT_OTHERS[:-1], drop=["native-country"])
    assert "native-country" not in pq.read_schema(out_dir / "k.parquet").names


# --------------------------------------------------------------------------- 4. --overwrite


def test_overwrite(out_dir):
    out = out_dir / "o.parquet"
    out.write_bytes(b"previous contents")
    before = snapshot(out_dir)

    r = cli("anonymize", ADULTS, "-o", out, "--qi", "age", "-k", "10")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, re.escape(str(out)), "--overwrite")
    assert snapshot(out_dir) == before

    r = cli("anonymize", ADULTS, "-o", out, "--qi", "age", "-k", "10", "--overwrite", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["rows"] == ADULT_ROWS
    assert pq.read_metadata(out).num_rows == ADULT_ROWS
    # replaced in place, no staging left; the run's metrics table sits next to it
    assert sorted(snapshot(out_dir)) == ["o.parquet", "o__metrics.parquet"]


def test_failed_overwrite_keeps_existing_output(out_dir):
    out = out_dir / "o.csv"
    out.write_text("keep,me\n1,2\n")
    before = snapshot(out_dir)
    r = cli("anonymize", ADULTS, "-o", out, "--qi", "age,no_such_col", "-k", "10", "--overwrite")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, "no_such_col")
    assert snapshot(out_dir) == before


def _failing_verification(*args, **kwargs):
    return Verification(
        k=10, l=1, rows=ADULT_ROWS, classes=1, min_class_size=1, dp=1, violations=[{"age": "x", "__rows": 1}],
        n_violations=1,
    )


@pytest.mark.parametrize("existing", [False, True], ids=["new", "overwrite"])
def test_failed_verification_publishes_nothing(out_dir, monkeypatch, existing):
    """A staged output that fails the SQL check is discarded; an existing output stays."""
    out = out_dir / "o.parquet"
    if existing:
        out.write_bytes(b"old")
    before = snapshot(out_dir)
    monkeypatch.setattr(sqlanon_coordinator, "verify_relation", _failing_verification)
    r = cli("anonymize", ADULTS, "-o", out, "--qi", "age", "-k", "10", "--overwrite")
    assert r.exit_code == 1
    assert_one_line_error(r.stderr, re.escape(str(out)))
    assert snapshot(out_dir) == before
    assert not staging_leftovers(out_dir)


@pytest.mark.parametrize(("cut", "run"), [
    ("click", "import runpy\nrunpy.run_module('sqlanon', run_name='__main__')"),  # as python -m sqlanon
    ("sqlanon.config", "from sqlanon._script import entry\nsys.exit(entry())"),  # as the installed script
])
def test_a_ctrl_c_while_the_command_line_imports_is_one_line(tmp_path, cut, run):
    """The script imports click, YAML and the executors before its error
    handling exists: a Ctrl-C in that tenth of a second printed a traceback
    (helper-6). And the console script imports the package before its
    entry's guard: the package imported its config and errors modules
    there (helper-40: 7 of 20 Ctrl-Cs 45-65 ms after the start). Here the
    import that the Ctrl-C cuts short is click's, then the config's."""
    code = textwrap.dedent(f"""
        import sys
        class Interrupt:
            def find_spec(self, name, path=None, target=None):
                if name == {cut!r}:
                    raise KeyboardInterrupt
        sys.meta_path.insert(0, Interrupt())
        sys.argv = ["sqlanon", "anonymize", "in.csv", "-o", "out.parquet", "--qi", "age", "-k", "5"]
    """) + run
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stderr) == (130, "Interrupted; nothing was published.\n")
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["sqlanon"] == "sqlanon._script:entry"  # the script enters where python -m does


def test_missing_options_are_named_together_with_their_job_file_keys():
    """One at a time, a newcomer ran the command four times to learn what it needs (helper-42)."""
    r = cli("anonymize", ADULTS, "--qi", "age")
    assert r.exit_code == 2
    assert "Missing '-o', '-k' (give them on the command line, or as output:, k: in a --config job file)" in r.stderr
    r = cli("anonymize", ADULTS, "--qi", "age", "-k", "5")
    assert r.exit_code == 2 and "Missing '-o' (give it on the command line, or as output: in" in r.stderr


@pytest.mark.parametrize("text", ["", "# the job moved to people.yml\n"])
def test_an_empty_job_file_is_said_to_be_empty(tmp_path, text):
    """A job file a broken deploy left empty (or all comments) gave only
    "Missing 'INPUT', '-o', '--qi', '-k'", as if the file were not read (helper-100)."""
    job = tmp_path / "job.yml"
    job.write_text(text)
    for command in ("anonymize", "verify"):
        r = cli(command, "--config", job)
        assert r.exit_code == 2
        assert_one_line_error(r.stderr, rf"^Error: Missing .*; {re.escape(repr(str(job)))} sets nothing: it is empty\.")


def test_a_missing_column_is_named_with_its_option_and_only_a_close_match(out_dir):
    """'zipcode' got "did you mean 'income'?" (difflib's 0.6), and the
    message did not say which option named it (helper-42)."""
    for qi, option, hint in (("age,zipcode", "--qi", None), ("educaton-num", "--qi", "education-num"),
                             ("age", "--sensitive", "workclass")):
        args = ["--qi", qi] if option == "--qi" else ["--qi", qi, "--sensitive", "workclas", "-l", "2"]
        r = cli("anonymize", ADULTS, "-o", out_dir / "o.parquet", *args, "-k", "5")
        assert r.exit_code == 2
        line = assert_one_line_error(r.stderr, f"^Error: {option} names column ")
        assert (f"(did you mean {hint!r}?)" in line) if hint else "did you mean" not in line, line


def test_duckdb_table_names_resolve_as_duckdb_does(tmp_path, out_dir):
    """A mistyped table failed as DuckDB's "Catalog Error: Table with name
    adult does not exist!", exit 1, where a mistyped column is exit 2 with
    its close name (helper-42); and a view in another schema that names a
    table of main unqualified failed as that table not existing."""
    db = tmp_path / "w.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE TABLE adults AS SELECT * FROM read_csv('{ADULTS}')")
        con.execute("CREATE SCHEMA hr")
        con.execute("CREATE VIEW hr.people AS SELECT * FROM main.adults")
    for args in (["anonymize", db, "--table", "adult", "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5"],
                 ["verify", db, "--table", "adult", "--qi", "age", "-k", "5"]):
        r = cli(*args)
        assert r.exit_code == 2, r.stderr
        assert_one_line_error(r.stderr, re.escape(f"--table: table 'adult' is not in {str(db)!r} (did you mean "
                                                  "'adults'?); it has: 'hr.people', 'adults'"))
    r = cli("verify", db, "--table", "HR.People", "--qi", "sex", "-k", "5")  # as DuckDB resolves it
    assert r.exit_code == 0, r.stderr
    # a view's unqualified names as the file's own connections resolve them (main): 'adults' from schema hr
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE VIEW hr.everyone AS SELECT * FROM adults")
    r = cli("anonymize", db, "--table", "hr.everyone", "-o", out_dir / "e.parquet", "--qi", "age", "-k", "5",
            "--workers", "2")
    assert r.exit_code == 0, r.stderr
    assert cli("verify", db, "--table", "hr.everyone", "--qi", "sex", "-k", "5").exit_code == 0
    # a table named with a dot is shown quoted, as --table takes it: the advice read 'hr.people' for both (helper-60)
    r = cli("verify", db, "--table", '"hr.people"', "--qi", "sex", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, re.escape(f"""--table: table '"hr.people"' is not in {str(db)!r} (did you mean """
                                              "'hr.people'?)"))


def test_a_glob_the_shell_expanded_is_named_as_such(tmp_path, out_dir):
    """`lake/*.parquet` unquoted reached the command as its files: "Got
    unexpected extra argument (lake/part-00001.parquet)" (helper-42)."""
    parts = [tmp_path / f"p{i}.parquet" for i in range(3)]
    for part in parts:
        pq.write_table(pa.table({"age": list(range(20))}), part)
    r = cli("anonymize", *parts, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, "a glob the shell expanded\\? quote it")
    r = cli("anonymize", parts[0], "nothing-here", "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 2 and "the shell expanded" not in r.stderr
    last_night = out_dir / "o.parquet"  # -o forgotten before an output that exists: no glob
    pq.write_table(pa.table({"age": [1]}), last_night)
    r = cli("anonymize", parts[0], last_night, "--qi", "age", "-k", "5")
    assert r.exit_code == 2 and "the shell expanded" not in r.stderr and f"did you mean -o {last_night}?" in r.stderr
    # a glob over directories (hive partitions), as README writes one: the hint too (helper-45)
    for year in ("year=2023", "year=2024"):
        (tmp_path / "lake" / year).mkdir(parents=True)
        pq.write_table(pa.table({"age": list(range(20))}), tmp_path / "lake" / year / "p.parquet")
    r = cli("anonymize", tmp_path / "lake" / "year=2023", tmp_path / "lake" / "year=2024", "-o", out_dir / "x.parquet",
            "--qi", "age", "-k", "5")
    assert r.exit_code == 2 and "a glob the shell expanded? quote it" in r.stderr, r.stderr


def test_verify_takes_the_anonymize_job_file(tmp_path):
    """A nightly check repeated the job's QIs, sensitive columns, k and l by
    hand (verify had no --config), copies that drift from the job (helper-42).
    It checks the job's output for what the job protects; flags override."""
    (tmp_path / "jobs").mkdir()
    job = tmp_path / "jobs" / "adults.yml"
    job.write_text(f"input: {ADULTS}\noutput: ../out.parquet\nqi: [age, education-num]\nsensitive: income\n"
                   "k: 10\nl: 2\nworkers: 1\n")
    assert cli("anonymize", "--config", job).exit_code == 0
    r = cli("verify", "--config", job)
    assert r.exit_code == 0 and r.stdout.startswith("OK: 32561 rows"), (r.stdout, r.stderr)
    r = cli("verify", "--config", job, "-k", "5000")
    assert r.exit_code == 1 and r.stdout.startswith("FAILED:")
    # one class a line (20 of them made one line of 2,400 characters: helper-42)
    report = r.stdout.splitlines()
    assert len(report) == 22 and report[0].endswith("break k=5000/l=2:") and report[-1].startswith("  (and ")
    assert all(x.startswith("  age=") for x in report[1:21])
    # as many as asked, and the rows they hold, which an auditor acts on (helper-68)
    r = cli("verify", "--config", job, "-k", "5000", "--show", "3", "--json")
    doc = json.loads(r.stdout)
    assert r.exit_code == 1 and len(doc["violations"]) == 3 and doc["n_violations"] > 3
    assert doc["violating_rows"] == sum(v["__rows"] for v in sqlanon.verify(
        tmp_path / "out.parquet", qi=["age", "education-num"], k=5000, l=2, sensitive=["income"],
        show=10_000).violations)
    report = cli("verify", "--config", job, "-k", "5000", "--show", "3").stdout.splitlines()
    assert len(report) == 5 and re.fullmatch(rf"FAILED: {doc['n_violations']} class\(es\) of "
                                             rf"{doc['violating_rows']} row\(s\) break k=5000/l=2:", report[0])
    report = cli("verify", "--config", job, "-k", "5000", "--show", "0").stdout.splitlines()
    assert report[1:] == [f"  (and {doc['n_violations']} more)"], report
    no_output = tmp_path / "jobs" / "no_output.yml"  # the job passes -o on its command line (helper-45)
    no_output.write_text("qi: [age]\nk: 10\n")
    r = cli("verify", "--config", no_output)
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, re.escape(f"Missing 'TABLE_OR_FILE' (give it on the command line, or as output: "
                                              f"in {str(no_output)!r})"))
    only_k = tmp_path / "jobs" / "only_k.yml"  # all that is missing at once (helper-47)
    only_k.write_text("k: 10\n")
    r = cli("verify", "--config", only_k)
    assert_one_line_error(r.stderr, re.escape("Missing 'TABLE_OR_FILE', '--qi' (give them on the command line, or "
                                              f"as output:, qi: in {str(only_k)!r})"))
    # another job's output named on the command line: checked, not the job's table in it (helper-45)
    into_db = tmp_path / "jobs" / "into_db.yml"
    into_db.write_text("output: ../out.duckdb\ntarget_table: adults_anon\nqi: [age, education-num]\nk: 10\n")
    r = cli("verify", "--config", into_db, tmp_path / "out.parquet")
    assert r.exit_code == 0 and r.stdout.startswith("OK: 32561 rows"), (r.stdout, r.stderr)
    # ... and the job's own database output named there: the job's table in it (helper-47)
    with duckdb.connect(str(tmp_path / "out.duckdb")) as con:
        con.execute(f"CREATE TABLE adults_anon AS SELECT * FROM read_parquet('{tmp_path / 'out.parquet'}')")
    r = cli("verify", "--config", into_db, tmp_path / "out.duckdb")
    assert r.exit_code == 0 and r.stdout.startswith("OK: 32561 rows"), (r.stdout, r.stderr)
    r = cli("verify", "--config", no_output, tmp_path / "out.parquet")  # flags override the job, which gives --qi
    assert r.exit_code == 0 and r.stdout.startswith("OK: 32561 rows"), (r.stdout, r.stderr)
    # ... but never weaker: the raw input passed a check at -k 1, or of one of the job's QIs (helper-51)
    for weaker, why in ((("-k", "1"), "-k 1 is below 'k' in"), (("-l", "1"), "-l 1 is below 'l' in"),
                        (("--qi", "age"), "--qi leaves out 'education-num' of 'qi' in"),
                        (("--sensitive", "sex"), "--sensitive leaves out 'income' of 'sensitive' in")):
        r = cli("verify", "--config", job, ADULTS, *weaker)
        assert r.exit_code == 2 and why in r.stderr, (weaker, r.stderr)
    no_qi = tmp_path / "jobs" / "no_qi.yml"
    no_qi.write_text("output: ../out.parquet\nk: 10\n")
    r = cli("verify", "--config", no_qi)
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, re.escape(f"Missing '--qi' (give it on the command line, or as qi: in "
                                              f"{str(no_qi)!r})"))
    r = cli("verify", tmp_path / "out.parquet")  # nor by a job: all at once (verify --help no longer says required)
    assert_one_line_error(r.stderr, re.escape("Missing '--qi', '-k' (give them on the command line, or as qi:, k: "
                                              "in an anonymize job file given to --config)"))
    one = tmp_path / "jobs" / "k1.yml"  # a job anonymize refuses is no job to check against
    one.write_text("output: ../out.parquet\nqi: [age]\nk: 1\n")
    r = cli("verify", "--config", one)
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, re.escape(f"'k' in {str(one)!r} must be an integer >= 2, got 1"))
    r = cli("verify", "--config", one, "-k", "5")  # unless a flag overrides it (helper-47)
    assert r.exit_code == 0 and r.stdout.startswith("OK: 32561 rows"), (r.stdout, r.stderr)
    job.write_text(job.read_text() + "colour: blue\n")
    r = cli("verify", "--config", job)
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, re.escape(f"unknown key 'colour' in {str(job)!r}"))


@pytest.mark.parametrize(("args", "message"), [
    (["--qi", "age", "--sensitive", "income", "-l", "2", "--hierarchy", f"income={COUNTRIES}"],
     "--hierarchy names column 'income', which is sensitive: sensitive columns are published as they are"),
    (["--qi", "age", "--sensitive", "income", "-l", "2", "--drop", "income"], "--drop names 'income', which is a "
     "sensitive column"),
    (["--qi", "age,race", "--drop", "race"], "--drop names 'race', which is a quasi-identifier"),
    (["--qi", "age,race", "--generalization", "race=hierarchy"],
     "no hierarchy file was given: pass --hierarchy race=FILE"),
    (["--qi", "native-country", "--hierarchy", "native-country=nowhere.json"],
     "hierarchy file 'nowhere.json' not found"),
    # two columns in one flag were read as one file name (helper-201)
    (["--qi", "native-country,race", "--hierarchy", f"native-country={COUNTRIES},race=r.csv"],
     f"hierarchy file '{COUNTRIES},race=r.csv' not found; give each column its own --hierarchy COLUMN=FILE"),
])
def test_a_columns_role_is_named_in_the_error(out_dir, args, message):
    """The messages said "not a quasi-identifier" of a sensitive column, "a
    quasi-identifier or sensitive column" where they knew which, and did
    not say how to give a hierarchy (helper-42)."""
    r = cli("anonymize", ADULTS, "-o", out_dir / "o.parquet", "-k", "5", *args)
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, re.escape(message))


def test_retries_with_the_local_pool_are_said_to_do_nothing(out_dir, caplog):
    """--retries 5 with the local pool was taken and ignored (its help says
    Dask, Spark), where --scheduler with it is refused (helper-42). The
    library's warning names its argument, as its errors do (helper-60)."""
    caplog.set_level("WARNING", logger="sqlanon")
    sqlanon.anonymize(ADULTS, out_dir / "a.parquet", qi=["age"], k=10, workers=1)
    assert "retries" not in caplog.text
    sqlanon.anonymize(ADULTS, out_dir / "a0.parquet", qi=["age"], k=10, workers=1, retries=0)  # what it does
    assert "retries" not in caplog.text
    sqlanon.anonymize(ADULTS, out_dir / "b.parquet", qi=["age"], k=10, workers=1, retries=5)
    assert "retries= applies to Dask and Spark: the local pool reruns no task" in caplog.text
    r = subprocess.run([sys.executable, "-m", "sqlanon", "anonymize", str(ADULTS), "-o", str(out_dir / "c.parquet"),
                        "--qi", "age", "-k", "10", "--workers", "1", "--retries", "5"], capture_output=True, text=True)
    assert r.returncode == 0 and "Warning: --retries applies to Dask and Spark" in r.stderr
    # From a job file: its key, as the file's errors name it (helper-149).
    job = out_dir.parent / "job.yml"
    job.write_text(f"input: {ADULTS}\noutput: {out_dir / 'd.parquet'}\nqi: [age]\nk: 10\nworkers: 1\nretries: 5\n")
    r = subprocess.run([sys.executable, "-m", "sqlanon", "anonymize", "--config", str(job)], capture_output=True,
                       text=True)
    assert r.returncode == 0 and f"Warning: 'retries' in {str(job)!r} applies to Dask and Spark" in r.stderr, r.stderr


def test_the_summary_shows_a_small_gcp_as_a_number(out_dir):
    """GCP was printed to 4 decimals: 0.0000 for one QI of 73 ages at k=10,
    which reads as "nothing lost" (helper-42); and the summary says k and l were checked."""
    r = cli("anonymize", ADULTS, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "10", "--workers", "1")
    assert r.exit_code == 0, r.stderr
    gcp = float(re.search(r"GCP=([^;]+);", r.stdout).group(1))
    assert 0 < gcp < 1e-3 and "k=10 l=1 verified" in r.stdout, r.stdout


def test_interrupt_publishes_nothing(out_dir, monkeypatch):
    out = out_dir / "o.parquet"

    def interrupted(*args, **kwargs):
        assert staging_leftovers(out_dir), "expected the staging file to exist during verification"
        raise KeyboardInterrupt

    monkeypatch.setattr(sqlanon_coordinator, "verify_relation", interrupted)
    r = cli("anonymize", ADULTS, "-o", out, "--qi", "age", "-k", "10")
    assert r.exit_code == 130
    assert "Traceback" not in r.stderr
    assert snapshot(out_dir) == {}


@pytest.mark.parametrize("reading", ["group", "command"])
def test_a_ctrl_c_while_the_options_are_read_exits_130(out_dir, monkeypatch, reading):
    """Before the command's own handling, click caught it: 'Aborted!', exit
    1, which a scheduler reads as a failed run (helper-195)."""
    from sqlanon import cli as sqlanon_cli

    def interrupted(self, ctx, args):
        raise KeyboardInterrupt

    monkeypatch.setattr(sqlanon_cli._Main if reading == "group" else sqlanon_cli._Command, "parse_args", interrupted)
    r = cli("anonymize", ADULTS, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "10")
    assert (r.exit_code, r.stderr.strip()) == (130, "Interrupted; nothing was published."), r.stderr
    assert snapshot(out_dir) == {}


def test_a_ctrl_c_during_verify_says_the_check_did_not_finish(monkeypatch):
    """verify publishes nothing: 'Interrupted; nothing was published.' read
    as if it might have (helper-201)."""
    from sqlanon import api

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(api.verify, "with_flags", interrupted)
    r = cli("verify", ADULTS, "--qi", "age", "-k", "10")
    assert (r.exit_code, r.stderr.strip()) == (130, "Interrupted; the check did not finish."), r.stderr


@pytest.mark.parametrize("how", ["swallowed", "as-duckdb-reports-it"])
def test_an_interrupt_that_does_not_surface_still_publishes_nothing(out_dir, monkeypatch, how):
    """DuckDB reports a Ctrl-C during a query as RuntimeError("Query
    interrupted"), consuming the KeyboardInterrupt, and code may swallow one;
    neither may go on to publish. Both end as an interrupt: exit 130, nothing
    written. (The SIGINT is real; the query it interrupts is stood in for, as
    a real one does not always start before the signal on a busy machine.)"""
    # swallowed, e.g. by a retry loop or a clean-up that catches too much
    _ctrl_c_inside(monkeypatch, "duckdb" if how == "as-duckdb-reports-it" else "handled")
    out = out_dir / "o.parquet"
    r = cli("anonymize", ADULTS, "-o", out, "--qi", "age", "-k", "10", "--workers", "1")
    assert r.exit_code == 130, r.stderr
    assert r.stderr.strip() == "Interrupted; nothing was published."
    assert snapshot(out_dir) == {}


def _ctrl_c_at(monkeypatch, cls, method: str) -> None:
    """A real SIGINT as ``cls.method`` begins (the run then goes on into it)."""
    real = getattr(cls, method)

    def with_ctrl_c(self, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)  # the handler runs in here
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cls, method, with_ctrl_c)


def test_an_interrupt_while_publishing_lets_it_finish(out_dir, monkeypatch):
    """The swap and the metrics are one step: a Ctrl-C inside it is noted, not obeyed."""
    from sqlanon import io as sqlanon_io

    _ctrl_c_at(monkeypatch, sqlanon_io.FileTarget, "publish_with_metrics")
    out = out_dir / "o.parquet"
    r = cli("anonymize", ADULTS, "-o", out, "--qi", "age", "-k", "10", "--workers", "1")
    assert r.exit_code == 0, r.stderr
    assert "published first" in r.stderr
    assert pq.read_metadata(out).num_rows == ADULT_ROWS and (out_dir / "o__metrics.parquet").exists()


def _ctrl_c_inside(monkeypatch, how: str) -> None:
    """A real SIGINT during the run's verification, which reports it as
    ``how``: "duckdb" (RuntimeError("Query interrupted"), as DuckDB does),
    or "handled" (the KeyboardInterrupt swallowed, or a host's own handler
    that returned)."""
    real = sqlanon_coordinator.verify_relation

    def verify_with_ctrl_c(*args, **kwargs):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            if how == "duckdb":
                raise RuntimeError("Query interrupted") from None
        return real(*args, **kwargs)

    monkeypatch.setattr(sqlanon_coordinator, "verify_relation", verify_with_ctrl_c)


def test_the_library_raises_a_ctrl_c_as_keyboardinterrupt_and_forgets_it_after(out_dir, monkeypatch):
    """A library caller (a notebook, Airflow) got DuckDB's RuntimeError for a
    Ctrl-C, which an `except Exception: continue` loop carries on after; and
    the flag it left made the next call from a thread (which has no Ctrl-C
    of its own) fail with a bare KeyboardInterrupt."""
    from concurrent.futures import ThreadPoolExecutor

    _ctrl_c_inside(monkeypatch, "duckdb")
    args = dict(qi=["age"], k=10, workers=1)
    with pytest.raises(KeyboardInterrupt):
        sqlanon.anonymize(ADULTS, out_dir / "a.parquet", **args)
    assert snapshot(out_dir) == {}
    monkeypatch.undo()
    with ThreadPoolExecutor(1) as thread:
        result = thread.submit(sqlanon.anonymize, ADULTS, out_dir / "b.parquet", **args).result()
    assert result.metrics.rows == ADULT_ROWS


def test_the_library_raises_a_ctrl_c_while_publishing_once_published(out_dir, monkeypatch):
    """The CLI says the run published before it stopped; a library call
    returned as if no Ctrl-C had come."""
    from sqlanon import io as sqlanon_io

    _ctrl_c_at(monkeypatch, sqlanon_io.FileTarget, "publish_with_metrics")
    out = out_dir / "o.parquet"
    with pytest.raises(KeyboardInterrupt, match="published"):
        sqlanon.anonymize(ADULTS, out, qi=["age"], k=10, workers=1)
    assert pq.read_metadata(out).num_rows == ADULT_ROWS and (out_dir / "o__metrics.parquet").exists()


def test_a_ctrl_c_swallowed_in_the_status_of_publishing_still_publishes_nothing(out_dir):
    """The step's look for a stop comes before the caller's status callback
    is told "publishing": a Ctrl-C in the callback that something swallows
    there (a status written with a DuckDB query, which reports it as "Query
    interrupted", and an except that logs and goes on) is seen by the look
    publishing itself begins with, or the run published after it
    (helper-143)."""

    def status(text: str) -> None:
        if text == "publishing":
            try:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5)
            except KeyboardInterrupt:
                pass

    with pytest.raises(KeyboardInterrupt):
        sqlanon.anonymize(ADULTS, out_dir / "o.parquet", qi=["age"], k=10, workers=1, status=status)
    assert snapshot(out_dir) == {}


def test_a_ctrl_c_after_publishing_is_told_as_such(out_dir, monkeypatch):
    """A Ctrl-C (SIGTERM) just after the swap landed in the run's clean-up:
    "Interrupted; nothing was published.", exit 130, with the output and its
    metrics replaced; a scheduler would run the job again (helper-40)."""
    _ctrl_c_at(monkeypatch, executors.LocalExecutor, "shutdown")  # once published: in the run's clean-up
    out = out_dir / "o.parquet"
    r = cli("anonymize", ADULTS, "-o", out, "--qi", "age", "-k", "10", "--workers", "2")
    assert r.exit_code == 0, r.stderr
    assert "published first" in r.stderr and "nothing was published" not in r.stderr
    assert pq.read_metadata(out).num_rows == ADULT_ROWS and (out_dir / "o__metrics.parquet").exists()


def test_the_library_tells_a_ctrl_c_after_publishing(out_dir, monkeypatch):
    """The caller got a bare KeyboardInterrupt, as if nothing had been published (helper-40)."""
    _ctrl_c_at(monkeypatch, executors.LocalExecutor, "shutdown")  # once published: in the run's clean-up
    out = out_dir / "o.parquet"
    with pytest.raises(KeyboardInterrupt, match="published"):
        sqlanon.anonymize(ADULTS, out, qi=["age"], k=10, workers=2)
    assert pq.read_metadata(out).num_rows == ADULT_ROWS and (out_dir / "o__metrics.parquet").exists()


def test_a_callers_own_ctrl_c_handler_keeps_its_say(out_dir, monkeypatch):
    """A host whose SIGINT handler only asks its jobs to finish (a graceful
    stop) had the running call aborted all the same."""
    asked = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: asked.append(signum))
    try:
        _ctrl_c_inside(monkeypatch, "handled")
        result = sqlanon.anonymize(ADULTS, out_dir / "o.parquet", qi=["age"], k=10, workers=1)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert asked == [signal.SIGINT] and result.metrics.rows == ADULT_ROWS


def test_a_sigterm_during_a_weakref_callback_is_one_line(tmp_path):
    """A SIGTERM the main thread took while it ran a weakref callback
    (importlib's _get_module_lock cb, at the end of any lazy import) raised
    the handler's KeyboardInterrupt where it cannot propagate: Python printed
    "Exception ignored in ..." and its traceback to stderr before the run's
    "Terminated; nothing was published." (a cron mail of 7 lines; helper-120)."""
    script = tmp_path / "poke.py"
    script.write_text(textwrap.dedent("""
        import os, signal, sys, weakref
        import duckdb
        real, calls = duckdb.connect, []
        class X: pass
        def cb(_ref):
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):
                pass  # the handler runs here, inside the callback
        def connect(*a, **k):
            calls.append(1)
            if len(calls) == 2:
                x = X(); r = weakref.ref(x, cb); del x
            return real(*a, **k)
        duckdb.connect = connect
        from sqlanon.cli import entry
        sys.argv = ["sqlanon", "anonymize", *sys.argv[1:]]
        entry(prog_name="sqlanon")
    """))
    p = subprocess.run([sys.executable, script, ADULTS, "-o", tmp_path / "o.parquet", "--qi", "age", "-k", "10",
                        "--workers", "1", "-q"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 143, (p.returncode, p.stderr)
    assert p.stderr.strip() == "Terminated; nothing was published.", p.stderr
    assert not (tmp_path / "o.parquet").exists()


_PUBLISHED_FIRST = "{} once publishing had begun: the output and its metrics were published first."


def _signalled_in_exit_handlers(tmp_path, *steps: int | float) -> subprocess.CompletedProcess:
    """The sqlanon script on Adult, and in its exit handlers after the run
    published (an exit handler registered first runs last: the run's watch
    has ended), ``steps``: a signal number is sent to the process, a float
    is slept."""
    body = "".join(f"    time.sleep({x})\n" if isinstance(x, float) else f"    os.kill(os.getpid(), {int(x)})\n"
                   for x in steps)
    script = tmp_path / "late.py"
    script.write_text("import atexit, os, sys, time\ndef late():\n" + body + "atexit.register(late)\n"
                      "from sqlanon.cli import entry\nsys.argv = ['sqlanon', 'anonymize', *sys.argv[1:]]\n"
                      "entry(prog_name='sqlanon')\n")
    return subprocess.run([sys.executable, script, ADULTS, "-o", tmp_path / "o.parquet", "--qi", "age", "-k", "10",
                           "--workers", "2", "-q"], capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("steps", [(signal.SIGTERM, 0.2), (signal.SIGINT, 0.2), (signal.SIGTERM, signal.SIGTERM, 0.2)],
                         ids=["sigterm", "sigint", "sigterm-pair"])
def test_a_signal_in_the_exit_handlers_after_publishing_is_told_as_such(tmp_path, steps):
    """A SIGTERM after the command's run had published and printed "wrote …",
    while the script ran its exit handlers (the worker pool's, temporary
    files'), ended the process by it: exit 143, "nothing published" to a
    scheduler, which would run it again; a Ctrl-C there printed a traceback
    from an exit handler (helper-145). `timeout` sends its SIGTERM to the
    run and then to its process group, a few ms apart: one request, whose
    second signal ended the process all the same (helper-146)."""
    p = _signalled_in_exit_handlers(tmp_path, *steps)
    assert p.returncode == 0, (p.returncode, p.stderr)
    # told as the signal it was (a SIGTERM was "Interrupted": helper-195)
    word = "Terminated" if steps[0] == signal.SIGTERM else "Interrupted"
    assert p.stdout.startswith("wrote ") and p.stderr.strip() == _PUBLISHED_FIRST.format(word)
    assert pq.read_metadata(tmp_path / "o.parquet").num_rows == ADULT_ROWS
    assert (tmp_path / "o__metrics.parquet").exists()


def test_a_second_sigterm_ends_an_exit_stuck_after_publishing(tmp_path):
    """After a published run, a first SIGTERM in the exit handlers is only
    recorded (above); another, interrupts.AGAIN_AFTER seconds later, ends
    the process as SIGTERM does: an exit handler stuck there is not left to
    run on (its 60 s sleep would exit 0)."""
    p = _signalled_in_exit_handlers(tmp_path, signal.SIGTERM, interrupts.AGAIN_AFTER + 0.2, signal.SIGTERM, 60.0)
    assert p.returncode == -signal.SIGTERM and p.stdout.startswith("wrote "), (p.returncode, p.stderr)


def test_a_sigterm_then_a_ctrl_c_while_publishing_still_ends_the_process(tmp_path):
    """Only the last signal was kept: a Ctrl-C after a SIGTERM, both while
    publishing (which runs to its end), left a KeyboardInterrupt that the
    host survived, and the SIGTERM was lost (helper-36)."""
    p = _library_host(tmp_path, """
from sqlanon import io
real = io.FileTarget.publish_with_metrics
def publish(self, *args, **kwargs):
    for signum in (signal.SIGTERM, signal.SIGINT):
        os.kill(os.getpid(), signum)
        time.sleep(0.2)
    return real(self, *args, **kwargs)
io.FileTarget.publish_with_metrics = publish
""")
    assert p.returncode == -signal.SIGTERM and "survived" not in p.stdout, (p.returncode, p.stdout, p.stderr)
    assert pq.read_metadata(tmp_path / "o.parquet").num_rows == ADULT_ROWS  # published first


def test_a_second_sigterm_ends_a_clean_up_stuck_after_publishing(tmp_path):
    """After publishing a signal is only recorded, and the run's clean-up
    goes on; a clean-up that hung (a DuckDB target's checkpoint, a pool's
    shutdown) could then not be stopped at all: a second SIGTERM 2 s or more
    after the first ends the process, as before publishing (helper-44)."""
    t0 = time.monotonic()
    p = _library_host(tmp_path, """
import shutil
from sqlanon import coordinator
class Stuck:
    def __getattr__(self, name):
        return getattr(shutil, name)
    def rmtree(self, path, *args, **kwargs):  # the spill directory's removal, once published
        # this run's own: a dead run's, left in TMPDIR by a test that killed one, is removed at the start
        if f"sqlanon-spill-{os.getpid()}-" in str(path):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(2.5)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)
        return shutil.rmtree(path, *args, **kwargs)
coordinator.shutil = Stuck()
""")
    assert p.returncode == -signal.SIGTERM and time.monotonic() - t0 < 20, (p.returncode, p.stdout, p.stderr)
    assert pq.read_metadata(tmp_path / "o.parquet").num_rows == ADULT_ROWS  # published first


def test_a_sigterm_ends_the_wait_for_a_shared_metrics_files_lock(tmp_path):
    """Publishing defers signals, and a run waiting there for another to
    release a shared metrics file (60 s at most) stopped only at the end of
    the wait, past a scheduler's grace period; nothing is published yet
    then: it stops at once (helper-9)."""
    import fcntl

    fd = os.open(tmp_path / ".m.parquet.sqlanon-lock", os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another run appending to it
    try:
        p = subprocess.Popen([sys.executable, "-m", "sqlanon", "-v", "anonymize", ADULTS, "-o", tmp_path / "o.parquet",
                              "--qi", "age", "-k", "5", "--metrics", tmp_path / "m.parquet", "--workers", "1"],
                             stderr=subprocess.PIPE, text=True)
        for line in p.stderr:
            if "waiting for another sqlanon run" in line:
                t0 = time.monotonic()
                p.send_signal(signal.SIGTERM)
                break
        rest = p.stderr.read()
        assert p.wait(timeout=30) == 143 and time.monotonic() - t0 < 10
        assert rest.strip().splitlines()[-1] == "Terminated; nothing was published."
        assert sorted(x.name for x in tmp_path.iterdir()) == [".m.parquet.sqlanon-lock"]
    finally:
        os.close(fd)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_sigterm_ends_a_library_callers_process_once_cleaned_up(tmp_path, signum):
    """In a library call a SIGTERM (docker stop, systemd) came out as a
    KeyboardInterrupt, which a host that catches those survived: the stop
    was lost. Now the call cleans up, then the process ends by the signal,
    as it would have without sqlanon; a SIGHUP (the terminal went away)
    likewise."""
    p = _library_host(tmp_path, f"""
from sqlanon import coordinator
real = coordinator.verify_relation
def verify(*args, **kwargs):
    os.kill(os.getpid(), {int(signum)})
    time.sleep(5)
    return real(*args, **kwargs)
coordinator.verify_relation = verify
""")
    assert p.returncode == -signum and "survived" not in p.stdout, (p.returncode, p.stdout, p.stderr)
    assert sorted(f.name for f in tmp_path.iterdir()) == ["host.py"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_second_sigterm_ends_a_run_that_the_first_could_not_stop(tmp_path, signum):
    """A run stuck where a KeyboardInterrupt is never seen (a DuckDB thread
    waiting on an import lock that an interrupted import left held: the
    query's wait swallows the interrupt and goes on waiting) could not be
    stopped but by SIGKILL (helper-35): another SIGTERM (or SIGHUP) ends
    the process by the signal at once, unless it comes within 2 s of the
    first (`timeout` sends one to the run, then one to its process group:
    such a pair ended a run before it cleaned up, helper-39)."""
    p = subprocess.Popen([sys.executable, "-c", f"""
import os, signal, sys, time
import sqlanon
from sqlanon import coordinator
def stuck(*args, **kwargs):
    said = False
    while True:
        try:  # from before "stuck" is said: a signal after it is swallowed
            if not said:
                said = True
                print("stuck", flush=True)
            time.sleep(10)
        except KeyboardInterrupt:
            print("swallowed", flush=True)
coordinator.verify_relation = stuck
try:
    sqlanon.anonymize({str(ADULTS)!r}, {str(tmp_path / "o.parquet")!r}, qi=["age"], k=10, workers=1)
except KeyboardInterrupt:
    print("survived")
"""], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert _line_within(p, 60) == "stuck\n"
        p.send_signal(signum)
        p.send_signal(signum)  # as `timeout` sends it to the run and then to its group: one request
        assert _line_within(p, 30) == "swallowed\n"
        time.sleep(interrupts.AGAIN_AFTER + 0.1)
        assert p.poll() is None  # still stuck
        p.send_signal(signum)
        assert p.wait(timeout=30) == -signum
    finally:
        p.kill()
    assert "survived" not in p.stdout.read()


def _line_within(p: subprocess.Popen, seconds: float) -> str:
    """The next line of ``p``'s stdout, or a failure after ``seconds`` (no hang)."""
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(p.stdout, selectors.EVENT_READ)
        assert sel.select(timeout=seconds), f"no line within {seconds} s"
    return p.stdout.readline()


def _library_host(tmp_path, patch: str) -> subprocess.CompletedProcess:
    """A host script that applies ``patch`` (Python code, with os, signal and
    time imported), anonymizes ADULTS into ``tmp_path/o.parquet`` and, as
    hosts do, catches KeyboardInterrupt and carries on ('survived')."""
    script = tmp_path / "host.py"
    script.write_text("import os, signal, time\nimport sqlanon\n" + patch + f"""
try:
    sqlanon.anonymize({str(ADULTS)!r}, {str(tmp_path / "o.parquet")!r}, qi=["age"], k=10, workers=1)
except KeyboardInterrupt:
    print("survived")
""")
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)


# --------------------------------------------------------------------------- 5. bad input


@pytest.fixture()
def inputs(tmp_path) -> dict[str, Path]:
    d = tmp_path / "in"
    d.mkdir()
    header_only = d / "header_only.csv"
    header_only.write_text("age,sex,income\n")
    empty_parquet = d / "empty.parquet"
    pq.write_table(
        pa.table({"age": pa.array([], pa.int64()), "sex": pa.array([], pa.string()),
                  "income": pa.array([], pa.string())}),
        empty_parquet,
    )
    corrupt = d / "corrupt.parquet"
    corrupt.write_bytes(os.urandom(4096))
    odd = d / "odd.parquet"  # types that cannot be QIs or sensitive; an infinite double
    duckdb.sql(
        "COPY (SELECT i AS id, i % 5 AS x, [i, i + 1] AS lst, {'a': i} AS st, to_seconds(i % 3) AS iv, "
        f"CASE WHEN i = 0 THEN 'inf'::DOUBLE ELSE i END AS f, '\\xFF\\x01'::BLOB AS bl FROM range(40) t(i)) TO '{odd}'"
    )
    return {"header_only": header_only, "empty_parquet": empty_parquet, "corrupt": corrupt, "odd": odd}


MALFORMED_HIERARCHY_BUG = (
    "BUG: a malformed --hierarchy/--generalization value (no '=') raises click.UsageError inside "
    "handle_errors, whose catch-all turns it into 'Error: internal error (UsageError: ...)' with exit 1 "
    "instead of a usage error with exit 2"
)

# (id, args after INPUT/-o OUTPUT as a function of the inputs, input override, exit code, regexes)
ERROR_CASES = [
    ("missing-column", ["--qi", "age,no_such_col", "-k", "10"], None, 2, [r"'no_such_col'"]),
    ("missing-sensitive-column", ["--qi", "age", "-k", "10", "-l", "2", "--sensitive", "salary"], None, 2,
     [r"'salary'"]),
    ("k-below-2", ["--qi", "age", "-k", "1"], None, 2, [r"\bk\b", r"\b1\b"]),
    ("k-negative", ["--qi", "age", "-k", "-3"], None, 2, [r"\bk\b", r"-3"]),
    ("l-without-sensitive", ["--qi", "age", "-k", "10", "-l", "2"], None, 2, [r"sensitive", r"\b2\b"]),
    ("l-zero", ["--qi", "age", "-k", "10", "-l", "0"], None, 2, [r"\bl\b", r"\b0\b"]),
    ("sensitive-is-qi", ["--qi", "age,income", "-k", "10", "-l", "2", "--sensitive", "income"], None, 2,
     [r"'income'"]),
    ("qi-twice", ["--qi", "age,age", "-k", "10"], None, 2, [r"'age'"]),
    ("no-qi", ["--qi", ",", "-k", "10"], None, 2, [r"quasi-identifier|--qi"]),
    ("hierarchy-missing-value",
     ["--qi", "age,native-country", "-k", "10", "--hierarchy", f"native-country={US_STATES}"], None, 2,
     # the job's hierarchy to fix: 2, as documented
     [re.escape(str(US_STATES)), r"no leaf for value\(s\) 'Cambodia', .* \(and 36 more\)", r"native-country"]),
    # a --qi typo was blamed on the flag that named the column right: "did you mean 'agee'?" (helper-201)
    ("qi-typo-beside-generalization", ["--qi", "agee,race", "-k", "10", "--generalization", "age=interval"], None, 2,
     [r"--generalization names column 'age', which is not a quasi-identifier \(the quasi-identifiers include "
      r"'agee': is one of the two misspelt\?\)$"]),
    ("hierarchy-file-missing",
     ["--qi", "age,native-country", "-k", "10", "--hierarchy", "native-country=/no/such/dir/countries.json"],
     None, 2, [re.escape("/no/such/dir/countries.json")]),
    ("hierarchy-non-qi", ["--qi", "age", "-k", "10", "--hierarchy", f"race={COUNTRIES}"], None, 2, [r"'race'"]),
    ("unknown-generalization", ["--qi", "age", "-k", "10", "--generalization", "age=intervall"], None, 2,
     [r"'intervall'", r"did you mean 'interval'", r"'age'"]),
    ("interval-on-text", ["--qi", "race", "-k", "10", "--generalization", "race=interval"], None, 2,
     [r"'race'", r"interval"]),
    ("k-larger-than-table", ["--qi", "age", "-k", "40000"], None, 1, [r"40000", str(ADULT_ROWS)]),
    ("l-larger-than-distinct", ["--qi", "age", "-k", "10", "-l", "3", "--sensitive", "income"], None, 1,
     [r"'income'", r"l=3|\b3\b"]),
    ("empty-csv", ["--qi", "age", "-k", "2"], "header_only", 1, [r"no rows|empty"]),
    # its columns read as text: not "'interval' needs numbers", exit 2 (helper-80)
    ("empty-csv-pinned", ["--qi", "age", "-k", "2", "--generalization", "age=interval"], "header_only", 1,
     [r"has no rows"]),
    ("empty-csv-typo", ["--qi", "agee", "-k", "2"], "header_only", 2, [r"'agee'", r"did you mean 'age'"]),  # helper-85
    ("empty-parquet", ["--qi", "age", "-k", "2"], "empty_parquet", 1, [r"no rows|empty"]),
    ("corrupt-parquet", ["--qi", "age", "-k", "2"], "corrupt", 1, [r"corrupt\.parquet"]),
    ("nonexistent-input", ["--qi", "age", "-k", "2"], "/no/such/file.csv", 1, [re.escape("/no/such/file.csv")]),
    # not "is a DuckDB database: name the table with --table" (helper-24)
    ("nonexistent-duckdb", ["--qi", "age", "-k", "2"], "/no/such/file.duckdb", 1,
     [r"DuckDB file '/no/such/file.duckdb' does not exist"]),
    # not "cannot tell the format of 'lake/'"
    ("nonexistent-directory", ["--qi", "age", "-k", "2"], "/no/such/lake/", 1, [r"'/no/such/lake/' does not exist"]),
    ("unknown-input-format", ["--qi", "age", "-k", "2"], str(REPO / "pyproject.toml"), 2, [r"pyproject\.toml"]),
    ("bounds-clash", ["--qi", "age", "-k", "10", "--interval-format", "bounds"], "clash", 2, [r"'age_lo'"]),
    # DuckDB, and so Parquet, CSV and DuckDB targets, match names case-insensitively
    ("bounds-clash-case", ["--qi", "age", "-k", "10", "--interval-format", "bounds"], "clash-case", 2,
     [r"'age_hi'", r"'AGE_HI'"]),
    ("qi-list", ["--qi", "x,lst", "-k", "2"], "odd", 2, [r"'lst'", r"nested values", r"quasi-identifier"]),
    ("sensitive-struct", ["--qi", "x", "-k", "2", "-l", "2", "--sensitive", "st"], "odd", 2,
     [r"'st'", r"nested values", r"sensitive"]),
    ("qi-interval", ["--qi", "iv", "-k", "2"], "odd", 2, [r"'iv'", r"no order"]),
    ("qi-infinite", ["--qi", "f", "-k", "2"], "odd", 2, [r"'f'", r"infinite", r"--generalization f=set"]),
    ("qi-binary", ["--qi", "bl", "-k", "2"], "odd", 2, [r"'bl'", r"bytes", r"quasi-identifier"]),  # was internal
    ("k-zero", ["--qi", "age", "-k", "0"], None, 2, [r"k must be an integer >= 2, got 0"]),  # was "Missing '-k'"
    ("task-timeout-infinite", ["--qi", "age", "-k", "10", "--task-timeout", "inf"], None, 2,
     [r"--task-timeout", r"inf"]),  # was an internal OverflowError
    ("sample-infinite", ["--qi", "age", "-k", "10", "--sample", "inf"], None, 2, [r"--sample", r"inf"]),
    ("worker-memory-zero", ["--qi", "age", "-k", "10", "--worker-memory", "0GB"], None, 2,
     [r"--worker-memory must be at least 64MiB, got '0GB'"]),  # failed reading the input, exit 1
    # 2**64 overflowed the Dask scheduler's messages and shut a shared cluster's workers down (helper-12)
    ("retries-huge", ["--qi", "age", "-k", "10", "--retries", "99999999999999999999"], None, 2,
     [r"--retries must be an integer from 0 to 100, got 99999999999999999999"]),
    # click kept the last of a repeated option: -k 10 -k 5 ran with k = 5
    ("option-twice", ["--qi", "age", "-k", "10", "-k5"], None, 2, [r"option -k given twice"]),
    # inside a group of short flags: -k 10 -qk 2 published k = 2, -l 4 -vl1 l = 1 (helper-6)
    ("option-twice-in-a-group", ["--qi", "age", "-k", "10", "-qk", "2"], None, 2, [r"option -k given twice"]),
    ("option-twice-in-a-group-with-value", ["--qi", "age", "-k", "5", "--sensitive", "race", "-l", "4", "-vl1"],
     None, 2, [r"option -l given twice"]),
    ("option-twice-spelled-apart", ["--qi", "age", "-k", "10", "--output", "x.parquet"], None, 2,
     [r"options -o and --output set the same thing"]),
    # neither a fraction nor a row count: it used to plan from a 1-row sample
    ("sample-fractional-rows", ["--qi", "age", "-k", "10", "--sample", "1.5"], None, 2, [r"--sample", r"1\.5"]),
    pytest.param(
        "malformed-hierarchy", ["--qi", "age,race", "-k", "10", "--hierarchy", "race"], None, 2,
        [r"--hierarchy", r"'race'"],
        id="malformed-hierarchy",
    ),
    pytest.param(
        "malformed-generalization", ["--qi", "age", "-k", "10", "--generalization", "age"], None, 2,
        [r"--generalization", r"'age'"],
        id="malformed-generalization",
    ),
]


@pytest.mark.parametrize(
    "case_id, args, source, code, patterns",
    [pytest.param(*c, id=c[0]) if type(c) is tuple else c for c in ERROR_CASES],
)
def test_bad_input(case_id, args, source, code, patterns, inputs, out_dir, tmp_path):
    if source == "clash":
        src = tmp_path / "clash.csv"
        src.write_text("age,age_lo\n" + "".join(f"{i},{i}\n" for i in range(20)))
    elif source == "clash-case":
        src = tmp_path / "clash.csv"
        src.write_text("age,AGE_HI\n" + "".join(f"{i},{i}\n" for i in range(20)))
    elif source in inputs:
        src = inputs[source]
    else:
        src = source or ADULTS
    inputs_before = snapshot(tmp_path / "in")
    out = out_dir / "o.parquet"
    r = cli("anonymize", src, "-o", out, *args)
    assert r.exit_code == code, (r.exit_code, r.stderr)
    if case_id.startswith("malformed"):
        assert_usage_error(r.stderr, *patterns)
    else:
        assert_one_line_error(r.stderr, *patterns)
    assert r.stdout == ""
    assert not out.exists()
    assert snapshot(out_dir) == {}
    assert snapshot(tmp_path / "in") == inputs_before
    assert not staging_leftovers(tmp_path)


@pytest.mark.parametrize(
    "args, pattern",
    [
        (["--qi", "age", "-k", "abc"], r"'-k'"),
        (["--qi", "age"], r"'-k'"),
        (["-k", "10"], r"'--qi'"),
        (["--qi", "age", "-k", "10", "--interval-format", "bonds"], r"bonds"),
        (["--qi", "age", "-k", "10", "--no-such-option"], r"--no-such-option"),
        (["--qi", "age", "-k", "10", "--seed", "-1"], r"--seed"),
        (["--qi", "age", "-k", "10", "--seed", "4294967296"], r"--seed"),
    ],
    ids=["k-not-int", "k-missing", "qi-missing", "bad-interval-format", "unknown-option", "seed-negative",
         "seed-too-large"],
)
def test_click_usage_errors(out_dir, args, pattern):
    out = out_dir / "o.parquet"
    r = cli("anonymize", ADULTS, "-o", out, *args)
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert_usage_error(r.stderr, pattern)
    assert snapshot(out_dir) == {}


@pytest.mark.parametrize(("body", "pattern"), [
    ("k: 4.9", r"'k' .* must be a whole number, not 4\.9"),  # click would have run k=4
    # click's own checks of a value from the file name its key and the file, not the flag
    ("executor: dusk", r"'dusk' is not one of .* \(key 'executor' in '.*job\.yml'\)$"),
    ("seed: -1", r"-1 is not in the range .* \(key 'seed' in '.*job\.yml'\)$"),
    ("k: true", r"'k' .* must be a whole number"),
    ("workers: 1.5", r"'workers' .* whole number"),
    ("seed: 2024-01-01", r"'seed' .* whole number"),
    ("k: 10\nk: 5", r"key 'k' appears twice"),  # YAML keeps the last one
    ("[a, b]: 1", r"a key must be a name, not a list or mapping"),  # was a TypeError traceback
    ("hierarchy: {[race]: h.json}", r"a key must be a name"),
    ("interval-format: bounds\ninterval_format: text", r"'interval-format' and 'interval_format' .* same option"),
    ("o: x.parquet", r"'output' and 'o' .* same option"),
    ("sensitive:", r"'sensitive' .* column name"),  # was the column 'None'
    ("sensitive: [[income, race]]", r"'sensitive' .* column name"),
    ("overwrite: [true]", r"'overwrite' .* true or false"),
    ('table: ""', r"'table' in '.*job\.yml' is empty$"),  # it said 'a database URL needs --table' (helper-51)
    ('metrics: " "', r"'metrics' in '.*job\.yml' is empty$"),
    ("task_timeout: [1]", r"'task_timeout' .* a number"),
    ("task_timeout: 1" + "0" * 400, r"'task_timeout' .* must be a number a float can hold"),  # a traceback (helper-86)
    ("metrics: {a: 1}", r"'metrics' .* a value"),
    ("hierarchy: {race: }", r"'hierarchy' .* a path"),
    ("generalization: {age: }", r"'generalization' .* a kind"),
    ("generalization: [age]", r"'generalization' .* map columns"),
    # YAML 1.1 read these as 8 (octal), 90 (base 60), 10 and 16: numbers are decimal, as YAML 1.2 has them
    ("k: 010", r"'k' .* must be a whole number, not '010'"),
    ("k: 1:30", r"'k' .* must be a whole number, not '1:30'"),
    ("k: 1_0", r"'k' .* must be a whole number, not '1_0'"),
    ("k: 0x10", r"'k' .* must be a whole number, not '0x10'"),
    ("seed: 0b11", r"'seed' .* whole number, not '0b11'"),  # YAML 1.1's binary
    ('k: !!int "010"', r"!!int '010' is not a plain decimal number, which YAML 1\.1 and 1\.2 read alike"),  # helper-60
    ("k: !!int 0x0A", r"!!int '0x0A' is not a plain decimal number"),
    ('sample: !!float "1_000"', r"!!float '1_000' is not a plain decimal number"),
    ("sample: 1_000", r"'sample' .* must be a fraction \(0\.001\) or a row count \(50000\), not '1_000'"),
    ('sample: "1e4"', r"'sample' .* not '1e4'"),  # text, as k: "10" is refused (helper-90)
    ("on: true", r"has the key True: keys are option names"),  # YAML's boolean, as a key
    # an item left empty (a template's blank variable) was dropped unsaid: its column published raw (helper-86)
    ('drop: [workclass, ""]', r"'drop' in '.*job\.yml' has an empty column name \(item 2 of its list\)"),
    ("keep: [' ']", r"'keep' .* has an empty column name \(item 1 of its list\)"),
    ('sensitive: ["", income]', r"'sensitive' .* has an empty column name \(item 1 of its list\)"),
    ("~: x", r"has the key None: keys are option names"),
    ("k: 1", r"'k' in '.*job.yml' must be an integer >= 2, got 1"),  # named k, not the flag -k
])
def test_config_values_of_the_wrong_kind_are_usage_errors(tmp_path, out_dir, body, pattern):
    """A YAML value is checked against what its option takes, by key name:
    nothing is converted on the way (k: 4.9 used to publish k = 4), and one
    option given twice is an error, not the last value silently."""
    cfg = tmp_path / "job.yml"
    cfg.write_text(f"input: {ADULTS}\noutput: {out_dir / 'o.parquet'}\nqi: [age, race]\n"
                   + ("" if body.startswith("k:") else "k: 10\n") + body + "\n")
    r = cli("anonymize", "--config", cfg)
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert_usage_error(r.stderr, pattern)
    assert snapshot(out_dir) == {}


def test_a_jobs_output_is_verified_from_python_as_from_the_command_line(tmp_path, capfd):
    """`sqlanon verify --config job.yml` had no library counterpart: a
    scheduler's task checking a job's output read the YAML itself
    (helper-122). sqlanon.verify_job checks the job's output for its qi,
    sensitive, k and l, flags never weaker, returns the check passed or
    failed, raises what cannot be read, prints nothing."""
    (tmp_path / "jobs").mkdir()
    job = tmp_path / "jobs" / "adults.yml"
    job.write_text(f"input: {ADULTS}\noutput: ../out.parquet\nqi: [age, race]\nsensitive: income\nk: 10\nl: 2\n"
                   "workers: 1\n")
    with pytest.raises(sqlanon.InputError, match="out.parquet"):
        sqlanon.verify_job(job)  # nothing published yet
    sqlanon.run_job(job)
    check = sqlanon.verify_job(job)
    assert isinstance(check, sqlanon.Verification) and check.ok and check.rows == 32561 and check.achieved_l >= 2
    stricter = sqlanon.verify_job(job, "-k", 100_000)
    assert not stricter.ok and stricter.violations
    for args, message in [(("-k", "5"), f"-k 5 is below 'k' in {str(job)!r} (10)"),
                          (("--qi", "age"), "--qi leaves out 'race' of 'qi' in"),
                          (("--help",), "verify_job() runs a job: --help is the command line's (sqlanon verify"),
                          (("--bogus",), "No such option '--bogus'")]:
        with pytest.raises(sqlanon.ConfigError) as caught:
            sqlanon.verify_job(job, *args)
        assert message in str(caught.value), (args, str(caught.value))
    with pytest.raises(sqlanon.ConfigError, match=r"^verify_job\(\): flag 2 must be text, a path or a number"):
        sqlanon.verify_job(job, "-k", None)
    assert capfd.readouterr() == ("", "")


def test_a_job_file_runs_from_python_as_from_the_command_line(tmp_path, capfd):
    """A scheduler in Python (Airflow's PythonOperator) ran a job file only
    through a subprocess: the library had no --config (helper-51).
    sqlanon.run_job reads and checks the file as the command does, takes
    the command's flags (never weaker), returns the run and prints nothing."""
    (tmp_path / "jobs").mkdir()
    job = tmp_path / "jobs" / "adults.yml"
    job.write_text(f"input: {ADULTS}\noutput: ../out.parquet\nqi: [age, race]\nsensitive: income\nk: 10\nl: 2\n"
                   "workers: 1\n")
    plan = sqlanon.run_job(job, "--explain")
    assert plan.metrics is None and len(plan.plan.fragments) == 1 and not (tmp_path / "out.parquet").exists()
    r = sqlanon.run_job(job, "--seed", "3", "-k", "20")
    assert isinstance(r, sqlanon.RunResult) and r.metrics.rows == 32561 and r.metrics.k == 20
    assert sqlanon.verify(tmp_path / "out.parquet", qi=["age", "race"], k=20, sensitive=["income"], l=2).ok
    assert capfd.readouterr() == ("", "")
    for args, error, message in [
        (("-k", "5", "--overwrite"), sqlanon.ConfigError, f"-k 5 is below 'k' in {str(job)!r} (10)"),
        (("--qi", "age", "--overwrite"), sqlanon.ConfigError, "--qi leaves out 'race' of 'qi' in"),
        ((), sqlanon.ConfigError, "already exists; pass --overwrite"),  # the flag: run_job takes flags
        (("-l", "3", "--overwrite"), sqlanon.PrivacyError, "cannot reach l=3"),
        (("--help",), sqlanon.ConfigError, "--help is the command line's"),
        (("--bogus",), sqlanon.ConfigError, "No such option '--bogus'"),
    ]:
        with pytest.raises(error) as caught:
            sqlanon.run_job(job, *args)
        assert message in str(caught.value), (args, str(caught.value))
    # a host's own: its root logger's level after -vv, flags as numbers, its low open-file limit (helper-53)
    root = logging.getLogger()
    before = root.level, logging.getLogger("sqlanon").level
    assert sqlanon.run_job(job, "--seed", 4, "-k", 20, "--overwrite", "-vv").metrics.k == 20
    assert sqlanon.run_job(job, "-k", np.int64(21), "--overwrite").metrics.k == 21  # as the library's k= (helper-60)
    assert sqlanon.run_job(job, "--sample", np.float32(0.5), "--overwrite").metrics.k == 10  # (helper-63)
    assert (root.level, logging.getLogger("sqlanon").level) == before
    with pytest.raises(sqlanon.ConfigError, match=r"^run_job\(\): flag 2 must be text, a path or a number, not "
                                                  r"NoneType None$"):
        sqlanon.run_job(job, "--metrics", None)
    low = subprocess.run([sys.executable, "-c", "import resource, sqlanon; resource.setrlimit(resource.RLIMIT_NOFILE, "
                          f"(60, resource.getrlimit(resource.RLIMIT_NOFILE)[1])); sqlanon.run_job({str(job)!r}, "
                          "'--overwrite', '-k', 20)"], capture_output=True, text=True, timeout=300)
    assert low.returncode == 0 and low.stdout == low.stderr == "", low  # it was SystemExit(1) and a printed line
    assert capfd.readouterr() == ("", "")
    job.write_text(job.read_text() + "kk: 3\n")
    with pytest.raises(sqlanon.ConfigError, match=r"^unknown key 'kk' in '.*adults\.yml' \(did you mean 'k'\?\)$"):
        sqlanon.run_job(job)
    job.write_text(job.read_text().replace("kk: 3\n", "workers: 0\n").replace("workers: 1\n", ""))
    with pytest.raises(sqlanon.ConfigError, match=r"^'workers' in '.*adults\.yml' must be an integer from 1"):
        sqlanon.run_job(job, "--overwrite")
    assert sqlanon.verify(tmp_path / "out.parquet", qi=["age", "race"], k=20).ok  # the published run, intact


def test_empty_lists_in_a_job_file_mean_none(tmp_path, out_dir):
    """drop: [], sensitive: [], hierarchy: {} and generalization: {} were
    refused ('must name at least one column'), where the library takes
    drop=[] and the file takes drop: "": a job file made from a template
    failed (helper-51). They mean none; qi: [] is still refused."""
    base = f"input: {ADULTS}\noutput: {out_dir / 'o.parquet'}\nk: 10\noverwrite: true\n"
    cfg = tmp_path / "job.yml"
    cfg.write_text(base + "qi: [age, race]\ndrop: []\nsensitive: []\nhierarchy: {}\ngeneralization: {}\n")
    r = cli("anonymize", "--config", cfg, "--json")
    assert r.exit_code == 0, r.stderr
    cfg.write_text(base + "qi: []\n")
    r = cli("anonymize", "--config", cfg)
    assert r.exit_code == 2 and "'qi' in" in r.stderr and "must name at least one column" in r.stderr, r.stderr


def test_a_backfill_to_a_file_drops_the_jobs_tables(tmp_path, out_dir):
    """A job reading a DuckDB table, or writing one (and its metrics table),
    run with INPUT or -o a file on the command line (a backfill): the file's
    table, target_table and metrics table belong to the job's database, not
    to the file named, as verify --config takes them (helper-45). They were
    applied to it, the run refused ("--table names a table in a DuckDB
    file"; "'target_table' in 'job.yml' writes into a DuckDB file"), and no
    flag unsets them (helper-149)."""
    db = tmp_path / "hr.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE TABLE people AS SELECT * FROM read_csv('{ADULTS}')")
    base = "qi: [age, race]\nk: 10\nworkers: 1\n"
    reads = tmp_path / "reads.yml"
    reads.write_text(base + f"input: {db}\ntable: people\noutput: {out_dir / 'o.parquet'}\n")
    r = cli("anonymize", "--config", reads, ADULTS, "-o", out_dir / "back.parquet")
    assert r.exit_code == 0, r.stderr
    assert sqlanon.verify(out_dir / "back.parquet", qi=["age", "race"], k=10).ok
    writes = tmp_path / "writes.yml"
    writes.write_text(base + f"input: {ADULTS}\noutput: {db}\ntarget_table: anon\nmetrics: runs\n")
    r = cli("anonymize", "--config", writes, "-o", out_dir / "back2.parquet")
    assert r.exit_code == 0, r.stderr
    assert (out_dir / "back2.parquet").exists() and (out_dir / "back2__metrics.parquet").exists()
    # Another database keeps them; a table named on the command line is still the user's.
    r = cli("anonymize", "--config", writes, "-o", out_dir / "other.duckdb")
    assert r.exit_code == 0, r.stderr
    with duckdb.connect(str(out_dir / "other.duckdb"), read_only=True) as con:
        assert {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()} == {"anon", "runs"}
    r = cli("anonymize", "--config", reads, ADULTS, "--table", "people", "-o", out_dir / "back3.parquet")
    assert r.exit_code == 2 and "is not a DuckDB database" in r.stderr, r.stderr


def test_a_value_built_of_yaml_aliases_is_shown_shortened(tmp_path, out_dir):
    """Aliases of aliases ('billion laughs'): a 368-byte job file's error
    message was 580 MB and took 2.8 GB to build (helper-6)."""
    levels = ["&l0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"&l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]" for i in range(1, 6)]
    cfg = tmp_path / "job.yml"
    cfg.write_text(f"input: {ADULTS}\noutput: {out_dir / 'o.parquet'}\nk: 5\nqi: [[{', '.join(levels)}]]\n")
    r = cli("anonymize", "--config", cfg)
    assert r.exit_code == 2
    assert_usage_error(r.stderr, r"'qi' in '.*job.yml' must be a column name .*, not \[\[")
    assert len(r.stderr) < 500
    assert snapshot(out_dir) == {}


def test_config_file_that_is_not_utf8_is_a_usage_error(tmp_path, out_dir):
    cfg = tmp_path / "job.yml"
    cfg.write_bytes(b"input: a.csv\noutput: o\xe9.parquet\nqi: age\nk: 10\n")
    r = cli("anonymize", "--config", cfg)
    assert r.exit_code == 2
    assert_usage_error(r.stderr, r"not UTF-8")


def test_verify_reads_csv_as_text(tmp_path):
    """A CSV file is text: '1.0' and '1.00' are two published values, two
    classes (as the publishing check counts them); it used to read them as
    one number and pass a file that breaks k."""
    src = tmp_path / "v.csv"
    src.write_text("q,s\n1.0,x\n1.0,y\n1.0,x\n1.00,y\n1.00,x\n1.00,y\n")
    r = cli("verify", src, "--qi", "q", "-k", "4", "--json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["classes"] == 2 and doc["n_violations"] == 2
    assert cli("verify", src, "--qi", "q", "-k", "3", "-l", "2", "--sensitive", "s").exit_code == 0


@pytest.mark.parametrize("src_fmt", ["csv", "parquet"])
def test_a_csv_output_is_l_diverse_as_its_readers_type_it(tmp_path, src_fmt):
    """A CSV output's l was counted on its text only: '5' and '5.0' of a
    sensitive column were two values, and classes whose every row had the
    result 5 were published as 2-diverse, while DuckDB and pandas, which
    type the file, saw one value (helper-4). The run now fails; into
    Parquet (typed) the values are one and the classes merge; `verify`
    checks a CSV file both ways."""
    rows = [(1, "5"), (1, "5.0"), (2, "5"), (2, "5.0"), (3, "1"), (3, "2"), (4, "1"), (4, "2")]
    if src_fmt == "csv":
        src = tmp_path / "lab.csv"
        src.write_text("age,result\n" + "".join(f"{a},{r}\n" for a, r in rows))
    else:  # a text column, published as text
        src = tmp_path / "lab.parquet"
        pq.write_table(pa.table({"age": [a for a, _ in rows], "result": [r for _, r in rows]}), src)
    args = ["--qi", "age", "--sensitive", "result", "-k", "2", "-l", "2", "--workers", "1"]
    r = cli("anonymize", src, "-o", tmp_path / "out.csv", *args)
    assert r.exit_code == 1
    assert_one_line_error(r.stderr, r"refusing to publish '.*out.csv': read back with its types, as DuckDB and pandas "
                                    r"read a CSV file, 2 class\(es\) of \d+ row\(s\) break k=2/l=2.*'5', '05' and '5.0'")
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]
    if src_fmt == "csv":
        r = cli("anonymize", src, "-o", tmp_path / "out.parquet", *args)
        assert r.exit_code == 0, r.stderr
        assert duckdb.execute(f"SELECT count(DISTINCT age) FROM '{tmp_path / 'out.parquet'}'").fetchone() == (1,)
    published = tmp_path / "pub.csv"
    published.write_text('age,result\n"[1, 2]",5\n"[1, 2]",5.0\n"[3, 4]",1\n"[3, 4]",2\n')
    r = cli("verify", published, "--qi", "age", "--sensitive", "result", "-k", "2", "-l", "2", "--json")
    assert r.exit_code == 1 and json.loads(r.stdout)["n_violations"] == 1
    assert cli("verify", published, "--qi", "age", "--sensitive", "result", "-k", "2").exit_code == 0


def test_csv_to_csv_passes_the_text_through(tmp_path):
    """A CSV output's pass-through columns hold the text of the input, not
    DuckDB's guess of its type: 'yes', '1.00' and '1e3' used to come out as
    true, 1.0 and 1000.0 (the checksums compared typed values and could not
    tell). Into Parquet the guessed types stay."""
    hostile = 'x\'); DROP TABLE t; --'
    rows = [f"{20 + i % 7},{['yes', 'no'][i % 2]},{['1.00', '1e3', '007'][i % 3]},{['flu', '1.0', '1.00'][i % 3]}"
            for i in range(60)]
    src = tmp_path / "in.csv"
    src.write_text(f'age,smoker,"{hostile}",dx\n' + "\n".join(rows) + "\n")
    out = tmp_path / "out.csv"
    r = cli("anonymize", src, "-o", out, "--qi", "age", "--sensitive", "dx", "-k", "5", "-l", "2")
    assert r.exit_code == 0, r.stderr

    def text(path, cols):
        return sorted(duckdb.execute(
            f"SELECT {', '.join(ident(c) for c in cols)} FROM read_csv(?, all_varchar = true)", [str(path)]
        ).fetchall())

    cols = ["smoker", hostile, "dx"]
    assert text(out, cols) == text(src, cols)
    assert ("yes", "1e3", "1.0") in text(out, cols)
    r = cli("anonymize", src, "-o", tmp_path / "out.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 0, r.stderr
    assert pq.read_schema(tmp_path / "out.parquet").field("smoker").type == pa.bool_()


def test_json_output_is_strict_json(tmp_path):
    """A NaN QI value in a violation is written as a string: the bare NaN
    token is not JSON, and strict parsers refuse the whole document."""
    src = tmp_path / "n.parquet"
    pq.write_table(pa.table({"q": [1.0, 1.0, float("nan"), float("nan")]}), src)
    r = cli("verify", src, "--qi", "q", "-k", "3", "--json")
    assert r.exit_code == 1

    def refuse(token):
        raise ValueError(token)

    doc = json.loads(r.stdout, parse_constant=refuse)
    assert sorted(str(v["q"]) for v in doc["violations"]) == ["1.0", "nan"]


@pytest.mark.parametrize("which", ["header_only", "empty_parquet"])
def test_empty_input_error_names_the_file(inputs, out_dir, which):
    r = cli("anonymize", inputs[which], "-o", out_dir / "o.parquet", "--qi", "age", "-k", "2")
    assert r.exit_code == 1
    assert_one_line_error(r.stderr, re.escape(inputs[which].name))


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read a file without read permission")
def test_unreadable_input(tmp_path, out_dir):
    src = tmp_path / "secret.csv"
    shutil.copy(ADULTS, src)
    src.chmod(0)
    try:
        r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "10")
    finally:
        src.chmod(0o644)
    assert r.exit_code == 1
    assert_one_line_error(r.stderr, re.escape(str(src)))
    assert snapshot(out_dir) == {}


def test_output_directory_missing_or_bad_extension(out_dir):
    r = cli("anonymize", ADULTS, "-o", out_dir / "nope" / "o.parquet", "--qi", "age", "-k", "10")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, "nope")
    r = cli("anonymize", ADULTS, "-o", out_dir / "o.txt", "--qi", "age", "-k", "10")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"o\.txt")
    assert snapshot(out_dir) == {}


@pytest.mark.parametrize("ending", ["/.", "/./", "/..", "/./."])
def test_an_output_ending_in_a_dot_component_is_refused_up_front(tmp_path, ending):
    """'-o out/.' ran all the work, then failed to swap the directory in
    ('cannot put 'out/.' in place: Device or resource busy', exit 1), its
    metrics written; '-o .' was refused up front (exit 2), and so is it."""
    (tmp_path / "in").mkdir()
    src = tmp_path / "in" / "in.parquet"
    pq.write_table(pa.table({"id": list(range(40)), "age": [20 + i % 10 for i in range(40)]}), src)
    (tmp_path / "w").mkdir()
    out = tmp_path / "w" / "out"
    r = cli("anonymize", src, "-o", out, "--qi", "age", "-k", "4", "--workers", "1")
    assert r.exit_code == 0, r.stderr
    before = snapshot(tmp_path)
    r = cli("anonymize", src, "-o", f"{out}{ending}", "--qi", "age", "-k", "4", "--workers", "1", "--overwrite")
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert_one_line_error(r.stderr, re.escape(f"{out}{ending}"), "name the output file or directory itself")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("overwrite", [False, True], ids=["plain", "overwrite"])
@pytest.mark.parametrize("spelling", ["same", "dot-slash", "absolute", "symlink"])
def test_output_equal_to_input(tmp_path, monkeypatch, overwrite, spelling):
    d = tmp_path / "data"
    d.mkdir()
    src = d / "in.csv"
    shutil.copy(ADULTS, src)
    monkeypatch.chdir(d)
    if spelling == "symlink":
        (d / "link.csv").symlink_to(src)
    out = {"same": "in.csv", "dot-slash": "./in.csv", "absolute": str(src), "symlink": "link.csv"}[spelling]
    before = snapshot(d)
    r = cli("anonymize", "in.csv", "-o", out, "--qi", "age", "-k", "10", *(["--overwrite"] if overwrite else []))
    assert r.exit_code == 2, (r.exit_code, r.stderr)
    assert_one_line_error(r.stderr, re.escape(out))
    assert snapshot(d) == before


def test_output_equal_to_a_part_of_a_directory_input(tmp_path):
    lake = tmp_path / "lake"
    lake.mkdir()
    with duckdb.connect() as con:
        for i in range(2):
            con.execute(
                f"COPY (SELECT * FROM read_csv(?) LIMIT 500 OFFSET {500 * i}) TO '{lake / f'part-{i}.parquet'}'",
                [str(ADULTS)],
            )
    before = snapshot(lake)
    r = cli("anonymize", lake, "-o", lake / "part-0.parquet", "--qi", "age", "-k", "5", "--overwrite")
    assert r.exit_code == 2, (r.exit_code, r.stdout, r.stderr)
    assert_one_line_error(r.stderr, r"part-0\.parquet")
    assert snapshot(lake) == before


# --------------------------------------------------------------------------- 6. verify


def test_verify_non_anonymous_file(tmp_path):
    qi = "age,education-num"
    r = cli("verify", ADULTS, "--qi", qi, "-k", "10")
    assert r.exit_code == 1
    assert "Traceback" not in r.stderr
    assert r.stdout.startswith("FAILED") and r.stderr == ""  # a result, as OK is: `verify … > report.txt`
    # lists violating groups: QI values (a CSV's values are text) and their size
    assert re.search(r"age='\d+', education-num='\d+', __rows=\d", r.stdout)

    r = cli("verify", ADULTS, "--qi", qi, "-k", "10", "--json")
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["ok"] is False
    assert doc["k"] == 10 and doc["rows"] == ADULT_ROWS and doc["min_class_size"] < 10
    assert doc["violations"], "no violating group listed"
    for v in doc["violations"]:
        assert {"age", "education-num", "__rows"} <= v.keys()
        assert v["__rows"] < 10


def test_verify_quiet_prints_only_a_failure():
    """-q: a passing check prints nothing (a nightly job's log stays empty;
    the exit code tells), a failing one still lists its groups, and --json
    prints its object either way (helper-80)."""
    ok = cli("verify", ADULTS, "--qi", "race", "-k", "2", "-q")
    assert (ok.exit_code, ok.stdout, ok.stderr) == (0, "", "")
    assert json.loads(cli("verify", ADULTS, "--qi", "race", "-k", "2", "-q", "--json").stdout)["ok"] is True
    bad = cli("verify", ADULTS, "--qi", "age,education-num", "-k", "10", "--quiet")
    assert bad.exit_code == 1 and bad.stdout.startswith("FAILED") and bad.stderr == ""


def test_verify_verbose_logs_its_check():
    """-v on verify logged nothing (its help spoke of fragments and a bar);
    it now logs the check's figures, and -vv its SQL."""
    r = run_subprocess("verify", ADULTS, "--qi", "age", "-k", "2", "-v")
    assert r.returncode == 1
    assert re.search(r"INFO k=2 l=1 checked by SQL: 32561 rows in \d+ classes \(smallest 1\); 2 break it", r.stderr)
    assert "SELECT" not in r.stderr
    assert "SELECT" in run_subprocess("verify", ADULTS, "--qi", "age", "-k", "2", "-vv").stderr
    assert "fragment" not in cli("verify", "--help").stdout


def test_verify_lists_timestamptz_classes(tmp_path):
    """Listing the violating classes of a TIMESTAMPTZ QI failed ("Required
    module 'pytz' failed to import"): DuckDB hands those values to Python
    through pytz, which is not installed. They are listed as text."""
    src = tmp_path / "tz.parquet"
    duckdb.sql(f"""COPY (SELECT TIMESTAMPTZ '2020-01-01 00:00:00+00' + to_hours(i % 7) AS ts, i % 3 AS s
                   FROM range(20) t(i)) TO '{src}'""")
    r = cli("verify", src, "--qi", "ts,s", "-k", "5", "--json")
    assert r.exit_code == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["n_violations"] == 20 and {"ts": "2020-01-01 00:00:00+00", "s": 0, "__rows": 1} in doc["violations"]


def test_verify_shows_the_values_of_a_failed_check_as_they_are(tmp_path):
    """A decomposed 'Zoé' printed as the composed one beside it (two lines
    alike), nanoseconds were cut, a NULL was 'None' (helper-68)."""
    import unicodedata

    src = tmp_path / "v.parquet"
    nfd = unicodedata.normalize("NFD", "Zoé")
    pq.write_table(pa.table({"city": [nfd, "Zoé", "Zoé", None],
                             "t": pa.array([1_000_000_001, 1_000_000_002, 1_000_000_002, 5], pa.timestamp("ns"))}), src)
    r = cli("verify", src, "--qi", "city", "-k", "3")
    assert r.exit_code == 1
    assert "city='Zoe\\u0301', __rows=1" in r.stdout and "city='Zoé', __rows=2" in r.stdout, r.stdout
    assert "city=NULL, __rows=1" in r.stdout, r.stdout
    r = cli("verify", src, "--qi", "t", "-k", "3", "--json")
    assert {"t": "1970-01-01 00:00:01.000000001", "__rows": 1} in json.loads(r.stdout)["violations"], r.stdout


def test_a_password_in_an_error_chained_to_the_one_shown_is_masked_too(tmp_path, monkeypatch):
    """DuckDB's postgres extension quotes its whole connection string when a
    session it reopens fails: the one-line message was masked, the error it
    was raised from was not, and a traceback (--debug, a library host's
    log) showed the password (helper-71)."""
    import traceback

    from sqlanon import verification

    src = tmp_path / "v.parquet"
    pq.write_table(pa.table({"age": ["[20, 29]"] * 5}), src)
    secret = "Sup3r-s3cret"

    def fetch(*args, **kwargs):
        raise duckdb.IOException(f"Unable to connect to Postgres at \"host='db' user='anon' password='{secret}'\"")

    monkeypatch.setattr(verification, "_fetch", fetch)
    with pytest.raises(sqlanon.InputError) as caught:
        sqlanon.verify(src, qi=["age"], k=5)
    shown = "".join(traceback.format_exception(caught.value))
    assert "Unable to connect" in shown and "password=***" in shown and secret not in shown, shown
    r = CliRunner().invoke(main, ["verify", str(src), "--qi", "age", "-k", "5", "--debug"])
    assert r.exit_code == 1 and "Traceback" in r.stderr and "sqlanon.errors.InputError" in r.stderr
    assert "password=***" in r.stderr and secret not in r.stderr, r.stderr


def test_debug_shows_the_traceback_and_keeps_the_exit_code():
    """--debug re-raised the error: a usage error then exited 1, as a runtime
    failure, and a scheduler debugging a job retried it (helper-87). The
    traceback, then the run's own line and its exit code."""
    r = run_subprocess("anonymize", ADULTS, "-o", "never.parquet", "--qi", "nosuch", "-k", "5", "--debug")
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("Traceback") and "sqlanon.errors.ConfigError: --qi names column 'nosuch'" in r.stderr
    assert r.stderr.splitlines()[-1].startswith("Error: --qi names column 'nosuch'")


def test_verify_names_its_counts_apart_from_a_qi_so_named(tmp_path):
    """A QI named __rows lost its values to the class's size, one named
    __distinct_dx its to the count of dx (helper-68)."""
    src = tmp_path / "v.parquet"
    pq.write_table(pa.table({"__rows": ["a", "a", "b"], "__distinct_dx": ["x", "x", "y"],
                             "dx": ["flu", "flu", "hiv"]}), src)
    r = cli("verify", src, "--qi", "__rows,__distinct_dx", "-k", "2", "-l", "2", "--sensitive", "dx", "--json")
    assert r.exit_code == 1, r.stderr
    assert json.loads(r.stdout)["violations"] == [
        {"__rows": "b", "__distinct_dx": "y", "___rows": 1, "___distinct_dx": 1},
        {"__rows": "a", "__distinct_dx": "x", "___rows": 2, "___distinct_dx": 1},
    ], r.stdout


def test_verify_warns_of_a_pandas_index_beside_the_rows(tmp_path, caplog):
    """A frame sorted by the true age, written with its index: verify passed
    it without a word, while anonymize refuses it as input (helper-68)."""
    src = tmp_path / "sorted.parquet"
    frame = pd.DataFrame({"age": ["[20, 29]"] * 5, "dx": ["flu", "hiv", "flu", "cold", "hiv"]}, index=[4, 0, 3, 1, 2])
    frame.to_parquet(src)
    with caplog.at_level("WARNING", logger="sqlanon"):
        assert sqlanon.verify(src, qi=["age"], k=5, l=2, sensitive=["dx"]).ok
    assert "column '__index_level_0__' of " in caplog.text and "is the index pandas wrote" in caplog.text, caplog.text
    caplog.clear()
    frame.to_parquet(src, index=False)
    with caplog.at_level("WARNING", logger="sqlanon"):
        assert sqlanon.verify(src, qi=["age"], k=5, l=2, sensitive=["dx"]).ok
    assert "pandas" not in caplog.text


def test_verify_of_a_ragged_csv_says_where_it_breaks(tmp_path):
    """A row with one field more: verify blamed --qi (exit 2: 'names column
    'zip', which is not in …'), anonymize the file's line 3 (helper-68)."""
    src = tmp_path / "r.csv"
    src.write_text("zip,dx\n123**,flu\n123**,flu,extra\n123**,cold\n")
    r = cli("verify", src, "--qi", "zip", "-k", "2")
    assert r.exit_code == 1
    assert_one_line_error(r.stderr, r"'.*r.csv' reads as one column, 'zip,dx': DuckDB could not tell its delimiter .*"
                                    r"\(line 3 of '.*r.csv': Expected Number of Columns: 2 Found: 3\)")


def test_verify_l_diversity_failure_and_success(tmp_path):
    out = tmp_path / "k_only.parquet"
    r = cli("anonymize", ADULTS, "-o", out, "--qi", "age,education-num,race", "-k", "10")
    assert r.exit_code == 0, r.stderr
    ok = cli("verify", out, "--qi", "age,education-num,race", "-k", "10", "--json")
    assert ok.exit_code == 0 and json.loads(ok.stdout)["ok"] is True
    bad = cli("verify", out, "--qi", "age,education-num,race", "-k", "10", "-l", "2", "--sensitive", "income",
              "--json")
    assert bad.exit_code == 1
    doc = json.loads(bad.stdout)
    assert doc["ok"] is False and doc["min_distinct"]["income"] == 1
    assert all(v["__distinct_income"] < 2 for v in doc["violations"])


def test_verify_reports_true_number_of_violating_classes():
    with duckdb.connect() as con:
        n_bad, bad_rows = con.execute(
            'SELECT count(*), sum(n) FROM (SELECT count(*) AS n FROM read_csv(?) GROUP BY age, "education-num") '
            "WHERE n < 10",
            [str(ADULTS)],
        ).fetchone()
    assert n_bad > 20
    r = cli("verify", ADULTS, "--qi", "age,education-num", "-k", "10")
    assert r.exit_code == 1
    m = re.search(r"(\d+) class\(es\) of (\d+) row\(s\) break", r.stdout)
    assert m, r.stdout
    assert (int(m.group(1)), int(m.group(2))) == (n_bad, bad_rows)


@pytest.mark.parametrize(
    "args, code, pattern",
    [
        (["/no/such/file.parquet", "--qi", "age", "-k", "2"], 1, re.escape("/no/such/file.parquet")),
        (["CORRUPT", "--qi", "age", "-k", "2"], 1, r"corrupt\.parquet"),
        ([str(ADULTS), "--qi", "age", "-k", "0"], 2, r"\bk\b"),
        ([str(ADULTS), "--qi", "age", "-k", "10", "-l", "2"], 2, r"sensitive"),
    ],
    ids=["nonexistent", "corrupt", "k-zero", "l-without-sensitive"],
)
def test_verify_errors(inputs, args, code, pattern):
    args = [str(inputs["corrupt"]) if a == "CORRUPT" else a for a in args]
    r = cli("verify", *args)
    assert r.exit_code == code, (r.exit_code, r.stderr)
    assert_one_line_error(r.stderr, pattern)
    assert r.stdout == ""


def test_verify_refuses_what_it_cannot_group_as_published(tmp_path):
    """Nanosecond timestamps with a zone (and times, INT96) are read by
    DuckDB to microseconds: verify said OK for t, t+1ns, t+1ns at k = 2,
    which pandas groups as 1 and 2. A sensitive column that is a QI as
    published (age as age_lo, age_hi) is refused as a QI named sensitive
    (helper-11)."""
    t = pa.array([1_600_000_000 * 10**9, 1_600_000_000 * 10**9 + 1, 1_600_000_000 * 10**9 + 1])
    pq.write_table(pa.table({"q": t.cast(pa.timestamp("ns", "UTC"))}), tmp_path / "ns.parquet")
    with pytest.raises(ConfigError, match="'q' .* holds values finer than microseconds"):
        sqlanon.verify(tmp_path / "ns.parquet", qi=["q"], k=2)
    pq.write_table(pa.table({"age_lo": [1, 1], "age_hi": [2, 2]}), tmp_path / "b.parquet")
    with pytest.raises(sqlanon.ConfigError, match="'age_lo' cannot be both a quasi-identifier and sensitive"):
        sqlanon.verify(tmp_path / "b.parquet", qi=["age"], k=2, l=1, sensitive=["age_lo"])


def test_verify_missing_column_is_a_usage_error():
    """Exit 1 is a failed check: a misspelled column must not look like one to a CI gate."""
    r = cli("verify", ADULTS, "--qi", "age,no_such_col", "-k", "2")
    assert_one_line_error(r.stderr, r"'no_such_col'")
    assert r.exit_code == 2


def test_missing_column_of_a_wide_table_lists_some_columns():
    """A 400-column table used to list every column: a 13 KB "one line"."""
    names = [f"very_long_column_name_number_{i}" for i in range(400)]
    con = duckdb.connect()
    table = con.execute(f"SELECT {', '.join(f'1 AS {n}' for n in names)}").fetch_arrow_table()
    con.close()
    with pytest.raises(sqlanon.ConfigError) as exc:
        sqlanon.anonymize_table(table, sqlanon.build_spec(["very_long_column_name_numbr_1"], k=2))
    assert "did you mean 'very_long_column_name_number_1'" in str(exc.value)
    assert "(370 more)" in str(exc.value) and len(str(exc.value)) < 1500


# --------------------------------------------------------------------------- 7. --help


def _commands():
    yield [], main
    for name, cmd in sorted(main.commands.items()):
        yield [name], cmd


@pytest.mark.parametrize("path, cmd", list(_commands()), ids=lambda x: "-".join(x) if isinstance(x, list) else None)
def test_help_mentions_every_option(path, cmd):
    r = cli(*path, "--help")
    assert r.exit_code == 0, r.stderr
    text = r.stdout
    flat = " ".join(text.split())
    ctx = click.Context(cmd, info_name=path[-1] if path else "sqlanon", parent=click.Context(main) if path else None)
    params = cmd.get_params(ctx)
    assert params
    if path:
        assert any(isinstance(p, click.Argument) for p in params)
    for p in params:
        if isinstance(p, click.Argument):
            assert (p.metavar or p.name.upper()) in text
            continue
        assert isinstance(p, click.Option)
        assert p.opts[0] in text, f"{p.opts[0]} missing from {path} --help"
        assert p.help and p.help.strip(), f"{p.opts[0]} of {path} has no help"
        assert " ".join(p.help.split())[:30] in flat, f"help of {p.opts[0]} not shown"
        if isinstance(p.type, click.Choice):
            for choice in p.type.choices:
                assert choice in text


@pytest.mark.parametrize("path, cmd", list(_commands()), ids=lambda x: "-".join(x) if isinstance(x, list) else None)
def test_help_of_a_column_list_says_the_flag_may_be_repeated(path, cmd):
    """A repeated --qi adds its columns, as click's multiple options do; the
    help of anonymize's --qi, --sensitive and --drop says so (helper-150),
    and so must every list option's: verify's --qi and --sensitive and
    anonymize's --keep spoke of a comma-separated list only."""
    ctx = click.Context(cmd, info_name=path[-1] if path else "sqlanon", parent=click.Context(main) if path else None)
    lists = [p for p in cmd.get_params(ctx) if isinstance(p, click.Option) and p.multiple
             and "comma-separated" in (p.help or "")]
    for p in lists:
        assert re.search(r"\b[Rr]epeat", p.help), f"{p.opts[0]} of {path}: {p.help!r}"


def test_help_lists_commands():
    r = cli("--help")
    assert r.exit_code == 0
    for name in main.commands:
        assert name in r.stdout
    assert {"anonymize", "verify"} <= set(main.commands)


def test_an_error_after_a_partial_progress_bar_starts_its_own_line(monkeypatch, capsys):
    """On a terminal the bar's line stays open between fragments; an error
    printed then used to continue it ('[####] 4/8 fragmentsError: ...')."""
    from sqlanon import cli as cli_module

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    cli_module._progress(quiet=False).fragments(4, 8)

    @cli_module.handle_errors
    def failing():
        raise InputError("disk full")

    with pytest.raises(SystemExit):
        failing()
    err = capsys.readouterr().err
    assert err.endswith("4/8 fragments\nError: disk full\n"), repr(err)


def test_config_errors_are_one_line_and_keys_differ_by_case(tmp_path):
    """A bad job file is one line (no usage banner: the command line is not at
    fault), and a key that differs only by case gets its hint."""
    cfg = tmp_path / "job.yml"
    cfg.write_text("K: 10\n")
    r = run_subprocess("anonymize", "--config", cfg)
    assert r.returncode == 2
    assert r.stderr == f"Error: unknown key 'K' in {str(cfg)!r} (did you mean 'k'?)\n"


@pytest.mark.parametrize(("key", "hint"), [("k_anon", "k"), ("kanonymity", "k"), ("l-diversity", "l"),
                                         ("ldiv", "l"), ("wrokers", "workers"), ("zzz", None),
                                         ("l_", "l"), ("as_json", "json")])  # the code's names (helper-6)
def test_config_hints_k_and_l_for_their_long_names(tmp_path, key, hint):
    """difflib finds nothing close to 'k' in 'k_anon': no hint was given."""
    cfg = tmp_path / "job.yml"
    cfg.write_text(f"{key}: 10\n")
    r = cli("anonymize", "--config", cfg)
    assert r.exit_code == 2
    assert r.stderr.endswith(f"unknown key {key!r} in {str(cfg)!r}" + (f" (did you mean {hint!r}?)" if hint else "")
                             + "\n")


@pytest.mark.parametrize("key, flag", [("no_overwrite", "overwrite"), ("no-overwrite", "overwrite"),
                                       ("no_quiet", "quiet")])
def test_config_says_how_to_turn_a_flag_off(tmp_path, key, flag):
    """'no_overwrite: true' was hinted 'did you mean overwrite?', the opposite (helper-86)."""
    cfg = tmp_path / "job.yml"
    cfg.write_text(f"{key}: true\n")
    r = cli("anonymize", "--config", cfg)
    assert r.exit_code == 2
    assert r.stderr == f"Error: unknown key {key!r} in {str(cfg)!r}: write {flag}: false\n"


@pytest.mark.parametrize("key", ["debug", "config", "explain"])
def test_a_command_line_flag_in_a_job_file_is_named_as_one(tmp_path, key):
    """'debug: true' was an unknown key with no hint, while the README said every option is a key.
    'explain: true' left in a nightly job published nothing, every night, with exit 0 (helper-42)."""
    cfg = tmp_path / "job.yml"
    cfg.write_text(f"{key}: true\n")
    r = cli("anonymize", "--config", cfg)
    assert r.exit_code == 2
    assert r.stderr == f"Error: {key!r} in {str(cfg)!r} is a command-line flag only: pass --{key} instead\n"


@pytest.mark.parametrize(("line", "message"), [
    ("workers: 0", "'workers' in '{cfg}' must be an integer from 1 to 65536, got 0"),
    ("workers: 2147483648", "'workers' in '{cfg}' must be an integer from 1 to 65536, got 2147483648"),
    ("task-timeout: 0", "'task-timeout' in '{cfg}' must be a positive number of seconds"),
    ("worker_memory: lots", "'worker_memory' in '{cfg}' takes a size such as 2GB"),
    ("sample: abc", "'sample' in '{cfg}' must be a fraction \\(0.001\\) or a row count \\(50000\\), not 'abc'"),
])
def test_a_bad_value_from_a_config_file_names_its_key(tmp_path, out_dir, line, message):
    """They named the flag the user never typed (--workers must be...), and
    sample: abc pointed to --help."""
    cfg = tmp_path / "job.yml"
    cfg.write_text(f"input: {ADULTS}\noutput: {out_dir / 'o.parquet'}\nqi: age\nk: 10\n{line}\n")
    r = cli("anonymize", "--config", cfg)
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, message.format(cfg=re.escape(str(cfg))))
    flag = "--" + line.split(":")[0].replace("_", "-")
    if flag != "--sample":  # the same value as a flag still names the flag
        r = cli("anonymize", "--config", cfg, flag, line.split(": ")[1])
        assert r.exit_code == 2 and r.stderr.startswith(f"Error: {flag} "), r.stderr
    assert snapshot(out_dir) == {}


@pytest.mark.parametrize(("body", "message"), [
    # '' joined to the file's directory: the job's own directory was anonymized, exit 0
    ("input: ''\noutput: o.parquet\nqi: age\nk: 10\n", "'input' in '{cfg}' is empty"),
    ("input: {adults}\noutput: ''\nqi: age\nk: 10\n", "'output' in '{cfg}' is empty"),
    # the value, then its key (it read "'metrics' in 'job.yml'='/…/m.parquet': directory …")
    ("input: {adults}\noutput: o.parquet\nqi: age\nk: 10\nmetrics: nowhere/m.parquet\n",
     "'.*nowhere/m.parquet' \\('metrics' in '{cfg}'\\): directory '.*nowhere' does not exist"),
    ("input: {adults}\noutput: o.parquet\nqi: ''\nk: 10\n",
     "'qi' in '{cfg}' names no column: name at least one quasi-identifier"),
    ("input: {adults}\noutput: o.parquet\nqi: age\nk: 10\ngeneralization: {{age: foo}}\n",
     "'generalization' in '{cfg}' gives column 'age' the unknown kind 'foo'; choose one of"),
])
def test_a_job_files_empty_or_unknown_value_is_refused_by_its_key(tmp_path, body, message):
    """helper-29: each named the file's key only in part, or not at all."""
    cfg = tmp_path / "job.yml"
    cfg.write_text(body.format(adults=ADULTS))
    r = cli("anonymize", "--config", cfg)
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, "^Error: " + message.format(cfg=re.escape(str(cfg))))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.yml"]


def test_metrics_given_empty_names_the_option():
    r = cli("anonymize", ADULTS, "-o", "o.parquet", "--qi", "age", "-k", "10", "--metrics", "")
    assert r.exit_code == 2
    assert r.stderr == "Error: --metrics is empty: name a .parquet or .csv file, or a table of the output's database\n"


@pytest.mark.parametrize("arg", ["workers", "fragments", "retries"])
def test_the_library_takes_no_bool_for_a_count(tmp_path, arg):
    """helper-29: True is an int to Python: retries=True ran once more, and
    workers=True failed only after the statistics, naming workers for fragments."""
    with pytest.raises(sqlanon.ConfigError, match=rf"^{arg}= must be (an|a positive) integer"):
        sqlanon.anonymize(ADULTS, tmp_path / "o.parquet", qi=["age"], k=10, **{arg: True})
    assert list(tmp_path.iterdir()) == []


def test_k_and_l_on_the_command_line_may_raise_a_job_files_not_lower_them(tmp_path, out_dir):
    """helper-29: '-l 1' switched a job's l check off and '-k 2' undid its
    'k: 10', exit 0, while the README said what the job protects stays
    protected."""
    cfg = tmp_path / "job.yml"
    cfg.write_text(f"input: {ADULTS}\noutput: {out_dir / 'o.parquet'}\nqi: [age, race]\nsensitive: [income]\n"
                   "k: 10\nl: 2\n")
    for flags, message in ((["-k", "2"], "-k 2 is below 'k' in '{cfg}' \\(10\\)"),
                           (["-l", "1"], "-l 1 is below 'l' in '{cfg}' \\(2\\)")):
        r = cli("anonymize", "--config", cfg, *flags)
        assert r.exit_code == 2
        assert_one_line_error(r.stderr, "^Error: " + message.format(cfg=re.escape(str(cfg)))
                              + ": a flag may raise what the job protects, not lower it; edit the file")
    assert snapshot(out_dir) == {}
    # A value no job takes is told as such, not as below the file's (helper-30).
    for flags, message in ((["-k", "1"], "k must be an integer >= 2, got 1"),
                           (["-l", "0"], "l must be an integer >= 1, got 0")):
        r = cli("anonymize", "--config", cfg, *flags)
        assert r.exit_code == 2 and r.stderr == f"Error: {message}\n"
    r = cli("anonymize", "--config", cfg, "-k", "12", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["min_class_size"] >= 12


def test_a_job_files_column_mapping_takes_a_column_named_with_an_equals_sign(tmp_path):
    """helper-29: the file's mapping travelled as COL=VALUE text, split at the
    first '=': column 'grp=code' was read as 'grp' ("not a quasi-identifier")."""
    src = tmp_path / "in.csv"
    src.write_text("grp=code,age\n" + "".join(f"AB{i:03d},{20 + i % 30}\n" for i in range(200)))
    cfg = tmp_path / "job.yml"
    cfg.write_text(f"input: {src}\noutput: o.parquet\nqi: [age, 'grp=code']\ngeneralization: {{'grp=code': prefix}}\n"
                   "k: 5\nworkers: 1\n")
    r = cli("anonymize", "--config", cfg, "--json")
    assert r.exit_code == 0, r.stderr
    out = pq.read_table(tmp_path / "o.parquet").column("grp=code").to_pylist()
    # Every code is unique: each is published as a prefix ('AB0**'), as the mapping asks.
    assert all(re.fullmatch(r"AB\d*\*+", v) for v in out), out[:5]
    r = cli("anonymize", "--config", cfg, "--generalization", "age=set", "--overwrite", "--json")
    assert r.exit_code == 0, r.stderr
    params = json.loads(duckdb.execute("SELECT parameters FROM read_parquet(?) WHERE kind = 'total'",
                                       [str(tmp_path / "o__metrics.parquet")]).fetchall()[-1][0])
    assert params["generalization"] == {"grp=code": "prefix", "age": "set"}
    assert params["sqlanon_version"] == sqlanon.__version__  # which code published it (helper-67)


def test_keep_on_the_command_line_against_a_job_files_drop_names_the_file(tmp_path):
    """Each column is named with where it came from, the flag or the file
    (helper-29; helper-30: all went by the first column's, and a name with
    an apostrophe was never credited to the file)."""
    src = tmp_path / "in.csv"
    src.write_text("age,sex,race,workclass,o'x\n" + "".join(f"{20 + i % 9},f,a,w,{i}\n" for i in range(50)))
    cfg = tmp_path / "job.yml"
    cfg.write_text(f"input: {src}\noutput: o.parquet\nqi: [age]\nk: 5\ndrop: [workclass, \"o'x\"]\n")
    r = cli("anonymize", "--config", cfg, "--keep", "workclass")
    assert r.exit_code == 2
    assert r.stderr == f"Error: --keep and 'drop' in {str(cfg)!r} both name 'workclass'\n"
    r = cli("anonymize", "--config", cfg, "--keep", "sex,workclass", "--drop", "sex")
    assert r.stderr == (f"Error: --keep and --drop both name 'sex'; --keep and 'drop' in {str(cfg)!r} both name "
                        "'workclass'\n")
    r = cli("anonymize", "--config", cfg, "--keep", '"o\'x"')
    assert r.stderr == f"Error: --keep and 'drop' in {str(cfg)!r} both name \"o'x\"\n"
    cfg.write_text(f"input: {src}\noutput: o.parquet\nqi: [age]\nk: 5\nkeep: [sex]\n")
    r = cli("anonymize", "--config", cfg, "--drop", "race,sex", "--keep", "race")
    assert r.stderr == f"Error: 'keep' in {str(cfg)!r} and --drop both name 'sex'; --keep and --drop both name 'race'\n"
    assert not (tmp_path / "o.parquet").exists()


def test_a_bad_command_line_value_is_not_blamed_on_the_config_file(tmp_path, out_dir):
    """'--fragmentation Mondrian' beside 'fragmentation: mondrian' in the file
    was reported as the file's key (helper-43); a bad value from the file
    names the key as the file writes it."""
    cfg = tmp_path / "job.yml"
    cfg.write_text(f"input: {ADULTS}\noutput: {out_dir / 'o.parquet'}\nqi: age\nk: 10\n"
                   "fragmentation: mondrian\nseed: 1\n")
    for flag, value in (("--fragmentation", "Mondrian"), ("--seed", "-1")):
        r = cli("anonymize", "--config", cfg, flag, value)
        assert r.exit_code == 2 and "job.yml" not in r.stderr and flag in r.stderr, r.stderr
    cfg.write_text(f"input: {ADULTS}\noutput: {out_dir / 'o.parquet'}\nqi: age\nk: 10\ninterval-format: Bounds\n")
    r = cli("anonymize", "--config", cfg)
    assert r.exit_code == 2 and "(key 'interval-format' in" in r.stderr, r.stderr
    assert snapshot(out_dir) == {}


def test_config_merge_keys_work(tmp_path):
    """'<<: *defaults' failed as 'not valid YAML' (helper-43); the mapping's
    own keys override the merged ones, as YAML says."""
    out = tmp_path / "o.parquet"
    cfg = tmp_path / "job.yml"
    cfg.write_text(f"<<: {{k: 5, qi: [age], workers: 1}}\ninput: {ADULTS}\noutput: {out}\nk: 7\n")
    r = cli("anonymize", "--config", cfg, "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["k"] == 7
    # Of a list of merged mappings the first wins (a key in two of them is no repeat), as YAML says.
    cfg.write_text(f"input: {ADULTS}\noutput: {out}\nqi: [age]\n"
                   "<<: [{k: 9, workers: 1}, {k: 4, l: 1}]\noverwrite: true\n")
    r = cli("anonymize", "--config", cfg, "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["k"] == 9


@pytest.mark.parametrize("body, error", [
    ("<<: {k: 10, k: 2}", r"key 'k' appears twice"),  # published k = 2 (helper-86)
    ("<<: {k: 10}\n<<: {k: 2}", r"the merge key '<<' appears twice"),
    ("generalization: {<<: {age: interval, age: set}}", r"key 'age' appears twice"),
    ("<<: [{k: 10}, 3]", r"a merge key '<<' takes a mapping or a list of them, not a scalar"),
    ("hierarchy: &h {a: h.csv, <<: *h}", r"a merge key '<<' merges a mapping that holds it"),  # (helper-198)
    # merges of merges of aliases, tenfold a level: 6 minutes and 1.7 GB for 626 bytes (helper-86); each
    # key once, it loads at once, and the mapping is refused as what it is
    ("hierarchy: {x0: &a0 {p: 1}, " + ", ".join(
        f"x{i}: &a{i} {{<<: [{', '.join([f'*a{i - 1}'] * 10)}]}}" for i in range(1, 9)) + "}",
     None),
])
def test_config_merge_keys_are_checked_as_the_files_own_keys(tmp_path, out_dir, body, error):
    cfg = tmp_path / "job.yml"
    cfg.write_text(f"input: {ADULTS}\noutput: {out_dir / 'o.parquet'}\nqi: [age]\n{body}\n")
    started = time.monotonic()
    r = cli("anonymize", "--config", cfg)
    assert r.exit_code == 2 and time.monotonic() - started < 30
    assert_one_line_error(r.stderr, rf"'.*job\.yml' is not valid YAML: {error}" if error else
                          r"'hierarchy' in '.*job\.yml' must be a path, not \{'p': 1\}")
    assert snapshot(out_dir) == {}


def test_config_merge_keys_give_the_first_mapping_its_keys_whatever_the_yaml_version(tmp_path):
    """PyYAML 6.0.4 left a merged key out only when it was the same string
    object as one merged before, which CPython shares for one-letter names:
    k from the first mapping, workers from the last (helper-196)."""
    cfg = tmp_path / "job.yml"
    cfg.write_text(f"input: {ADULTS}\noutput: {tmp_path / 'o.parquet'}\nqi: [age]\n"
                   "<<: [{k: 9, workers: 1, fragments: 1}, {k: 4, workers: 2, fragments: 2, l: 1}]\n"
                   "sensitive: income\n")
    r = cli("anonymize", "--config", cfg, "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["k"], doc["workers"], doc["fragments"], doc["l"]) == (9, 1, 1, 1)


def test_a_config_file_overwrite_can_be_turned_off(tmp_path):
    out = tmp_path / "o.parquet"
    out.write_bytes(b"previous")
    cfg = tmp_path / "job.yml"
    cfg.write_text(f"input: {ADULTS}\noutput: {out}\nqi: age\nk: 10\noverwrite: true\n")
    r = cli("anonymize", "--config", cfg, "--no-overwrite", "--workers", "1")
    assert r.exit_code == 2 and "already exists; pass --overwrite" in r.stderr, r.stderr
    assert out.read_bytes() == b"previous"


def test_a_config_file_json_and_quiet_can_be_turned_off(tmp_path):
    """A job file's json: true and quiet: true had no flag to undo them for
    one run, as --no-overwrite undoes overwrite: true (helper-149)."""
    out = tmp_path / "o.parquet"
    cfg = tmp_path / "job.yml"
    cfg.write_text(f"input: {ADULTS}\noutput: {out}\nqi: age\nk: 10\njson: true\nquiet: true\nworkers: 1\n")
    r = cli("anonymize", "--config", cfg, "--no-json", "--no-quiet")
    assert r.exit_code == 0 and r.stdout.startswith("wrote "), r.stdout  # (progress needs a terminal)


def test_relative_sqlite_url_in_a_config_file_is_relative_to_the_file(tmp_path, monkeypatch):
    import sqlite3

    job = tmp_path / "jobs"
    job.mkdir()
    with sqlite3.connect(job / "hr.db") as c:
        c.execute("CREATE TABLE p (id INTEGER, age INTEGER)")
        c.executemany("INSERT INTO p VALUES (?, ?)", [(i, i % 40) for i in range(200)])
    (job / "job.yml").write_text("input: sqlite:///hr.db\ntable: p\noutput: o.parquet\nqi: age\nk: 5\n")
    monkeypatch.chdir(tmp_path)  # elsewhere: SQLite would create ./hr.db, and find no table
    r = cli("anonymize", "--config", job / "job.yml", "--workers", "1", "--quiet")
    assert r.exit_code == 0, r.stderr
    assert (job / "o.parquet").exists() and not (tmp_path / "hr.db").exists()
    # A read-only URI filename (uri=true) too: it was taken from the working directory (helper-60)
    (job / "ro.yml").write_text('input: "sqlite:///file:hr.db?mode=ro&uri=true"\ntable: p\noutput: r.parquet\n'
                                "qi: age\nk: 5\n")
    r = cli("anonymize", "--config", job / "ro.yml", "--workers", "1", "--quiet")
    assert r.exit_code == 0, r.stderr
    assert pq.read_table(job / "r.parquet").num_rows == 200
    # '..' after a linked directory goes where ls goes: SQLAlchemy cut 'link/..' off as text, and read a
    # decoy there (or failed as a database not there; helper-86)
    (tmp_path / "real" / "jobs").mkdir(parents=True)
    shutil.copy(job / "hr.db", tmp_path / "real" / "hr.db")
    (tmp_path / "linked").symlink_to(tmp_path / "real" / "jobs")
    with sqlite3.connect(tmp_path / "hr.db") as c:  # the decoy, where the text's '..' leads
        c.execute("CREATE TABLE p (id INTEGER, age INTEGER)")
        c.executemany("INSERT INTO p VALUES (?, ?)", [(i, i % 4) for i in range(20)])
    (tmp_path / "real" / "jobs" / "up.yml").write_text("input: sqlite:///../hr.db\ntable: p\noutput: u.parquet\n"
                                                      "qi: age\nk: 5\n")
    r = cli("anonymize", "--config", tmp_path / "linked" / "up.yml", "--workers", "1", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["rows"] == 200
    # On the command line, from the working directory, and recorded so (it was recorded relative: helper-188)
    monkeypatch.chdir(job)
    r = cli("anonymize", "sqlite:///hr.db", "--table", "p", "-o", "cli.parquet", "--qi", "age", "-k", 5, "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["input"] == f"sqlite:///{job}/hr.db table p"
    assert pq.read_table(job / "cli__metrics.parquet").column("source")[0].as_py() == f"sqlite:///{job}/hr.db table p"


def test_reader_gone_after_publishing_is_not_an_internal_error(tmp_path):
    """`sqlanon anonymize … --json | head -c0`: the run is done and published;
    the closed pipe used to end it as 'internal error (BrokenPipeError)', exit 1,
    then 141 (SIGPIPE's), which a scheduler takes for a failure: 0, silently."""
    out = tmp_path / "o.parquet"
    p = subprocess.Popen([sys.executable, "-m", "sqlanon", "anonymize", str(ADULTS), "-o", str(out), "--qi", "age",
                          "-k", "10", "--json", "--workers", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()
    err = p.stderr.read()
    assert p.wait(timeout=300) == 0 and err == ""
    assert out.exists()


def test_metrics_json_columns_are_strict_json():
    """The metrics table's JSON columns (parameters, WHERE parameters, plan)
    use the same writer as --json: a NaN cut value is the string 'nan'."""
    def refuse(token):
        raise ValueError(token)

    text = sqlanon_coordinator._json({"where_params": [float("nan"), 1.5, float("-inf")]})
    assert json.loads(text, parse_constant=refuse) == {"where_params": ["nan", 1.5, "-inf"]}


# --------------------------------------------------------------------------- lake inputs and outputs that must be refused


def _small(path: Path, **extra) -> Path:
    n = 200
    pq.write_table(pa.table({"id": list(range(n)), "age": [20 + i % 40 for i in range(n)], **extra}), path)
    return path


@pytest.mark.parametrize("header", ["id,age,age", "id,Age,age", "id,age,", "id, age,age", "id,age,\u3000AGE", "id,age, "])
def test_csv_columns_duckdb_would_rename_are_refused(tmp_path, out_dir, header):
    """DuckDB renames a repeated or empty column name (age_1, column2): the
    second age used to be published as it was, next to the generalized one.
    It names a column by its header cell trimmed of spaces (helper-15:
    ' age' and 'age' were not seen as one name, ' ' not as none)."""
    src = tmp_path / "dup.csv"
    src.write_text(header + "\n" + "".join(f"{i},{20 + i % 40},{20 + i % 40}\n" for i in range(200)))
    r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, "dup.csv", r"two columns named|has no name")
    assert snapshot(out_dir) == {}


def test_a_pipe_as_input_and_a_column_name_with_a_comma_are_named(tmp_path, out_dir):
    """A FIFO was reported as 'does not exist'; 'it has: age, Name, Full'
    showed one column named 'Name, Full' as two (helper-6)."""
    fifo = tmp_path / "in.csv"
    os.mkfifo(fifo)
    r = cli("anonymize", fifo, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 1
    assert_one_line_error(r.stderr, r"'.*in\.csv' is not a regular file")
    src = tmp_path / "c.csv"
    src.write_text('age,"Name, Full"\n' + "".join(f"{i},x{i}\n" for i in range(20)))
    r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "--drop", "Name", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"it has: 'age', 'Name, Full'")
    assert snapshot(out_dir) == {}


def test_a_column_name_with_a_comma_is_written_in_double_quotes(tmp_path, out_dir):
    """Lists of columns split at commas, so a name holding one ('Name, Full')
    could not be given at all, not even as one item of a job file's YAML list.
    It is now written as in SQL: double quotes, a quote inside doubled."""
    src = tmp_path / "c.csv"
    src.write_text('age,"Name, Full","say ""hi"", bye",zip\n' + "".join(f"{i},x{i},y{i % 3},{i % 4}\n" for i in range(40)))
    r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "--drop", "Name, Full", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, re.escape("""--drop names column 'Name', which is not in""") + ".*" +
                          re.escape("""(a name holding a comma is written in double quotes: '"Name, Full"')"""))
    r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", 'age, "say ""hi"", bye"', "-k", "5",
            "--drop", '"Name, Full" ,zip')
    assert r.exit_code == 0, r.stderr
    t = pq.read_table(out_dir / "o.parquet")
    assert t.column_names == ["age", 'say "hi", bye']
    assert t.column('say "hi", bye').type == pa.string() and t.num_rows == 40
    job = tmp_path / "job.yml"
    job.write_text('qi: [age, \'say "hi", bye\']\ndrop: ["Name, Full"]\nsensitive: zip\nk: 5\nl: 2\n')
    r = cli("anonymize", "--config", job, src, "-o", out_dir / "j.parquet")
    assert r.exit_code == 0, r.stderr
    assert pq.read_table(out_dir / "j.parquet").column_names == ["age", 'say "hi", bye', "zip"]
    r = cli("verify", out_dir / "j.parquet", "--qi", '"say ""hi"", bye",age', "--sensitive", "zip", "-k", "5", "-l", "2")
    assert r.exit_code == 0, r.stderr
    res = sqlanon.anonymize(src, out_dir / "a.parquet", qi='age,"say ""hi"", bye"', drop=["Name, Full", "zip"], k=5)
    assert res.source_rows == 40
    assert pq.read_table(out_dir / "a.parquet").column_names == ["age", 'say "hi", bye']


def test_empty_csv_file_is_named(tmp_path, out_dir):
    """A 0-byte CSV file (alone or in a directory) used to fail as "column
    'age' is not in 'e.csv'; it has: column0"."""
    (tmp_path / "lake").mkdir()
    (tmp_path / "lake" / "a.csv").write_text("age\n" + "".join(f"{i % 9}\n" for i in range(50)))
    for empty in (tmp_path / "e.csv", tmp_path / "lake" / "b.csv"):
        empty.write_bytes(b"")
    for src, name in ((tmp_path / "e.csv", "e.csv"), (tmp_path / "lake", "b.csv")):
        r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
        assert r.exit_code == 1
        assert_one_line_error(r.stderr, re.escape(name) + "' is empty: a CSV file starts with its header row")
    assert snapshot(out_dir) == {}


def test_parquet_columns_duckdb_would_rename_or_misread_are_refused(tmp_path, out_dir):
    dup = tmp_path / "dup.parquet"
    n = 200
    pq.write_table(pa.Table.from_arrays([pa.array(range(n)), pa.array([20 + i % 40 for i in range(n)]),
                                         pa.array([20 + i % 40 for i in range(n)])], names=["id", "age", "age"]), dup)
    wide = _small(tmp_path / "wide.parquet", big=pa.array([10**40] * n, pa.decimal256(45, 2)))
    # of two kinds: told as a clash of the file's types with its own (helper-23)
    cased = tmp_path / "cased.parquet"
    pq.write_table(pa.table({"age": pa.array([str(i % 40) for i in range(n)]), "Age": pa.array(range(n))}), cased)
    for src, pattern in ((dup, "two columns named 'age'"), (wide, "'big' .* DECIMAL of 45 digits"),
                         (cased, r"two columns named 'age' and 'Age' \(DuckDB's names ignore case\): rename one")):
        r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
        assert r.exit_code == 2
        assert_one_line_error(r.stderr, re.escape(src.name), pattern)
    lake = tmp_path / "lake" / "age=30"
    lake.mkdir(parents=True)
    _small(lake / "p.parquet")
    r = cli("anonymize", tmp_path / "lake", "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, "'age' .* hive partition key")
    assert snapshot(out_dir) == {}


def test_file_name_with_glob_characters_reads_that_file(tmp_path, out_dir):
    """``data[1].parquet`` used to read ``data1.parquet`` (DuckDB globs it)."""
    named = _small(tmp_path / "data[1].parquet")
    pq.write_table(pq.read_table(named).slice(0, 50), tmp_path / "data1.parquet")
    r = cli("anonymize", named, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["rows"] == 200
    # Its columns are checked in it too, not in data1.parquet.
    n = 200
    pq.write_table(pa.Table.from_arrays([pa.array(range(n)), pa.array([20 + i % 40 for i in range(n)]),
                                         pa.array([20 + i % 40 for i in range(n)])], names=["id", "age", "age"]), named)
    r = cli("anonymize", named, "-o", out_dir / "o2.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, re.escape("data[1].parquet"), "two columns named 'age'")


def test_lake_files_under_underscore_or_dot_names_are_skipped(tmp_path, out_dir):
    """As Spark, Hive and Arrow do: Spark's _temporary/ attempt files and a
    writer's hidden in-progress copy were read as more rows (each person
    two or three times: a class of k rows then held fewer than k people)."""
    lake = tmp_path / "lake"
    attempt = lake / "_temporary" / "0" / "_temporary" / "attempt_1"
    attempt.mkdir(parents=True)
    _small(lake / "part-0.parquet")
    shutil.copy(lake / "part-0.parquet", attempt / "part-0.parquet")
    shutil.copy(lake / "part-0.parquet", lake / ".part-0.parquet.inprogress.parquet")
    n = 200  # a hidden file DuckDB would misread (two 'age' columns) is not read at all
    pq.write_table(pa.Table.from_arrays([pa.array(range(n)), pa.array([20 + i % 40 for i in range(n)]),
                                         pa.array([20 + i % 40 for i in range(n)])], names=["id", "age", "age"]),
                   lake / ".hidden.parquet")
    for src in (lake, f"{lake}/**/*.parquet", f"{lake}/*.parquet"):
        r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5", "--overwrite")
        assert r.exit_code == 0, r.stderr
        assert pq.read_metadata(out_dir / "o.parquet").num_rows == n, src
    r = cli("anonymize", lake / "_temporary", "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5", "--overwrite")
    assert r.exit_code == 1
    assert_one_line_error(r.stderr, "holds no .parquet, .csv or .tsv files .names starting with _ or . are skipped")


def test_a_parquet_files_unnamed_pandas_index_is_not_published(tmp_path, out_dir):
    """pandas writes a filtered frame's index as a hidden column,
    __index_level_0__: each row's position in the input. Published, it
    undid the shuffle within classes (a file sorted by age: the index sorts
    each class's true ages; helper-47), exit 0. It is refused by name unless
    dropped (or kept on purpose)."""
    n = 400
    df = pd.DataFrame({"age": [20 + i % 40 for i in range(n)], "dx": ["flu", "cold"] * (n // 2)}).sort_values("age")
    src = tmp_path / "p.parquet"
    df[df.index % 3 > 0].to_parquet(src)
    assert "__index_level_0__" in pq.read_schema(src).names
    r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"column '__index_level_0__' of .*p.parquet' is the index pandas wrote.*drop it")
    assert snapshot(out_dir) == {}
    r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5", "--drop", "__index_level_0__")
    assert r.exit_code == 0, r.stderr
    assert pq.read_schema(out_dir / "o.parquet").names == ["age", "dx"]


@pytest.mark.parametrize("kind", ["delta", "iceberg", "hudi"])
def test_a_table_formats_directory_is_refused(tmp_path, out_dir, kind):
    """A Delta table's directory holds the files of rows deleted since (an
    erasure) and every rewritten file's old version, until VACUUM: read as
    plain Parquet it published the deleted people and everyone else twice
    (helper-48, exit 0). Iceberg and Hudi tables too."""
    table = tmp_path / "people"
    data = table / "data" if kind == "iceberg" else table
    (data / "date=2024-01-01").mkdir(parents=True)
    _small(data / "date=2024-01-01" / "part-0.parquet")
    marker = {"delta": "_delta_log/00000000000000000000.json", "iceberg": "metadata/v1.metadata.json",
              "hudi": ".hoodie/hoodie.properties"}[kind]
    (table / marker).parent.mkdir()
    (table / marker).write_text("{}")
    name = {"delta": "Delta Lake", "iceberg": "Iceberg", "hudi": "Hudi"}[kind]
    # The table as the input, inside it, or below the input (a lake of
    # tables, helper-53), by directory or glob.
    for src in (table, data / "date=2024-01-01", f"{data}/*/*.parquet", tmp_path, f"{tmp_path}/**/*.parquet",
                f"{tmp_path}/*/{'*/' if kind == 'iceberg' else ''}*/*.parquet"):
        r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
        assert r.exit_code == 2, (src, r.stderr)
        assert_one_line_error(r.stderr, rf"'.*people' is a {name} table: .* export a snapshot")
    assert snapshot(out_dir) == {}
    if kind == "iceberg":  # a directory named metadata beside a lake is no table
        shutil.rmtree(table / "data")
        _small(table / "part-0.parquet")
        r = cli("anonymize", table, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
        assert r.exit_code == 0, r.stderr


@pytest.mark.parametrize("target", ["o.csv", "o.parquet", "dir", "w.duckdb"])
def test_a_class_two_fragments_publish_is_shuffled_as_one(tmp_path, target):
    """Two fragments (DE, FR | IT, ES) both published the class 'Europe':
    each fragment's rows came as a block, the first 60 rows exactly the DE
    and FR ones, telling which side of the cut each row lies on (helper-47)."""
    h = tmp_path / "h.json"
    h.write_text(json.dumps({"cat": "*", "subcats": [
        {"cat": "Europe", "subcats": [{"cat": c} for c in ("DE", "FR", "IT", "ES")]},
        {"cat": "Asia", "subcats": [{"cat": c} for c in ("JP", "CN")]}]}))
    src = tmp_path / "eu.csv"
    rows = [(f"id-{c}-{i}", c, ("flu", "cold", "hiv")[i % 3]) for c in ("DE", "FR", "IT", "ES") for i in range(30)]
    src.write_text("pid,country,dx\n" + "".join(",".join(r) + "\n" for r in rows))
    out = tmp_path / target
    extra = ["--target-table", "t"] if target.endswith(".duckdb") else []
    r = cli("anonymize", src, "-o", out, *extra, "--qi", "country", "--hierarchy", f"country={h}", "--sensitive", "dx",
            "-k", "50", "-l", "2", "--workers", "2", "--fragments", "2", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["classes"] == 1 and json.loads(r.stdout)["fragments"] == 2
    if target.endswith(".duckdb"):
        with duckdb.connect(str(out)) as con:
            pids = [p for (p,) in con.execute("SELECT pid FROM t").fetchall()]
    elif target == "dir":
        pids = pq.read_table(out).column("pid").to_pylist()
    else:
        pids = read_any(out)["pid"].tolist()
    assert sorted(pids) == sorted(p for p, _, _ in rows)
    first_half = {p.split("-")[1] for p in pids[:60]}
    assert first_half == {"DE", "FR", "IT", "ES"}, first_half


def test_a_csv_file_read_as_one_column_says_so(tmp_path, out_dir):
    """One row with an unquoted comma near the top made DuckDB's sniffer
    give up on ',' and read the file as one column named 'id,age,dx': the
    error said column 'age' is missing, exit 2 (helper-48)."""
    src = tmp_path / "badrow.csv"
    lines = ["id,age,dx"] + [f"{i},{20 + i % 50},{('Flu', 'Cold')[i % 2]}" for i in range(3000)]
    lines[1500] = "1499,44,Smith, John"
    src.write_text("\n".join(lines) + "\n")
    r = cli("anonymize", src, "-o", out_dir / "o.csv", "--qi", "age", "-k", "5")
    assert r.exit_code == 1
    line = assert_one_line_error(r.stderr, r"'.*badrow.csv' reads as one column, 'id,age,dx': DuckDB could not tell "
                                           r"its delimiter .a row with more or fewer fields")
    # and where: the line and its cause, as the file read with the header's delimiter breaks (helper-42)
    # (not the row's text: the input's data stays out of errors and logs)
    assert line.endswith("(line 1501 of " + repr(str(src)) + ": Expected Number of Columns: 3 Found: 4)"), line
    # a header name holding another delimiter: the one that splits it into the most fields (helper-45)
    lines[0] = 'id;"age, years";dx'
    src.write_text("\n".join(line.replace(",", ";") if i else line for i, line in enumerate(lines)) + "\n")
    r = cli("anonymize", src, "-o", out_dir / "o.csv", "--qi", "age", "-k", "5")
    assert r.stderr.rstrip().endswith("(line 1501 of " + repr(str(src)) + ": Expected Number of Columns: 3 Found: "
                                      "4)"), r.stderr
    # one such file of a lake: it, and where, not the columns it lacks beside the others (helper-45)
    (tmp_path / "lake").mkdir()
    (tmp_path / "lake" / "a.csv").write_text("\n".join(lines[:1500]).replace(";", ",") + "\n")
    bad = tmp_path / "lake" / "b.csv"
    bad.write_text("\n".join(lines).replace(";", ",") + "\n")
    r = cli("anonymize", tmp_path / "lake", "-o", out_dir / "o.csv", "--qi", "age", "-k", "5")
    assert r.exit_code == 1
    line = assert_one_line_error(r.stderr, re.escape(f"{str(bad)!r} reads as one column, 'id,\"age, years\",dx'"))
    assert line.endswith(f"(line 1501 of {str(bad)!r}: Expected Number of Columns: 3 Found: 4)"), line
    assert snapshot(out_dir) == {}


@pytest.mark.parametrize("kind", ["crlf", "tsv", "multiline", "zst"])
def test_a_lakes_csv_file_that_breaks_is_named_with_its_line(tmp_path, out_dir, kind):
    """helper-47: in a lake of Windows line ends the row's text stood where
    the cause goes (line 51 of ...: 47,20001,cold,extra: ''); a .tsv lake
    whose one file the sniffer gave up on named the lake, not the file, nor
    where; after quoted values over several lines the line named was DuckDB's
    count of rows, lines above the row. (The row's text is the input's:
    never in the message.)"""
    sep, end, ext = ("\t", "\n", "tsv") if kind == "tsv" else (",", "\r\n" if kind == "crlf" else "\n", "csv")
    ext += ".zst" if kind == "zst" else ""  # the line found in the file uncompressed (helper-47)
    (tmp_path / "lake").mkdir()
    for i in range(3):
        rows = [sep.join(("age", "zip", "dx"))] + [sep.join((
            str(20 + j % 40), str(20_000 + j % 9), '"flu,\nthen cold"' if kind in ("multiline", "zst") and j < 3
            else "flu"))
            for j in range(100)]
        if i == 1:
            rows[50] = sep.join(("47", "20001", "Smith", "John"))
        data = (end.join(rows) + end).encode()
        if kind == "zst":
            with pa.CompressedOutputStream(str(tmp_path / "lake" / f"p{i}.{ext}"), "zstd") as out:
                out.write(data)
        else:
            (tmp_path / "lake" / f"p{i}.{ext}").write_bytes(data)
    bad = str(tmp_path / "lake" / f"p1.{ext}")
    r = cli("anonymize", tmp_path / "lake", "-o", out_dir / "o.parquet", "--qi", "age,zip", "-k", "5")
    assert r.exit_code == 1
    line = assert_one_line_error(r.stderr, re.escape(repr(bad)))
    at = 54 if kind in ("multiline", "zst") else 51  # three rows above it take two lines each
    assert line.endswith(f"(line {at} of {bad!r}: Expected Number of Columns: 3 Found: 4)"), line
    assert "Smith" not in r.stderr and snapshot(out_dir) == {}


@pytest.mark.parametrize("qi", ["age,city", "age"])
def test_sparks_null_partition_is_read_as_null(tmp_path, out_dir, qi):
    """Spark and Hive write a NULL partition value as the directory
    city=__HIVE_DEFAULT_PARTITION__; DuckDB reads its text, which was
    published as a city (helper-48)."""
    lake = tmp_path / "lake"
    for city in ("NYC", "__HIVE_DEFAULT_PARTITION__"):
        (lake / f"city={city}").mkdir(parents=True)
        _small(lake / f"city={city}" / "part-0.parquet")
    r = cli("anonymize", lake, "-o", out_dir / "o.parquet", "--qi", qi, "-k", "5", "--workers", "2")
    assert r.exit_code == 0, r.stderr
    cities = pq.read_table(out_dir / "o.parquet").column("city").to_pylist()
    assert len(cities) == 400 and not any("HIVE" in (c or "") for c in cities)
    assert cities.count(None) == 200 and cities.count("NYC") == 200


@pytest.mark.parametrize("key,values,out_name,qi", [
    ("year", ("2020", "2021"), "o.parquet", "age"),
    ("year", ("2020", "2021"), "o.csv", "age,year"),
    ("dt", ("2020-01-01", "2020-01-02"), "o.parquet", "age,dt"),
    ("Год", ("2019", "2020"), "o.parquet", "age"),  # a capital DuckDB does not fold (helper-25)
])
def test_a_csv_lake_with_a_typed_partition_key_is_read(tmp_path, out_dir, key, values, out_name, qi):
    """A CSV lake's key DuckDB types as an integer or a date (year=2020/,
    dt=2020-01-01/) stayed typed in the checks on the files' text, which
    read with all_varchar: 'trim(BIGINT)' failed the run (exit 1) into
    Parquet, or with the key as a QI. The key is read as its directory
    names' text there, and published with its values."""
    lake = tmp_path / "lake"
    for v in values:
        (lake / f"{key}={v}").mkdir(parents=True)
        (lake / f"{key}={v}" / "part-0.csv").write_text(
            "id,age,dx\n" + "".join(f"{i},{20 + i % 10},{'ab'[i % 2]}\n" for i in range(20)))
    out = out_dir / out_name
    r = cli("anonymize", lake, "-o", out, "--qi", qi, "-k", "4", "--sensitive", "dx", "-l", "2",
            "--workers", "1", "--interval-format", "bounds")
    assert r.exit_code == 0, r.stderr
    t = read_arrow(out)
    assert t.num_rows == 40
    if key in qi.split(","):
        lo, hi = (t.column(f"{key}_{end}").to_pylist() for end in ("lo", "hi"))
        assert all(str(a) in values and str(b) in values and str(a) <= str(b) for a, b in zip(lo, hi))
    else:
        assert sorted(map(str, t.column(key).to_pylist())) == sorted(v for v in values for _ in range(20))
    assert sqlanon.verify(out, qi=[c for c in t.column_names if c.split("_")[0] in qi.split(",")],
                          k=4, l=2, sensitive=["dx"]).ok


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_null_partition_keeps_the_keys_type(tmp_path, out_dir, fmt):
    """year=__HIVE_DEFAULT_PARTITION__ beside year=2019 made DuckDB read the
    key as text: a year QI was generalized as a set of strings, not as
    intervals (helper-53). It keeps the type its values give it."""
    lake = tmp_path / "lake"
    for i, year in enumerate(("2019", "2020", "__HIVE_DEFAULT_PARTITION__")):
        (lake / f"year={year}").mkdir(parents=True)
        t = pa.table({"id": list(range(i * 100, i * 100 + 100)), "age": [20 + j % 40 for j in range(100)]})
        if fmt == "parquet":
            pq.write_table(t, lake / f"year={year}" / "part-0.parquet")
        else:
            pa.csv.write_csv(t, lake / f"year={year}" / "part-0.csv")
    out = out_dir / "o.parquet"
    r = cli("anonymize", lake, "-o", out, "--qi", "year,age", "-k", "5", "--interval-format", "bounds")
    assert r.exit_code == 0, r.stderr
    t = pq.read_table(out)
    assert pa.types.is_integer(t.schema.field("year_lo").type), t.schema
    years = sorted(zip(t.column("year_lo").to_pylist(), t.column("year_hi").to_pylist()), key=str)
    assert years.count((None, None)) == 100 and {y for y in years if y != (None, None)} <= {
        (2019, 2019), (2020, 2020), (2019, 2020)}


def test_a_csv_lake_key_finer_than_microseconds_names_its_directories(tmp_path, out_dir):
    """A key dt=2020-01-01 10:00:00.1234567 is read cut to microseconds and
    refused; the refusal told to 'convert the file with that column typed',
    but the values are directory names (helper-3)."""
    lake = tmp_path / "lake"
    for d in ("2020-01-01 10:00:00.1234567", "2020-01-02 10:00:00"):
        (lake / f"dt={d}").mkdir(parents=True)
        (lake / f"dt={d}" / "p.csv").write_text("id,age\n" + "".join(f"{i},{20 + i % 10}\n" for i in range(20)))
    r = cli("anonymize", lake, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "4", "--workers", "1")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"partition key 'dt' of '.*lake' holds, in its directory names, times finer "
                                    r"than microseconds.*: rename those directories, or drop the key \(--drop\)")
    assert snapshot(out_dir) == {}
    r = cli("anonymize", lake, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "4", "--workers", "1", "--drop", "dt")
    assert r.exit_code == 0, r.stderr


def test_a_lake_whose_files_have_other_partition_keys_is_refused_by_name(tmp_path, out_dir):
    """A new night's day=…/region=eu/ beside day=…/ failed the run with
    DuckDB's raw 'Hive partition mismatch', exit 1 (helper-67): the lake's
    layout, which a retry meets again. Keys in another order are one layout."""
    lake = tmp_path / "lake"
    for d in ("day=1", "day=2/region=eu"):
        (lake / d).mkdir(parents=True)
        _small(lake / d / "p.parquet")
    for src in (lake, lake / "**" / "*.parquet"):
        r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
        assert r.exit_code == 2
        assert_one_line_error(r.stderr, r"the files of '.*lake' are partitioned by different keys "
                                        r"\('.*day=1/p.parquet' by day, '.*day=2/region=eu/p.parquet' by day, region\)")
    assert snapshot(out_dir) == {}
    (lake / "day=1").rename(lake / "region=us")
    (lake / "region=us" / "p.parquet").rename(lake / "region=us" / "x")
    (lake / "region=us" / "day=1").mkdir()
    (lake / "region=us" / "x").rename(lake / "region=us" / "day=1" / "p.parquet")
    r = cli("anonymize", lake, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 0, r.stderr
    assert set(pq.read_table(out_dir / "o.parquet").column("region").to_pylist()) == {"us", "eu"}
    (lake / "=x").mkdir()  # no key, as DuckDB reads it (helper-69: refused as a key '')
    (lake / "region=us").rename(lake / "=x" / "region=us")
    r = cli("anonymize", lake, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5", "--overwrite")
    assert r.exit_code == 0, r.stderr


@pytest.mark.parametrize("how", ["directory", "glob"])
def test_a_key_value_directory_above_a_hive_lake_is_refused(tmp_path, out_dir, how):
    """DuckDB reads every key=value directory of a file's absolute path as
    a partition: a lake under /data/site=berlin/ had its files' own 'site'
    column published as 'berlin' in every row, exit 0, the check of the
    pass-through columns reading the input the same way (helper-2). Read
    through a path without '=' (a link), the lake publishes its own values."""
    lake = tmp_path / "site=berlin" / "lake"
    (lake / "year=2020").mkdir(parents=True)
    _small(lake / "year=2020" / "part-0.parquet", site=[f"clinic{i % 4}" for i in range(200)])
    src = lake if how == "directory" else lake / "*" / "*.parquet"
    r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"cannot read '.*lake' as a hive-partitioned lake: DuckDB would read its "
                                    r"directory 'site=berlin' as a partition too")
    assert snapshot(out_dir) == {}
    link = tmp_path / "berlin"
    link.symlink_to(lake)
    src = link if how == "directory" else link / "*" / "*.parquet"
    r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 0, r.stderr
    t = pq.read_table(out_dir / "o.parquet")
    assert sorted(t.column("site").to_pylist()) == sorted(f"clinic{i % 4}" for i in range(200))
    assert set(t.column("year").to_pylist()) == {2020}


def test_a_file_name_that_is_not_utf8_is_named(tmp_path, out_dir):
    """DuckDB takes UTF-8 paths only: a lake file named in Latin-1 failed as
    an 'internal error (RuntimeError: Unable to cast Python instance…)', an
    output so named only after every fragment (helper-50)."""
    lake = tmp_path / "lake"
    lake.mkdir()
    _small(lake / "a.parquet")
    latin = os.fsdecode(bytes(lake) + b"/pok\xe9r.parquet")
    shutil.copy(lake / "a.parquet", latin)
    for args in ([lake, "-o", out_dir / "o.parquet"], [lake / "a.parquet", "-o", os.fsdecode(bytes(out_dir) + b"/o\xe9.parquet")]):
        if args[0] == lake / "a.parquet":
            os.unlink(latin)
        r = cli("anonymize", *args, "--qi", "age", "-k", "5")
        assert r.exit_code == 1, r.stderr
        assert_one_line_error(r.stderr, r"cannot use (input file|output) '.*\\udce9.*': its name is not valid UTF-8")
    assert snapshot(out_dir) == {}
    # A metrics file so named, a temporary directory so named: an internal
    # error after all the work (helper-53).
    latin_tmp = os.fsdecode(bytes(tmp_path) + b"/t\xe9")
    os.mkdir(latin_tmp)
    for args, env, what in (
        (["--metrics", os.fsdecode(bytes(out_dir) + b"/m\xe9.parquet")], {}, "metrics file"),
        ([], {"TMPDIR": latin_tmp}, r"the temporary directory \(TMPDIR\)"),
    ):
        p = subprocess.run([sys.executable, "-m", "sqlanon.cli", "anonymize", str(lake / "a.parquet"), "-o",
                            str(out_dir / "o.parquet"), "--qi", "age", "-k", "5", *args], capture_output=True,
                           env={**os.environ, **env})
        assert p.returncode == 1, p.stderr
        assert_one_line_error(p.stderr.decode(), rf"cannot use {what} '.*\\udce9.*': its name is not valid UTF-8")
        assert snapshot(out_dir) == {}


def test_a_compressed_csv_file_duckdb_would_not_read_is_named(tmp_path, out_dir):
    """DuckDB tells .gz by its lower-case suffix: a directory's day2.CSV.GZ
    was left out without a word, half the data published (helper-48)."""
    lake = tmp_path / "up"
    lake.mkdir()
    rows = "".join(f"{i},{20 + i % 40}\n" for i in range(200))
    (lake / "day1.csv").write_text("id,age\n" + rows)
    (lake / "day2.CSV.GZ").write_bytes(gzip.compress(("id,age\n" + rows).encode()))
    r = cli("anonymize", lake, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 2  # as a .csv.bz2 named directly: the layout's fault, a retry fails alike (helper-64)
    assert_one_line_error(r.stderr, r"'.*day2.CSV.GZ' would not be read: .* lower-case suffix")
    assert snapshot(out_dir) == {}
    (lake / "day2.CSV.GZ").rename(lake / "day2.csv.gz")
    r = cli("anonymize", lake, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 0, r.stderr
    assert pq.read_metadata(out_dir / "o.parquet").num_rows == 400
    # Nor does it read .bz2 or .xz: those were left out without a word too (helper-53).
    for suffix, compress in ((".csv.bz2", bz2.compress), (".csv.xz", lzma.compress)):
        (lake / f"day3{suffix}").write_bytes(compress(("id,age\n" + rows).encode()))
        r = cli("anonymize", lake, "-o", out_dir / "p.parquet", "--qi", "age", "-k", "5")
        assert r.exit_code == 2
        assert_one_line_error(r.stderr, rf"'.*day3{re.escape(suffix)}' would not be read: DuckDB reads compressed "
                                        r"CSV files as .gz or .zst only; decompress it")
        (lake / f"day3{suffix}").unlink()
    assert not (out_dir / "p.parquet").exists()


def test_a_parquet_file_not_named_so_in_a_directory_is_refused_by_anonymize_and_verify(tmp_path, out_dir):
    """Hive names its files 000000_0 and Impala *.parq, which every reader of
    the directory reads: sqlanon left them out without a word, so a verify
    of such a published directory passed a class of one (helper-181), and
    an input directory's rows were lost. Other files are still not data."""
    lake = tmp_path / "pub"
    lake.mkdir()
    pq.write_table(pa.table({"age": ["[20, 30)"] * 3}), lake / "part-0.parquet")
    (lake / "README").write_text("published nightly")
    assert cli("verify", lake, "--qi", "age", "-k", "3").exit_code == 0
    for name in ("000000_0", "x.parq"):
        pq.write_table(pa.table({"age": ["[30, 40)"]}), lake / name)
        for args in (["verify", lake], ["anonymize", lake, "-o", out_dir / "o.parquet"]):
            r = cli(*args, "--qi", "age", "-k", "3")
            assert r.exit_code == 2, r.stderr
            assert_one_line_error(r.stderr, rf"'.*{re.escape(name)}' is a Parquet file whose name does not end in "
                                            r"\.parquet, which sqlanon would not read: rename it \(\.parquet\), "
                                            r"or move it out of the input")
        (lake / name).unlink()
    assert snapshot(out_dir) == {}


def test_workers_do_not_import_from_the_working_directory(tmp_path, out_dir):
    """The local pool's fork server is a `python -c` interpreter, whose path
    starts with the working directory: a pandas.py where a run started ran
    in every worker, exit 0 (helper-24). Workers import what the CLI does,
    from a source tree too (python -m, where the tree is the CLI's path)."""
    src = _small(tmp_path / "src.parquet")
    here = tmp_path / "here"
    here.mkdir()
    marker = tmp_path / "MARKER"
    for name in ("pandas.py", "numpy.py", "duckdb.py"):
        (here / name).write_text(f"open({str(marker)!r}, 'a').write(__name__ + ' ran\\n')\nraise ImportError\n")
    r = subprocess.run([*console_script(), "anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5",
                        "--workers", "2", "--fragments", "2"], capture_output=True, text=True, timeout=600, cwd=here)
    assert r.returncode == 0 and not marker.exists(), (r.stderr, marker.exists() and marker.read_text())
    r = subprocess.run([sys.executable, "-m", "sqlanon", "anonymize", src, "-o", out_dir / "p.parquet", "--qi",
                        "age", "-k", "5", "--workers", "2", "--fragments", "2", "--json"], capture_output=True,
                       text=True, timeout=600, cwd=REPO, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert r.returncode == 0 and json.loads(r.stdout)["workers"] == 2, r.stderr


@pytest.mark.parametrize("link", ["directory", "file", "hard", "loop"])
def test_a_lake_file_reached_by_two_paths_is_refused(tmp_path, out_dir, link):
    """A 'latest' symlink to a day's directory, a file symlink or a hard
    link made the same file two inputs: every person twice, so a class of
    k rows held k/2 people (helper-48: each class one person, exit 0); a
    symlink loop read it 41 times."""
    lake = tmp_path / "lake"
    day = lake / "2024-01-01"
    day.mkdir(parents=True)
    _small(day / "part-0.parquet")
    if link == "directory":
        (lake / "latest").symlink_to("2024-01-01")
    elif link == "file":
        (lake / "current.parquet").symlink_to(day / "part-0.parquet")
    elif link == "hard":
        os.link(day / "part-0.parquet", lake / "copy.parquet")
    else:
        (day / "loop").symlink_to("..")
    for src in (lake, f"{lake}/**/*.parquet"):
        r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
        assert r.exit_code == 2, r.stderr  # the lake's layout: a retry fails alike
        assert_one_line_error(r.stderr, r"'.*part-0.parquet' and '.*' are one file .a link.: its rows would be read twice")
    assert snapshot(out_dir) == {}


def _refused_as_directory_and_glob(lake: Path, fmt: str, out_dir: Path, qi: str, error: str, code: int) -> None:
    """A run on ``lake``, named as its directory and as a glob of its files,
    fails with exit ``code`` and the one line ``error``, writing nothing."""
    for src in (lake, f"{lake}/*.{fmt}"):
        r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", qi, "-k", "5")
        assert r.exit_code == code, r.stderr
        assert_one_line_error(r.stderr, error)
    assert snapshot(out_dir) == {}


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_lake_file_behind_a_broken_link_is_refused(tmp_path, out_dir, fmt):
    """A data file's symlink whose target is gone (a day moved to cold
    storage) was skipped as DuckDB's glob skips it: that day's rows were
    left out of the output, exit 0 (helper-17)."""
    lake = tmp_path / "lake"
    lake.mkdir()
    df = pd.DataFrame({"age": [20 + i % 40 for i in range(200)]})
    df.to_parquet(lake / "day1.parquet") if fmt == "parquet" else df.to_csv(lake / "day1.csv", index=False)
    (lake / f"day2.{fmt}").symlink_to(tmp_path / f"archive/day2.{fmt}")
    (lake / "_old").mkdir()
    (lake / "_old" / f"day0.{fmt}").symlink_to(tmp_path / "gone")  # hidden, as its files are: not read
    (lake / "NOTES.md").symlink_to(tmp_path / "gone.md")  # no data
    _refused_as_directory_and_glob(lake, fmt, out_dir, "age", rf"'.*day2.{fmt}' is a link to '.*archive/day2.{fmt}', "
                                                              r"which does not exist: its rows would not be read", 1)
    (lake / f"day2.{fmt}").unlink()
    # a partition directory moved away: its rows were left out too (helper-25)
    (lake / "year=2020").symlink_to(tmp_path / "cold" / "year=2020")
    r = cli("anonymize", lake, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 1
    assert_one_line_error(r.stderr, r"'.*year=2020' is a link to '.*cold/year=2020', which does not exist")
    (lake / "year=2020").unlink()
    r = cli("anonymize", lake, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 0, r.stderr


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_lake_files_with_different_columns_are_refused(tmp_path, out_dir, fmt):
    """DuckDB unions a lake's files by name: a QI renamed in a new file
    (sex -> gender) read as NULL there and its new name, like a column only
    one file has (ssn), was published raw, exit 0."""
    lake = tmp_path / "lake"
    lake.mkdir()
    day1 = pd.DataFrame({"age": [20 + i % 40 for i in range(200)], "sex": ["F", "M"] * 100})
    day2 = day1.rename(columns={"sex": "gender"}).assign(ssn=[f"SSN-{i}" for i in range(200)])
    for name, df in (("day1", day1), ("day2", day2)):
        df.to_parquet(lake / f"{name}.parquet") if fmt == "parquet" else df.to_csv(lake / f"{name}.csv", index=False)
    _refused_as_directory_and_glob(lake, fmt, out_dir, "age,sex", rf"day2.{fmt}' does not have the columns of "
                                   rf".*day1.{fmt}' \(it has 'gender', 'ssn'; it lacks 'sex'\)", 2)
    day2.rename(columns={"gender": "SEX"}).drop(columns="ssn").to_parquet(lake / "day2.parquet") if fmt == "parquet" \
        else day2.rename(columns={"gender": "SEX"}).drop(columns="ssn").to_csv(lake / "day2.csv", index=False)
    r = cli("anonymize", lake, "-o", out_dir / "o.parquet", "--qi", "age,sex", "-k", "5")
    assert r.exit_code == 0, r.stderr  # names match as DuckDB matches them: ignoring case


@pytest.mark.parametrize("ext", ["csv", "parquet"])
def test_csv_lake_partitioned_by_a_number(tmp_path, ext):
    """A CSV lake under year=2019/ crashed the column check (the key's value
    2019 came back as a header cell), then CSV to CSV failed reading the key
    as text. The key passes through as its directories spell it."""
    lake = tmp_path / "lake"
    for year in ("2019", "007"):
        (lake / f"year={year}").mkdir(parents=True)
        (lake / f"year={year}" / "p.csv").write_text(
            "age,flag\n" + "".join(f"{i % 10},{['yes', '1.00'][i % 2]}\n" for i in range(50)))
    out = tmp_path / f"o.{ext}"
    r = cli("anonymize", lake, "-o", out, "--qi", "age", "-k", "5")
    assert r.exit_code == 0, r.stderr
    rows = duckdb.execute(
        f"SELECT year::VARCHAR, flag::VARCHAR, count(*) FROM '{out}' GROUP BY ALL ORDER BY ALL").fetchall()
    assert rows == [(y, f, 25) for y in ("007", "2019") for f in ("1.00", "yes")]


def test_overwrite_replaces_only_a_directory_sqlanon_wrote(tmp_path, out_dir):
    """--overwrite used to delete whatever the output directory held."""
    src = _small(tmp_path / "in.parquet")
    mine = out_dir / "anon"
    assert cli("anonymize", src, "-o", f"{mine}/", "--qi", "age", "-k", "5").exit_code == 0
    assert cli("anonymize", src, "-o", mine, "--qi", "age", "-k", "5", "--overwrite").exit_code == 0
    theirs = out_dir / "theirs"
    theirs.mkdir()
    (theirs / "keep.txt").write_text("keep")
    (out_dir / "res.csv").mkdir()
    for out, pattern in ((theirs, "'keep.txt'"), (out_dir / "res.csv", "is a directory, not a csv file"), (".", "")):
        r = cli("anonymize", src, "-o", out, "--qi", "age", "-k", "5", "--overwrite")
        assert r.exit_code == 2, r.stderr
        assert_one_line_error(r.stderr, pattern)
    assert (theirs / "keep.txt").read_text() == "keep"


def test_metrics_go_only_into_a_metrics_file_or_table(tmp_path, out_dir):
    """An existing file or table that is not an earlier run's metrics is never
    appended to (it used to get 24 more columns), and a directory is refused
    before the run (it used to publish the output, then fail)."""
    src = _small(tmp_path / "in.parquet")
    victim = _small(out_dir / "victim.parquet")
    before = snapshot(out_dir)
    (out_dir / "dir.parquet").mkdir()
    for metrics, pattern in ((victim, "not a sqlanon metrics table .*'run_id'"), (out_dir / "dir.parquet", "directory")):
        r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5", "--metrics", metrics)
        assert r.exit_code == 2, r.stderr
        assert_one_line_error(r.stderr, re.escape(str(metrics)), pattern)
    _small(out_dir / "o2__metrics.parquet")  # the default place, taken by something else
    r = cli("anonymize", src, "-o", out_dir / "o2.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, "o2__metrics.parquet", "--metrics")
    db = out_dir / "w.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE other AS SELECT 1 AS a")
    r = cli("anonymize", src, "-o", db, "--target-table", "t", "--metrics", "other", "--qi", "age", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, "'other'", "not a sqlanon metrics table")
    with duckdb.connect(str(db)) as con:
        assert con.execute("SELECT * FROM other").fetchall() == [(1,)]
        assert [t for (t,) in con.execute("SHOW TABLES").fetchall()] == ["other"]
    assert {k: v for k, v in snapshot(out_dir).items() if k in before} == before
    assert not (out_dir / "o.parquet").exists() and not (out_dir / "o2.parquet").exists()


def test_a_metrics_table_that_would_round_the_runs_values_is_refused_before_the_run(tmp_path, out_dir):
    """A hand-made metrics table with an INTEGER ncp and a DECIMAL(4,2) gcp
    took a run's 626.157 as 626 and 0.0096 as 0.01, silently (helper-41).
    Refused before any work, naming the column; a table whose columns hold
    the values (wider ones, text, a TIMESTAMP) is appended to."""
    src = _small(tmp_path / "in.parquet")
    db = out_dir / "w.duckdb"
    with duckdb.connect(str(db)) as con:  # DuckDB's names ignore case: "NCP" is ncp, "Kind" kind (helper-47)
        con.execute('CREATE TABLE t__metrics (run_id VARCHAR, "Kind" VARCHAR, fragment_id INTEGER, "NCP" INTEGER, '
                    "gcp DECIMAL(4,2), started_at TIMESTAMP)")
    r = cli("anonymize", src, "-o", db, "--target-table", "t", "--qi", "age", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, re.escape("table 't__metrics' in " + repr(str(db)) + ": its column 'NCP' is "
                                              "INTEGER, which does not hold sqlanon's ncp (double precision numbers) "
                                              "exactly"))
    assert "nothing was published" not in r.stderr  # before the run, not when publishing (helper-48)
    with duckdb.connect(str(db)) as con:
        assert [t for (t,) in con.execute("SHOW TABLES").fetchall()] == ["t__metrics"]
        con.execute('ALTER TABLE t__metrics ALTER "NCP" TYPE DOUBLE')
        con.execute("ALTER TABLE t__metrics ALTER gcp TYPE VARCHAR")
        con.execute("ALTER TABLE t__metrics ALTER fragment_id TYPE DECIMAL(18, 3)")
    r = cli("anonymize", src, "-o", db, "--target-table", "t", "--qi", "age", "-k", "5")
    assert_one_line_error(r.stderr, "its column 'started_at' is TIMESTAMP, which does not hold sqlanon's started_at "
                                    "\\(timestamps with time zone\\)")  # the wall time of some zone
    with duckdb.connect(str(db)) as con:
        con.execute("ALTER TABLE t__metrics ALTER started_at TYPE TIMESTAMPTZ")
    r = cli("anonymize", src, "-o", db, "--target-table", "t", "--qi", "age", "-k", "12")
    assert r.exit_code == 0, r.stderr
    with duckdb.connect(str(db)) as con:
        ncp, gcp = con.execute("SELECT ncp, gcp FROM t__metrics WHERE kind = 'total'").fetchone()
        total = con.execute("SELECT * FROM t").fetch_arrow_table()
    assert total.num_rows == 200 and 0 < ncp != round(ncp) and float(gcp) == pytest.approx(ncp / 200)


@pytest.mark.parametrize(("ours", "theirs", "holds"), [
    (pa.float64(), "DOUBLE", True), (pa.float64(), "double precision", True), (pa.float64(), "FLOAT", False),
    (pa.float64(), "real", False), (pa.float64(), "numeric(10,3)", False), (pa.float64(), "DECIMAL(18,3)", False),
    (pa.float64(), "INTEGER", False), (pa.float64(), "text", True), (pa.int32(), "bigint", True),
    (pa.int32(), "numeric", True), (pa.int32(), "smallint", False), (pa.int64(), "INTEGER", False),
    (pa.int64(), "DOUBLE", False), (pa.int64(), "HUGEINT", True), (pa.string(), "character varying(64)", True),
    (pa.string(), "character(64)", False), (pa.string(), "INTEGER", False), (pa.bool_(), "BOOLEAN", True),
    (pa.bool_(), "smallint", False), (pa.timestamp("us", "UTC"), "TIMESTAMP WITH TIME ZONE", True),
    (pa.timestamp("us", "UTC"), "timestamp without time zone", False), (pa.timestamp("us", "UTC"), "DATE", False),
    (pa.timestamp("us", "UTC"), "timestamp(6) with time zone", True),
    (pa.timestamp("us", "UTC"), "timestamp(3) with time zone", False), (pa.int32(), "numeric(10,0)", True),
    (pa.int32(), "numeric(9,0)", False), (pa.int32(), "DECIMAL(18,3)", True), (pa.int64(), "numeric(19,0)", True),
    (pa.int64(), "DECIMAL(18,0)", False), (pa.float64(), "numeric(38,10)", False),
])
def test_metrics_column_types_that_hold_the_runs_values(ours, theirs, holds):
    schema = pa.schema([("x", ours)])
    key = [("run_id", "VARCHAR"), ("kind", "text"), ("fragment_id", "INTEGER")]  # a metrics table's
    if holds:
        io.refuse_unfit_metrics(schema, [*key, ("x", theirs), ("other", "DATE")], "t")
    else:
        with pytest.raises(ConfigError, match=re.escape(f"t: its column 'x' is {theirs}, which does not hold")):
            io.refuse_unfit_metrics(schema, [*key, ("x", theirs)], "t")


def test_duckdb_output_inside_the_input_directory_is_refused(tmp_path):
    """Its staging parts would sit inside the directory the workers read."""
    lake = tmp_path / "lake"
    lake.mkdir()
    _small(lake / "p.parquet")
    r = cli("anonymize", lake, "-o", lake / "w.duckdb", "--target-table", "t", "--qi", "age", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, "lies under")


def test_csv_read_errors_say_why_without_the_row(tmp_path, out_dir):
    """DuckDB's CSV errors put their cause on a later line: the one-line
    error used to be 'CSV Error on Line: 3' alone. The row's text and the
    value that failed to convert (data) stay out of it."""
    latin = tmp_path / "latin.csv"
    latin.write_bytes(b"age,name\n30,secret-a\n31,Ren\xe9e\n")
    typed = tmp_path / "typed.csv"
    typed.write_text("age,name\n" + "".join(f"{20 + i % 40},secret-b\n" for i in range(30_000)) + "secret-c,x\n")
    # With Windows line ends (Excel's) DuckDB puts the row on a line of its
    # own after 'Original Line:', which was then shown as the reason
    # (helper-48); a quoted field's line breaks spread it over several.
    crlf = tmp_path / "crlf.csv"
    crlf.write_bytes(typed.read_bytes().replace(b"\n", b"\r\n"))
    latin_crlf = tmp_path / "latin-crlf.csv"
    latin_crlf.write_bytes(b"age;name\r\n30;secret-a\r\n31;Ren\xe9e\r\n32;x\r\n")
    quoted = tmp_path / "quoted.csv"
    quoted.write_text("age,name\n" + "".join(f"{20 + i % 40},ok\n" for i in range(30_000))
                      + 'secret-c,"secret-d\n\nsecret-e"\n')
    mixed = tmp_path / "mixed.csv"
    mixed.write_bytes(b"".join(f"{20 + i % 40},secret-{i}".encode() + (b"\r\n" if i < 50 else b"\n")
                               for i in range(100)))
    # A value past the sniffed rows that its guessed type cannot read: refused up front by its row, not
    # DuckDB's raw conversion error, exit 2 (the file fails every retry: helper-67)
    unread = (r"column 'age' of .* holds, on line 30,002, a value that DuckDB, reading the column as BIGINT .* "
              r"cannot read")
    # Not UTF-8: refused before DuckDB reads it, by its line, exit 2 (a retry fails alike: helper-107)
    for src, pattern, code in ((latin, "line 3 is not UTF-8 text", 2), (typed, unread, 2), (crlf, unread, 2),
                               (latin_crlf, "line 3 is not UTF-8 text", 2), (quoted, unread, 2),
                               (mixed, r"sniffing .*not possible to automatically detect the CSV parsing dialect", 1)):
        r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
        assert r.exit_code == code, r.stderr
        line = assert_one_line_error(r.stderr, re.escape(src.name), pattern)
        assert "secret" not in line
        assert 'file ""' not in line


def test_duckdb_types_arrow_does_not_keep_come_back_in_a_duckdb_table(tmp_path, out_dir):
    """UUID, ENUM, HUGEINT and fixed-size arrays used to come out as VARCHAR,
    VARCHAR, DECIMAL(38,0) and lists; a HUGEINT of 39 digits went into
    Parquet as an invalid decimal. The values checked by the checksums were
    the same, the types were not."""
    db = tmp_path / "in.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
        con.execute("""
            CREATE TABLE t AS SELECT i AS id, 20 + i % 40 AS age,
                (CASE WHEN i = 7 THEN 170141183460469231731687303715884105727 ELSE i * 10 END)::HUGEINT AS h,
                uuid() AS u, (['sad', 'ok', 'happy'])[1 + i % 3]::mood AS m,
                [i::DOUBLE, 1.5]::DOUBLE[2] AS arr, ['a,"b', 'c']::VARCHAR[2] AS sarr,
                ('{"k": ' || i || '}')::JSON AS j, (TIMESTAMP '2020-01-01' + i * INTERVAL 1 SECOND)::TIMESTAMP_S AS ts,
                (TIMESTAMP '2020-01-01' + i * INTERVAL 1 MILLISECOND)::TIMESTAMP_MS AS tms
            FROM range(300) r(i)""")
        con.execute("CREATE TABLE small AS SELECT * FROM t WHERE id <> 7")
        source = con.execute("SELECT id, h, u, m, arr, sarr, j, ts, tms FROM t ORDER BY id").fetchall()
    out = out_dir / "out.duckdb"
    r = cli("anonymize", db, "--table", "t", "-o", out, "--target-table", "t", "--qi", "age", "-k", "5")
    assert r.exit_code == 0, r.stderr
    with duckdb.connect(str(out), read_only=True) as con:
        types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE t)").fetchall())
        assert con.execute("SELECT id, h, u, m, arr, sarr, j, ts, tms FROM t ORDER BY id").fetchall() == source
    assert types["h"] == "HUGEINT" and types["u"] == "UUID" and types["m"] == "ENUM('sad', 'ok', 'happy')"
    assert types["arr"] == "DOUBLE[2]" and types["sarr"] == "VARCHAR[2]"
    # JSON came out as VARCHAR, TIMESTAMP_S and _MS as TIMESTAMP (microseconds)
    assert (types["j"], types["ts"], types["tms"]) == ("JSON", "TIMESTAMP_S", "TIMESTAMP_MS")
    r = cli("anonymize", db, "--table", "t", "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 2  # refused before any work, as it cannot be published safely: a usage error
    assert_one_line_error(r.stderr, "'h' is a HUGEINT .* 39 digits")
    r = cli("anonymize", db, "--table", "small", "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 0, r.stderr


@pytest.mark.parametrize("how", ["prefix", "hierarchy"])
@pytest.mark.parametrize("source", ["duckdb", "parquet"])
def test_a_uuid_qi_by_prefix_or_hierarchy(tmp_path, out_dir, how, source):
    """A UUID QI generalized by prefix or a hierarchy failed every run:
    reading its values as text by their bytes put COLLATE "binary" on a
    UUID ('collations are only supported for type varchar': helper-37)."""
    db = tmp_path / "in.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE t AS SELECT i AS id, ('00000000-0000-0000-0000-0000000000' || "
                    "lpad((i % 40)::VARCHAR, 2, '0'))::UUID AS u, i % 50 AS x FROM range(500) r(i)")
        con.execute(f"COPY t TO '{tmp_path / 'in.parquet'}'")
        leaves = [r[0] for r in con.execute("SELECT DISTINCT u::VARCHAR FROM t ORDER BY 1").fetchall()]
    (tmp_path / "h.csv").write_text("".join(f"{leaf};{leaf[:-1]}*;*\n" for leaf in leaves))
    src = [db, "--table", "t"] if source == "duckdb" else [tmp_path / "in.parquet"]
    gen = ["--generalization", "u=prefix"] if how == "prefix" else ["--hierarchy", f"u={tmp_path / 'h.csv'}"]
    r = cli("anonymize", *src, "-o", out_dir / "o.parquet", "--qi", "u,x", *gen, "-k", "20", "--fragments", "2")
    assert r.exit_code == 0, r.stderr
    out = pq.read_table(out_dir / "o.parquet")
    assert out.num_rows == 500 and min(Counter(zip(out["u"].to_pylist(), out["x"].to_pylist())).values()) >= 20


@pytest.mark.parametrize("output", ["o.parquet", "o.csv", "d/", "w.duckdb"])
def test_a_union_column_is_refused_before_any_work(tmp_path, out_dir, output):
    """A UNION reaches Arrow and Parquet as a struct: every output failed
    after all the work (the checksums, or 'a table cannot be created from an
    unnamed struct' into a DuckDB table)."""
    db = tmp_path / "in.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TYPE label AS ENUM ('UNION(x)', 'b')")  # a label is no UNION
        con.execute("CREATE TABLE t AS SELECT i AS age, union_value(num := i)::UNION(num INT, s VARCHAR) AS u, "
                    "[union_value(num := i)::UNION(num INT, s VARCHAR)] AS us, 'b'::label AS lab FROM range(100) r(i)")
    extra = ["--target-table", "t"] if output.endswith(".duckdb") else []
    r = cli("anonymize", db, "--table", "t", "-o", out_dir / output, *extra, "--qi", "age", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"column 'u' is UNION\(num INTEGER, s VARCHAR\): a UNION cannot travel")
    assert snapshot(out_dir) == {}
    r = cli("anonymize", db, "--table", "t", "-o", out_dir / output, *extra, "--qi", "age", "-k", "5", "--drop", "u")
    assert r.exit_code == 2 and "column 'us' is UNION(num INTEGER, s VARCHAR)[]" in r.stderr
    r = cli("anonymize", db, "--table", "t", "-o", out_dir / output, *extra, "--qi", "age", "-k", "5",
            "--drop", "u,us")
    assert r.exit_code == 0, r.stderr


def test_a_hugeint_of_39_digits_in_a_list_or_struct_is_refused(tmp_path, out_dir):
    """Inside a list or a struct a HUGEINT travels as DECIMAL(38,0), and is
    never cast back: a 39-digit value was written into Parquet or a DuckDB
    table as a decimal its own type cannot hold (arithmetic on it overflowed;
    the checksums compare text and agreed)."""
    db = tmp_path / "in.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("""
            CREATE TABLE t AS SELECT i AS id, 20 + i % 40 AS age,
                [(CASE WHEN i = 7 THEN 170141183460469231731687303715884105727 ELSE i END)::HUGEINT] AS hs,
                {'h': i::HUGEINT, 'iban': '1234567890123456789012345678901234567890'} AS st
            FROM range(300) r(i)""")
        con.execute("CREATE TABLE small AS SELECT * FROM t WHERE id <> 7")
    for out, extra in ((out_dir / "o.parquet", []), (out_dir / "o.duckdb", ["--target-table", "t"])):
        r = cli("anonymize", db, "--table", "t", "-o", out, *extra, "--qi", "age", "-k", "5")
        assert r.exit_code == 2
        assert_one_line_error(r.stderr, "'hs' holds HUGEINT values of 39 digits .* a list or struct")
        r = cli("anonymize", db, "--table", "small", "-o", out, *extra, "--qi", "age", "-k", "5", "--overwrite")
        assert r.exit_code == 0, r.stderr
    assert not list(out_dir.glob("*.sqlanon-staging-*"))


def test_csv_quoted_only_after_the_sniffers_rows(tmp_path):
    """DuckDB's sniffer reads the first 20,480 rows; seeing no quoted value
    there it guessed "no quoting", and a later "Smith, J" in the input, or
    a later "[1000, 1009]" in the published CSV, read as two columns."""
    n = 30_000
    rows = [f"{i % 50},plain" for i in range(n)]
    rows += [f'{1000 + i},"Smith, J"' for i in range(10)]
    src = tmp_path / "in.csv"
    src.write_text("age,name\n" + "\n".join(rows) + "\n")
    out = tmp_path / "out.csv"
    r = cli("anonymize", src, "-o", out, "--qi", "age", "-k", "10", "--workers", "1", "--json")
    assert r.exit_code == 0, r.stderr
    got = duckdb.execute("SELECT age, name FROM read_csv(?, all_varchar = true, quote = '\"')", [str(out)]).fetchall()
    assert len(got) == n + 10
    assert got.count(("[1000, 1009]", "Smith, J")) == 10
    # The published order puts that class within the sniffer's reach or not;
    # written last, as in the input, it is out of it: verify reads it so too.
    out.write_text("age,name\n" + "\n".join([f"{i % 50},plain" for i in range(n)] + ['"[1000, 1009]","Smith, J"'] * 10)
                   + "\n")
    r = cli("verify", out, "--qi", "age", "-k", "10")
    assert r.exit_code == 0, r.stderr + r.stdout


def test_a_csv_output_whose_readers_merge_nan_and_null_says_so(tmp_path):
    """CSV to CSV, a sensitive column of numbers with 'nan' and empty fields
    travels as text: two values to the run, one (NaN and NULL) to readers
    who type the file. The run is refused; its hint named '5' and '5.0' only,
    which this file does not hold (helper-79)."""
    src = tmp_path / "lab.csv"
    src.write_text("age,result\n" + "".join(f"{a},{r}\n" for a, r in [(1, "nan"), (1, ""), (2, "nan"), (2, ""),
                                                                          (3, "1.5"), (3, "2.5")] * 2))
    r = cli("anonymize", src, "-o", tmp_path / "out.csv", "--qi", "age", "--sensitive", "result", "-k", "2", "-l", "2",
            "--workers", "1")
    assert r.exit_code == 1
    assert_one_line_error(r.stderr, r"read back with its types.*'nan' and an empty field of a column of numbers")
    assert sorted(p.name for p in tmp_path.iterdir()) == [src.name]


def test_csv_output_cannot_tell_empty_from_null(tmp_path):
    """'' and NULL are two sensitive values in Parquet, one in a CSV file
    (DuckDB reads the quoted "" it writes for '' as NULL, as most readers
    do): the published CSV would not be 2-diverse. The run refuses it and
    says why, and writes Parquet."""
    src = tmp_path / "e.parquet"
    pq.write_table(pa.table({"age": [i % 4 for i in range(40)], "dx": ["" if i % 2 else None for i in range(40)]}), src)
    out = tmp_path / "e.csv"
    r = cli("anonymize", src, "-o", out, "--qi", "age", "--sensitive", "dx", "-k", "5", "-l", "2")
    assert r.exit_code == 1
    assert_one_line_error(r.stderr, r"l=2", r"'' and NULL", r"'dx' holds both")
    assert not out.exists() and not staging_leftovers(tmp_path)
    r = cli("anonymize", src, "-o", tmp_path / "e.parquet.out.parquet", "--qi", "age", "--sensitive", "dx", "-k", "5",
            "-l", "2")
    assert r.exit_code == 0, r.stderr


def test_timestamptz_text_is_utc_on_any_machine(tmp_path):
    """A TIMESTAMPTZ written as text (bounds, pass-through) used to follow
    the machine's time zone: the same job wrote '2019-12-31 19:00:00-05'
    in New York and '2020-01-01 00:00:00+00' in CI. It is UTC, as the
    interval labels are."""
    src = tmp_path / "tz.parquet"
    start = datetime.datetime(2020, 1, 1, tzinfo=datetime.timezone.utc)
    ts = pa.array([start + datetime.timedelta(hours=7 * i) for i in range(20)], pa.timestamp("us", tz="UTC"))
    pq.write_table(pa.table({"t": ts, "u": ts}), src)
    outs = {}
    for tz in ("UTC", "America/New_York"):
        out = tmp_path / f"{tz.replace('/', '_')}.csv"
        proc = run_subprocess("anonymize", src, "-o", out, "--qi", "t", "-k", "5", "--interval-format", "bounds",
                              env={"TZ": tz})
        assert proc.returncode == 0, proc.stderr
        outs[tz] = sorted(out.read_text().splitlines())
    assert outs["UTC"] == outs["America/New_York"]
    assert "2020-01-01 00:00:00+00,2020-01-02 04:00:00+00,2020-01-01 00:00:00+00" in outs["UTC"]


def test_drop_on_the_command_line_adds_to_the_config_files(tmp_path):
    """Flags override --config values, but a --drop that replaced the file's
    drop list published the direct identifiers the job file dropped."""
    job = tmp_path / "job.yml"
    job.write_text("qi: [age]\nk: 10\ndrop: [capital-gain, workclass]\n")
    out = tmp_path / "o.parquet"
    r = cli("anonymize", "--config", job, ADULTS, "-o", out, "--drop", "capital-loss,workclass")
    assert r.exit_code == 0, r.stderr
    names = pq.read_schema(out).names
    assert not {"capital-gain", "capital-loss", "workclass"} & set(names)
    assert "age" in names and "income" in names


def test_qi_or_sensitive_on_the_command_line_keeps_the_config_files(tmp_path, out_dir):
    """--qi replaced the job file's QIs: `--config job.yml --qi sex` published
    age, race... unchanged (exit 0). A flag may add columns, never leave
    the file's out."""
    job = tmp_path / "job.yml"
    job.write_text("qi: [age, race, sex]\nsensitive: [income]\nl: 2\nk: 10\n")
    for flag, value, pattern in (
        ("--qi", "sex", r"--qi leaves out 'age', 'race' of 'qi' in '.*job.yml', which would then be published unchanged"),
        ("--sensitive", "workclass", r"--sensitive leaves out 'income' of 'sensitive' .* unchecked for l: name it"),
    ):
        r = cli("anonymize", "--config", job, ADULTS, "-o", out_dir / "o.parquet", flag, value)
        assert r.exit_code == 2
        assert_one_line_error(r.stderr, pattern)
    assert snapshot(out_dir) == {}
    r = cli("anonymize", "--config", job, ADULTS, "-o", out_dir / "o.parquet", "--qi", "sex,age,race,education-num")
    assert r.exit_code == 0, r.stderr
    assert pq.read_table(out_dir / "o.parquet").column("education-num").type == pa.string()


def test_hierarchy_on_the_command_line_keeps_the_config_files_other_columns(tmp_path):
    """--hierarchy replaced the job file's whole mapping: one more
    '--hierarchy race=…' published the file's sex column as a set, exit 0
    (helper-43). Flags now set only the columns they name."""
    h = REPO / "hierarchies" / "adult"
    job = tmp_path / "job.yml"
    job.write_text(f"qi: [race, sex]\nhierarchy: {{race: {h / 'race.csv'}, sex: {h / 'sex.csv'}}}\nk: 10\n"
                   "generalization: {race: hierarchy}\n")
    out = tmp_path / "o.parquet"
    r = cli("anonymize", "--config", job, ADULTS, "-o", out, "--hierarchy", f"race={h / 'race.csv'}",
            "--generalization", "sex=hierarchy", "--json")
    assert r.exit_code == 0, r.stderr
    params = json.loads(duckdb.execute("SELECT parameters FROM read_parquet(?) WHERE kind = 'total'",
                                       [str(tmp_path / "o__metrics.parquet")]).fetchone()[0])
    assert params["generalization"] == {"race": "hierarchy", "sex": "hierarchy"}
    assert set(params["hierarchy"]) == {"race", "sex"}


def test_a_command_line_column_mapping_overrides_the_job_files_entry_for_that_column(tmp_path):
    """Flags override the --config file, in a column mapping too: the
    flag's entry for a column wins over the job's entry for it (helper-141:
    with the file's entries merged last, the job's interval and hierarchy
    file were published instead, exit 0, and no test told)."""
    h = REPO / "hierarchies" / "adult"
    mine = tmp_path / "race.csv"
    shutil.copy(h / "race.csv", mine)
    job = tmp_path / "job.yml"
    job.write_text(f"qi: [age, race, sex]\nhierarchy: {{race: {h / 'race.csv'}}}\nk: 10\n"
                   "generalization: {age: interval, sex: set}\n")
    src, out = tmp_path / "a.parquet", tmp_path / "o.parquet"
    duckdb.execute(f"COPY (SELECT age, race, sex FROM read_csv('{ADULTS}') LIMIT 1000) TO '{src}'")
    r = cli("anonymize", "--config", job, src, "-o", out, "--workers", "1", "--generalization", "age=set",
            "--hierarchy", f"race={mine}")
    assert r.exit_code == 0, r.stderr
    params = json.loads(duckdb.execute("SELECT parameters FROM read_parquet(?) WHERE kind = 'total'",
                                       [str(tmp_path / "o__metrics.parquet")]).fetchone()[0])
    assert params["generalization"] == {"age": "set", "race": "hierarchy", "sex": "set"}
    assert params["hierarchy"]["race"] == str(mine), params["hierarchy"]


def test_generalization_on_the_command_line_switches_a_job_files_hierarchy_off(tmp_path):
    """The job's hierarchy of a column could not be switched off from the
    command line: '--generalization sex=set' failed with 'drop one of the
    two', and only the file could drop it. A hierarchy typed on the command
    line as well still clashes."""
    h = REPO / "hierarchies" / "adult"
    job = tmp_path / "job.yml"
    job.write_text(f"qi: [race, sex]\nhierarchy: {{race: {h / 'race.csv'}, sex: {h / 'sex.csv'}}}\nk: 10\n")
    out = tmp_path / "o.parquet"
    r = cli("anonymize", "--config", job, ADULTS, "-o", out, "--generalization", "sex=set")
    assert r.exit_code == 0, r.stderr
    params = json.loads(duckdb.execute("SELECT parameters FROM read_parquet(?) WHERE kind = 'total'",
                                       [str(tmp_path / "o__metrics.parquet")]).fetchone()[0])
    assert params["generalization"] == {"race": "hierarchy", "sex": "set"}
    assert set(params["hierarchy"]) == {"race"}
    r = cli("anonymize", "--config", job, ADULTS, "-o", out, "--overwrite", "--generalization", "sex=set",
            "--hierarchy", f"sex={h / 'sex.csv'}")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, "column 'sex' has a hierarchy but generalization 'set'")


def test_generalization_takes_a_comma_separated_list_as_qi_does(tmp_path):
    """'--generalization age=interval,education-num=set' failed with 'the
    unknown kind 'interval,education-num=set'', where --qi takes a list
    (helper-80). A piece without '=' keeps the old reading (and its error)."""
    out = tmp_path / "o.parquet"
    r = cli("anonymize", ADULTS, "-o", out, "--qi", "age,education-num,race", "-k", "10",
            "--generalization", "age=interval, education-num=set", "--generalization", "race=prefix")
    assert r.exit_code == 0, r.stderr
    params = json.loads(duckdb.execute("SELECT parameters FROM read_parquet(?) WHERE kind = 'total'",
                                       [str(tmp_path / "o__metrics.parquet")]).fetchone()[0])
    assert params["generalization"] == {"age": "interval", "education-num": "set", "race": "prefix"}
    r = cli("anonymize", ADULTS, "-o", out, "--overwrite", "--qi", "age,education-num", "-k", "10",
            "--generalization", "age=interval,education-num")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, "the unknown kind 'interval,education-num'")


def test_a_hierarchy_missing_values_of_a_typed_csv_column_says_how_they_were_read(tmp_path):
    """DuckDB reads '01/02/2020' in a CSV file as the date 2020-02-01: the
    error listed values found in neither file (helper-43)."""
    src = tmp_path / "v.csv"
    src.write_text("visit,d\n01/02/2020,a\n02/02/2020,b\n03/02/2020,a\n")
    h = tmp_path / "v.json"
    h.write_text(json.dumps({"cat": "*", "subcats": [{"cat": v} for v in ("01/02/2020", "02/02/2020", "03/02/2020")]}))
    r = cli("anonymize", src, "-o", tmp_path / "o.parquet", "--qi", "visit", "--hierarchy", f"visit={h}", "-k", "2",
            "--date-order", "DMY")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"no leaf for value\(s\) '2020-02-01', .* \(the column is read as date32\[day\]")


def test_every_hierarchy_missing_values_is_named_in_one_error(tmp_path, out_dir):
    """ARX's occupation and workclass hierarchies both lack Adult's '?' (ours
    add it): the run named the first column only, a second run the next
    (helper-66)."""
    arx = tmp_path
    for name in ("occupation.csv", "workclass.csv"):
        lines = (REPO / "hierarchies" / "adult" / name).read_text().splitlines(keepends=True)
        (arx / name).write_text("".join(line for line in lines if not line.startswith("?;")))
    r = cli("anonymize", ADULTS, "-o", out_dir / "o.parquet", "--qi", "age,occupation,workclass", "-k", "5",
            "--hierarchy", f"occupation={arx / 'occupation.csv'}", "--hierarchy", f"workclass={arx / 'workclass.csv'}")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"occupation.csv' has no leaf for value\(s\) '\?' of column 'occupation'; "
                                    r"and hierarchy '.*workclass.csv' has no leaf for value\(s\) '\?' of column "
                                    r"'workclass'$")
    assert snapshot(out_dir) == {}


def test_a_hierarchy_file_with_a_header_row_is_warned_about(tmp_path, out_dir, caplog):
    """ARX's levels have no header row: 'age;band;*' first was read as a leaf
    'age', silently, one leaf more in every NCP (helper-66); so was one not
    named as the column ('years,decade,top', helper-113). A flat list's
    first leaf, absent from the data, is no header, nor a word leaf alone
    in its group among word leaves ('?;Unknown;*', helper-114)."""
    src = _small(tmp_path / "s.parquet")
    rows = "".join(f"{a};{a // 10 * 10}s;*\n" for a in range(20, 60))
    h = tmp_path / "age.csv"
    named = "starts with a leaf 'age', no value of the data (named as its column): a header row?"
    above = "starts with a leaf 'years', no value of the data (a row of its own above the file's root): a header row?"
    word = "starts with a leaf 'years', no value of the data (a word over leaves that are numbers): a header row?"
    for text, warned in ((rows, None), ("age;band;*\n" + rows, named), ("AGE;band;*\n" + rows, named.replace(
            "'age'", "'AGE'")), ("years;decade;top\n" + rows, above), ("years;decade;*\n" + rows, word),
                         ("".join(f"{a};*\n" for a in range(19, 60)), None)):
        h.write_text(text)
        caplog.clear()
        with caplog.at_level("WARNING", logger="sqlanon"):
            r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "--hierarchy", f"age={h}", "-k",
                    "5", "--overwrite")
        assert r.exit_code == 0, r.stderr
        assert (warned in caplog.text) if warned else "a header row?" not in caplog.text, caplog.text
    # a word leaf alone in its group, among word leaves: no header (helper-114)
    src = _small(tmp_path / "c.parquet", city=[("Berlin", "Paris", "Rome")[i % 3] for i in range(200)])
    h.write_text("?;Unknown;*\nBerlin;Europe;*\nParis;Europe;*\nRome;Europe;*\n")
    caplog.clear()
    with caplog.at_level("WARNING", logger="sqlanon"):
        r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "city", "--hierarchy", f"city={h}", "-k", "5",
                "--overwrite")
    assert r.exit_code == 0 and "a header row?" not in caplog.text, r.stderr + caplog.text


@pytest.mark.parametrize("kind", ["interval", "set"])
def test_a_quasi_identifier_that_is_null_in_every_row_is_warned_about(tmp_path, out_dir, caplog, kind):
    """A nightly source whose QI column went empty upstream published every
    row's value as NULL, exit 0, not a word (helper-100); a float QI of NaN
    only, generalized as a set, went unwarned (helper-106)."""
    src = tmp_path / "s.parquet"
    for age, warned in (("NULL::INTEGER", "NULL"), ("CASE WHEN i % 3 = 0 THEN NULL ELSE i % 40 END", None),
                        ("CASE WHEN i % 2 = 0 THEN NULL ELSE 'NaN'::DOUBLE END", "NULL or NaN"),  # helper-103
                        ("'NaN'::DOUBLE", "NULL or NaN"),
                        ("CASE WHEN i % 2 = 0 THEN 'NaN'::DOUBLE ELSE i % 40 END", None)):
        duckdb.sql(f"COPY (SELECT i AS id, {age} AS age, i % 5 AS zip FROM range(100) t(i)) TO '{src}'")
        caplog.clear()
        with caplog.at_level("WARNING", logger="sqlanon"):
            r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age,zip", "-k", "5", "--overwrite",
                    "--generalization", f"age={kind}")
        assert r.exit_code == 0, r.stderr
        assert ("quasi-identifier 'age' is" in caplog.text) is bool(warned), caplog.text
        assert not warned or f"quasi-identifier 'age' is {warned} in every row" in caplog.text, caplog.text
        assert "'zip'" not in caplog.text


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
@pytest.mark.parametrize("kind", ["text", "float"])
def test_l_reached_only_by_counting_null_is_warned_about(tmp_path, out_dir, caplog, suffix, kind):
    """A sensitive column gone mostly NULL upstream passed l=2 with classes
    of one value and NULLs, exit 0, not a word (helper-100); NULL stays a
    value to l (README), and the run and verify say how many classes need
    it: a float's NaN too, which a CSV file writes 'nan' (helper-103: no
    word of a CSV output's)."""
    src = tmp_path / "s.parquet"
    a, b, missing = ("'a'", "'b'", "NULL") if kind == "text" else ("1.5", "2.5", "'NaN'::DOUBLE")
    out = out_dir / f"o.{suffix}"
    for dx, warned in ((f"CASE WHEN i % 3 = 0 THEN {a} WHEN i % 20 = 1 THEN {b} ELSE {missing} END", True),
                       (f"CASE WHEN i % 3 = 0 THEN {a} WHEN i % 3 = 1 THEN {b} ELSE {missing} END", False)):
        duckdb.sql(f"COPY (SELECT i AS id, 20 + i % 40 AS age, {dx} AS dx FROM range(600) t(i)) TO '{src}'")
        caplog.clear()
        with caplog.at_level("WARNING", logger="sqlanon"):
            r = cli("anonymize", src, "-o", out, "--qi", "age", "--sensitive", "dx", "-l", "2", "-k", "5",
                    "--overwrite")
            assert r.exit_code == 0, r.stderr
            v = cli("verify", out, "--qi", "age", "--sensitive", "dx", "-l", "2", "-k", "5", "--json")
        assert v.exit_code == 0, v.stderr
        said = re.findall(r"l=2 holds with a missing value \(NULL or NaN; in a CSV file 'NA' and its kin too\) "
                          r"counted as a value of 'dx': "
                          r"(\d+) class\(es\) hold fewer than 2 values besides it \(a reader learns the value, or "
                          r"that it is missing\)", caplog.text)
        by_null = json.loads(v.stdout)["classes_l_by_null"]
        if warned:
            assert len(said) == 2 and said[0] == said[1] and by_null == {"dx": int(said[0])}, caplog.text
            read = pd.read_parquet(out) if suffix == "parquet" else pd.read_csv(out)  # as its readers count
            assert (read.groupby("age")["dx"].nunique() < 2).sum() == int(said[0])
        else:
            assert not said and by_null == {}, caplog.text


def test_csv_dates_that_read_both_ways_need_a_date_order(tmp_path, out_dir):
    """DuckDB reads '01/02/2020' day first when no value tells: a US file of
    the 1st to the 12th of a month published every date as another one,
    QIs and pass-through columns alike, exit 0. Such a file is refused
    unless --date-order (or the job's date-order) says which."""
    src = tmp_path / "us.csv"
    src.write_text("visit,seen,d\n" + "".join(f"0{m}/0{m + 1}/2020,0{m}/0{m + 1}/2020 10:00:00,{'ab'[m % 2]}\n"
                                                 for m in range(1, 8)))
    out = out_dir / "o.parquet"
    r = cli("anonymize", src, "-o", out, "--qi", "visit", "-k", "7")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"column 'visit' of '.*us\.csv' holds dates such as '0\d/0\d/2020' that read day "
                                    r"first and month first alike .*--date-order=DMY or --date-order=MDY")
    assert snapshot(out_dir) == {}
    r = cli("anonymize", src, "-o", out, "--qi", "visit", "-k", "7", "--date-order", "mdy")
    assert r.exit_code == 0, r.stderr
    got = duckdb.execute("SELECT visit, seen FROM read_parquet(?) ORDER BY seen", [str(out)]).fetchall()
    assert got[0] == ("[2020-01-02, 2020-07-08]", dt.datetime(2020, 1, 2, 10, 0))
    job = tmp_path / "job.yml"
    job.write_text(f"input: {src}\noutput: {out}\nqi: [visit]\nk: 7\ndate-order: DMY\noverwrite: true\n")
    assert cli("anonymize", "--config", job).exit_code == 0
    assert duckdb.execute("SELECT min(seen) FROM read_parquet(?)", [str(out)]).fetchone()[0] == dt.datetime(2020, 2, 1, 10)
    # a value past 12 tells the order; into CSV a pass-through date stays the text it was
    src.write_text(src.read_text() + "01/13/2020,01/13/2020 10:00:00,a\n")
    assert cli("anonymize", src, "-o", out, "--qi", "d", "-k", "2", "--overwrite").exit_code == 0
    assert duckdb.execute("SELECT max(visit) FROM read_parquet(?)", [str(out)]).fetchone()[0] == dt.date(2020, 7, 8)
    src.write_text("\n".join(src.read_text().splitlines()[:-1]) + "\n")
    assert cli("anonymize", src, "-o", out_dir / "o.csv", "--qi", "d", "-k", "2").exit_code == 0
    # the library takes it as the command line does, in either case (it refused 'mdy': helper-6)
    sqlanon.anonymize(src, out, qi=["visit"], k=7, date_order="mdy", overwrite=True)
    assert duckdb.execute("SELECT min(seen) FROM read_parquet(?)", [str(out)]).fetchone()[0] == dt.datetime(2020, 1, 2, 10)
    # in a directory e[a] beside ea/: the formats are the file's own, not ea's ISO dates' (helper-190)
    iso = "visit,seen,d\n" + "".join(f"2020-0{m}-0{m + 1},2020-0{m}-0{m + 1} 10:00:00,a\n" for m in range(1, 8))
    for d, text in (("e[a]", src.read_text()), ("ea", iso)):
        (tmp_path / d).mkdir()
        (tmp_path / d / "us.csv").write_text(text)
    r = cli("anonymize", tmp_path / "e[a]" / "us.csv", "-o", out, "--qi", "visit", "-k", "7", "--date-order", "MDY",
            "--overwrite")
    assert r.exit_code == 0, r.stderr


def test_dates_of_a_lake_are_read_in_one_order(tmp_path, out_dir):
    """DuckDB guesses each CSV file of a lake apart: a file whose US dates all
    read both ways was read day first next to one read month first (exit 0,
    intervals that missed the true dates), and --date-order was dropped when
    the first file held no date (helper-15)."""
    lake = tmp_path / "lake"
    lake.mkdir()
    (lake / "a.csv").write_text("id,age,visit\n" + "".join(f"{i},{20 + i % 9},{1 + i % 12:02d}/{1 + i % 11:02d}/2020\n"
                                                           for i in range(30)))
    (lake / "b.csv").write_text("id,age,visit\n" + "".join(f"{i},{20 + i % 9},{1 + i % 12:02d}/{13 + i % 15}/2020\n"
                                                           for i in range(100, 130)))
    out = out_dir / "o.parquet"
    r = cli("anonymize", lake, "-o", out, "--qi", "age", "-k", "3")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"column 'visit' of '.*a\.csv' holds dates such as '\d\d/\d\d/2020' that read day "
                                    "first and month first alike")
    assert snapshot(out_dir) == {}
    r = cli("anonymize", lake, "-o", out, "--qi", "age,visit", "-k", "3", "--date-order", "MDY", "--keep", "id")
    assert r.exit_code == 0, r.stderr
    got = dict(duckdb.execute("SELECT id, visit FROM read_parquet(?)", [str(out)]).fetchall())
    for i in (0, 7, 100, 112):  # each visit inside its published interval, read month first
        lo, hi = (dt.date.fromisoformat(d) for d in got[i].strip("[]").split(", ")) if got[i].startswith("[") else (
            dt.date.fromisoformat(got[i]),) * 2
        day = 1 + i % 11 if i < 100 else 13 + i % 15
        assert lo <= dt.date(2020, 1 + i % 12, day) <= hi, (i, got[i])
    # the first file without any date: the order applies to the others still
    (lake / "a.csv").write_text("id,age,visit\n" + "".join(f"{i},{20 + i % 9},\n" for i in range(30)))
    (lake / "c.csv").write_text("id,age,visit\n" + "".join(f"{i},{20 + i % 9},04/{1 + i % 9:02d}/2020\n"
                                                           for i in range(200, 230)))
    (lake / "b.csv").unlink()  # its 01/13/2020 is no day-first date
    for order, months in (("MDY", {4}), ("DMY", set(range(1, 10)))):
        r = cli("anonymize", lake, "-o", out, "--qi", "age", "-k", "3", "--date-order", order, "--overwrite")
        assert r.exit_code == 0, r.stderr
        assert months == {m for (m,) in duckdb.execute(
            "SELECT DISTINCT month(visit) FROM read_parquet(?) WHERE id >= 200", [str(out)]).fetchall()}


def test_a_csv_line_starting_with_a_hash_is_a_row(tmp_path, out_dir):
    """DuckDB's sniffer took '#' for a comment character: lines starting with
    it were dropped and every value cut at it ('apt #4 main st' published as
    'apt '), exit 0 with the pass-through columns 'checked' (helper-15)."""
    src = tmp_path / "c.csv"
    rows = [f"{'#' if i % 7 == 3 else ''}{i},{20 + i % 9},apt #{i} main st" for i in range(60)]
    src.write_text("id,age,note\n" + "\n".join(rows) + "\n")
    for out in (out_dir / "o.parquet", out_dir / "o.csv"):
        r = cli("anonymize", src, "-o", out, "--qi", "age", "-k", "3")
        assert r.exit_code == 0, r.stderr
        notes = duckdb.execute("SELECT note FROM read_csv(?, all_varchar = true, comment = '') " if out.suffix == ".csv"
                               else "SELECT note FROM read_parquet(?)", [str(out)]).fetchall()
        assert sorted(n for (n,) in notes) == sorted(f"apt #{i} main st" for i in range(60))
    ids = duckdb.execute("SELECT id FROM read_parquet(?)", [str(out_dir / "o.parquet")]).fetchall()
    assert sorted(i for (i,) in ids) == sorted(("#" if i % 7 == 3 else "") + str(i) for i in range(60))


def test_job_file_lists_are_named_as_the_files_and_its_flags_combine(tmp_path, out_dir):
    """helper-15: a column of the job's `keep` that --qi also named was blamed
    on --keep when --keep added to the list; `metrics: hr.m` was named as
    --metrics='hr.m'; --hierarchy could not switch the job's
    `generalization: {zip: prefix}` to the hierarchy (refused as both)."""
    job = tmp_path / "job.yml"
    job.write_text(f"input: {ADULTS}\nqi: [age, native-country]\nk: 10\nkeep: [race, sex]\n"
                   "generalization: {native-country: prefix}\n")
    r = cli("anonymize", "--config", job, "-o", out_dir / "o.parquet", "--qi", "age,native-country,race",
            "--keep", "sex")
    assert r.exit_code == 2
    # Each side named where it came from: the QI was the command line's (helper-80).
    assert_one_line_error(r.stderr, r"^Error: 'keep' in '.*job\.yml' names 'race', which --qi makes a "
                                    r"quasi-identifier$")
    r = cli("anonymize", "--config", job, "-o", out_dir / "o.parquet", "--qi", "age,native-country,race",
            "--keep", "race")  # named by the flag, and by the file too
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"^Error: --keep names 'race', which is a quasi-identifier$")
    r = cli("anonymize", "--config", job, "-o", out_dir / "o.parquet", "--keep", "age")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"^Error: --keep names 'age', which 'qi' in '.*job\.yml' makes a quasi-identifier$")
    job.write_text(f"input: {ADULTS}\nqi: [age, native-country]\nk: 10\nkeep: [race]\nsensitive: [sex]\n")
    r = cli("anonymize", "--config", job, "-o", out_dir / "o.parquet", "--sensitive", "sex,race")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"^Error: 'keep' in '.*job\.yml' names 'race', which --sensitive makes a "
                                    r"sensitive column$")
    r = cli("anonymize", "--config", job, "-o", out_dir / "o.parquet", "--drop", "sex")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"^Error: --drop names 'sex', which 'sensitive' in '.*job\.yml' makes a "
                                    r"sensitive column$")
    job.write_text(f"input: {ADULTS}\nqi: [age, native-country]\nk: 10\nmetrics: hr.m\n"
                   "generalization: {native-country: prefix}\n")
    r = cli("anonymize", "--config", job, "-o", out_dir / "o.parquet")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"^Error: cannot tell the format of 'hr\.m' \('metrics' in '.*job\.yml'\): name a")
    job.write_text(f"input: {ADULTS}\nqi: [age, native-country]\nk: 10\n"
                   "generalization: {native-country: prefix}\n")
    r = cli("anonymize", "--config", job, "-o", out_dir / "o.parquet", "--hierarchy",
            f"native-country={REPO / 'hierarchies' / 'countries.json'}", "--json")
    assert r.exit_code == 0, r.stderr
    (text,) = duckdb.execute("SELECT parameters FROM read_parquet(?) WHERE kind = 'total'",
                             [str(out_dir / "o__metrics.parquet")]).fetchone()
    assert json.loads(text)["generalization"] == {"age": "interval", "native-country": "hierarchy"}


def test_metrics_record_what_was_applied(tmp_path):
    """The total row's parameters said generalization null for every QI
    left to its default, and nothing of the hierarchy file or the drops: a
    run could not be audited or rerun from its metrics."""
    out = tmp_path / "m.parquet"
    r = cli("anonymize", ADULTS, "-o", out, "--qi", "age,race,native-country", "--hierarchy",
            f"native-country={COUNTRIES}", "--drop", "workclass", "-k", "10")
    assert r.exit_code == 0, r.stderr
    (text,) = duckdb.execute(
        "SELECT parameters FROM read_parquet(?) WHERE kind = 'total'", [str(tmp_path / "m__metrics.parquet")]
    ).fetchone()
    params = json.loads(text)
    assert params["generalization"] == {"age": "interval", "race": "set", "native-country": "hierarchy"}
    assert params["hierarchy"] == {"native-country": str(COUNTRIES)}
    assert params["hierarchy_sha256"] == {"native-country": sqlanon.load_hierarchy(COUNTRIES).fingerprint}
    assert params["drop"] == ["workclass"]
    assert params["keep"] is None


def test_metrics_record_a_hierarchy_by_its_absolute_path(tmp_path, monkeypatch):
    """A path as typed (relative to a directory the row does not record, or
    joined with a job file's) could not be found again from the metrics."""
    monkeypatch.chdir(REPO / "examples")
    job = tmp_path / "job.yml"
    job.write_text(f"qi: [age, native-country]\nk: 10\nhierarchy: {{native-country: {os.path.relpath(COUNTRIES, tmp_path)}}}\n")
    for args in (["--hierarchy", "native-country=../hierarchies/countries.json"], ["--config", job]):
        out = tmp_path / "m.parquet"
        r = cli("anonymize", ADULTS, "-o", out, "--qi", "age,native-country", "-k", "10", "--overwrite", *args)
        assert r.exit_code == 0, r.stderr
        (text,) = duckdb.execute(
            "SELECT parameters FROM read_parquet(?) WHERE kind = 'total' ORDER BY started_at DESC LIMIT 1",
            [str(tmp_path / "m__metrics.parquet")],
        ).fetchone()
        assert json.loads(text)["hierarchy"] == {"native-country": str(COUNTRIES)}


def test_output_to_stdout_is_refused(tmp_path):
    """'-o -' used to write part files into a directory named '-'."""
    r = cli("anonymize", ADULTS, "-o", "-", "--qi", "age", "-k", "10")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"the output '-'", r"standard output")
    assert not Path("-").exists()


def test_compressed_and_tab_separated_files(tmp_path):
    """.csv.gz, .csv.zst and .tsv are CSV: read as named (a .tsv by tabs,
    never sniffed into commas) and written as named, metrics too."""
    rows = "".join(f"{20 + i % 30}\t{['a,b', 'c'][i % 2]}\t{['flu', 'cold'][i % 3 % 2]}\n" for i in range(300))
    lake = tmp_path / "lake"
    for part in ("x=1", "x=2"):
        (lake / part).mkdir(parents=True)
        with gzip.open(lake / part / "p.tsv.gz", "wt") as f:
            f.write("age\tnote\ts\n" + rows)
    tsv = tmp_path / "in.tsv"
    tsv.write_text("age\tnote\ts\n" + rows)
    for src, out, metrics in ((lake, "o.tsv.gz", "m.csv.zst"), (f"{lake}/*/*.tsv.gz", "o.csv.zst", "m.csv.gz"),
                              (tsv, "o.tsv", "m.tsv")):
        r = cli("anonymize", src, "-o", tmp_path / out, "--metrics", tmp_path / metrics,
                "--qi", "age", "--sensitive", "s", "-k", "10", "-l", "2")
        assert r.exit_code == 0, r.stderr
        with open(tmp_path / out, "rb") as f:
            head = f.read(4)
        assert head[:2] == b"\x1f\x8b" if out.endswith(".gz") else head == b"(\xb5/\xfd" if out.endswith(".zst") \
            else head == b"age\t"
        got = duckdb.execute(f"SELECT note, count(*) FROM '{tmp_path / out}' GROUP BY ALL ORDER BY ALL").fetchall()
        assert got == [("a,b", 150 * (2 if src != tsv else 1)), ("c", 150 * (2 if src != tsv else 1))]
        assert duckdb.execute(f"SELECT count(*) FROM '{tmp_path / metrics}' WHERE kind = 'total'").fetchone() == (1,)
        r = cli("verify", tmp_path / out, "--qi", "age", "--sensitive", "s", "-k", "10", "-l", "2")
        assert r.exit_code == 0, r.stderr
    assert sqlanon.io.default_metrics_path("o.tsv.gz") == "o__metrics.parquet"


def test_directory_mixing_csv_and_tsv_is_refused(tmp_path, out_dir):
    lake = tmp_path / "lake"
    lake.mkdir()
    (lake / "a.csv").write_text("age\n1\n")
    (lake / "b.tsv").write_text("age\n1\n")
    r = cli("anonymize", lake, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "2")
    assert r.exit_code == 2, r.stderr  # a retry fails alike (helper-87)
    assert_one_line_error(r.stderr, r"mixes \.csv and \.tsv files: name one kind with a glob \(dir/\*\.csv\)")
    assert snapshot(out_dir) == {}


def test_the_readmes_scheduled_job_runs_as_written(tmp_path):
    """The job file of the README's 'Scheduled jobs', verbatim, on a lake of its shape; run twice, as nightly."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Scheduled jobs"):]
    yml = section[section.index("```yaml\n") + len("```yaml\n"):section.index("```\n", section.index("```yaml"))]
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "people.yml").write_text(yml)
    lake = tmp_path / "lake" / "people"
    (lake / "_temporary").mkdir(parents=True)
    n = 2000
    people = pd.DataFrame({
        "name": [f"person {i}" for i in range(n)], "ssn": [f"{i:09d}" for i in range(n)],
        "age": [18 + i % 70 for i in range(n)], "zip": [f"2{i % 40:04d}" for i in range(n)],
        "sex": ["F", "M"] * (n // 2), "diagnosis": ["flu", "cold", "asthma"] * (n // 3) + ["flu"] * (n % 3),
        "visit_id": range(n), "ward": [f"w{i % 7}" for i in range(n)],
        "admitted": pd.date_range("2020-01-01", periods=n, freq="h"),
    })
    people.iloc[: n // 2].to_parquet(lake / "part-0.parquet")
    people.iloc[n // 2:].to_parquet(lake / "part-1.parquet")
    people.to_parquet(lake / "_temporary" / "part-0.parquet")  # skipped
    (tmp_path / "hierarchies").mkdir()
    zips = {"cat": "*", "subcats": [{"cat": f"2{d}***", "subcats": [{"cat": f"2{i:04d}"} for i in range(40)
                                                                     if i // 10 == d]} for d in range(4)]}
    (tmp_path / "hierarchies" / "zip.json").write_text(json.dumps(zips))
    (tmp_path / "published").mkdir()
    for night in range(2):
        r = run_subprocess("anonymize", "--config", tmp_path / "jobs" / "people.yml", "--json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["rows"] == n and json.loads(r.stdout)["fragments"] == 8
    assert sqlanon.run_job(tmp_path / "jobs" / "people.yml", "--seed", "3").metrics.rows == n  # as from Python
    out = pq.read_table(tmp_path / "published" / "people.parquet")
    assert not {"name", "ssn", "visit_id"} & set(out.column_names)
    assert {"ward", "admitted"} <= set(out.column_names)
    runs = pq.read_table(tmp_path / "published" / "anonymization_metrics.parquet").column("run_id").to_pylist()
    assert len(set(runs)) == 3
    # The third night the source has a new column: `keep` stops the job.
    published = snapshot(tmp_path / "published")
    for i, part in enumerate((people.iloc[: n // 2], people.iloc[n // 2:])):
        part.assign(email=[f"p{j}@example.org" for j in part.index]).to_parquet(lake / f"part-{i}.parquet")
    r = run_subprocess("anonymize", "--config", tmp_path / "jobs" / "people.yml", "--json")
    assert r.returncode == 2
    assert_one_line_error(r.stderr, r"'keep' in '.*people.yml' leaves out 'email', a column of")
    assert snapshot(tmp_path / "published") == published


def test_a_url_quoted_in_an_error_has_its_password_masked(tmp_path):
    """Errors that quote a value given where a path was expected printed a
    database URL's password: a job file's input list, --metrics."""
    url = "postgresql://op:S3cretpw@127.0.0.1:5/hr"
    cfg = tmp_path / "job.yml"
    cfg.write_text(f'input: ["{url}"]\noutput: {tmp_path / "x.parquet"}\nqi: [age]\nk: 5\n')
    runs = [
        cli("anonymize", "--config", cfg),
        cli("anonymize", ADULTS, "-o", tmp_path / "x.parquet", "--qi", "age", "-k", "5", "--metrics", url),
        cli("anonymize", ADULTS, "-o", tmp_path / "x.parquet", "--qi", "age", "-k", "5", "--metrics",
            url.replace("op:S3cretpw", "op") + "?password=S3cretpw"),
    ]
    runs.append(cli("anonymize", ADULTS, "-o", tmp_path / "x.parquet", "--qi", "age", "-k", "5", "--metrics",
                    url.replace("S3cretpw", "S3c'ret\"pw")))  # quotes in a password
    cfg.write_text(f'input: ["{url.replace("S3cretpw", "S3cret pw")}"]\n'  # a space, not percent-encoded
                   f'output: {tmp_path / "x.parquet"}\nqi: [age]\nk: 5\n')
    runs.append(cli("anonymize", "--config", cfg))
    # A value shortened for the message was cut before it was masked: a long URL lost its '@' and
    # printed the password's start (helper-51)
    long = "postgresql://op:S3cretpw_xyz_long_enough@db.warehouse.example.com:5432/human_resources"
    for value in (f'["{long}"]', f'{{m: "{long}"}}'):
        cfg.write_text(f'input: {value}\noutput: {tmp_path / "x.parquet"}\nqi: [age]\nk: 5\n')
        runs += [cli("anonymize", "--config", cfg), cli("verify", "--config", cfg)]
    for r in runs:
        assert r.exit_code == 2 and ("op:***@" in r.stderr or "password=***" in r.stderr), r.stderr
        assert "S3cret" not in r.stderr + r.stdout and "S3c'ret" not in r.stderr
    with pytest.raises(sqlanon.ConfigError) as caught:
        sqlanon.anonymize(ADULTS, tmp_path / "x.parquet", qi=["age"], k=5, metrics=url)
    assert "S3cretpw" not in str(caught.value) and "op:***@" in str(caught.value)
    # A URL without a password before one with it: each keeps its own host (they were merged into one)
    assert redact_urls("'postgresql://db1:5432/x' and 'postgresql://op:S3cret pw@db2/y'") == (
        "'postgresql://db1:5432/x' and 'postgresql://op:***@db2/y'")


@pytest.mark.parametrize("query, said", [
    ("bogus=1", 'invalid connection option "bogus"'), ("sslmode=bogus", 'invalid sslmode value: "bogus"'),
    ("connect_timeout=abc", "bad value for connect_timeout"), ("port=99999", 'invalid port number: "99999"'),
    ("", "Connection refused")])
def test_a_database_url_option_libpq_refuses_is_a_usage_error(tmp_path, query, said):
    """A URL's option libpq does not know, or whose value it refuses, is the
    URL's fault, exit 2 as a port that is not a number is (it was 1, said
    of a retry's to succeed: helper-61); a server down is the run's (1)."""
    url = f"postgresql://op:S3cretpw@127.0.0.1:1/hr?{query}"
    for r in (cli("anonymize", url, "--table", "t", "-o", tmp_path / "x.parquet", "--qi", "age", "-k", "5"),
              cli("anonymize", ADULTS, "-o", url, "--target-table", "t", "--qi", "age", "-k", "5")):
        assert r.exit_code == (1 if not query else 2), r.stderr
        assert_one_line_error(r.stderr, r"cannot connect to postgresql://op:\*\*\*@127.0.0.1:1/hr", re.escape(said))
    assert not (tmp_path / "x.parquet").exists()
    if not query:  # a port no service has, given a host name (helper-189)
        r = cli("anonymize", "postgresql://op@localhost:-1/hr", "--table", "t", "-o", tmp_path / "x.parquet", "--qi",
                "age", "-k", "5")
        # said as the port's fault (it was libpq's 'failed to resolve host ... Servname not supported')
        assert r.exit_code == 2 and "(port -1 is not 1-65535)" in r.stderr, r.stderr


def test_an_output_given_as_o_equals_is_refused(tmp_path, monkeypatch):
    """click reads -o=anon.parquet as the file '=anon.parquet', which was
    written, exit 0 (helper-188); --output=x and -o ./=x are what they say."""
    monkeypatch.chdir(tmp_path)
    r = cli("anonymize", ADULTS, "-o=anon.parquet", "--qi", "age", "-k", 5)
    assert r.exit_code == 2 and "Error: -o takes the path after a space: '=anon.parquet' was read as the output's" in r.stderr
    assert list(tmp_path.iterdir()) == []
    assert cli("anonymize", ADULTS, "--output=anon.parquet", "--qi", "age", "-k", 5).exit_code == 0
    assert cli("anonymize", ADULTS, "-o", "./=odd.parquet", "--qi", "age", "-k", 5).exit_code == 0
    assert (tmp_path / "anon.parquet").exists() and (tmp_path / "=odd.parquet").exists()


@pytest.mark.parametrize("body, said", [
    ("table: t", "'table' in {job!r} names a table in a DuckDB file"),
    ("scheduler: tcp://127.0.0.1:1", "'scheduler' in {job!r} goes with executor: dask"),
    ("encoding: utf-16", "('encoding' in {job!r}: utf-16)"),
    ("hierarchy: {{native-country: {countries}}}\ngeneralization: {{native-country: prefix}}",
     "drop one of the two ('hierarchy' and 'generalization' in {job!r})"),
    ("generalization: {{workclass: interval}}", "cast it in a view, or use set or prefix ('generalization' in {job!r})"),
    ("sensitive: [race]", "cannot be both a quasi-identifier and sensitive ('qi' and 'sensitive' in {job!r})"),
])
def test_a_job_files_errors_name_its_keys_not_flags(tmp_path, body, said):
    """Errors about a job file's values named flags nobody passed ('--table
    names a table…', 'goes with --executor=dask', '(--encoding utf-16)') or
    no key at all (helper-188)."""
    job = tmp_path / "job.yml"
    job.write_text(f"input: {ADULTS}\noutput: {tmp_path / 'o.parquet'}\nqi: [age, race, native-country, workclass]\n"
                   f"k: 5\n" + body.format(countries=REPO / "hierarchies" / "countries.json") + "\n")
    r = cli("anonymize", "--config", job)
    assert r.exit_code == 2 and said.format(job=str(job)) in r.stderr, r.stderr
    assert "--" not in r.stderr.replace("--help", "")


@pytest.mark.parametrize("q", [["yes", "yes", "Yes", "Yes", "no", "no"],
                               ["2020-01-01", "2020-01-01", "2020-1-1", "2020-1-1", "2020-01-02", "2020-01-02"]])
def test_a_csv_whose_qi_spellings_duckdb_types_alike_is_checked_class_by_class(tmp_path, q):
    """The check of a CSV as its readers type it typed the QIs too: 'yes' and
    'Yes' (one BOOLEAN), '2020-01-01' and '2020-1-1' (one DATE) made one
    class, whose l hid that pandas' class 'yes' holds '5' and '5.0', one
    value: published and verified, exit 0 (helper-191)."""
    src, out = tmp_path / "in.parquet", tmp_path / "o.csv"
    pq.write_table(pa.table({"q": q, "s": ["5", "5.0", "7", "8", "1", "2"]}), src)
    r = cli("anonymize", src, "-o", out, "--qi", "q", "-k", 2, "-l", 2, "--sensitive", "s", "--workers", 1)
    assert r.exit_code == 1 and "refusing to publish" in r.stderr and "__distinct_s=1" in r.stderr, r.stderr
    assert not out.exists()
    out.write_text("q,s\n" + "".join(f"{a},{b}\n" for a, b in zip(q, ["5", "5.0", "7", "8", "1", "2"])))
    r = cli("verify", out, "--qi", "q", "-k", 2, "-l", 2, "--sensitive", "s")
    assert r.exit_code == 1 and "__distinct_s=1" in r.stdout, r.stdout


def test_bare_sqlanon_prints_its_help():
    """It printed 'Error: Usage: …', the whole help, then "(see 'sqlanon --help')"."""
    r = run_subprocess()
    assert r.returncode == 2 and r.stdout.startswith("Usage: ") and "anonymize" in r.stdout
    assert r.stderr == ""


def test_help_wins_over_a_bad_config_before_it(tmp_path):
    """`--config bad.yml --help` showed the YAML error instead of the help."""
    r = cli("anonymize", "--config", tmp_path / "missing.yml", "--help")
    assert r.exit_code == 0 and r.stdout.startswith("Usage:")
    assert cli("anonymize", "--config", tmp_path / "missing.yml").exit_code == 2


def test_a_run_started_with_stdout_and_stderr_closed_publishes(tmp_path):
    """Started with both closed (a supervisor's >&- 2>&-), every run exited
    1 without a word: the check for a terminal on stderr failed (helper-50)."""
    out = tmp_path / "o.parquet"
    args = [sys.executable, "-m", "sqlanon.cli", "anonymize", str(ADULTS), "-o", str(out), "--qi", "age", "-k", "10"]
    for extra in ([], ["--workers", "2", "-v"]):
        p = subprocess.run([*args, *extra, "--overwrite"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=300, cwd=REPO, preexec_fn=lambda: (os.close(1), os.close(2)))
        assert p.returncode == 0
        assert pq.read_metadata(out).num_rows == ADULT_ROWS
        out.unlink()


@pytest.mark.parametrize("stdout", ["full", "closed"])
def test_a_published_run_whose_summary_cannot_be_written_exits_0(tmp_path, stdout):
    """Exit 1 tells a scheduler nothing was published: a run that had
    published but then met a full disk on stdout exited 1 ('internal
    error'), one started with stdout closed (>&-) printed a traceback."""
    out = tmp_path / "o.parquet"
    args = [sys.executable, "-m", "sqlanon.cli", "anonymize", str(ADULTS), "-o", str(out), "--qi", "age", "-k", "10",
            "--json"]
    if stdout == "full":
        with open("/dev/full", "w") as full:
            p = subprocess.run(args, stdout=full, stderr=subprocess.PIPE, text=True, timeout=300, cwd=REPO)
    else:
        p = subprocess.run(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=300, cwd=REPO,
                           preexec_fn=lambda: os.close(1))
    assert p.returncode == 0, p.stderr
    assert p.stderr.startswith("Warning: published, but the summary could not be written to standard output"), p.stderr
    assert len(p.stderr.splitlines()) == 1 and pq.read_metadata(out).num_rows == ADULT_ROWS


def test_json_shows_an_output_through_dot_dot_and_its_metrics_alike(tmp_path):
    """A job file's output '../pub/o.parquet' is absolute through its
    directory: --json showed the output as '/…/pub/o.parquet' and its
    metrics as '/…/jobs/../pub/o__metrics.parquet' (helper-64)."""
    (tmp_path / "jobs").mkdir()
    (tmp_path / "pub").mkdir()
    (tmp_path / "jobs" / "j.yml").write_text(f"input: {ADULTS}\noutput: ../pub/o.parquet\nqi: [age]\nk: 10\n")
    r = cli("anonymize", "--config", tmp_path / "jobs" / "j.yml", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["output"], doc["metrics_table"]) == (str(tmp_path / "pub" / "o.parquet"),
                                                     str(tmp_path / "pub" / "o__metrics.parquet"))


def test_job_file_paths_are_shown_without_dot_dot_unless_a_link_needs_it(tmp_path):
    """A job file's '../lake/x.csv' was named '/…/jobs/../lake/x.csv' in its
    errors (helper-80). Tidied where that names the same file; through a
    symbolic link to the jobs' directory, '..' is the link target's parent,
    which the tidy path would not be, so it stays."""
    (tmp_path / "jobs").mkdir()
    (tmp_path / "lake").mkdir()
    job = tmp_path / "jobs" / "j.yml"
    job.write_text("input: ../lake/missing.csv\noutput: ../pub/o.parquet\nqi: [age]\nk: 10\n")
    r = cli("anonymize", "--config", job)
    assert r.exit_code in (1, 2) and str(tmp_path / "lake" / "missing.csv") in r.stderr and ".." not in r.stderr

    (tmp_path / "elsewhere" / "jobs").mkdir(parents=True)
    (tmp_path / "elsewhere" / "lake").mkdir()
    (tmp_path / "elsewhere" / "pub").mkdir()
    shutil.copy(ADULTS, tmp_path / "elsewhere" / "lake" / "missing.csv")  # where the link's '..' leads
    (tmp_path / "linked").symlink_to(tmp_path / "elsewhere" / "jobs")
    (tmp_path / "linked" / "j.yml").write_text(job.read_text())
    r = cli("anonymize", "--config", tmp_path / "linked" / "j.yml", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["rows"] == ADULT_ROWS
    assert (tmp_path / "elsewhere" / "pub" / "o.parquet").exists() and not (tmp_path / "pub").exists()


@pytest.mark.parametrize("output, extra, shown", [
    ("o.parquet", ("--metrics", "m.csv"), ("o.parquet", "m.csv")),
    ("o.csv", (), ("o.csv", "o__metrics.parquet")),
    ("o.duckdb", ("--target-table", "t"), ("o.duckdb table t", "o.duckdb table t__metrics")),
])
def test_json_shows_a_relative_output_and_metrics_absolute_as_the_input(tmp_path, monkeypatch, output, extra, shown):
    """--json gave the input absolute but the output and metrics table as
    typed ('out/x.parquet'), which a log line read later cannot place (helper-56)."""
    monkeypatch.chdir(tmp_path)
    r = cli("anonymize", ADULTS, "-o", output, *extra, "--qi", "age,race", "-k", "10", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert (doc["output"], doc["metrics_table"]) == tuple(f"{tmp_path}{os.sep}{s}" for s in shown)


@pytest.mark.parametrize("dirs, pattern", [
    (("k=1/k=2", "k=3/k=4"), r"'.*k=1/k=2/p\.parquet' has the partition key 'k' twice in its path, of which DuckDB "
                             r"reads the outer value only"),
    (("k=-00", "k=7"), r"partition key 'k' .* numbers not written as DuckDB reads them back \('-00'\)"),
    (("t=2020-01-01 10:00:00", "t=2020-01-01T11:00:00+02:00"),
     r"partition key 't' .* times with a UTC offset, which DuckDB reads without it .*'2020-01-01T11:00:00\+02:00'"),
    (("t=2020-01-01 10:00:00", "t=2020-06-01 10:00:00.1234567"),
     r"partition key 't' .* times finer than microseconds"),
])
def test_partition_values_that_duckdb_would_change_are_refused(tmp_path, out_dir, dirs, pattern):
    """A key twice in one path kept the outer value only; k=-00 was read as
    0; a directory's UTC offset was dropped (another instant) and a seventh
    decimal cut: each published with exit 0 (helper-58)."""
    lake = tmp_path / "lake"
    for i, d in enumerate(dirs):
        (lake / d).mkdir(parents=True)
        pq.write_table(pa.table({"id": list(range(i * 20, i * 20 + 20)), "age": [20 + j % 4 for j in range(20)]}),
                       lake / d / "p.parquet")
    r = cli("anonymize", lake, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "4", "--workers", "1")
    assert r.exit_code == 2, r.stderr
    assert_one_line_error(r.stderr, pattern)
    assert snapshot(out_dir) == {}


def test_dot_dot_after_a_linked_directory_is_taken_as_the_shell_takes_it(tmp_path):
    """DuckDB and os.path.abspath cut 'link/..' off as text, the kernel
    follows the link first: a job file in a linked directory naming
    ../people.parquet read another file than `ls` showed (exit 0) and wrote
    its output elsewhere; an output through link/.. failed with an internal
    error (helper-60). Both are the kernel's now."""
    (tmp_path / "real" / "jobs").mkdir(parents=True)
    (tmp_path / "real" / "pub").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real" / "jobs")
    _small(tmp_path / "real" / "people.parquet")
    pq.write_table(pa.table({"id": [1, 2, 3], "age": [1, 2, 3]}), tmp_path / "people.parquet")  # the text's
    (tmp_path / "real" / "jobs" / "job.yml").write_text(
        "input: ../people.parquet\noutput: ../pub/p.parquet\nqi: [age]\nk: 5\nworkers: 1\n")
    r = cli("anonymize", "--config", tmp_path / "link" / "job.yml", "--json")
    assert r.exit_code == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["rows"] == 200 and got["output"] == str(tmp_path / "real" / "pub" / "p.parquet")
    assert pq.read_table(tmp_path / "real" / "pub" / "p.parquet").num_rows == 200
    r = cli("anonymize", tmp_path / "link" / ".." / "people.parquet", "-o", tmp_path / "link" / ".." / "pub" / "q.csv",
            "--qi", "age", "-k", "5", "--workers", "1")
    assert r.exit_code == 0, r.stderr
    assert len((tmp_path / "real" / "pub" / "q.csv").read_text().splitlines()) == 201
    # an input ending in '..' too (an output so is refused as written) (helper-63)
    (tmp_path / "l2" / "real" / "sub").mkdir(parents=True)
    (tmp_path / "l2" / "link").symlink_to(tmp_path / "l2" / "real" / "sub")
    _small(tmp_path / "l2" / "real" / "data.parquet")
    pq.write_table(pa.table({"id": [1, 2, 3], "age": [1, 2, 3]}), tmp_path / "l2" / "data.parquet")
    r = cli("anonymize", tmp_path / "l2" / "link" / "..", "-o", tmp_path / "l2.parquet", "--qi", "age", "-k", "5",
            "--workers", "1", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["rows"] == 200


def test_a_job_files_output_dash_is_refused_as_the_flags(tmp_path, monkeypatch):
    """`-o -` is refused; a job file's `output: "-"`, joined to its directory,
    quietly made a directory named '-' there (helper-60)."""
    (tmp_path / "job.yml").write_text(f'input: {ADULTS}\noutput: "-"\nqi: [age]\nk: 5\n')
    monkeypatch.chdir(tmp_path)
    r = cli("anonymize", "--config", tmp_path / "job.yml")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"'output' in '.*job\.yml' is '-': name a file")
    assert not (tmp_path / "-").exists()


def test_a_csv_name_with_a_trailing_slash_is_refused(tmp_path, out_dir):
    """-o y.csv/ published a directory of Parquet parts named y.csv, which
    pandas failed to read as CSV and the next -o y.csv refused (helper-62).
    x.parquet/ stays a directory of parts, as Spark names them."""
    r = cli("anonymize", ADULTS, "-o", f"{out_dir / 'y.csv'}/", "--qi", "age", "-k", "5", "--workers", "1")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"'.*y\.csv/' names a CSV file and a directory of Parquet parts")
    assert snapshot(out_dir) == {}
    r = cli("anonymize", ADULTS, "-o", f"{out_dir / 'y.parquet'}/", "--qi", "age", "-k", "5", "--workers", "1")
    assert r.exit_code == 0, r.stderr
    assert (out_dir / "y.parquet").is_dir()


def test_a_duckdb_target_another_process_holds_is_refused_before_any_work(tmp_path, monkeypatch):
    """A dashboard's read-only connection to the target file: the run did all
    its work, then failed on DuckDB's 'Could not set lock' (helper-67)."""
    db = tmp_path / "pub.duckdb"
    args = ["anonymize", ADULTS, "-o", db, "--target-table", "people", "--qi", "age", "-k", "5", "--overwrite"]
    assert cli(*args).exit_code == 0
    before = duckdb.connect(str(db)).execute("SELECT count(*) FROM people").fetchone()
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time\n"
                               f"c = duckdb.connect({str(db)!r}, read_only=True); print('open', flush=True)\n"
                               "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "open\n"
        with monkeypatch.context() as m:  # before any work: the statistics pass never starts
            m.setattr(sqlanon_coordinator, "domain_stats", lambda *a, **kw: pytest.fail("the work started"))
            for extra in ((), ("--explain",)):
                r = cli(*args, *extra)
                assert r.exit_code == 1
                assert_one_line_error(r.stderr, rf"cannot write '.*pub.duckdb table people': another process \(PID "
                                                rf"{holder.pid}\) has its file open, .* close that connection, or "
                                                r"publish to another file")
    finally:
        holder.communicate("", timeout=30)
    assert duckdb.connect(str(db), read_only=True).execute("SELECT count(*) FROM people").fetchone() == before
    assert cli(*args).exit_code == 0  # and once it is closed, the run goes ahead


def test_a_dotted_duckdb_table_names_its_metrics_table_quoted(tmp_path):
    """--target-table '"x.y"' reported its metrics table as 'x.y__metrics',
    which --table reads as table y__metrics of schema x (helper-62)."""
    db = tmp_path / "m.duckdb"
    r = cli("anonymize", ADULTS, "-o", db, "--target-table", '"x.y"', "--qi", "age", "-k", "5", "--workers", "1",
            "--json")
    assert r.exit_code == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["output"] == f'{db} table "x.y"' and got["metrics_table"] == f'{db} table "x.y__metrics"'
    assert cli("verify", db, "--table", '"x.y"', "--qi", "age", "-k", "5").exit_code == 0


def test_an_output_below_a_file_says_so(tmp_path):
    """-o t.parquet/x.parquet, t.parquet a file, said "output directory
    't.parquet' does not exist" (helper-62)."""
    pq.write_table(pa.table({"a": [1]}), tmp_path / "t.parquet")
    for out, extra in ((tmp_path / "t.parquet" / "x.parquet", []),
                       (tmp_path / "t.parquet" / "x.duckdb", ["--target-table", "t"])):
        r = cli("anonymize", ADULTS, "-o", out, "--qi", "age", "-k", "5", *extra)
        assert r.exit_code == 2
        assert_one_line_error(r.stderr, r"output directory '.*t\.parquet' is a file$")


def test_library_warnings_name_arguments_per_call_and_thread():
    """The filter that writes a library call's warnings in its terms was
    added and removed per call: a nested call's end undid the outer's, and
    another thread's CLI warnings were rewritten meanwhile (helper-63)."""
    import threading

    from sqlanon import errors

    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    log = logging.getLogger("sqlanon")
    log.addHandler(handler)
    started, logged = threading.Event(), threading.Event()

    def elsewhere():  # a CLI run in another thread
        started.wait(5)
        log.warning("pass --overwrite")
        logged.set()

    @errors.in_library_terms
    def inner():
        log.warning("pass --overwrite")

    @errors.in_library_terms
    def outer():
        inner()
        started.set()
        logged.wait(5)
        log.warning("pass --overwrite")

    try:
        t = threading.Thread(target=elsewhere)
        t.start()
        outer()
        t.join()
        log.warning("pass --overwrite")
    finally:
        log.removeHandler(handler)
    assert seen == ["pass overwrite=True", "pass --overwrite", "pass overwrite=True", "pass --overwrite"]


def test_postgresql_without_psycopg_says_how_to_install_it(tmp_path):
    """Without the [postgres] extra a PostgreSQL input and `verify` of a
    table were internal errors (ModuleNotFoundError: No module named
    'psycopg'); an output said what to install (helper-101)."""
    url = "postgresql://u@127.0.0.1:1/db"
    code = ("import sys\nsys.modules['psycopg'] = None  # as if not installed\n"
            "from sqlanon._script import entry\nsys.exit(entry())\n")
    for args in (["anonymize", url, "--table", "t", "-o", tmp_path / "o.parquet", "--qi", "age", "-k", "2"],
                 ["verify", url, "--table", "t", "--qi", "age", "-k", "2"],
                 ["anonymize", ADULTS, "-o", url, "--target-table", "t", "--qi", "age", "-k", "2"]):
        p = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True,
                           timeout=120, cwd=REPO)
        assert p.returncode == 2, p.stderr
        # not "pip install 'sqlanon[postgres]'": sqlanon is not on PyPI (helper-201)
        assert_one_line_error(p.stderr, r"^Error: PostgreSQL needs psycopg: install sqlanon's postgres extra \(in "
                                        r"its checkout: pip install -e '\.\[postgres\]'\)$")
    assert not (tmp_path / "o.parquet").exists()


def test_a_cut_compressed_input_is_refused_naming_it(tmp_path, out_dir):
    """DuckDB reads a .csv.gz cut short (a copy or download that stopped) up
    to the cut without a word: a run published 15,273 of 20,000 rows, exit
    0 (helper-107). Here the cut falls where the rows read whole, so DuckDB
    finds nothing wrong (and reads fewer of them than the file holds): the
    file is refused before any work, as a lake's file, and by verify."""
    import zlib

    def rows(lo, hi):
        return "".join(f"{i},{20 + i % 40},{['copd', 'flu', 'cold'][i % 3]}\n" for i in range(lo, hi)).encode()

    z = zlib.compressobj(wbits=31)
    head = z.compress(b"id,age,dx\n" + rows(0, 15000)) + z.flush(zlib.Z_SYNC_FLUSH)
    whole = head + z.compress(rows(15000, 20000)) + z.flush()
    lake = tmp_path / "lake"
    lake.mkdir()
    (lake / "a.csv.gz").write_bytes(whole)
    (lake / "b.csv.gz").write_bytes(head)  # every row before the cut is whole
    assert 0 < duckdb.sql(f"SELECT count(*) FROM read_csv('{lake / 'b.csv.gz'}')").fetchone()[0] <= 15000  # no error
    r = cli("anonymize", lake / "a.csv.gz", "-o", out_dir / "o.parquet", "--qi", "age", "--sensitive", "dx",
            "-k", "5", "-l", "2")
    assert r.exit_code == 0, r.stderr
    for args in (["anonymize", lake / "b.csv.gz", "-o", out_dir / "b.parquet", "--qi", "age", "-k", "5"],
                 ["anonymize", lake, "-o", out_dir / "lake.parquet", "--qi", "age", "-k", "5"],
                 ["verify", lake / "b.csv.gz", "--qi", "age", "-k", "5"]):
        r = cli(*args)
        assert r.exit_code == 1
        assert_one_line_error(r.stderr, rf"^Error: '{re.escape(str(lake / 'b.csv.gz'))}' is a cut gzip file \(it "
                                        r"ends before its end-of-stream marker\): its last rows would be lost")
    # zstd: DuckDB failed on the last row's columns, or called the file empty (helper-107)
    duckdb.sql(f"COPY (SELECT * FROM read_csv('{lake / 'a.csv.gz'}')) TO '{tmp_path / 'a.csv.zst'}' "
               "(FORMAT csv, COMPRESSION zstd)")
    data = (tmp_path / "a.csv.zst").read_bytes()
    for size in (len(data) // 2, 20):
        (tmp_path / "b.csv.zst").write_bytes(data[:size])
        r = cli("anonymize", tmp_path / "b.csv.zst", "-o", out_dir / "z.parquet", "--qi", "age", "-k", "5")
        assert r.exit_code == 1
        assert_one_line_error(r.stderr, rf"^Error: '{re.escape(str(tmp_path / 'b.csv.zst'))}' is a cut zstd file "
                                        r"\(it ends inside a frame\): its last rows would be lost; copy it again$")
    # not zstd at all (it said "cannot read ...: None": helper-112)
    (tmp_path / "b.csv.zst").write_bytes(b"id,age\n1,2\n")
    r = cli("anonymize", tmp_path / "b.csv.zst", "-o", out_dir / "z.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 1
    assert_one_line_error(r.stderr, rf"^Error: '{re.escape(str(tmp_path / 'b.csv.zst'))}' is not a whole zstd file "
                                    r"\(ZSTD decompress failed: Unknown frame descriptor\): copy it again$")
    assert sorted(p.name for p in out_dir.iterdir()) == ["o.parquet", "o__metrics.parquet"]


def test_a_csv_input_that_is_not_utf8_is_refused_naming_its_line(tmp_path, out_dir):
    """A Latin-1 byte past the rows DuckDB's sniffer reads made the scan of
    a text column an internal error ('Attempted to access index 2 within
    vector of size 1'), exit 1, no word of the encoding; where the first
    rows held it, DuckDB's error said only what was wrong (helper-107). The
    file, the line and what to do, before any work, exit 2 (a retry fails
    alike); plain, gzip, in a lake, and to verify."""
    import gzip

    rows = ["id,age,city"] + [f"{i},{20 + i % 40},city{i % 4}" for i in range(60000)]
    rows[50001] = "50000,30,M\xfcnchen"
    lake = tmp_path / "lake"
    lake.mkdir()
    text = "\n".join(rows).encode("latin-1")
    (lake / "a.csv").write_bytes("\n".join(rows[:100]).encode())
    (lake / "b.csv").write_bytes(text)
    (tmp_path / "b.csv.gz").write_bytes(gzip.compress(text))
    for f, args in ((lake / "b.csv", ["anonymize", lake / "b.csv", "-o", out_dir / "b.parquet", "--qi", "age,city"]),
                    (lake / "b.csv", ["anonymize", lake, "-o", out_dir / "lake.parquet", "--qi", "age,city"]),
                    (tmp_path / "b.csv.gz", ["anonymize", tmp_path / "b.csv.gz", "-o", out_dir / "gz.parquet",
                                             "--qi", "age,city"]),
                    (lake / "b.csv", ["verify", lake / "b.csv", "--qi", "age,city"])):
        r = cli(*args, "-k", "5")
        assert r.exit_code == 2, r.stderr
        assert_one_line_error(r.stderr, rf"^Error: cannot read '{re.escape(str(f))}': line 50002 is not UTF-8 "
                                        r"text, as CSV inputs are read by default: " + (
                                            r"name its encoding \(--encoding latin-1, utf-16\) or convert the file "
                                            r"first$" if args[0] == "anonymize" else r"convert the file first \(e\.g\. "
                                            r"iconv -f LATIN1 -t UTF-8 in\.csv > out\.csv\)$"))
    assert not list(out_dir.iterdir())
    (lake / "b.csv").write_bytes(text.decode("latin-1").encode())  # converted
    assert cli("anonymize", lake, "-o", out_dir / "lake.parquet", "--qi", "age,city", "-k", "5").exit_code == 0
    # A character split across two of the pass's reads, then a bad byte: its line, not the next (helper-112)
    split = tmp_path / "split.csv"
    split.write_bytes(b"id,city\n1," + b"a" * (2**20 - 12) + "€".encode() + b"\xff\n2,b\n")
    r = cli("anonymize", split, "-o", out_dir / "s.parquet", "--qi", "city", "-k", "2")
    assert r.exit_code == 2 and "line 2 is not UTF-8 text" in r.stderr, r.stderr


def test_a_csv_inputs_encoding_is_named_with_encoding(tmp_path, out_dir, caplog):
    """A Latin-1 export (Excel's, a European system's) had to be converted
    first: --encoding latin-1 (or utf-16) reads it, its text published as
    written (UTF-8), the parameters recording it; a file that is not such
    text is refused by its line; a job file takes it too."""
    rows = ["id,age,city"] + [f"{i},{20 + i % 40},{'Zürich' if i % 2 else 'Genève'} {i % 3}" for i in range(30_000)]
    rows[25_001] = "25000,30,M\xfcnchen"
    latin, utf16 = tmp_path / "latin.csv", tmp_path / "utf16.csv"
    latin.write_bytes("\n".join(rows).encode("latin-1"))
    utf16.write_bytes("\n".join(rows).encode("utf-16"))
    for src, name in ((latin, "LATIN-1"), (utf16, "utf-16")):
        out = out_dir / f"{src.stem}.csv"
        r = cli("anonymize", src, "-o", out, "--qi", "age", "-k", "5", "--encoding", name, "--json")
        assert r.exit_code == 0, r.stderr
        published = pd.read_csv(out, dtype=str).set_index("id")["city"]
        assert published["25000"] == "München" and published["1"] == "Zürich 1" and len(published) == 30_000
        params = json.loads(duckdb.sql(f"SELECT parameters FROM '{out_dir / f'{src.stem}__metrics.parquet'}' "
                                       "WHERE kind = 'total'").fetchone()[0])
        assert params["encoding"] == name.lower()
    # a lone surrogate on line 25,002 (the header is line 1)
    (tmp_path / "bad.csv").write_bytes(utf16.read_bytes().replace("Mü".encode("utf-16-le"), b"M\x00\x00\xd8"))
    r = cli("anonymize", tmp_path / "bad.csv", "-o", out_dir / "y.csv", "--qi", "age", "-k", "5", "--encoding",
            "utf-16")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, r"^Error: cannot read '.*bad.csv': line 25002 is not UTF-16 \(little-endian\) text "
                                    r"\(--encoding utf-16\)$")
    # What DuckDB's readers do not take, which Python's codecs do (helper-114): refused by line, exit 2,
    # where a DuckDB error (exit 1, no line), an internal error, or a garbled file quoted in an error were
    text = "\n".join(rows)
    cases = {
        "be.csv": ("\ufeff" + text).encode("utf-16-be"), "emoji.csv": text.replace("München", "😀").encode("utf-16"),
        "latin_as_16.csv": latin.read_bytes(), "cp1252.csv": text.replace("München", "€5").encode("cp1252"),
        "utf8_as_latin.csv": text.replace("München", "Ça").encode(),
    }
    for name, (encoding, why) in {
            "be.csv": ("utf-16", r"line 1 is big-endian UTF-16 \(its byte-order mark\)"),
            "emoji.csv": ("utf-16", r"line 25002 holds a character past U\+FFFF"),
            "latin_as_16.csv": ("utf-16", r"line 1 is not UTF-16 text \(its line ends are no UTF-16 line ends\)"),
            "cp1252.csv": ("latin-1", r"line 25002 holds a byte of 0x80-0x9F, which DuckDB's latin-1 does not read"),
            "utf8_as_latin.csv": ("latin-1", r"line 25002 is UTF-8 text \(an accented letter's two bytes\), not "
                                             r"latin-1: leave --encoding out")}.items():
        (tmp_path / name).write_bytes(cases[name])
        r = cli("anonymize", tmp_path / name, "-o", out_dir / "w.csv", "--qi", "age", "-k", "5", "--encoding", encoding)
        assert r.exit_code == 2, r.stderr
        assert_one_line_error(r.stderr, rf"^Error: cannot read '.*{name}': {why}")
    assert not (out_dir / "w.csv").exists()
    # UTF-16 without its byte-order mark (little-endian, as DuckDB reads it) passes; UTF-8 named latin-1
    # whose bytes latin-1 reads too is warned about: every accent published as two characters
    (tmp_path / "le.csv").write_bytes(text.encode("utf-16-le"))
    assert cli("anonymize", tmp_path / "le.csv", "-o", out_dir / "le.csv", "--qi", "age", "-k", "5", "--encoding",
               "utf-16").exit_code == 0
    (tmp_path / "u8.csv").write_bytes(text.encode())
    with caplog.at_level("WARNING", logger="sqlanon"):
        r = cli("anonymize", tmp_path / "u8.csv", "-o", out_dir / "u8.csv", "--qi", "age", "-k", "5", "--encoding",
                "latin-1")
    assert r.exit_code == 0 and "reads as UTF-8 too, holding characters past ASCII: --encoding latin-1 makes each " \
                                "of them two" in caplog.text, caplog.text
    job = tmp_path / "job.yml"
    job.write_text(f"input: {latin}\noutput: {out_dir / 'job.parquet'}\nqi: [age]\nk: 5\nencoding: latin-1\n")
    assert cli("anonymize", "--config", job).exit_code == 0
    r = cli("anonymize", latin, "-o", out_dir / "z.csv", "--qi", "age", "-k", "5", "--encoding", "cp1252")
    assert r.exit_code == 2 and "'cp1252' is not one of 'utf-8', 'latin-1', 'utf-16'" in r.stderr


def test_csv_dates_with_two_digit_years_are_refused(tmp_path, out_dir):
    """'12/25/45', as spreadsheets export US dates, read as 2045-12-25:
    published 100 years off as a QI's intervals and as a pass-through column
    into Parquet, exit 0 (helper-107). Refused by column, file and value; a
    CSV output's pass-through text is not read as dates, and passes as written."""
    src = tmp_path / "people.csv"
    src.write_text("id,age,dob\n" + "".join(f"{i},{20 + i % 30},{1 + i % 12:02d}/{1 + i % 28:02d}/{40 + i % 50}\n"
                                            for i in range(300)))
    for qi in ("dob", "age"):
        r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", qi, "-k", "5")
        assert r.exit_code == 2
        assert_one_line_error(r.stderr, rf"^Error: column 'dob' of '{re.escape(str(src))}' holds dates with two-digit "
                                        r"years such as '\d\d/\d\d/\d\d', which DuckDB reads as 2000-2068")
    assert not list(out_dir.iterdir())
    r = cli("anonymize", src, "-o", out_dir / "o.csv", "--qi", "age", "-k", "5")
    assert r.exit_code == 0, r.stderr
    assert sorted(pd.read_csv(out_dir / "o.csv", dtype=str)["dob"]) == sorted(pd.read_csv(src, dtype=str)["dob"])
    # In a lake, the file that holds them (it named the lake: helper-107); so a late ZIP code's leading zero
    lake = tmp_path / "lake"
    lake.mkdir()
    for name, zips in (("a.csv", ["10115"] * 300), ("b.csv", ["10115"] * 25_000 + ["02134"])):
        (lake / name).write_text("id,age,dob,zip\n" + "".join(
            f"{i},{20 + i % 30},19{40 + i % 50}-01-02,{z}\n" for i, z in enumerate(zips)))
    r = cli("anonymize", lake, "-o", out_dir / "lake.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, rf"^Error: column 'zip' of '{re.escape(str(lake / 'b.csv'))}' holds numbers "
                                    r"written with leading zeros")
    (lake / "c.csv").write_bytes(src.read_bytes().replace(b"id,age,dob", b"id,age,dob,zip").replace(b"\n", b",1\n")
                                 .replace(b"zip,1\n", b"zip\n"))
    (lake / "b.csv").unlink()
    r = cli("anonymize", lake, "-o", out_dir / "lake.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, rf"^Error: column 'dob' of '{re.escape(str(lake / 'c.csv'))}' holds dates with "
                                    r"two-digit years")


def test_csv_dates_followed_by_words_are_refused(tmp_path, out_dir):
    """'0044-03-15 BC', as PostgreSQL writes a date before year 1, past the
    rows DuckDB sniffs: its DATE reading drops the words after a date, so
    44 BC was read as 44 AD, and a QI's interval ([0044-03-15, 2000-01-10])
    missed its row's value, exit 0 (helper-140). Refused by column."""
    src = tmp_path / "late.csv"
    src.write_text("id,age,d\n" + "".join(f"{i},{20 + i % 30},{2000 + i % 20}-0{1 + i % 9}-1{i % 9}\n"
                                            for i in range(21_000)) + "21000,30,0044-03-15 BC\n")
    r = cli("anonymize", src, "-o", out_dir / "o.csv", "--qi", "age,d", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, rf"^Error: column 'd' of '{re.escape(str(src))}' holds dates followed by "
                                    "other text")
    assert not list(out_dir.iterdir())
    src.write_text(src.read_text().replace("0044-03-15 BC", "2020-01-01 00:00:00"))  # midnight: nothing lost
    assert cli("anonymize", src, "-o", out_dir / "o.csv", "--qi", "age,d", "-k", "5").exit_code == 0


def test_csv_truth_values_written_two_ways_are_refused(tmp_path, out_dir):
    """'yes' and '1' past the rows DuckDB sniffs a column of true/false from:
    its BOOLEAN reading made them true, their text lost, exit 0 (helper-142;
    '1' among the sniffed rows makes the column text, 'yes' or 't' there do
    not: the check reads every row). Refused by column; one spelling each,
    in any case, reads as it is; CSV to CSV passes the text."""
    src = tmp_path / "b.csv"
    rows = "".join(f"{i % 40},{'True' if i % 2 else 'false'}\n" for i in range(21_000))
    src.write_text("age,flag\n" + rows + "1,yes\n2,0\n")
    r = cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5")
    assert r.exit_code == 2
    assert_one_line_error(r.stderr, rf"^Error: column 'flag' of '{re.escape(str(src))}' holds truth values written "
                                    r"more than one way")
    assert not list(out_dir.iterdir())
    assert cli("anonymize", src, "-o", out_dir / "o.csv", "--qi", "age", "-k", "5").exit_code == 0
    assert {line.rsplit(",", 1)[1] for line in (out_dir / "o.csv").read_text().splitlines()[1:]} == {
        "yes", "0", "True", "false"}
    src.write_text("age,flag\n" + rows + "1,TRUE\n2,False\n")
    assert cli("anonymize", src, "-o", out_dir / "o.parquet", "--qi", "age", "-k", "5").exit_code == 0


def test_a_hierarchy_of_dates_before_year_1_is_left_uncut(tmp_path, out_dir, caplog):
    """A date QI with a hierarchy whose leaves name dates before year 1
    ('-0043-03-15', the text of 44 BC): the plan bound each leaf as a Python
    date for its IN lists, which has no year 0 or below, and the run failed
    with "internal error (OverflowError: date value out of range)" as soon
    as it had two fragments (helper-142). Such a column is left uncut, as a
    value column is, and its rows publish their leaves."""
    src = tmp_path / "d.csv"
    values = ["2020-01-01", "2020-01-02", "-0043-03-15", "0000-01-01"]
    src.write_text("id,d\n" + "".join(f"{i},{values[i % 4]}\n" for i in range(8)))
    h = tmp_path / "h.json"
    h.write_text(json.dumps({"cat": "*", "subcats": [
        {"cat": "now", "subcats": [{"cat": "2020-01-01"}, {"cat": "2020-01-02"}]},
        {"cat": "old", "subcats": [{"cat": "-0043-03-15"}, {"cat": "0000-01-01"}]}]}))
    out = out_dir / "o.parquet"
    r = cli("anonymize", src, "-o", out, "--qi", "d", "-k", "2", "--hierarchy", f"d={h}", "--workers", "1",
            "--fragments", "2")
    assert r.exit_code == 0, r.stderr
    assert "cannot be a cut's value" in caplog.text
    got = {row["id"]: row["d"] for row in pq.read_table(out).to_pylist()}
    assert got == {i: values[i % 4] for i in range(8)}


@pytest.mark.parametrize("column, values", [("code", ["5", "05"]), ("code", ["5", "+5.0"]),
                                            ("flag", ["true", "1"]),
                                            ("seen", ["2020-01-01", "2020-01-01 00:00:00"]),
                                            # an instant in two zones, to the minute: DuckDB's cast took neither
                                            ("seen", ["2020-01-01T00:00Z", "2020-01-01T01:00+01:00"]),
                                            # named as the lookup's column: it bound to that, and was not checked
                                            ("text", ["2020-01-01", "2020-01-01 00:00:00"])])
def test_a_csv_output_whose_readers_read_two_spellings_as_one_value_is_refused(tmp_path, out_dir, column, values):
    """DuckDB keeps '05' beside '5' as text, pandas reads both as 5, and
    pyarrow reads 'true' and '1' as one boolean: l = 2 of such a column was
    published and verified where its readers see one value per class
    (helper-107). The run refuses it, verify says it fails; as text apart
    from numbers the same column passes."""
    src = tmp_path / "s.csv"
    src.write_text(f"id,age,{column}\n" + "".join(f"{i},{20 + i % 40},{values[i % 2]}\n" for i in range(400)))
    args = ["--qi", "age", "--sensitive", column, "-k", "5", "-l", "2"]
    r = cli("anonymize", src, "-o", out_dir / "o.csv", *args)
    assert r.exit_code == 1
    assert_one_line_error(r.stderr, r"^Error: refusing to publish .*read back with its types, as DuckDB and pandas "
                                    rf"read a CSV file, 16 class\(es\) of 400 row\(s\) break k=5/l=2: .*__distinct_{column}=1")
    assert not list(out_dir.iterdir())
    read = pd.read_csv(src, engine="pyarrow" if column in ("flag", "seen", "text") else "c")
    assert (read.groupby("age")[column].nunique() == 1).all()  # as its readers see it
    r = cli("anonymize", src, "-o", out_dir / "o.parquet", *args)  # Parquet keeps the text: two values
    assert r.exit_code == 0, r.stderr
    shown = tmp_path / "published.csv"  # a class per age, both spellings in each
    shown.write_text(f"age,{column}\n" + "".join(f"{20 + i % 40},{values[i // 40 % 2]}\n" for i in range(400)))
    v = cli("verify", shown, "--qi", "age", "--sensitive", column, "-k", "5", "-l", "2", "--json")
    assert v.exit_code == 1 and json.loads(v.stdout)["reading"].startswith("read as pandas reads the file")


def test_run_jobs_warnings_name_the_files_keys(out_dir, caplog):
    """run_job's warning about a value of the job file named a flag nobody
    passed (``--retries applies to Dask and Spark``), where the command's
    names the file's key, as run_job's errors do (helper-175)."""
    caplog.set_level("WARNING", logger="sqlanon")
    job = out_dir.parent / "job.yml"
    job.write_text(f"input: {ADULTS}\noutput: {out_dir / 'd.parquet'}\nqi: [age]\nk: 10\nworkers: 1\nretries: 5\n")
    sqlanon.run_job(job)
    assert f"'retries' in {str(job)!r} applies to Dask and Spark" in caplog.text, caplog.text
    assert "--retries" not in caplog.text
    caplog.clear()  # a flag given to run_job is named as the flag, as on the command line
    sqlanon.run_job(job, "--retries", "4", "-o", out_dir / "e.parquet")
    assert "--retries applies to Dask and Spark" in caplog.text, caplog.text


def test_dir_of_the_package_lists_its_api_before_it_is_imported():
    """The API is imported on first use: dir(sqlanon) showed TYPE_CHECKING and
    importlib only, so a REPL's completion and help() missed it (helper-201)."""
    code = ("import sqlanon, sys; print(sorted(set(sqlanon.__all__) - set(dir(sqlanon))), "
            "'sqlanon.api' in sys.modules, all(callable(getattr(sqlanon, n)) for n in sqlanon.__all__))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert p.stdout.split() == ["[]", "False", "True"], p.stderr


def test_a_lakes_own_sqlanon_file_column_passes_through(tmp_path):
    """The checks that read a lake file by file add a column __sqlanon_file:
    a lake's own column of that name failed anonymize (a CSV lake with dates)
    and verify (any lake) with DuckDB's binder error, --drop'ped too
    (helper-199). They take a name the lake does not hold."""
    lake = tmp_path / "lake"
    lake.mkdir()
    for f in range(2):
        rows = "".join(f"{f * 20 + i},2020-03-{1 + i:02d},v{f * 20 + i},{20 + i % 5},{'ab'[i % 2]}\n"
                       for i in range(20))
        (lake / f"p{f}.csv").write_text("rid,day,__SQLANON_FILE,age,s\n" + rows)
    out = tmp_path / "o.parquet"
    r = cli("anonymize", lake, "-o", out, "--qi", "age", "-k", "3", "--sensitive", "s", "-l", "2", "--workers", "1")
    assert r.exit_code == 0, r.stderr
    got = duckdb.execute("SELECT rid, __SQLANON_FILE FROM read_parquet(?) ORDER BY rid", [str(out)]).fetchall()
    assert got == [(i, f"v{i}") for i in range(40)]
    r = cli("verify", lake, "--qi", "age", "-k", "3", "--sensitive", "s", "-l", "2")
    assert r.exit_code == 0 and r.stdout.startswith("OK: 40 rows"), r.stderr
