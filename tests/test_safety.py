"""Regression tests: outputs that would overwrite inputs, packaging, escaping, redaction."""

from __future__ import annotations

import fnmatch
import os
import tomllib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlanon
from sqlanon import ConfigError
from sqlanon.io import BACKUP_MARK, remove_stale_staging
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


def test_metrics_may_not_overwrite_the_output_or_the_input(lake, tmp_path):
    out = tmp_path / "out.parquet"
    with pytest.raises(ConfigError, match="--metrics"):
        sqlanon.anonymize(lake, out, qi=["x"], k=5, metrics=str(out))
    with pytest.raises(ConfigError, match="--metrics"):
        sqlanon.anonymize(lake, out, qi=["x"], k=5, metrics=str(lake / "m.parquet"))
    with pytest.raises(ConfigError, match="--metrics"):
        sqlanon.anonymize(lake, out, qi=["x"], k=5, metrics=str(tmp_path / "m.json"))
    assert not out.exists()


def test_a_directory_input_is_not_an_output(lake):
    before = sorted(p.name for p in lake.iterdir())
    for out in (lake, f"{lake}/", lake / "sub/"):
        with pytest.raises(ConfigError, match="is the input"):
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


def test_explain_result_never_holds_a_password(lake):
    r = sqlanon.anonymize(lake, "postgresql://u:s3cretpass@db.example/x", target_table="t", qi=["x"], k=5,
                          explain=True, workers=1)
    assert "s3cretpass" not in repr(r.to_dict()) and "s3cretpass" not in r.output


def test_redaction():
    c = Conn("postgresql://bob:hunter22@h/db")
    text = "failed: host=h password=hunter22 user=bob; url postgresql://bob:hunter22@h/db; hunter22"
    assert "hunter22" not in c.redact(text)
    short = Conn("postgresql://bob:a@h/db")
    assert short.redact("cannot connect: password=a") == "cannot connect: password=***"


def test_usage_errors_before_any_work(lake, tmp_path):
    t = pa.table({"age": [1, 2, 3, 4], "age_lo": [0, 0, 0, 0]})
    src = tmp_path / "t.parquet"
    pq.write_table(t, src)
    with pytest.raises(ConfigError, match="age_lo"):
        sqlanon.anonymize(src, tmp_path / "o.parquet", qi=["age"], k=2, interval_format="bounds")
    with pytest.raises(ConfigError, match="--worker-memory"):
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


def test_unwritable_output_directory(tmp_path, monkeypatch):
    import sqlanon.io as sio

    real = os.access
    # As root every directory is writable: make this one read-only to the check.
    monkeypatch.setattr(sio.os, "access", lambda p, mode: False if mode == os.W_OK else real(p, mode))
    with pytest.raises(ConfigError, match="not writable"):
        sqlanon.anonymize(REPO / "examples" / "adults.csv", tmp_path / "o.parquet", qi=["age"], k=5)
