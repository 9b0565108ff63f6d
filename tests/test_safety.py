"""Regression tests: outputs that would overwrite inputs, packaging, escaping, redaction."""

from __future__ import annotations

import fnmatch
import json
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv  # noqa: F401 - pa.csv
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sqlanon
from sqlanon import ConfigError
from sqlanon.io import BACKUP_MARK, STAGING_MARK, PathLock, remove_stale_staging
from sqlanon.sql import literal
from sqlanon.warehouse import Conn

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def lake(tmp_path):
    d = tmp_path / "lake"
    d.mkdir()
    for i in range(2):
        pq.write_table(pa.table({"x": np.arange(i * 50, i * 50 + 50), "s": np.arange(100)[i * 50:][:50] % 3}),
                       d / f"part-{i}.parquet")
    return d


def test_the_default_metrics_file_may_not_be_the_input(tmp_path):
    """Anonymizing a metrics file (m__metrics.parquet -> m.parquet) appended
    the run's metrics to its own input."""
    src = tmp_path / "m__metrics.parquet"
    pq.write_table(pa.table({"kind": ["a", "b"] * 5}), src)
    with pytest.raises(ConfigError, match="is the input or inside it: name another"):
        sqlanon.anonymize(src, tmp_path / "m.parquet", qi=["kind"], k=2)
    assert pq.read_metadata(src).num_rows == 10 and not (tmp_path / "m.parquet").exists()


def test_metrics_may_not_overwrite_the_output_or_the_input(lake, tmp_path):
    """Each refusal says which: a metrics file beside a glob's files was
    said to 'overwrite the input or the output' (helper-108)."""
    out = tmp_path / "out.parquet"
    with pytest.raises(ConfigError, match="metrics=.* would overwrite the output; "):
        sqlanon.anonymize(lake, out, qi=["x"], k=5, metrics=str(out))
    with pytest.raises(ConfigError, match="metrics=.* lies inside the input "):
        sqlanon.anonymize(lake, out, qi=["x"], k=5, metrics=str(lake / "m.parquet"))
    with pytest.raises(ConfigError, match="metrics=.* lies under .*, where the input .* reads .*; name another file"):
        sqlanon.anonymize(f"{lake}/*.parquet", out, qi=["x"], k=5, metrics=str(lake / "m.json.parquet"))
    one = next(lake.glob("*.parquet"))  # one of the glob's own files
    for src in (f"{lake}/*.parquet", lake):
        with pytest.raises(ConfigError, match=r"metrics=.* is one of the files of the input .*; name another file"):
            sqlanon.anonymize(src, out, qi=["x"], k=5, metrics=str(one))
    with pytest.raises(ConfigError, match="metrics="):
        sqlanon.anonymize(lake, out, qi=["x"], k=5, metrics=str(tmp_path / "m.json"))
    assert not out.exists()


def test_a_directory_input_is_not_an_output(lake):
    before = sorted(p.name for p in lake.iterdir())
    outs = ((lake, "is"), (f"{lake}/", "is"), (lake / "sub/", "lies inside"), (lake / "o.parquet", "lies inside"),
            (lake.parent, "holds"))  # it said 'is the input' of each
    for out, where in outs:
        with pytest.raises(ConfigError, match=f"{where} the input"):
            sqlanon.anonymize(lake, out, qi=["x"], k=5, overwrite=True)
    assert sorted(p.name for p in lake.iterdir()) == before


def test_every_template_is_packaged():
    conf = tomllib.loads((REPO / "pyproject.toml").read_text())
    patterns = conf["tool"]["setuptools"]["package-data"]["sqlanon.sql_templates"]
    base = REPO / "sql_templates"
    for t in base.rglob("*.sql"):
        rel = t.relative_to(base).as_posix()
        assert any(fnmatch.fnmatch(rel, p) and rel.count("/") == p.count("/") for p in patterns), rel


def test_postgres_literals_ignore_standard_conforming_strings():
    assert literal("a\\'b", "postgres") == "E'a\\\\''b'"
    assert literal("it's", "duckdb") == "'it''s'"


def test_explain_never_shows_a_password(lake):
    """A plan's database output is connected to, as the run's is (its result's password-free URL:
    test_postgres.test_password_never_leaks): one out of reach is named without its password."""
    with pytest.raises(sqlanon.InputError, match=r"^cannot connect to postgresql://u:\*\*\*@127\.0\.0\.1:1/x: ") as e:
        sqlanon.anonymize(lake, "postgresql://u:s3cretpass@127.0.0.1:1/x", target_table="t", qi=["x"], k=5,
                          explain=True, workers=1)  # (port 1: refused at once)
    assert "s3cretpass" not in str(e.value)


def test_redaction():
    c = Conn("postgresql://bob:hunter22@h/db")
    text = "failed: host=h password=hunter22 user=bob; url postgresql://bob:hunter22@h/db; hunter22"
    assert "hunter22" not in c.redact(text)
    short = Conn("postgresql://bob:a@h/db")
    assert short.redact("cannot connect: password=a") == "cannot connect: password=***"
    # libpq also takes the password as a URL parameter: masked in the URL shown
    # (outputs, --json, metrics tables) and in any text.
    q = Conn("postgresql://bob@h:5432/db?sslmode=disable&password=hunter22")
    assert q.password == "hunter22"
    assert q.safe() == "postgresql://bob@h:5432/db?password=***&sslmode=disable"
    assert "hunter22" not in q.redact(f"cannot connect to {q.url}: hunter22 rejected")
    # the rest of the word kept (its colon was masked with it: helper-180)
    assert q.redact(f"schema 'x' does not exist in {q.url}: create it") == (
        "schema 'x' does not exist in postgresql://bob@h:5432/db?sslmode=disable&password=***: create it")
    assert c.redact("at postgresql://bob:hunter22@h/db: no") == "at postgresql://bob:***@h/db: no"


URL_PIECES = ["postgresql", "postgres", "postgresql+psycopg", "://", "bob", "b%40b", ":", "pw", "p%2Fw", "p%40", "@",
              "@", "h", "db.example", "[::1]", "[fe80::1%25eth0]", ":5432", ":0", "/", "db", "d%20b", "/x/y", "?",
              "&", "=", "sslmode=require", "password=se%20c", "options=-c%20a%3Db", "a=1", "a=2", "k=", "%", "+",
              " ", "#", "\n", "\\", "'", '"', "é"]


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(URL_PIECES), min_size=1, max_size=14))
def test_postgresql_urls_are_read_as_sqlalchemy_reads_them(pieces):
    """PostgreSQL URLs are read without importing SQLAlchemy (its import was
    0.2-0.4 s of every PostgreSQL run); what the run connects to and shows
    must be what SQLAlchemy's reading gave, part by part."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from sqlanon.warehouse import Url, UrlError

    url = "postgresql://" + "".join(pieces) if not pieces[0].startswith("postgres") else "".join(pieces)
    try:
        theirs = make_url(url)
        theirs.port  # noqa: B018
    except (ArgumentError, ValueError):
        with pytest.raises((UrlError, ValueError)):
            Url.parse(url)
        return
    ours = Url.parse(url)
    if theirs.get_backend_name() not in ("postgresql", "postgres"):  # 'postgrespostgres://': SQLAlchemy reads it
        assert ours.backend == theirs.get_backend_name()
        return
    assert ours.backend == "postgresql"
    assert ours.drivername == re.sub(r"^postgres(?=$|\+)", "postgresql", theirs.drivername)
    assert (ours.username, ours.password, ours.host, ours.port, ours.database) == (
        theirs.username, theirs.password, theirs.host, theirs.port, theirs.database)
    assert dict(ours.query) == dict(theirs.query)
    their_drivername = theirs.set(drivername=ours.drivername)
    if not any("password" in k.lower() for k in theirs.query):
        assert ours.shown() == their_drivername.render_as_string(hide_password=True)
    assert ours.shown(hide_password=False) == their_drivername.render_as_string(hide_password=False)


def test_secrets_in_unusual_places_are_masked(lake, tmp_path, capsys):
    """helper-37: an unencoded '@' in the password printed its second half
    (SQLAlchemy took 'Secret9@127.0.0.1' for the host); libpq's
    ?sslpassword= (a client key's passphrase) went unmasked into messages
    and metrics tables; a libpq key=value string given as the input was
    printed whole."""
    with pytest.raises(ConfigError, match=r"percent-encode it \(%40\)") as e:
        sqlanon.anonymize("postgresql://bob:Sup@Secret9@127.0.0.1:1/db", tmp_path / "o.parquet", table="t",
                          qi=["x"], k=5)
    assert "Secret9" not in str(e.value) and "Sup" not in str(e.value)
    # with a '/' in it too, the rest of the password became the host and the database (helper-43)
    with pytest.raises(ConfigError, match=r"percent-encode it \(%40\)") as e:
        sqlanon.anonymize("postgresql://bob:Sup@Sec/ret9@127.0.0.1:1/db", tmp_path / "o.parquet", table="t",
                          qi=["x"], k=5)
    assert "Sec" not in str(e.value) and "ret9" not in str(e.value), str(e.value)
    assert Conn("sqlite:////tmp/jane@corp/backup@2020.db").database == "/tmp/jane@corp/backup@2020.db"  # a path's '@'s
    c = Conn("postgresql://bob:pw@h:5432/db?sslpassword=KeyPass77&sslmode=require")
    assert "KeyPass77" not in c.safe() and "sslpassword=***" in c.safe()
    assert "KeyPass77" not in c.redact(f"cannot connect to {c.url}: sslpassword=KeyPass77")
    from sqlanon.errors import redact_urls

    assert "KeyPass77" not in redact_urls("x postgresql://h/db?a=1&sslpassword=KeyPass77 y")
    # libpq's quoting and escapes; the URL's other parameters stay (helper-41)
    for text in ('host=h password="se cret" dbname=x', r"host=h password=se\ cret dbname=x",
                 "host=h password=ab'cd dbname=x", "host=h password='se cret' dbname=x"):
        assert redact_urls(text) == "host=h password=*** dbname=x", text
    assert redact_urls("postgresql://h/db?password=abc&sslmode=require") == "postgresql://h/db?password=***&sslmode=require"
    with pytest.raises(sqlanon.SqlanonError) as e:
        sqlanon.anonymize("host=127.0.0.1 password=Secret99 dbname=x", tmp_path / "o.parquet", table="people",
                          qi=["x"], k=5)
    assert "Secret99" not in str(e.value)
    r = subprocess.run([sys.executable, "-m", "sqlanon", "anonymize", "host=h password='Se cret99' dbname=x",
                        "--table", "t", "-o", str(tmp_path / "o.parquet"), "--qi", "x", "-k", "5"],
                       capture_output=True, text=True)
    assert r.returncode in (1, 2) and "cret99" not in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr


def test_usage_errors_before_any_work(lake, tmp_path):
    t = pa.table({"age": [1, 2, 3, 4], "age_lo": [0, 0, 0, 0]})
    src = tmp_path / "t.parquet"
    pq.write_table(t, src)
    with pytest.raises(ConfigError, match="age_lo"):
        sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["age"], k=2, interval_format="bounds")
    with pytest.raises(ConfigError, match="worker_memory="):
        sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["age"], k=2, worker_memory="lots")


def test_a_dead_runs_backup_of_a_directory_output_is_restored(tmp_path):
    target = tmp_path / "out"
    backup = tmp_path / f".out{BACKUP_MARK}999999999"
    backup.mkdir()
    (backup / "part-0.parquet").write_bytes(b"old")
    remove_stale_staging(target)
    assert (target / "part-0.parquet").read_bytes() == b"old"
    assert not backup.exists()
    # the swap had finished: only the leftover backup goes
    backup.mkdir()
    remove_stale_staging(target)
    assert not backup.exists() and target.exists()


def test_a_dead_runs_backup_is_back_before_the_output_is_looked_for(tmp_path):
    """Killed between its two renames (no atomic exchange), a run left the
    old output aside; the next run, without --overwrite, found no output,
    put the backup back after that check and replaced it (helper-9)."""
    old = tmp_path / "out.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), old)
    backup = tmp_path / f".out.parquet{BACKUP_MARK}999999999"
    old.rename(backup)
    with pytest.raises(ConfigError, match="already exists"):
        sqlanon.anonymize(REPO / "examples" / "adults.csv", old, qi=["age"], k=5)
    assert pq.read_table(old).column("x").to_pylist() == [1, 2] and not backup.exists()


def test_a_planted_staging_entry_is_neither_finished_nor_followed(tmp_path):
    """In a directory others may write (/tmp, a team's), a planted "dead
    run's staged metrics" (a link to someone's private file, with a claim
    naming a file of mode 6777 as the published output) had the next run
    give that private file the mode and the planter's group, and move the
    link over the output (helper-71). Only this user's own entries, never a
    link, are finished, moved back or removed."""
    victim = tmp_path / "private"
    victim.write_text("secret")
    victim.chmod(0o600)
    donor = tmp_path / "donor"
    donor.write_text("")
    donor.chmod(0o6777 if os.geteuid() == 0 else 0o777)
    out = tmp_path / "out.parquet"

    def plant(name: str, owner: int | None = None) -> Path:
        staged = tmp_path / f".{name}{STAGING_MARK}1-deadbeef"
        staged.mkdir()
        if owner is None:
            (staged / name).symlink_to(victim)
        else:
            (staged / name).write_text("planted")
        st = donor.stat()
        claim = Path(f"{staged}.publishes")
        claim.write_text(json.dumps({"output": str(donor), "dev": st.st_dev, "ino": st.st_ino}))
        if owner is not None:
            for entry in (staged, staged / name, claim):
                os.chown(entry, owner, owner)
        return staged

    plant("out.parquet")
    plant("out__metrics.parquet")
    sqlanon.anonymize(REPO / "examples" / "adults.csv", out, qi=["age"], k=5)
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600 and victim.read_text() == "secret"
    assert not out.is_symlink() and pq.read_metadata(out).num_rows == 32_561
    assert not (tmp_path / "out__metrics.parquet").is_symlink()
    if os.geteuid() != 0:
        return
    # Another user's entries (a real file this time) are left as they are.
    for f in tmp_path.glob(".*"):
        if f.is_dir():
            shutil.rmtree(f)
        else:
            f.unlink()
    planted = [plant("out.parquet", 65534), plant("out__metrics.parquet", 65534)]
    sqlanon.anonymize(REPO / "examples" / "adults.csv", out, qi=["age"], k=5, overwrite=True)
    assert all((p / p.name.split(STAGING_MARK)[0][1:]).read_text() == "planted" for p in planted)
    assert pq.read_metadata(out).num_rows == 32_561


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MB file system of its own (tmpfs; needs root, as CI runs)."""
    where = tmp_path / "disk"
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_fails_the_run_naming_it_and_keeps_the_old_output(small_disk):
    """A nightly run on a disk filling up: the error named a hidden staging
    file's write, not what the run needs room for; the old output and its
    metrics must stay as they were, and no staging behind."""
    import hashlib

    out = small_disk / "o.parquet"
    run = [sys.executable, "-m", "sqlanon", "anonymize", str(REPO / "examples" / "adults.csv"), "-o", str(out),
           "--qi", "age,education-num,occupation", "-k", "5", "--overwrite", "-q"]
    assert subprocess.run(run, capture_output=True).returncode == 0
    digest = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in small_disk.iterdir()}
    free = os.statvfs(small_disk)
    (small_disk / "filler").write_bytes(b"\0" * (free.f_bavail * free.f_frsize - 64 * 1024))
    p = subprocess.run(run, capture_output=True, text=True)
    assert p.returncode == 1 and "No space left on device" in p.stderr, p.stderr
    assert "(the disk is full: a run writes its parts (and first" in p.stderr, p.stderr
    assert len(p.stderr.splitlines()) == 1
    assert {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in small_disk.iterdir() if f.name != "filler"} \
        == digest
    # A DuckDB file's table: the file grows by the new table before the old one goes.
    for f in small_disk.iterdir():
        f.unlink()
    db = small_disk / "o.duckdb"
    run[run.index("-o") + 1:run.index("-o") + 2] = [str(db), "--target-table", "t"]
    assert subprocess.run(run, capture_output=True).returncode == 0
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        before = con.execute("SELECT count(*), sum(hash(COLUMNS(*))) FROM t").fetchall()
    free = os.statvfs(small_disk)
    (small_disk / "filler").write_bytes(b"\0" * (free.f_bavail * free.f_frsize - 64 * 1024))
    p = subprocess.run(run, capture_output=True, text=True)
    assert p.returncode == 1 and "(the disk is full: a run writes its parts" in p.stderr, p.stderr
    (small_disk / "filler").unlink()
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*), sum(hash(COLUMNS(*))) FROM t").fetchall() == before


def test_a_full_disk_names_the_parquet_inputs_ordered_copy_too():
    """A Parquet input (or a DuckDB table) of many fragments is copied into the staging area,
    ordered by fragment, and the copy stays while the parts are written: a
    disk that then fills names it among what the run needs room for (it
    named a CSV input's copy only)."""
    import errno

    from sqlanon import io

    hint = io.no_room_hint(OSError(errno.ENOSPC, "No space left on device"))
    assert "a CSV input's parsed" in hint and "a Parquet input's or DuckDB table's ordered by fragment" in hint, hint


def test_a_full_disk_while_a_csv_input_is_copied_for_its_fragments_fails_the_run_naming_it(small_disk):
    """More fragments than workers read a Parquet copy of a CSV input, made
    in the staging area next to the output: a disk too full for it names
    the input and what the run needs room for; the old output stays."""
    import hashlib

    out = small_disk / "o.parquet"
    run = [sys.executable, "-m", "sqlanon", "anonymize", str(REPO / "examples" / "adults.csv"), "-o", str(out),
           "--qi", "age,education-num,occupation", "-k", "5", "--workers", "1", "--fragments", "3",
           "--overwrite", "-q"]
    assert subprocess.run(run, capture_output=True).returncode == 0
    digest = {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in small_disk.iterdir()}
    free = os.statvfs(small_disk)
    (small_disk / "filler").write_bytes(b"\0" * (free.f_bavail * free.f_frsize - 64 * 1024))
    p = subprocess.run(run, capture_output=True, text=True)
    assert p.returncode == 1 and len(p.stderr.splitlines()) == 1, p.stderr
    assert p.stderr.startswith(f"Error: cannot copy the CSV input {str(REPO / 'examples' / 'adults.csv')!r} for its "
                               "fragments: cannot write "), p.stderr
    assert "No space left on device (the disk is full: a run writes its parts (and first" in p.stderr, p.stderr
    assert {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in small_disk.iterdir() if f.name != "filler"} \
        == digest


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file of another user needs root")
def test_a_dead_runs_backup_of_a_colleagues_output_is_put_back(tmp_path):
    """A team's directory: a colleague published the output, a run of
    ours died between its renames; its backup keeps the colleague's
    ownership, and was left hidden for good, the next run publishing over
    the empty place without --overwrite (helper-72)."""
    old = tmp_path / "out.parquet"
    pq.write_table(pa.table({"x": [1, 2]}), old)
    os.chown(old, 65534, 65534)
    backup = tmp_path / f".out.parquet{BACKUP_MARK}999999999"
    old.rename(backup)
    with pytest.raises(ConfigError, match="already exists"):
        sqlanon.anonymize(REPO / "examples" / "adults.csv", old, qi=["age"], k=5)
    assert pq.read_table(old).column("x").to_pylist() == [1, 2] and not backup.exists()
    # A link named as a backup is nobody's output: not followed into place.
    elsewhere = tmp_path / "elsewhere.parquet"
    pq.write_table(pa.table({"x": [3]}), elsewhere)
    old.unlink()
    backup.symlink_to(elsewhere)
    sqlanon.anonymize(REPO / "examples" / "adults.csv", old, qi=["age"], k=5)
    assert not old.is_symlink() and pq.read_metadata(old).num_rows == 32_561


def test_json_takes_a_violations_map_keyed_by_dates():
    """A MAP QI keyed by dates failed --json with 'keys must be str, int…' (helper-11)."""
    import datetime as dt

    from sqlanon.config import strict_json

    assert strict_json({"q": {dt.date(2020, 1, 1): 1}, "x": float("nan")}) == '{"q": {"2020-01-01": 1}, "x": "nan"}'


def test_unwritable_output_directory(tmp_path, monkeypatch):
    import sqlanon.io as sio

    real = os.access
    # As root every directory is writable: make this one read-only to the check.
    monkeypatch.setattr(sio.os, "access", lambda p, mode: False if mode == os.W_OK else real(p, mode))
    with pytest.raises(ConfigError, match="not writable"):
        sqlanon.anonymize(REPO / "examples" / "adults.csv", tmp_path / "o.parquet", qi=["age"], k=5)


# ---------------------------------------------------------------- two runs, one output


def _run(src, out, *extra) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "sqlanon", "anonymize", str(src), "-o", str(out), "--qi", "x", "-k", "5",
         "--workers", "1", "--quiet", *map(str, extra)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_a_second_run_on_the_same_output_is_refused_and_keeps_the_firsts_staging(lake, tmp_path):
    """Two runs on one output both published (a scheduler's retry): the
    later swap won, and a run took the other's live staging for a dead run's
    when its process id was not one it could see (another container, an
    NFS client): the other run then failed writing its parts."""
    out = tmp_path / "o.parquet"
    other = tmp_path / f".o.parquet{STAGING_MARK}{os.getpid()}-0000beef"  # a live process of ours
    other.mkdir()
    with PathLock(out, "o") as lock:
        assert lock.held
        p = _run(lake, out)
        _, err = p.communicate(timeout=120)
        assert p.returncode == 1
        assert re.fullmatch(r"Error: another sqlanon run is writing '.*o.parquet'; try again when it has finished "
                            r"\(it holds '.*\.o\.parquet\.sqlanon-lock'\)\n", err), err
        assert other.exists() and not out.exists()
    # Holding the lock, a run knows any other staging is a dead run's, whatever its process id.
    p = _run(lake, out)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert not other.exists() and pq.read_metadata(out).num_rows == 100


def test_a_run_waits_for_a_plan_holding_the_outputs_lock(lake, tmp_path, monkeypatch):
    """--explain holds the output's lock while it checks and reads the output
    (a DuckDB file's tables): a run starting then failed, 'another sqlanon
    run is writing' (helper-180), or, the lock let go early, failed on the
    DuckDB file the plan had open (helper-183). A run waits for a plan."""
    from sqlanon import coordinator

    out = tmp_path / "o.parquet"
    waited = []
    draw = coordinator.draw_sample

    def drawn_while_a_run_waits(*args, **kwargs):
        p = _run(lake, out)
        waited.append((p, p.stderr.readline()))  # it says it waits, and waits
        return draw(*args, **kwargs)

    monkeypatch.setattr(coordinator, "draw_sample", drawn_while_a_run_waits)
    plan = sqlanon.anonymize(lake, out, qi=["x"], k=5, workers=1, explain=True)
    assert plan.metrics is None and not out.exists()
    (p, line), = waited
    try:
        assert re.fullmatch(r"Warning: waiting for another sqlanon plan \(--explain\) to finish reading "
                            r"'.*o.parquet'\n", line), line
        _, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 0, err
    assert pq.read_metadata(out).num_rows == 100
    # A plan waits for a run as a run does: refused at once.
    with PathLock(out, "o") as lock:
        assert lock.held
        with pytest.raises(sqlanon.InputError, match="another sqlanon run is writing"):
            sqlanon.anonymize(lake, out, qi=["x"], k=5, workers=1, explain=True, overwrite=True)


def test_runs_sharing_a_metrics_file_append_in_turn(lake, tmp_path):
    """The metrics file is read, extended and swapped in: a run appending
    in between (two outputs, one --metrics) lost its rows to the later swap."""
    metrics = tmp_path / "m.parquet"
    first = _run(lake, tmp_path / "a.parquet", "--metrics", metrics)
    assert first.wait(timeout=120) == 0, first.stderr.read()
    with PathLock(metrics, "m") as lock:
        assert lock.held
        second = _run(lake, tmp_path / "b.parquet", "--metrics", metrics)
        # It says when it starts waiting: only then is the file read after the append below.
        line = second.stderr.readline()
        assert re.fullmatch(r"Warning: waiting for another sqlanon run to finish writing the metrics file "
                            r"'.*m.parquet'\n", line), line
        # Meanwhile another run appends (as sqlanon does: aside, then a rename).
        rows = pq.read_table(metrics)
        pq.write_table(pa.concat_tables([rows, rows.slice(0, 1)]), tmp_path / "m.tmp")
        os.replace(tmp_path / "m.tmp", metrics)
    assert second.wait(timeout=120) == 0, second.stderr.read()
    kinds = pq.read_table(metrics).column("target").to_pylist()
    assert [os.path.basename(t) for t in kinds].count("a.parquet") == 3  # 1 fragment + total + the one appended
    assert [os.path.basename(t) for t in kinds].count("b.parquet") == 2


def test_a_lock_file_left_by_another_user_still_locks(tmp_path):
    """Created 0644 by another user's crashed run, it could not be opened
    for writing, and runs went on unlocked without a word."""
    target = tmp_path / "o.parquet"
    stale = tmp_path / ".o.parquet.sqlanon-lock"
    stale.write_bytes(b"")
    os.chmod(stale, 0o444)
    real_open = os.open

    def as_another_user(path, flags, *mode):
        if str(path) == str(stale) and flags & (os.O_RDWR | os.O_WRONLY):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *mode)

    import sqlanon.io as sio

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sio.os, "open", as_another_user)
        with PathLock(target, "o") as first:
            assert first.held
            with pytest.raises(sqlanon.InputError, match="another sqlanon run is writing o"):
                PathLock(target, "o").acquire()


def test_a_link_or_fifo_at_the_lock_files_name_is_refused(lake, tmp_path):
    """In a directory others may write, a symbolic link planted at the lock
    file's name made the run open its target and make it writable by all."""
    victim = tmp_path / "victim"
    victim.write_text("secret")
    os.chmod(victim, 0o600)
    out, lock = tmp_path / "o.parquet", tmp_path / ".o.parquet.sqlanon-lock"
    os.symlink(victim, lock)
    with pytest.raises(sqlanon.InputError, match=r"lock file '.*\.o\.parquet\.sqlanon-lock' is a symbolic link"):
        sqlanon.anonymize(lake, out, qi=["x"], k=5, workers=1)
    assert os.stat(victim).st_mode & 0o777 == 0o600 and not out.exists()
    lock.unlink()
    os.mkfifo(lock)
    with pytest.raises(sqlanon.InputError, match="is not a regular file"):
        sqlanon.anonymize(lake, out, qi=["x"], k=5, workers=1)
    lock.unlink()
    assert sqlanon.anonymize(lake, out, qi=["x"], k=5, workers=1).metrics.rows == 100


@pytest.mark.parametrize("name", ["__SQLANON_ROWS", "__sqlanon_l_0", "__Sqlanon_N"])
def test_a_column_named_like_sqlanons_own_is_refused_in_any_case(lake, tmp_path, name):
    """`verify` passed a table whose every class holds one row when a QI
    was named __SQLANON_ROWS (its value 100 read as the class size), and
    anonymize refused such names in lower case only."""
    import duckdb

    bad = tmp_path / "bad.parquet"
    duckdb.sql(f"COPY (SELECT i AS zip, 100 AS {name}, 'a' AS dx FROM range(50) t(i)) TO '{bad}'")
    with pytest.raises(ConfigError, match=f"column '{name}': names starting with '__sqlanon_' .*rename it"):
        sqlanon.verify(bad, qi=["zip", name], k=10)
    with pytest.raises(ConfigError, match=f"column '{name}'"):
        sqlanon.verify(bad, qi=["zip"], sensitive=[name], k=10, l=2)
    with pytest.raises(ConfigError, match=f"column '{name}'"):
        sqlanon.anonymize(bad, tmp_path / "o.parquet", qi=["zip", name], k=5, workers=1)
    assert not (tmp_path / "o.parquet").exists()


def test_a_table_named_like_the_old_staging_table_is_kept(tmp_path):
    """A DuckDB target dropped any table named <target>__sqlanon_staging
    (the source itself, here) and published without a word."""
    import duckdb

    db = tmp_path / "w.duckdb"
    with duckdb.connect(str(db)) as c:
        c.execute("CREATE TABLE src__sqlanon_staging AS SELECT i AS x, i % 3 AS s FROM range(100) t(i)")
    sqlanon.anonymize(db, db, table="src__sqlanon_staging", target_table="src", qi=["x"], k=5, workers=2)
    with duckdb.connect(str(db)) as c:
        tables = {r[0] for r in c.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        assert tables == {"src__sqlanon_staging", "src", "src__metrics"}
        assert c.execute("SELECT count(*) FROM src__sqlanon_staging").fetchone() == (100,)


@pytest.mark.parametrize("name", ["a[x].parquet", "d[x]/", "w[x].duckdb", "c[1]*?.csv"])
def test_an_output_named_with_glob_characters(lake, tmp_path, name):
    """The parts were read back by a pattern made of the output's name: a
    name with brackets failed after all the work ('No files found')."""
    out = str(tmp_path / name)
    kw = {"target_table": "t"} if name.endswith(".duckdb") else {}
    assert sqlanon.anonymize(lake, out, qi=["x"], k=5, workers=2, **kw).metrics.rows == 100


def test_names_too_long_to_stage_are_refused_before_any_work(lake, tmp_path):
    """A name within ~27 bytes of the filesystem's limit failed after all the
    work ('File name too long', an internal error), or not, by process id."""
    with pytest.raises(ConfigError, match=r"output name 'z{226}\.parquet' is too long"):
        sqlanon.anonymize(lake, tmp_path / ("z" * 226 + ".parquet"), qi=["x"], k=5, workers=1)
    # its default metrics file, 9 bytes longer, is the one that does not fit
    with pytest.raises(ConfigError, match=r"metrics file name 'z{205}__metrics\.parquet' is too long"):
        sqlanon.anonymize(lake, tmp_path / ("z" * 205 + ".parquet"), qi=["x"], k=5, workers=1)
    assert not list(tmp_path.glob("z*")) and not list(tmp_path.glob(".z*"))
    assert sqlanon.anonymize(lake, tmp_path / ("z" * 190 + ".parquet"), qi=["x"], k=5, workers=1).metrics.rows == 100


def test_a_file_only_its_owner_may_replace_is_refused_before_any_work(lake, tmp_path, monkeypatch):
    """In a directory with the sticky bit, another user's metrics file cannot
    be renamed over: the run published its output, then failed with exit 1
    (an internal error) and lost its metrics row."""
    import sqlanon.io as sio

    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    metrics = shared / "all.parquet"
    sqlanon.anonymize(lake, tmp_path / "a.parquet", qi=["x"], k=5, workers=1, metrics=str(metrics))
    monkeypatch.setattr(sio.os, "geteuid", lambda: 65534)  # another user than the files' (root)
    with pytest.raises(ConfigError, match=r"metrics file '.*all\.parquet' belongs to another user, in a directory "
                                          r"with the sticky bit"):
        sqlanon.anonymize(lake, tmp_path / "b.parquet", qi=["x"], k=5, workers=1, metrics=str(metrics))
    with pytest.raises(ConfigError, match=r"output '.*all\.parquet' belongs to another user"):
        sqlanon.anonymize(lake, metrics, qi=["x"], k=5, workers=1, overwrite=True, metrics=str(tmp_path / "m.csv"))
    assert not (tmp_path / "b.parquet").exists()


def test_metrics_that_cannot_be_put_in_place_after_publishing_are_a_warning(lake, tmp_path, monkeypatch, caplog):
    """Published is published (exit 0): a metrics file that could not be
    swapped in afterwards (made immutable meanwhile) failed the run with
    exit 1, 'nothing published', and left its staged file behind."""
    import sqlanon.io as sio

    real = os.replace

    def immutable(src, dst):
        if str(dst).endswith("__metrics.parquet"):
            raise PermissionError(1, "Operation not permitted")
        return real(src, dst)

    monkeypatch.setattr(sio.os, "replace", immutable)
    out = tmp_path / "o.parquet"
    with caplog.at_level("WARNING", logger="sqlanon"):
        result = sqlanon.anonymize(lake, out, qi=["x"], k=5, workers=1)
    assert result.metrics.rows == 100
    assert out.exists() and not (tmp_path / "o__metrics.parquet").exists()
    assert "but its metrics were not written: cannot put" in caplog.text and "Operation not permitted" in caplog.text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lake", "o.parquet"]
    # --json's metrics_table said where they were not (a scheduler reading stdout could not tell: helper-120)
    assert result.metrics_location is None and result.to_dict()["metrics_table"] is None
    db = tmp_path / "o.duckdb"
    result = sqlanon.anonymize(lake, db, target_table="t", qi=["x"], k=5, workers=1,
                               metrics=str(tmp_path / "m__metrics.parquet"))
    assert result.metrics_location is None and result.metrics.rows == 100


def test_a_duckdb_view_as_the_target_or_metrics_table_is_refused_before_any_work(lake, tmp_path):
    """A view as --target-table or --metrics failed only when publishing,
    after all the work, with DuckDB's catalog error (exit 1)."""
    import duckdb

    db = tmp_path / "w.duckdb"
    with duckdb.connect(str(db)) as c:
        c.execute("CREATE VIEW v AS SELECT 1 AS run_id, 2 AS kind, 3 AS fragment_id")
    for kw in (dict(target_table="v", overwrite=True), dict(target_table="anon", metrics="v")):
        with pytest.raises(ConfigError, match=r"'v' in '.*w\.duckdb' is a view: sqlanon writes tables"):
            sqlanon.anonymize(lake, db, qi=["x"], k=5, workers=1, **kw)
    with pytest.raises(ConfigError, match=r"is a directory, not a DuckDB file: table= names"):
        sqlanon.anonymize(lake, tmp_path / "o.parquet", table="foo", qi=["x"], k=5, workers=1)


def test_a_duckdb_path_with_a_prefix_is_a_local_file(lake, tmp_path, monkeypatch):
    """DuckDB reads 'md:name' as MotherDuck's cloud service: the output went
    to download its extension (and, with a token set, would have gone there)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("motherduck_token", "not-a-token")
    sqlanon.anonymize(lake, "md:w.duckdb", target_table="t", qi=["x"], k=5, workers=1)
    assert (tmp_path / "md:w.duckdb").is_file()
    assert sqlanon.anonymize("md:w.duckdb", "md:w.duckdb", table="t", target_table="t2", qi=["x"], k=5,
                             workers=1).metrics.rows == 100


def test_spill_directories_are_private_and_removed(lake, tmp_path, monkeypatch):
    """DuckDB made its spill directories readable by all (0755, files 0644),
    and they hold the input's rows: the coordinator's in TMPDIR, the
    workers' in the staging area next to the output (helper-37)."""
    import stat

    import sqlanon.io as sio

    import tempfile

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # cached by an earlier call
    (tmp_path / "tmp").mkdir()
    real, seen = sio.connect, {}

    def connect(*args, temp_directory=None, **kw):
        if temp_directory:  # the coordinator's own directory, a worker's inside the staging area
            d = Path(os.path.realpath(temp_directory))  # (a worker's by its held name, /proc/self/fd/N)
            d = d if d.name.startswith("sqlanon-spill-") else d.parent
            seen[str(d)] = stat.S_IMODE(os.stat(d).st_mode)
        return real(*args, temp_directory=temp_directory, **kw)

    monkeypatch.setattr(sio, "connect", connect)
    assert sqlanon.anonymize(lake, tmp_path / "o.parquet", qi=["x"], k=5, workers=1).metrics.rows == 100
    assert len(seen) == 2 and set(seen.values()) == {0o700}, seen
    assert not any(os.path.exists(d) for d in seen) and not list((tmp_path / "tmp").iterdir())


@pytest.mark.skipif(os.geteuid() != 0, reason="gives files another group, as root")
def test_overwrite_keeps_the_outputs_mode_and_group(lake, tmp_path):
    """Made under the umask and renamed into place, an output kept 0600 (a
    directory 0700) came back 0644 (0755) from every --overwrite (helper-37)."""
    import stat

    def access(p):
        st = os.stat(p)
        return stat.S_IMODE(st.st_mode), st.st_gid

    out, d = tmp_path / "o.parquet", tmp_path / "d"
    for target in (out, d):
        sqlanon.anonymize(lake, target, qi=["x"], k=5, workers=2)
    metrics = tmp_path / "o__metrics.parquet"
    for p, mode in ((out, 0o600), (metrics, 0o640), (d, 0o700), *((f, 0o600) for f in d.iterdir())):
        os.chmod(p, mode)
        os.chown(p, -1, 1)  # another group (as root; a user may give a file one of its groups)
    before = {p: access(p) for p in (out, metrics, d)}
    for target in (out, d):
        sqlanon.anonymize(lake, target, qi=["x"], k=5, workers=2, overwrite=True)
    assert {p: access(p) for p in (out, metrics, d)} == before
    assert {access(f) for f in d.iterdir()} == {(0o600, 1)}


def test_a_new_metrics_file_takes_the_outputs_access(lake, tmp_path):
    """A new metrics file was made under the umask (0644) beside an output
    kept 0600 (or a directory kept 0700): any local user read the plan's
    values of the input (helper-47). It takes the output's mode and group
    (a directory's without its x bits)."""
    import stat

    for target, mode in ((tmp_path / "o.parquet", 0o600), (tmp_path / "d", 0o750)):
        sqlanon.anonymize(lake, target, qi=["x"], k=5, workers=1)
        os.chmod(target, mode)
        metrics = tmp_path / f"{target.stem}__metrics.parquet"
        metrics.unlink()
        sqlanon.anonymize(lake, target, qi=["x"], k=5, workers=1, overwrite=True)
        assert stat.S_IMODE(os.stat(metrics).st_mode) == mode & 0o666, target
    # Into a DuckDB file, a --metrics file takes the file's (it was left
    # under the umask there, helper-53).
    db = tmp_path / "w.duckdb"
    sqlanon.anonymize(lake, db, target_table="t", qi=["x"], k=5, workers=1)
    os.chmod(db, 0o600)
    sqlanon.anonymize(lake, db, target_table="t", qi=["x"], k=5, workers=1, overwrite=True,
                      metrics=str(tmp_path / "wm.parquet"))
    assert stat.S_IMODE(os.stat(tmp_path / "wm.parquet").st_mode) == 0o600


def test_files_disagreeing_on_a_columns_kind_are_refused(tmp_path):
    """A nightly file whose age came as text ('21y') made DuckDB read the
    whole column as text: the QI went from intervals to sets, silently
    (helper-38). Widths may differ: INT32 beside INT64 is fine."""
    lake = tmp_path / "lake"
    for day, age in ((1, pa.array([30, 40] * 10, pa.int32())), (2, pa.array([35, 45] * 10, pa.int64())),
                     (3, pa.array(["21y", "33"] * 10))):
        (lake / f"day={day}").mkdir(parents=True)
        pq.write_table(pa.table({"age": age, "s": list(range(20))}), lake / f"day={day}" / "a.parquet")
    with pytest.raises(sqlanon.ConfigError, match=r"column 'age' holds text in '.*day=3/a\.parquet' but integers in "
                                                 r"'.*day=1/a\.parquet'.*align the files"):
        sqlanon.anonymize(lake, tmp_path / "o.parquet", qi=["age"], k=5, workers=1)
    import shutil

    shutil.rmtree(lake / "day=3")
    assert sqlanon.anonymize(lake, tmp_path / "o.parquet", qi=["age"], k=5, workers=1).metrics.rows == 40
    # a column of NULLs only (pyarrow's NullType) takes any type; 64-bit ids beside doubles lose digits (helper-41)
    (lake / "day=4").mkdir()
    pq.write_table(pa.table({"age": pa.nulls(20, pa.null()), "s": list(range(20))}), lake / "day=4" / "a.parquet")
    assert sqlanon.anonymize(lake, tmp_path / "o.parquet", qi=["age"], k=5, workers=1, overwrite=True).metrics.rows == 60
    (lake / "day=5").mkdir()
    pq.write_table(pa.table({"age": [30.5] * 20, "s": list(range(20))}), lake / "day=5" / "a.parquet")
    with pytest.raises(sqlanon.ConfigError, match="column 'age' holds floats in .* but integers in"):
        sqlanon.anonymize(lake, tmp_path / "o.parquet", qi=["age"], k=5, workers=1, overwrite=True)
    # nested: a list of integers beside a list of text became VARCHAR[] (a list of NULLs takes any)
    lists = tmp_path / "lists"
    for day, tags in ((6, pa.array([[1, 2]] * 20)), (7, pa.array([[None]] * 20, pa.list_(pa.null()))),
                      (8, pa.array([["x"]] * 20))):
        (lists / f"day={day}").mkdir(parents=True)
        pq.write_table(pa.table({"age": [30] * 20, "s": list(range(20)), "tags": tags}), lists / f"day={day}" / "a.parquet")
        if day == 7:
            assert sqlanon.anonymize(lists, tmp_path / "o.parquet", qi=["age"], k=5, workers=1,
                                     overwrite=True).metrics.rows == 40
    with pytest.raises(sqlanon.ConfigError, match="column 'tags' holds a list of text in .* but a list of integers in"):
        sqlanon.anonymize(lists, tmp_path / "o.parquet", qi=["age"], k=5, workers=1, overwrite=True)


def test_decimals_no_one_decimal_type_holds_are_refused(tmp_path):
    """decimal(38,2) in one file beside decimal(38,4) in another read as
    decimal(38,2): 1.2345 was published as 1.23, passed through and as a
    QI (exit 0). Decimals one type holds (10,2 and 12,4: decimal(12,4))
    keep their values."""
    import decimal

    def lake(name: str, *types: tuple[int, int]) -> Path:
        for day, ((p, s), text) in enumerate(zip(types, ("5.00", "1.2345")), 1):
            (tmp_path / name / f"day={day}").mkdir(parents=True)
            pq.write_table(pa.table({"age": [20 + i % 10 for i in range(20)], "dx": ["a", "b"] * 10,
                                     "amount": pa.array([decimal.Decimal(text)] * 20, pa.decimal128(p, s))}),
                           tmp_path / name / f"day={day}" / "a.parquet")
        return tmp_path / name

    for qi in (["age"], ["age", "amount"]):
        with pytest.raises(sqlanon.ConfigError, match=r"column 'amount' holds decimal\(38,2\) in '.*day=1/a\.parquet' "
                                                     r"but decimal\(38,4\) in '.*day=2/a\.parquet'"):
            sqlanon.anonymize(lake(f"wide{len(qi)}", (38, 2), (38, 4)), tmp_path / "o.parquet", qi=qi, k=4, workers=1)
        assert not (tmp_path / "o.parquet").exists()
    sqlanon.anonymize(lake("fits", (10, 2), (12, 4)), tmp_path / "o.parquet", qi=["age"], k=4, workers=1)
    t = pq.read_table(tmp_path / "o.parquet")
    assert t.schema.field("amount").type == pa.decimal128(12, 4)
    assert sorted(set(map(str, t.column("amount").to_pylist()))) == ["1.2345", "5.0000"]


def test_durations_in_different_units_are_refused(tmp_path):
    """pyarrow writes a duration as INT64 counts of its unit (the unit only
    in its Arrow schema): duration('s') in one file beside duration('ms')
    in another came out as one int64 column, 300 and 300000 for the same
    five minutes (exit 0). One unit in every file still reads."""
    import datetime

    def lake(name: str, *units: str) -> Path:
        for day, unit in enumerate(units, 1):
            (tmp_path / name / f"day={day}").mkdir(parents=True)
            pq.write_table(pa.table({"age": [20 + i % 10 for i in range(20)],
                                     "wait": pa.array([datetime.timedelta(minutes=5)] * 20, pa.duration(unit))}),
                           tmp_path / name / f"day={day}" / "a.parquet")
        return tmp_path / name

    with pytest.raises(sqlanon.ConfigError, match=r"column 'wait' holds durations in milliseconds in "
                                                 r"'.*day=2/a\.parquet' but durations in seconds in '.*day=1/a\.parquet'"):
        sqlanon.anonymize(lake("mixed", "s", "ms"), tmp_path / "o.parquet", qi=["age"], k=4, workers=1)
    assert not (tmp_path / "o.parquet").exists()
    sqlanon.anonymize(lake("same", "ms", "ms"), tmp_path / "o.parquet", qi=["age"], k=4, workers=1)
    assert set(pq.read_table(tmp_path / "o.parquet").column("wait").to_pylist()) <= {
        300_000, datetime.timedelta(minutes=5)}


def test_a_metrics_file_whose_columns_take_no_metrics_is_refused_before_any_work(lake, tmp_path):
    """A file with the key columns but 'rows' a struct failed when publishing,
    after all the work, naming the hidden staging file (helper-38)."""
    import duckdb

    hand = tmp_path / "hand.parquet"
    duckdb.sql(f"COPY (SELECT 'x' AS run_id, 'y' AS kind, 1 AS fragment_id, {{'a': 1}} AS \"rows\") TO '{hand}'")
    with pytest.raises(ConfigError, match=r"metrics file '.*hand\.parquet': its column 'rows' is STRUCT\(a INTEGER\), "
                                          r"where sqlanon writes BIGINT"):
        sqlanon.anonymize(lake, tmp_path / "o.parquet", qi=["x"], k=5, workers=1, metrics=str(hand))
    assert not (tmp_path / "o.parquet").exists()
    for m in ("m.parquet", "m.csv"):  # sqlanon's own files take every later run's rows
        for _ in range(2):
            sqlanon.anonymize(lake, tmp_path / "o.parquet", qi=["x"], k=5, workers=1, metrics=str(tmp_path / m),
                              overwrite=True)


def test_table_names_are_parsed_strictly():
    """'a..b' was taken as a.b and '"x"y' as x.y (helper-37)."""
    from sqlanon.io import split_table_name

    assert split_table_name('"a.b".c') == ["a.b", "c"] and split_table_name('"a""b"') == ['a"b']
    assert split_table_name('a"b') == ['a"b'] and split_table_name("People Data") == ["People Data"]
    for bad in ("a..b", '"x"y', ".t", "t.", "a.b.c", '""', ""):
        with pytest.raises(ConfigError, match="bad table name"):
            split_table_name(bad)


def test_a_filesystem_without_modes_still_locks(lake, tmp_path, monkeypatch):
    """vfat or CIFS refuse fchmod: the lock's fchmod, moved into the opening
    this session, made the run go on unlocked (or leak a descriptor) and
    leave the lock file behind (helper-41)."""
    import sqlanon.io as sio

    def no_modes(fd, mode):
        raise OSError(95, "Operation not supported")

    monkeypatch.setattr(sio.os, "fchmod", no_modes)
    before = len(os.listdir("/proc/self/fd"))
    with PathLock(tmp_path / "o.parquet", "o") as lock:
        assert lock.held
        with pytest.raises(sqlanon.InputError, match="another sqlanon run is writing o"):
            PathLock(tmp_path / "o.parquet", "o").acquire()
    assert len(os.listdir("/proc/self/fd")) == before and not (tmp_path / ".o.parquet.sqlanon-lock").exists()


def test_a_staging_area_swapped_by_another_user_runs_no_code_and_gets_no_rows(tmp_path, monkeypatch):
    """The staging area next to the output may sit in a folder others may
    write (a team's, not sticky): one renamed it away and put a directory of
    their own in its place, then replaced the pickle every worker loads
    (their code ran as the run's user) and opened the CSV input's parsed
    copy, written readable by all before its chmod (helper-115). A pickle
    not the user's own, or one others may write, is refused; the copy and
    the workers' spill are written by names that stay the run's own private
    directories, whatever is renamed."""
    import pickle
    import stat

    import sqlanon.io as sio
    from sqlanon import worker

    payload = tmp_path / "payload.pickle"
    payload.write_bytes(pickle.dumps(("spec", "stats")))
    os.chmod(payload, 0o600)
    assert worker.shared(str(payload)) == ("spec", "stats")
    worker.shared.cache_clear()  # (loaded once per process and path)
    if os.geteuid() == 0:  # another user's file: as root, give it away
        os.chown(payload, 12345, 12345)
        with pytest.raises(sqlanon.InputError, match="refusing to load .*: it is not the run's own file"):
            worker.shared(str(payload))
    link = tmp_path / "link.pickle"
    link.symlink_to(payload)
    with pytest.raises(sqlanon.InputError, match="cannot read"):
        worker.shared(str(link))
    # Another user's directory is not the run's (its mode is no sign: a filesystem without Unix modes
    # reports 0755 whatever was asked, helper-117)
    (tmp_path / "open").mkdir()
    os.chmod(tmp_path / "open", 0o755)
    os.close(sio.open_private(str(tmp_path / "open")))
    if os.geteuid() == 0:
        os.chown(tmp_path / "open", 12345, 12345)
        with pytest.raises(sqlanon.InputError, match="is no longer this run's private directory"):
            sio.open_private(str(tmp_path / "open"))
    # The parsed copy: written by its directory's held name, a 0700 directory of the area's
    src = tmp_path / "in.csv"
    src.write_text("id,x\n" + "".join(f"{i},{i % 30}\n" for i in range(600)))
    real, written = sio.copy_relation, []

    def copy_relation(con, relation, path, *args, **kw):
        written.append((path, stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode)))
        return real(con, relation, path, *args, **kw)

    monkeypatch.setattr(sio, "copy_relation", copy_relation)
    r = sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["x"], k=5, workers=2, fragments=6)
    assert r.metrics.rows == 600
    copies = [(p, m) for p, m in written if p.endswith(sio.PARSED_COPY)]
    assert len(copies) == 1 and copies[0][0].startswith("/proc/self/fd/") and copies[0][1] == 0o700, written


@pytest.mark.skipif(os.geteuid() != 0, reason="gives files away to nobody: root only")
def test_nobodys_files_are_a_root_runs_own_only_on_nfs(tmp_path, monkeypatch):
    """Root squashing shows a root run's files on NFS as nobody's (65534),
    taken as its own there (helper-117); on a local filesystem a file of
    nobody's is a local process's running as nobody, which swapped a root
    run's staging area for its own in a folder it may write, and its pickle
    ran as root in every local worker (helper-121)."""
    import pickle

    import sqlanon.io as sio
    from sqlanon import worker

    payload = tmp_path / "shared.pickle"
    payload.write_bytes(pickle.dumps(("spec", "stats")))
    os.chown(payload, sio.NFS_NOBODY, sio.NFS_NOBODY)
    (tmp_path / "spill").mkdir()
    os.chown(tmp_path / "spill", sio.NFS_NOBODY, sio.NFS_NOBODY)
    worker.shared.cache_clear()
    with pytest.raises(sqlanon.InputError, match="refusing to load .*: it is not the run's own file"):
        worker.shared(str(payload))
    with pytest.raises(sqlanon.InputError, match="is no longer this run's private directory"):
        sio.open_private(str(tmp_path / "spill"))
    monkeypatch.setattr(sio, "_on_nfs", lambda dev: True)  # a squashing NFS mount
    assert worker.shared(str(payload)) == ("spec", "stats")
    os.close(sio.open_private(str(tmp_path / "spill")))
    worker.shared.cache_clear()


@pytest.mark.parametrize("out", ["o.parquet", "d/"])
def test_a_staging_area_swapped_while_the_run_writes_it_is_not_published(tmp_path, monkeypatch, out):
    """Swapped for another directory (another user's, who may write the
    output's folder) once the parts are written: the run verified and
    published whatever that directory held, a directory output the
    attacker's own (helper-115). Refused, nothing published."""
    import duckdb

    import sqlanon.io as sio

    src = tmp_path / "in.parquet"
    duckdb.sql(f"COPY (SELECT i AS id, i % 30 AS x FROM range(300) t(i)) TO '{src}'")
    target = sio.DirectoryTarget if out.endswith("/") else sio.FileTarget
    real = target.assemble

    def assemble(self, con, staging, empty):
        relation = real(self, con, staging, empty)
        shutil.copytree(staging.root, f"{staging.root}.theirs")
        shutil.rmtree(staging.root)
        os.rename(f"{staging.root}.theirs", staging.root)  # the same contents, another directory
        return relation

    monkeypatch.setattr(target, "assemble", assemble)
    with pytest.raises(sqlanon.InputError, match=r"staging area .* was replaced while the run wrote it .*; nothing "
                                                 r"was published"):
        sqlanon.anonymize(src, tmp_path / out, qi=["x"], k=5, workers=1)
    assert not (tmp_path / out).exists() and not (tmp_path / "o__metrics.parquet").exists()


def test_names_in_the_outputs_folder_are_never_followed_or_removed_as_anothers(tmp_path):
    """One who may write the output's folder could swap the staged metrics'
    folder for one whose metrics name links to any file (the run then gave
    it the old metrics' mode: 0777 /etc/shadow as root), link the claim to
    a file (overwritten), or rename a directory of this user's to a staging
    area's name (its files removed) (helper-116)."""
    import stat

    import sqlanon.io as sio

    canary = tmp_path / "canary"
    canary.write_text("secret")
    os.chmod(canary, 0o600)
    old = tmp_path / "old.parquet"
    old.write_text("x")
    os.chmod(old, 0o777)
    link = tmp_path / "link"
    link.symlink_to(canary)
    sio._keep_access(str(link), str(old))  # the mode is not given through the link
    assert stat.S_IMODE(canary.stat().st_mode) == 0o600
    # the claim is a new file, never written through a link
    metrics = tmp_path / "m.parquet"
    con = sio.connect()
    staged = sio.stage_metrics_file(con, pa.table({"a": [1]}), str(metrics))
    os.symlink(canary, staged.claim)
    staged.belongs_to(str(tmp_path / "out.parquet"), str(old))
    assert canary.read_text() == "secret"
    # a folder put in the staged metrics' place: nothing put in place, nothing of it removed
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "m.parquet").symlink_to(canary)
    os.rename(staged.folder, tmp_path / "moved")
    os.rename(theirs, staged.folder)
    with pytest.raises(OSError, match="its staging folder was replaced"):
        staged()
    assert not metrics.exists() and canary.read_text() == "secret"
    staged.discard()
    assert (Path(staged.folder) / "m.parquet").is_symlink()
    con.close()
    # a staging area replaced: not removed
    area = sio.FileTarget(str(tmp_path / "out.parquet"), "parquet").new_staging()
    mine = tmp_path / "reports"
    mine.mkdir()
    (mine / "q3.txt").write_text("keep")
    os.rename(area.root, tmp_path / "area-moved")
    os.rename(mine, area.root)
    area.discard()
    assert (area.root / "q3.txt").read_text() == "keep"


def test_a_clusters_staging_area_is_shared_and_its_parts_modes_best_effort(tmp_path, monkeypatch):
    """With a remote scheduler or master the workers may run as another
    user of the group: a private (0700) staging area shut them out, and
    --overwrite's chmod of their part files raised after all the work
    (helper-41)."""
    import stat

    import sqlanon.io as sio

    old = os.umask(0o002)
    try:
        shared = sio.DirectoryTarget(str(tmp_path / "d")).new_staging(shared=True)
        private = sio.DirectoryTarget(str(tmp_path / "e")).new_staging()
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(shared.root).st_mode) == 0o775 and stat.S_IMODE(os.stat(private.root).st_mode) == 0o700
    (tmp_path / "old").write_text("x")
    (tmp_path / "new").write_text("y")

    def not_ours(path, mode):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(sio.os, "chmod", not_ours)
    sio._keep_access(str(tmp_path / "new"), str(tmp_path / "old"))  # no error: best effort


def test_an_interrupted_clean_up_releases_the_outputs_lock(lake, tmp_path, monkeypatch):
    """A Ctrl-C while removing a dead run's big staging kept the lock: every
    later run in the process was refused as 'another run'."""
    import sqlanon.io as sio

    out = tmp_path / "o.parquet"

    def interrupted(path, locked=False):
        raise KeyboardInterrupt

    monkeypatch.setattr(sio, "remove_stale_staging", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sqlanon.anonymize(lake, out, qi=["x"], k=5, workers=1)
    monkeypatch.undo()
    assert sqlanon.anonymize(lake, out, qi=["x"], k=5, workers=1).metrics.rows == 100
    assert not (tmp_path / ".o.parquet.sqlanon-lock").exists()


def test_a_glob_matching_two_formats_is_refused(tmp_path):
    lake = tmp_path / "lake.csv"  # 'lake.csv/*' reads as CSV: its Parquet files went to read_csv
    lake.mkdir()
    pq.write_table(pa.table({"x": list(range(20))}), lake / "a.parquet")
    (lake / "b.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(20)))
    with pytest.raises(sqlanon.ConfigError, match=r"'.*lake.csv/\*' mixes Parquet and CSV files: name one kind"):
        sqlanon.anonymize(f"{lake}/*", tmp_path / "o.parquet", qi=["x"], k=5)
    # DuckDB tells a compression by its lower-case suffix only: .CSV.GZ is no format sqlanon reads.
    (lake / "c.CSV.GZ").write_bytes(b"")
    with pytest.raises(ConfigError, match="cannot tell the format of '.*c.CSV.GZ'"):
        sqlanon.anonymize(lake / "c.CSV.GZ", tmp_path / "o.parquet", qi=["x"], k=5)


def test_an_output_directory_that_is_a_mount_point_is_refused(lake, tmp_path):
    """It could never be swapped (a rename of a mount point is EBUSY): the
    run failed at the end with an internal error and left its staged metrics."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(mnt)], capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        with pytest.raises(ConfigError, match="is a mount point: .* name a directory inside it"):
            sqlanon.anonymize(lake, f"{mnt}/", qi=["x"], k=5, overwrite=True)
        assert sorted(os.listdir(tmp_path)) == ["lake", "mnt"]
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


# ---------------------------------------------------------------- names that resolve to the same thing


@pytest.fixture
def people_db(tmp_path):
    import duckdb

    db = tmp_path / "v.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE people AS SELECT i AS id, i % 50 AS age FROM range(500) t(i)")
    con.execute("CREATE TABLE report AS SELECT 'precious' AS x")
    con.close()
    return db


def _tables(db) -> dict[str, list]:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        names = con.execute("SELECT table_schema, table_name FROM information_schema.tables "
                            "WHERE table_type = 'BASE TABLE'").fetchall()
        return {
            f"{schema}.{name}": con.execute(f'SELECT count(*), list(CAST(COLUMNS(*) AS VARCHAR) ORDER BY ALL) '
                                            f'FROM "{schema}"."{name}"').fetchall()
            for schema, name in sorted(names)
        }
    finally:
        con.close()


def test_a_duckdb_input_table_is_not_an_output_under_another_spelling(people_db, tmp_path):
    """DuckDB resolves main.people, PEOPLE and "People" to the table people: each is the input."""
    before = _tables(people_db)
    link = tmp_path / "link.duckdb"
    link.symlink_to(people_db)
    for out, name in ((people_db, "main.people"), (people_db, "PEOPLE"), (people_db, '"People"'), (link, "people")):
        with pytest.raises(ConfigError, match="is the input"):
            sqlanon.anonymize(people_db, out, table="people", target_table=name, qi=["age"], k=5, workers=1, overwrite=True)
    with pytest.raises(ConfigError, match="is the input table"):
        sqlanon.anonymize(people_db, people_db, table="people", target_table="anon", metrics="MAIN.People", qi=["age"], k=5, workers=1)
    # without a table for the output, the same file: name one (it said "write elsewhere": helper-201)
    with pytest.raises(ConfigError, match=r"is the input's database: name a new table in it with target_table=, or"):
        sqlanon.anonymize(people_db, people_db, table="people", qi=["age"], k=5, workers=1)
    assert _tables(people_db) == before


def test_names_differing_in_non_ascii_case_are_two_names_as_in_duckdb(people_db, tmp_path):
    """DuckDB folds the case of ASCII letters only: 'Émile' and 'émile' are
    two tables, 'É' and 'é' two columns. sqlanon folded all of Unicode: the
    output émile beside a table Émile was refused as existing, and a file
    with columns É and é as naming one column twice."""
    import duckdb

    con = duckdb.connect(str(people_db))
    con.execute('CREATE TABLE "Émile" AS SELECT 1 AS x')
    con.close()
    r = sqlanon.anonymize(people_db, people_db, table="people", target_table="émile", qi=["age"], k=5, workers=1)
    assert r.metrics.rows == _tables(people_db)["main.émile"][0][0] and _tables(people_db)["main.Émile"][0][0] == 1
    with pytest.raises(ConfigError, match="already exists"):  # ASCII letters: one name
        sqlanon.anonymize(people_db, people_db, table="people", target_table="ÉMILE", qi=["age"], k=5, workers=1)
    src = tmp_path / "e.parquet"
    pq.write_table(pa.table({"É": [1] * 10, "é": list(range(10))}), src)
    r = sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["é"], k=5, workers=1)
    assert pq.read_table(tmp_path / "o.parquet").column("É").to_pylist() == [1] * 10


def test_a_table_below_the_input_view_is_not_an_output(people_db):
    """Reading the table people and writing it was refused, but reading a
    view over it and writing people with --overwrite replaced the raw
    table by its anonymized copy, exit 0 (helper-2). Views over views
    (another schema, a name needing quotes, column aliases, a CTE, a
    subquery) are followed; a view over another table may still write."""
    import duckdb

    con = duckdb.connect(str(people_db))
    con.execute('CREATE SCHEMA "my s"')
    con.execute('CREATE TABLE "my s".people AS SELECT i AS id, 2 AS age FROM range(10) t(i)')
    con.execute("CREATE VIEW people_v AS SELECT * FROM people")
    con.execute('CREATE VIEW "my s"."v AS x" (id, "a;ge") AS WITH p AS (SELECT * FROM main.people_v) SELECT * FROM p')
    con.execute('CREATE VIEW top AS SELECT id, "a;ge" AS age FROM "my s"."v AS x" '
                'WHERE id IN (SELECT id FROM report, main.people)')
    con.execute("CREATE VIEW other AS SELECT id, age FROM \"my s\".people")
    # through a table macro, or query_table() naming it in text, it was replaced (helper-17)
    con.execute("CREATE MACRO all_people() AS TABLE SELECT * FROM people")
    con.execute("CREATE VIEW by_macro AS SELECT * FROM all_people()")
    con.execute("CREATE VIEW by_name AS SELECT * FROM query_table('people')")
    # every overload of a macro, and a scalar macro's subquery (helper-20)
    con.execute('CREATE MACRO most(x) AS (SELECT max(id) FROM "my s".people), (x, y) AS (SELECT max(id) FROM people)')
    con.execute('CREATE VIEW by_overload AS SELECT id, age + most(1) AS age FROM "my s".people')
    con.execute("CREATE MACRO last_id() AS (SELECT max(id) FROM people)")
    con.execute('CREATE VIEW by_scalar AS SELECT id, age + last_id() AS age FROM "my s".people')
    con.close()
    before = _tables(people_db)
    for view in ("people_v", '"my s"."v AS x"', "top", "by_macro", "by_name", "by_overload", "by_scalar"):
        with pytest.raises(ConfigError, match=r"output 'people' holds rows the input .* reads \(a view over it\)"):
            sqlanon.anonymize(people_db, people_db, table=view, target_table="people", qi=["id"], k=2, workers=1,
                              overwrite=True)
    assert _tables(people_db) == before
    # (while the views over people, which its anonymized copy would break, stand, it is not replaced)
    with pytest.raises(sqlanon.InputError, match=r"view '.*' reads it and would no longer work"):
        sqlanon.anonymize(people_db, people_db, table="other", target_table="people", qi=["id"], k=2, workers=1,
                          overwrite=True)
    with duckdb.connect(str(people_db)) as con:
        for view in ("top", '"my s"."v AS x"', "people_v", "by_macro", "by_name", "by_scalar"):
            con.execute(f"DROP VIEW {view}")
    sqlanon.anonymize(people_db, people_db, table="other", target_table="people", qi=["id"], k=2, workers=1,
                      overwrite=True)
    assert _tables(people_db)["main.people"][0][0] == 10  # the copy of "my s".people


def test_a_directory_output_that_cannot_be_swapped_stays_in_place(tmp_path, monkeypatch):
    """A 0555 output directory: the exchange failed (EACCES), was taken for a
    filesystem without it, and the fallback moved the old output aside, failed
    to move the new one in and left no output at all, exit 1, every run
    (helper-22). A user who cannot write it is refused before any work; a
    fallback whose second rename fails puts the old one back."""
    from sqlanon import io

    src = tmp_path / "src.parquet"
    pq.write_table(pa.table({"age": [20 + i % 40 for i in range(200)]}), src)
    out = tmp_path / "out"
    sqlanon.anonymize(src, f"{out}/", qi=["age"], k=5, workers=1)
    before = sorted(p.name for p in out.iterdir())
    out.chmod(0o555)
    if os.geteuid() == 0 and Path("/usr/bin/setpriv").exists():  # root without its override: any user
        nocap = ["setpriv", "--inh-caps=-dac_override,-dac_read_search,-fowner",
                 "--bounding-set=-dac_override,-dac_read_search,-fowner"]
        r = subprocess.run([*nocap, sys.executable, "-m", "sqlanon", "anonymize", src, "-o", f"{out}/", "--qi", "age",
                            "-k", "5", "--overwrite"], capture_output=True, text=True, timeout=600)
        assert r.returncode == 2 and r.stderr.startswith(f"Error: output '{out}/' is a directory this user cannot "
                                                         "write"), r.stderr
    out.chmod(0o755)
    monkeypatch.setattr(io, "_exchange", lambda a, b: False)  # a filesystem without it (NFS)
    real = os.rename

    def second_fails(a, b):
        if ".sqlanon-staging-" in str(a):
            raise PermissionError(13, "Permission denied", str(a))
        return real(a, b)

    monkeypatch.setattr(os, "rename", second_fails)
    with pytest.raises(sqlanon.InputError, match="Permission denied"):
        sqlanon.anonymize(src, f"{out}/", qi=["age"], k=5, workers=1, overwrite=True)
    monkeypatch.setattr(os, "rename", real)
    assert sorted(p.name for p in out.iterdir()) == before
    assert not [p for p in tmp_path.iterdir() if ".sqlanon-" in p.name]


def test_removing_staging_never_changes_the_directory_holding_it(tmp_path, monkeypatch):
    """The clean-up's retry made the directory of whatever it failed to remove
    writable (0700): for the staging directory itself, that is the user's own
    output directory (a shared 2775 one lost its group bits; helper-25)."""
    from sqlanon import io

    base = tmp_path / "shared"
    staging = base / ".out.sqlanon-staging-1-abc"
    (staging / "sub").mkdir(parents=True)
    (staging / "sub" / "part.parquet").write_bytes(b"x")
    base.chmod(0o2775)
    real = os.rmdir

    def refuse_top(path, *args, **kwargs):
        if str(path) == str(staging):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", refuse_top)
    io._remove(staging)
    assert stat.S_IMODE(base.stat().st_mode) == 0o2775 and staging.exists()
    monkeypatch.setattr(os, "rmdir", real)
    io._remove(staging)
    assert not staging.exists()


def test_removing_a_planted_backup_never_follows_a_link_swapped_in(tmp_path, monkeypatch):
    """A dead run's backup is removed whoever planted it (remove_stale_staging),
    and the clean-up's retry of an entry it could not remove (the planter's)
    went by name: a folder of the planted tree swapped for a link to one of
    the user's between rmtree's error and the retry made that folder 0700 and
    removed the entry of that name in it (helper-168)."""
    from sqlanon import io

    mine = tmp_path / "mine"
    mine.mkdir(mode=0o755)
    (mine / "secret.txt").write_text("precious")
    mine.chmod(0o755)
    out = tmp_path / "out.parquet"
    out.write_bytes(b"old output")
    backup = tmp_path / f".out.parquet{BACKUP_MARK}999999"
    (backup / "a").mkdir(parents=True)
    (backup / "a" / "secret.txt").write_bytes(b"")
    real = os.unlink

    def planters(path, *args, **kwargs):  # another user's: EACCES; meanwhile the planter swaps a link in
        if kwargs.get("dir_fd") is not None and str(path) == "secret.txt" and (backup / "a").is_dir() \
                and not (backup / "a").is_symlink():
            os.rename(backup / "a", backup / "a.real")
            os.symlink(mine, backup / "a")
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", planters)
    remove_stale_staging(out, locked=True)
    monkeypatch.setattr(os, "unlink", real)
    assert (mine / "secret.txt").read_text() == "precious"
    assert stat.S_IMODE(mine.stat().st_mode) == 0o755


def test_a_file_below_the_input_view_is_not_an_output(tmp_path, monkeypatch, caplog):
    """A DuckDB view over read_parquet('raw.parquet') with -o raw.parquet
    --overwrite replaced the raw file by its anonymized copy, exit 0, and a
    change of the file during the run went unseen: the run's input files
    were the database's only. Files named in a list, by a glob, relative to
    the working directory, or read by a replacement scan (FROM 'x.csv') all
    count; a table whose name looks like a file's is a table."""
    import duckdb

    from sqlanon import coordinator, io

    monkeypatch.chdir(tmp_path)
    (tmp_path / "lake").mkdir()
    pq.write_table(pa.table({"id": list(range(20)), "age": [20 + i % 5 for i in range(20)]}), "raw.parquet")
    for day in (1, 2):
        pq.write_table(pa.table({"id": [day], "age": [30]}), f"lake/day{day}.parquet")
    (tmp_path / "extra.csv").write_text("id,age\n99,40\n")
    db = tmp_path / "v.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE VIEW one AS SELECT * FROM read_parquet('raw.parquet')")
    con.execute("CREATE VIEW many AS SELECT * FROM read_parquet(['lake/*.parquet', 'raw.parquet']) "
                "UNION ALL SELECT * FROM 'extra.csv'")
    con.execute('CREATE TABLE "t.parquet" AS SELECT 1 AS id, 2 AS age')
    con.execute('CREATE VIEW by_table AS SELECT * FROM "t.parquet"')
    con.close()
    # ~ as DuckDB expands it, a glob an output would fall under, and names known only at run time (helper-25)
    monkeypatch.setenv("HOME", str(tmp_path / "lake"))
    con = duckdb.connect(str(db))
    con.execute("CREATE VIEW home AS SELECT * FROM read_parquet('~/day1.parquet')")
    con.execute("CREATE VIEW days AS SELECT * FROM read_parquet('lake/day*.parquet')")
    con.execute("CREATE MACRO m(p) AS TABLE SELECT * FROM read_parquet(p)")
    con.execute("CREATE VIEW by_macro AS SELECT * FROM m('raw.parquet')")
    con.execute("CREATE VIEW by_query AS SELECT * FROM query('SELECT * FROM ''raw.parquet''')")
    con.close()
    pq.write_table(pa.table({"x": [1]}), "t.parquet")  # not what the view reads
    files = {view: sorted(os.path.relpath(f, tmp_path) for f in coordinator._input_files(io.open_source(db, view))[3:])
             for view in ("one", "many", "by_table")}
    assert files == {"one": ["raw.parquet"], "many": ["extra.csv", "lake/day1.parquet", "lake/day2.parquet",
                                                      "raw.parquet"],
                     "by_table": []}
    before = {f: Path(f).read_bytes() for f in ("raw.parquet", "lake/day1.parquet", "extra.csv")}
    for view, out, what in (("one", "raw.parquet", "is the file 'raw.parquet'"),
                            ("one", str(tmp_path / "raw.parquet"), "is the file 'raw.parquet'"),
                            ("many", "lake", "holds the file 'lake/day1.parquet'"),
                            ("many", "extra.csv", "is the file 'extra.csv'"),
                            ("home", "lake/day1.parquet", "is the file 'lake/day1.parquet'")):
        what = what.replace("'", f"'{tmp_path}/", 1)  # named in full
        with pytest.raises(ConfigError, match=rf"output .* {re.escape(what)}, which the input .* reads \(a view over it\)"):
            sqlanon.anonymize(db, out, table=view, qi=["age"], k=2, workers=1, overwrite=True)
    with pytest.raises(ConfigError, match=r"output 'lake/day3.parquet' lies where the input .* reads \('.*/lake/day"
                                          r"\*.parquet', a view over it\): a later run would read it back"):
        sqlanon.anonymize(db, "lake/day3.parquet", table="days", qi=["age"], k=2, workers=1)
    for view in ("by_macro", "by_query"):  # said, as for PostgreSQL's functions
        with caplog.at_level(logging.WARNING, logger="sqlanon"):
            sqlanon.anonymize(db, f"{view}.parquet", table=view, qi=["age"], k=2, workers=1)
        assert f"reads files it names only when it runs (query(), a macro's argument, an expression): if it reads " \
               f"{view}.parquet, this run replaces it" in caplog.text
    assert {f: Path(f).read_bytes() for f in before} == before
    sqlanon.anonymize(db, "t.parquet", table="one", qi=["age"], k=2, workers=1, overwrite=True)
    # A name that reads as a pattern and matches no file is read as itself by DuckDB: that file is the
    # view's ('raw[1].parquet' was taken for 'raw1.parquet', and replaced by the output: helper-87).
    shutil.copy("raw.parquet", "raw[1].parquet")
    before["raw[1].parquet"] = Path("raw[1].parquet").read_bytes()
    con = duckdb.connect(str(db))
    con.execute("CREATE VIEW bracket AS SELECT * FROM read_parquet('raw[1].parquet')")
    con.close()
    assert [os.path.relpath(f, tmp_path) for f in coordinator._input_files(io.open_source(db, "bracket"))[3:]] == [
        "raw[1].parquet"]
    with pytest.raises(ConfigError, match=r"output 'raw\[1\]\.parquet' is the file '.*/raw\[1\]\.parquet', which"):
        sqlanon.anonymize(db, "raw[1].parquet", table="bracket", qi=["age"], k=2, workers=1, overwrite=True)
    assert {f: Path(f).read_bytes() for f in before} == before


def test_verify_counts_a_nocase_qi_as_its_readers_do(tmp_path):
    """verify grouped a DuckDB table's QI by the column's collation: with
    COLLATE NOCASE 'PARIS' and 'Paris' were one class of 2, while every
    reader sees two classes of one row (helper-4). QIs are compared byte
    by byte; a sensitive column's values count as written, with one
    sensitive column as with two (count(DISTINCT …) ignores the collation,
    GROUP BY did not: helper-137), and the spelling warning names them."""
    import duckdb

    db = tmp_path / "w.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE pub(city VARCHAR COLLATE NOCASE, dx VARCHAR COLLATE NOCASE, n INTEGER)")
    con.execute("INSERT INTO pub VALUES ('PARIS', 'flu', 1), ('Paris', 'cold', 1), ('Rome', 'flu', 2), "
                "('Rome', 'FLU', 2), ('Oslo', 'flu', 3), ('Oslo', 'cold', 3)")
    con.close()
    v = sqlanon.verify(db, table="pub", qi=["city", "n"], k=2)
    assert not v.ok and v.classes == 4 and v.min_class_size == 1
    v = sqlanon.verify(db, table="pub", qi=["n"], k=2, l=2, sensitive=["dx"])
    assert v.ok and v.min_distinct == {"dx": 2}  # 'flu' and 'FLU': two values as written (README)
    both = sqlanon.verify(db, table="pub", qi=["n"], k=2, l=2, sensitive=["dx", "city"])
    assert both.min_distinct["dx"] == v.min_distinct["dx"]


def test_anonymize_warns_of_a_sensitive_column_its_collation_counts_fewer(tmp_path, caplog):
    """l counts a DuckDB table's NOCASE sensitive column as written, as the
    output's plain VARCHAR is read; but 'Flu' and 'flu' are one value to the
    source's GROUP BY, and only verify said so (helper-159)."""
    import duckdb

    db = tmp_path / "w.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE t(age INTEGER, dx VARCHAR COLLATE NOCASE, dy VARCHAR)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?)",
                    [(20 + i, ["Flu", "FLU", "flu", "cold"][i % 4], ["Flu", "FLU"][i % 2]) for i in range(40)])
    con.close()
    out = tmp_path / "o.duckdb"
    with caplog.at_level(logging.WARNING, logger="sqlanon"):
        r = sqlanon.anonymize(db, out, table="t", target_table="a", qi=["age"], sensitive=["dx"], k=5, l=2,
                              workers=1)
    assert r.metrics.rows == 40
    said = [m for m in caplog.messages if "its collation" in m]
    assert len(said) == 1 and "'dx'" in said[0] and "4 distinct values that its collation (such as NOCASE) " \
        "holds as 2" in said[0]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sqlanon"):  # a column without a collation: nothing to say
        sqlanon.anonymize(db, out, table="t", target_table="a", qi=["age"], sensitive=["dy"], k=5, l=2, workers=1,
                          overwrite=True)
    assert not [m for m in caplog.messages if "its collation" in m]


def test_a_duckdb_target_a_view_reads_is_not_replaced_under_it(people_db, tmp_path):
    """DuckDB keeps no dependencies: a replacing table without the column a
    view of the file reads broke the view, exit 0 and not a word
    (helper-158). Refused in the publishing transaction, the old table and
    its view intact, as PostgreSQL refuses it; a view the new table serves
    is no obstacle."""
    import duckdb

    with duckdb.connect(str(people_db)) as con:
        con.execute("CREATE TABLE anon AS SELECT 'x' AS age, 1 AS extra")
        con.execute("CREATE SCHEMA rpt")
        # unqualified: main.anon to the file's users, not bound when attached under another name (helper-161)
        con.execute("CREATE VIEW rpt.v AS SELECT age, extra FROM anon")
        con.execute("CREATE VIEW fine AS SELECT age FROM main.anon")
    before = _tables(people_db)
    run = dict(table="people", target_table="anon", qi=["age"], k=5, workers=1, overwrite=True)
    with pytest.raises(sqlanon.InputError, match=r"^cannot replace '.*v\.duckdb table anon': view 'rpt\.v' reads it "
                                                 r"and would no longer work \(Binder Error: .*\"extra\".*\); "
                                                 r"redefine or drop"):
        sqlanon.anonymize(people_db, people_db, **run)
    assert _tables(people_db) == before
    with duckdb.connect(str(people_db)) as con:
        assert con.execute("SELECT * FROM rpt.v").fetchall() == [("x", 1)]
        con.execute("DROP VIEW rpt.v")
    assert sqlanon.anonymize(people_db, people_db, **run).metrics.rows == 500
    with duckdb.connect(str(people_db)) as con:
        assert con.execute("SELECT count(*) FROM fine").fetchone()[0] == 500


def test_an_existing_duckdb_table_in_another_case_needs_overwrite(people_db):
    before = _tables(people_db)
    with pytest.raises(ConfigError, match="already exists"):
        sqlanon.anonymize(people_db, people_db, table="people", target_table="REPORT", qi=["age"], k=5, workers=1)
    assert _tables(people_db) == before


def test_metrics_table_in_another_schema_of_a_duckdb_target(people_db, tmp_path):
    import duckdb

    out = tmp_path / "m.duckdb"
    con = duckdb.connect(str(out))
    con.execute("CREATE SCHEMA audit; CREATE SCHEMA hr")
    con.close()
    r = sqlanon.anonymize(people_db, out, table="people", target_table="hr.anon", metrics="audit.runs", qi=["age"], k=5, workers=1)
    assert r.metrics_location == f"{out} table audit.runs"
    tables = _tables(out)
    assert "audit.runs" in tables and "hr.anon" in tables and not any("." in n.split(".", 1)[1] for n in tables)


def test_target_table_needs_a_duckdb_file(lake, tmp_path, people_db):
    out = tmp_path / "tt.parquet"
    with pytest.raises(ConfigError, match="target_table= writes into a DuckDB file"):
        sqlanon.anonymize(lake, out, target_table="t", qi=["x"], k=5, workers=1)
    # ... also with a metrics table there: it was 'schema 'hr' does not exist in the new DuckDB file' (helper-86)
    with pytest.raises(ConfigError, match="target_table= writes into a DuckDB file"):
        sqlanon.anonymize(lake, out, target_table="hr.t", metrics="runs", qi=["x"], k=5, workers=1)
    assert not out.exists()
    existing = tmp_path / "data.parquet"
    pq.write_table(pa.table({"x": [1]}), existing)
    for metrics in (None, "runs"):
        with pytest.raises(ConfigError, match="is not a DuckDB database"):
            sqlanon.anonymize(lake, existing, target_table="t", metrics=metrics, qi=["x"], k=5, workers=1,
                              overwrite=True)
    with pytest.raises(ConfigError, match="is not a DuckDB database: table="):
        sqlanon.anonymize(existing, tmp_path / "o.parquet", table="t", qi=["x"], k=2, workers=1)


def test_a_sqlite_file_gets_a_url_hint(tmp_path):
    import sqlite3

    db = tmp_path / "hr.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE people (x INTEGER)")
    with pytest.raises(ConfigError, match=r"is a SQLite database: name it as a URL, sqlite:///"):
        sqlanon.anonymize(db, tmp_path / "o.parquet", table="people", qi=["x"], k=2, workers=1)
    # without a table too: it was 'a DuckDB database: name the table', and then a SQLite one (helper-24)
    with pytest.raises(ConfigError, match=r"is a SQLite database: name it as a URL, sqlite:///"):
        sqlanon.anonymize(db, tmp_path / "o.parquet", qi=["x"], k=2, workers=1)
    pq.write_table(pa.table({"x": [1, 2]}), tmp_path / "p.parquet")
    for table in (None, "t"):  # as the output: not to be named as a URL, which is refused there too (helper-25)
        with pytest.raises(ConfigError, match=r"is a SQLite database, which sqlanon reads but does not write"):
            sqlanon.anonymize(tmp_path / "p.parquet", db, target_table=table, qi=["x"], k=2, workers=1)
    with pytest.raises(ConfigError, match=r"'.*new.duckdb' names a DuckDB database \(by its suffix\): name the "
                                          r"output table"):
        sqlanon.anonymize(tmp_path / "p.parquet", tmp_path / "new.duckdb", qi=["x"], k=2, workers=1)


def test_a_directory_named_like_a_database_is_a_lake(tmp_path):
    """lake.db/ holding Parquet files was 'a DuckDB database: name the table
    with --table' (helper-25); with --table it is still refused as no file."""
    lake = tmp_path / "lake.db"
    lake.mkdir()
    pq.write_table(pa.table({"x": [i % 5 for i in range(20)]}), lake / "part-0.parquet")
    assert sqlanon.anonymize(lake, tmp_path / "o.parquet", qi=["x"], k=2, workers=1).metrics.rows == 20
    with pytest.raises(ConfigError, match="is a directory, not a DuckDB file"):
        sqlanon.anonymize(lake, tmp_path / "o.parquet", table="t", qi=["x"], k=2, workers=1, overwrite=True)


def test_a_directory_input_reads_every_spelling_of_its_extension(tmp_path):
    d = tmp_path / "mix"
    d.mkdir()
    t = pa.table({"id": np.arange(300), "x": np.arange(300) % 30})
    for name in ("a.parquet", "b.pq", "c.PARQUET"):
        pq.write_table(t, d / name)
    r = sqlanon.anonymize(d, tmp_path / "o.parquet", qi=["x"], k=5, workers=1)
    assert r.metrics.rows == 900 and pq.read_table(tmp_path / "o.parquet").num_rows == 900
    only_pq = tmp_path / "pq"
    only_pq.mkdir()
    pq.write_table(t, only_pq / "part.pq")
    assert sqlanon.anonymize(only_pq, tmp_path / "o2.parquet", qi=["x"], k=5, workers=1).metrics.rows == 300


def test_a_glob_over_hive_partitions_keeps_the_partition_columns(tmp_path):
    import duckdb

    hive = tmp_path / "hive"
    duckdb.sql(
        f"COPY (SELECT i AS id, i % 30 AS x, ['a', 'b', 'c'][1 + i % 3] AS cat FROM range(300) t(i)) "
        f"TO '{hive}' (FORMAT parquet, PARTITION_BY (cat))"
    )
    out = tmp_path / "o.parquet"
    sqlanon.anonymize(f"{hive}/*/*.parquet", out, qi=["x"], k=5, workers=2)
    got = pq.read_table(out)
    assert "cat" in got.column_names
    assert sorted(got.column("cat").to_pylist()) == sorted(["a", "b", "c"][i % 3] for i in range(300))


def test_an_output_under_a_glob_input_says_why(lake):
    with pytest.raises(ConfigError, match="lies under .* where the input .* reads"):
        sqlanon.anonymize(f"{lake}/part-*.parquet", lake / "anon.csv", qi=["x"], k=5)


def test_a_csv_output_is_checked_on_the_text_it_holds_and_as_its_readers_type_it(tmp_path):
    """'1.0' and '1.00' are two sensitive values in the source and in the CSV's
    text. Reading the CSV back typed made them one number, and an earlier
    session took that for a valid output refused, so the check read the text
    only. But DuckDB and pandas read the file typed (and a person reads them
    as one value): every class with diag 1 only was 2-diverse on paper and
    1-diverse to its readers (helper-4). Refused now; into Parquet, where the
    column stays text for every reader, it is published."""
    src = tmp_path / "sens.parquet"
    pq.write_table(pa.table({"id": np.arange(100), "age": np.arange(100) % 10,
                             "diag": ["1.0" if i % 2 == 0 else "1.00" for i in range(100)]}), src)
    out = tmp_path / "out.csv"
    with pytest.raises(sqlanon.VerificationError, match="read back with its types, as DuckDB and pandas read"):
        sqlanon.anonymize(src, out, qi=["age"], sensitive=["diag"], k=2, l=2, workers=1)
    assert not out.exists()
    r = sqlanon.anonymize(src, tmp_path / "out.parquet", qi=["age"], sensitive=["diag"], k=2, l=2, workers=1)
    assert r.verification.ok and r.metrics.rows == 100 and r.verification.min_distinct == {"diag": 2}


def test_a_csv_outputs_yes_and_no_are_texts_as_pandas_reads_them_and_true_is_one_boolean(tmp_path):
    """DuckDB's sniffer reads 'Yes', 'yes' and 'YES' as one boolean, which
    pandas and pyarrow read as three texts: a CSV output of them was refused
    ('a value written two ways'), and verify failed it, where its readers
    see l = 3 (helper-181). 'true', 'TRUE' and 'True' stay one value, a
    boolean to pandas and pyarrow alike."""
    for values, ok in ((["Yes", "yes", "YES"], True), (["true", "TRUE", "True"], False)):
        src = tmp_path / "flags.parquet"
        pq.write_table(pa.table({"age": np.arange(60) % 2, "flag": [values[i % 3] for i in range(60)]}), src)
        out = tmp_path / "out.csv"
        if ok:
            r = sqlanon.anonymize(src, out, qi=["age"], sensitive=["flag"], k=2, l=3, workers=1, overwrite=True)
            assert r.verification.ok and sqlanon.verify(out, qi=["age"], k=2, l=3, sensitive=["flag"]).ok
            assert pd.read_csv(out).groupby("age")["flag"].nunique().min() == 3
        else:
            with pytest.raises(sqlanon.VerificationError, match="read back with its types"):
                sqlanon.anonymize(src, out, qi=["age"], sensitive=["flag"], k=2, l=2, workers=1, overwrite=True)


def test_a_csv_output_is_checked_as_pandas_reads_its_null_spellings(tmp_path):
    """'5', '5.0' and 'NA' in a sensitive column: DuckDB's guess keeps the
    column text (it reads only an empty field as NULL), three values, and the
    typed check let it pass; pandas and pyarrow read 'NA' as NULL and the
    rest as numbers, two values per class (helper-95). So are a text 'NaN'
    and a NULL one value to them. Refused; into Parquet it is published."""
    import pandas as pd

    src = tmp_path / "s.csv"
    src.write_text("age,dx\n" + "".join(f"{30 + i % 3},{['5', '5.0', 'NA'][(i // 3) % 3]}\n" for i in range(30)))
    assert set(pd.read_csv(src).groupby("age")["dx"].nunique(dropna=False)) == {2}  # the reader the check stands for
    out = tmp_path / "out.csv"
    with pytest.raises(sqlanon.VerificationError, match="read back with its types.*'NA'"):
        sqlanon.anonymize(src, out, qi=["age"], sensitive=["dx"], k=5, l=3, workers=1)
    assert not out.exists()
    nan = tmp_path / "nan.parquet"
    pq.write_table(pa.table({"age": [i % 3 for i in range(30)], "dx": [["x", "NaN", None][(i // 3) % 3]
                                                                       for i in range(30)]}), nan)
    with pytest.raises(sqlanon.VerificationError, match="read back with its types"):
        sqlanon.anonymize(nan, out, qi=["age"], sensitive=["dx"], k=5, l=3, workers=1)
    assert not out.exists()
    r = sqlanon.anonymize(src, tmp_path / "out.parquet", qi=["age"], sensitive=["dx"], k=5, l=3, workers=1)
    assert r.verification.ok and r.verification.min_distinct == {"dx": 3}
    check = sqlanon.verify(src, qi=["age"], sensitive=["dx"], k=5, l=3)  # a CSV file as pandas reads it
    assert not check.ok and "break k=5/l=3 (read as pandas reads the file: " in check.describe_failure(), check
    r = subprocess.run([sys.executable, "-m", "sqlanon", "verify", str(src), "--qi", "age", "--sensitive", "dx",
                        "-k", "5", "-l", "3"], capture_output=True, text=True)
    assert r.returncode == 1 and r.stdout.startswith("FAILED: 3 class(es) of 30 row(s) break k=5/l=3 (read as pandas"), r
    assert check.to_dict()["reading"].startswith("read as pandas reads the file: ")  # --json says it too


def test_a_csv_outputs_null_spellings_that_type_a_column_past_the_sniffed_rows_keep_the_typed_check(tmp_path):
    """'NA' read as NULL beside numbers made DuckDB's sniff of the first
    20,480 rows type dx2 a number; a text past them ('pending') then broke
    the typed read, and the whole check was skipped: dx1's '5' and '5.0',
    one value to pandas, were published as two (refused before 'NA' was
    read as NULL). The read-back sniffs every row."""
    import pandas as pd

    n = 21_000
    src = tmp_path / "s.csv"
    src.write_text("age,dx1,dx2\n" + "".join(
        f"{30 + i % 3},{['5', '5.0', '7'][(i // 3) % 3]},{'pending' if i == n - 1 else 'NA' if i % 2 else i % 7}\n"
        for i in range(n)))
    assert set(pd.read_csv(src, low_memory=False).groupby("age")["dx1"].nunique(dropna=False)) == {2}
    out = tmp_path / "out.csv"
    with pytest.raises(sqlanon.VerificationError, match="read back with its types"):
        sqlanon.anonymize(src, out, qi=["age"], sensitive=["dx1", "dx2"], k=5, l=3, workers=1)
    assert not out.exists()
    assert not sqlanon.verify(src, qi=["age"], sensitive=["dx1", "dx2"], k=5, l=3).ok


def test_a_csv_output_of_an_enum_is_checked_as_pandas_reads_its_null_spellings(tmp_path):
    """A DuckDB ENUM's label 'NA' (Namibia) beside a NULL: one value to
    pandas, as a VARCHAR's is, and the typed check skipped the enum."""
    import duckdb

    db = tmp_path / "s.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TYPE cc AS ENUM ('NA', 'US')")
        con.execute("CREATE TABLE t AS SELECT 30 + i % 3 AS age, "
                    "[NULL, 'NA', 'US'][(i // 3) % 3 + 1]::cc AS country FROM range(30) r(i)")
    out = tmp_path / "out.csv"
    with pytest.raises(sqlanon.VerificationError, match="read back with its types.*'NA'"):
        sqlanon.anonymize(db, out, table="t", qi=["age"], sensitive=["country"], k=5, l=3, workers=1)
    assert not out.exists()


def test_library_checks_seed_and_types_like_the_cli(lake, tmp_path):
    for seed in (-1, 2**31, True):
        with pytest.raises(ConfigError, match="seed="):
            sqlanon.anonymize(lake, tmp_path / "o.parquet", qi=["x"], k=5, seed=seed)
    # The largest seed draws a sample (2**31 and up had passed the check, then failed in DuckDB's parser as
    # "cannot read" the input: helper-49).
    r = sqlanon.anonymize(lake, tmp_path / "s.parquet", qi=["x"], k=5, seed=2**31 - 1, sample=10, workers=1)
    assert r.sample_rows == 10 and r.seed == 2**31 - 1
    t = pa.table({"x": [[1], [2], [3], [4]], "y": [1, 2, 3, 4]})
    with pytest.raises(ConfigError, match="'x' has type list"):
        sqlanon.anonymize_table(t, sqlanon.AnonymizationSpec((sqlanon.QuasiIdentifier("x"),), k=2))
    inf = pa.table({"f": [1.0, 2.0, float("inf"), 4.0]})
    with pytest.raises(ConfigError, match="'f' holds infinite values"):
        sqlanon.anonymize_table(inf, sqlanon.AnonymizationSpec((sqlanon.QuasiIdentifier("f"),), k=2))
    import duckdb

    dates = tmp_path / "dates.parquet"  # 'infinity' as DuckDB (and PostgreSQL through it) hands it over
    duckdb.sql(f"COPY (SELECT i, CASE WHEN i = 3 THEN 'infinity'::DATE ELSE DATE '2000-01-01' + i::INT END AS d "
               f"FROM range(20) t(i)) TO '{dates}'")
    with pytest.raises(ConfigError, match="'d' holds infinite dates"):
        sqlanon.anonymize(dates, tmp_path / "o.parquet", qi=["d"], k=5, workers=1)
    # pandas' Timestamp.max is finite to pandas: the message says why it is infinite here (helper-21)
    valid = tmp_path / "valid.parquet"
    pq.write_table(pa.table({"t": pa.array([0, 1, 2, 2**63 - 1] * 5, pa.timestamp("ns"))}), valid)
    with pytest.raises(ConfigError, match=r"'t' holds infinite dates or timestamps \(or the type's largest or "
                                          r"smallest, e.g. pandas' Timestamp.max, which DuckDB reads as infinity\)"):
        sqlanon.anonymize(valid, tmp_path / "o.parquet", qi=["t"], k=5, workers=1)
    assert not (tmp_path / "o.parquet").exists()


# ---------------------------------------------------------------- the library's arguments


@pytest.mark.parametrize(("kwargs", "pattern"), [
    ({"overwrite": "no"}, "overwrite must be True or False, got 'no'"),  # used to replace the output
    ({"explain": "yes"}, "explain must be True or False"),
    ({"metrics": 3}, "metrics= takes a path or a database URL, got int"),
    ({"sensitive": [1], "l": 2}, "sensitive takes column names, got 1 among them"),
    ({"qi": ["x", 1]}, "qi takes column names, got 1 among them"),
    ({"qi": b"x,y"}, r"qi takes column names as text, got bytes b'x,y'"),  # was 'got 120 among them' (helper-160)
    ({"hierarchies": "x=h.json"}, r"hierarchies takes a mapping \{column: hierarchy file\}"),
    ({"generalization": {"x": 1}}, r"generalization takes a mapping .* got 'x': 1 in it"),
    ({"task_timeout": "10"}, "task_timeout must be a number, got '10'"),
    ({"sample": "0.5"}, "sample must be a number"),
    ({"progress": True}, "progress must be a function"),
    ({"status": "verbose"}, "status must be a function"),
    ({"table": 5}, "table must be a string"),
])
def test_library_arguments_of_the_wrong_kind_are_named(lake, tmp_path, kwargs, pattern):
    """Each used to fail deep inside (AttributeError, TypeError), late (after
    a fragment was anonymized), or not at all: overwrite="no" is truthy."""
    out = tmp_path / "o.parquet"
    out.write_bytes(b"precious")
    args = {"qi": ["x"], "k": 5, "workers": 1, **kwargs}
    with pytest.raises(ConfigError, match=pattern):
        sqlanon.anonymize(lake, out, **args)
    assert out.read_bytes() == b"precious"


def test_a_verification_shows_whether_it_passed(lake):
    """The repr of a Verification left out ok, a property, the one thing
    looked for; describe_failure() of a check that passed read '0 class(es)
    of 0 row(s) break k=5/l=1: ' (helper-160)."""
    passed, failed = sqlanon.verify(lake, qi=["x"], k=1), sqlanon.verify(lake, qi=["x"], k=10**6)
    assert repr(passed).startswith("Verification(ok=True, k=1, l=1, rows=")
    assert repr(failed).startswith("Verification(ok=False, k=1000000, l=1, rows=")
    assert passed.describe_failure() == "no class breaks k=1/l=1"
    assert failed.describe_failure().startswith(f"{failed.n_violations} class(es) of {failed.rows} row(s) break "
                                                "k=1000000/l=1: ")


def test_library_takes_paths_and_numpy_numbers(lake, tmp_path):
    import pandas as pd

    r = sqlanon.anonymize(lake, tmp_path / "o.parquet", qi=["x"], k=np.int64(5), l=np.int64(1), workers=np.int64(1),
                          seed=np.uint32(3), sample=np.float64(0.5), metrics=tmp_path / "m.parquet",
                          overwrite=np.bool_(False), task_timeout=np.float32(60))
    assert r.metrics.rows == 100 and (tmp_path / "m.parquet").exists()
    assert sqlanon.verify(tmp_path / "o.parquet", qi=["x"], k=np.int64(5)).ok
    for bad, pattern in ((pd.DataFrame({"x": [1]}), "input takes a path or a database URL, got DataFrame; "
                                                    "anonymize_table"), ("", "input is empty"), (None, "got NoneType")):
        with pytest.raises(ConfigError, match=pattern):
            sqlanon.anonymize(bad, tmp_path / "p.parquet", qi=["x"], k=5)
        with pytest.raises(ConfigError, match=pattern):
            sqlanon.verify(bad, qi=["x"], k=5)
    with pytest.raises(ConfigError, match="output is empty"):
        sqlanon.anonymize(lake, " ", qi=["x"], k=5)
    with pytest.raises(ConfigError, match="'x' cannot be both a quasi-identifier and sensitive"):
        sqlanon.verify(tmp_path / "o.parquet", qi=["x"], sensitive=["x"], k=5)


def test_a_job_files_key_as_a_library_argument_is_told_its_name(lake, tmp_path):
    """A job file's 'hierarchy:' is 'hierarchies=' in Python: Python's bare
    TypeError did not say so (helper-80)."""
    with pytest.raises(TypeError, match=r"anonymize\(\) got an unexpected keyword argument 'hierarchy' "
                                        r"\(did you mean 'hierarchies'\?\)$"):
        sqlanon.anonymize(lake, tmp_path / "o.parquet", qi=["x"], k=5, hierarchy={"x": "h.json"})
    with pytest.raises(TypeError, match=r"verify\(\) got an unexpected keyword argument 'sensitiv' "
                                        r"\(did you mean 'sensitive'\?\)$"):
        sqlanon.verify(tmp_path / "o.parquet", qi=["x"], k=5, sensitiv=["y"])
    with pytest.raises(TypeError, match=r"build_spec\(\) got an unexpected keyword argument 'zzz'$"):
        sqlanon.build_spec(["x"], k=5, zzz=1)
    assert not (tmp_path / "o.parquet").exists()


def test_a_quasi_identifier_object_and_a_mapping_naming_it(tmp_path):
    """The mapping's hierarchy or generalization was dropped without a word."""
    from sqlanon import QuasiIdentifier

    countries = str(REPO / "hierarchies" / "countries.json")
    spec = sqlanon.build_spec([QuasiIdentifier("c"), "age"], k=10, hierarchies={"c": countries})
    assert spec.quasi_identifiers[0].hierarchy is not None
    spec = sqlanon.build_spec([QuasiIdentifier("c")], k=10, generalization={"c": "prefix"})
    assert spec.quasi_identifiers[0].generalization == "prefix"
    with pytest.raises(ConfigError, match="'c' is a QuasiIdentifier with its own generalization"):
        sqlanon.build_spec([QuasiIdentifier("c", "set")], k=10, generalization={"c": "prefix"})


def test_anonymize_table_keeps_a_dataframes_index_as_data():
    """A named or filtered index came back as a fresh 0..n-1 (person_id
    lost, and to_pandas() rows silently misaligned with the input's) or as
    a column named __index_level_0__."""
    import pandas as pd

    df = pd.DataFrame({"age": [20 + i % 30 for i in range(60)], "note": [f"n{i}" for i in range(60)]})
    spec = sqlanon.build_spec(["age"], k=5)
    named = sqlanon.anonymize_table(df.rename_axis("person_id"), spec).table
    assert named.column_names == ["person_id", "age", "note"]
    assert sorted(zip(named.column("person_id").to_pylist(), named.column("note").to_pylist())) == \
        [(i, f"n{i}") for i in range(60)]
    assert sqlanon.anonymize_table(df, spec).table.column_names == ["age", "note"]  # the default: position only
    # 0..n-1 in order is positions only whatever its kind (it was refused unless a RangeIndex)
    for same in (df.sample(frac=1, random_state=0).sort_index(), df.set_axis(pd.Index(list(range(60))))):
        assert sqlanon.anonymize_table(same, spec).table.column_names == ["age", "note"]
    # An unnamed index other than 0..n-1 holds positions (a filter's, a chunk's, df.iloc[10:]): published,
    # they would undo the shuffle within classes; dropped, to_pandas() would misalign. The caller decides.
    for other in (df[df.age > 30], df.iloc[10:], df.sample(frac=1, random_state=0),
                  df.set_axis(pd.Index([float(i) for i in range(60)]))):
        with pytest.raises(ConfigError, match=r"the DataFrame's index is not 0..n-1 .*rename_axis\('row_id'\)"
                                              r".*reset_index\(drop=True\)"):
            sqlanon.anonymize_table(other, spec)
    kept = sqlanon.anonymize_table(df[df.age > 30].rename_axis("row_id"), spec).table
    assert kept.column_names == ["row_id", "age", "note"]
    assert sorted(kept.column("row_id").to_pylist()) == list(df.index[df.age > 30])
    mixed = df.assign(note=[1, "unknown"] * 30)
    with pytest.raises(ConfigError, match=r"column 'note' \(dtype object\) holds values of mixed types") as exc:
        sqlanon.anonymize_table(mixed, spec)
    assert "unknown" not in str(exc.value)  # a value is data: never in an error
    with pytest.raises(ConfigError, match="spec must be an AnonymizationSpec"):
        sqlanon.anonymize_table(df, {"qi": ["age"], "k": 5})


def test_library_errors_name_its_arguments_and_the_cli_its_flags(lake, tmp_path):
    """The library shares the CLI's checks, and their messages named the
    CLI's flags: "pass --overwrite", "(--qi)", "--executor dask"."""
    out = tmp_path / "o.parquet"
    out.write_bytes(b"old")
    cases = [
        (dict(), "already exists; pass overwrite=True to replace it", "already exists; pass --overwrite to replace it"),
        (dict(scheduler="tcp://127.0.0.1:1"), "scheduler= goes with executor='dask'", "--scheduler goes with --executor=dask"),
        (dict(metrics=str(out)), f"metrics={str(out)!r} would overwrite", f"--metrics={str(out)!r} would overwrite"),
        # an empty address: ignored by the local pool, a remote cluster to Dask's (helper-51)
        (dict(executor="dask", scheduler=""), "scheduler= is empty", "--scheduler is empty"),
        (dict(spark_master=" "), "spark_master= is empty", "--spark-master is empty"),
        (dict(generalization={"x": "sets"}), "'sets'", "'sets'"),
        # a flag with a column: 'pass hierarchies= x=FILE' was no Python (helper-51)
        (dict(generalization={"x": "hierarchy"}), "pass hierarchies={'x': 'FILE'}", "pass --hierarchy x=FILE"),
    ]
    for kwargs, library, command_line in cases:
        with pytest.raises(ConfigError) as caught:
            sqlanon.anonymize(lake, out, qi=["x"], k=5, **kwargs)
        assert library in str(caught.value) and "--" not in str(caught.value)
        flags = [f"--{k.replace('_', '-')}={v}" if k != "generalization" else f"--generalization=x={v['x']}"
                 for k, v in kwargs.items()]
        r = subprocess.run([sys.executable, "-m", "sqlanon", "anonymize", str(lake), "-o", str(out), "--qi", "x",
                            "-k", "5", *flags], capture_output=True, text=True)
        assert r.returncode == 2 and command_line in r.stderr, r.stderr
    with pytest.raises(ConfigError, match=r"^name the quasi-identifier columns \(qi=\)$"):
        sqlanon.verify(lake, qi=[], k=2)
    infinite = pa.table({"my d": [float("inf"), 1.0] * 5})
    with pytest.raises(ConfigError, match=r"generalize it as a set \(generalization=\{'my d': 'set'\}\)$"):
        sqlanon.anonymize_table(infinite, sqlanon.build_spec(["my d"], k=2))
    # Names, paths and values in a message are left as they are, flags or not.
    dashed = tmp_path / "--dash.parquet"
    pq.write_table(pa.table({"--x": [1, 2], "age": [3, 4]}), dashed)
    with pytest.raises(ConfigError) as caught:
        sqlanon.anonymize(dashed, tmp_path / "d.parquet", qi=["--y"], k=2)
    assert "qi= names column '--y', which is not in" in str(caught.value)
    assert "it has: '--x', 'age'" in str(caught.value)
    with pytest.raises(sqlanon.InputError, match="'.*/--missing.parquet' does not exist"):
        sqlanon.anonymize(tmp_path / "--missing.parquet", tmp_path / "d.parquet", qi=["x"], k=2)
    assert out.read_bytes() == b"old"


def test_every_library_flag_is_an_argument_of_anonymize():
    import inspect

    from sqlanon.errors import LIBRARY_FLAGS

    arguments = set(inspect.signature(sqlanon.anonymize).parameters) - {"input", "output", "progress", "status"}
    named = {f.replace("-", "_") for f in LIBRARY_FLAGS} - {"no_overwrite", "hierarchy"} | {"hierarchies"}
    assert named == arguments


def test_a_server_error_is_shown_not_the_first_line_of_the_statement():
    """DuckDB quotes the statement it sent to PostgreSQL over many lines
    before the server's error: the message showed 'Failed to prepare query
    "SELECT' and nothing of the cause."""
    from sqlanon.io import first_line

    exc = RuntimeError('Binder Error: Failed to prepare query "SELECT\n  count(*) AS n\nFROM "t" GROUP BY "u" '
                       'COLLATE "C"": ERROR:  collations are not supported by type uuid\nLINE 3: ...')
    assert first_line(exc) == "Binder Error: Failed to prepare query: ERROR: collations are not supported by type uuid"
    # A connection lost: no 'ERROR:', and the cause was cut off with the statement (helper-50).
    lost = RuntimeError('IO Error: Failed to execute query "BEGIN TRANSACTION ISOLATION LEVEL REPEATABLE READ;\n'
                        'SELECT "a": 1\n": server closed the connection unexpectedly\n\tThis probably means ...')
    assert first_line(lost) == "IO Error: Failed to execute query: server closed the connection unexpectedly"
    assert first_line(RuntimeError("IO Error: No files found\nmore")) == "IO Error: No files found"


def _immutable(path: Path, on: bool) -> bool:
    """``chattr ±i path`` (root may not write into an immutable directory);
    False where the filesystem or the user cannot."""
    done = subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True)
    return done.returncode == 0


def test_a_metrics_directory_made_unwritable_during_the_run_is_a_runtime_error(lake, tmp_path, caplog):
    """Found at the start, an unwritable metrics directory is a usage error
    (exit 2); become one while the run worked (a remount, an immutable
    flag), it is a failure of the run (exit 1: a retry may succeed), with
    nothing published. The lock's warning named ENOENT (the lock file it
    then tried to open read-only) rather than why it could not be made."""
    mdir = tmp_path / "metrics"
    mdir.mkdir()
    if not _immutable(mdir, True) or not _immutable(mdir, False):
        pytest.skip("chattr +i is not available here")
    out = tmp_path / "o.parquet"

    def status(text):
        if text == "publishing":
            _immutable(mdir, True)

    try:
        with caplog.at_level("WARNING", logger="sqlanon"), pytest.raises(sqlanon.SqlanonError) as failed:
            sqlanon.anonymize(lake, out, qi=["x"], k=5, workers=1, metrics=str(mdir / "m.parquet"), status=status)
    finally:
        _immutable(mdir, False)
    assert failed.value.exit_code == 1, failed.value
    assert "Operation not permitted" in caplog.text and "No such file" not in caplog.text, caplog.text
    assert not out.exists() and list(mdir.iterdir()) == []


def test_session_options_add_to_the_urls_or_pgoptions(monkeypatch):
    """The options a run adds to a session (idle_session_timeout=0) must not
    replace the user's own (a search_path, from the URL or PGOPTIONS), which
    libpq would then ignore."""
    monkeypatch.setenv("PGOPTIONS", "-c work_mem=64MB")
    own = Conn("postgresql://u@h/db?options=-c%20search_path%3Dhr")
    styles = ("-c DateStyle=ISO,MDY -c IntervalStyle=postgres -c extra_float_digits=3 -c xmloption=content "
              "-c lc_monetary=C -c standard_conforming_strings=on"  # warehouse.TEXT_STYLE
              " -c search_path=pg_catalog,pg_temp")  # warehouse.SAFE_PATH: the user's is for resolving names only
    utf8 = "client_encoding='UTF8'"
    assert own.libpq() == f"host='h' dbname='db' user='u' {utf8} options='-c search_path=hr {styles}'"
    assert own.libpq(own_path=True) == (f"host='h' dbname='db' user='u' {utf8} options='-c search_path=hr "
                                        f"{styles.removesuffix(' -c search_path=pg_catalog,pg_temp')}'")
    assert own.libpq("-c x=0") == f"host='h' dbname='db' user='u' {utf8} options='-c search_path=hr {styles} -c x=0'"
    assert Conn("postgresql://u@h/db").libpq("-c x=0") == \
        f"host='h' dbname='db' user='u' {utf8} options='-c work_mem=64MB {styles} -c x=0'"


def test_a_server_error_on_a_name_without_its_schema_says_the_runs_path():
    """warehouse.SAFE_PATH: every name of a run's own statements is qualified,
    so a relation, type or function the server did not find unqualified was
    named by user code it ran for the run (a view's function, a trigger)."""
    from sqlanon.io import safe_path_hint

    for line in ('ERROR: relation "audit" does not exist', 'type "zip" does not exist',
                 "Failed to prepare COPY: ERROR: function lookup(integer) does not exist"):
        assert safe_path_hint(line).startswith("; the run's sessions use search_path = pg_catalog, pg_temp"), line
    for line in ('relation "hr.audit" does not exist', "function hr.lookup(integer) does not exist",
                 "Catalog Error: Table with name audit does not exist!", 'column "age" does not exist'):
        assert safe_path_hint(line) == "", line
