"""The throwaway PostgreSQL server of the test suite (tests/pg_server.py):
SQLAlchemy + psycopg round trip, password authentication, the statement log,
pg_stat_statements."""

from __future__ import annotations

import uuid

import pytest

psycopg = pytest.importorskip("psycopg", reason='needs psycopg 3: pip install "psycopg[binary]"')
sa = pytest.importorskip("sqlalchemy")

pytestmark = pytest.mark.postgres


def _managed_only(server) -> None:
    if server.external:
        pytest.skip("the server comes from SQLANON_TEST_PG_URL: its log and auth setup are not ours")


def test_url_shape(pg_server, pg_url):
    assert pg_url.startswith("postgresql://")
    assert pg_server.password and pg_server.password in pg_url
    assert pg_url.endswith(f":{pg_server.port}/{pg_server.dbname}")


def test_sqlalchemy_round_trip(pg_server):
    table = f"harness_{uuid.uuid4().hex[:8]}"
    engine = sa.create_engine(pg_server.sqlalchemy_url)
    try:
        with engine.begin() as con:
            con.execute(sa.text(f"CREATE TABLE {table} (id int PRIMARY KEY, name text, score double precision)"))
            con.execute(
                sa.text(f"INSERT INTO {table} VALUES (:id, :name, :score)"),
                [{"id": 1, "name": "a", "score": 1.5}, {"id": 2, "name": "b'q", "score": None}],
            )
        with engine.connect() as con:
            rows = con.execute(sa.text(f"SELECT id, name, score FROM {table} ORDER BY id")).all()
            assert [tuple(r) for r in rows] == [(1, "a", 1.5), (2, "b'q", None)]
            who = con.execute(sa.text("SELECT current_user, current_database(), version()")).one()
            assert (who[0], who[1]) == (pg_server.user, pg_server.dbname)
            assert who[2].startswith("PostgreSQL")
        with engine.begin() as con:
            con.execute(sa.text(f"DROP TABLE {table}"))
    finally:
        engine.dispose()


def test_plain_url_works_with_psycopg(pg_url):
    with psycopg.connect(pg_url, connect_timeout=10) as con:
        assert con.execute("SELECT 1").fetchone() == (1,)


def test_password_is_required(pg_server):
    _managed_only(pg_server)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(pg_server.url_with_password("wrong-" + pg_server.password), connect_timeout=10)
    # no password at all (and none in PGPASSWORD/.pgpass): refused as well
    no_pw = f"host={pg_server.host} port={pg_server.port} dbname={pg_server.dbname} user={pg_server.user} passfile=/nonexistent"
    with pytest.raises(psycopg.OperationalError, match="no password supplied|password authentication failed"):
        psycopg.connect(no_pw, connect_timeout=10, password="")


def test_statements_reach_the_server_log(pg_server):
    _managed_only(pg_server)
    marker = f"sqlanon_marker_{uuid.uuid4().hex}"
    with psycopg.connect(pg_server.url) as con:
        con.execute(f"SELECT 1 AS x WHERE '{marker}' <> ''").fetchall()
    assert pg_server.wait_for_log(marker), f"{marker} not in {pg_server.log_file}"
    line = next(ln for ln in pg_server.read_log().splitlines() if marker in ln)
    assert "statement:" in line and "WHERE" in line


def test_pg_stat_statements(pg_server):
    with psycopg.connect(pg_server.url) as con:
        loaded = "pg_stat_statements" in con.execute("SHOW shared_preload_libraries").fetchone()[0]
        installed = con.execute(
            "SELECT count(*) FROM pg_extension WHERE extname = 'pg_stat_statements'"
        ).fetchone()[0]
        if not (loaded and installed):
            if not pg_server.external and pg_server.has_pg_stat_statements:
                pytest.fail("pg_stat_statements exists on this machine but was not loaded")
            pytest.skip("pg_stat_statements is not loaded on this server")
        marker = f"sqlanon_pgss_{uuid.uuid4().hex[:12]}"
        con.execute(f"SELECT count(*) AS {marker} FROM generate_series(1, 10)").fetchall()
        hits = con.execute(
            "SELECT calls FROM pg_stat_statements WHERE query LIKE %s", (f"%{marker}%",)
        ).fetchall()
        assert hits and hits[0][0] >= 1
