"""sqlanon reading a hot standby (a read replica) of PostgreSQL (helper-162).

A streaming standby of the test server (``pg_standby``: pg_basebackup -R, in
recovery): the primary's table of the standby's input is that input, and a
session of the run that the server ends (as a standby's replay of the
primary's changes does) fails the run as the input's failure, in one line.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest

psycopg = pytest.importorskip("psycopg", reason='needs psycopg 3: pip install "psycopg[binary]"')

from sqlanon import coordinator, warehouse  # noqa: E402
from sqlanon.config import AnonymizationSpec, QuasiIdentifier  # noqa: E402
from sqlanon.errors import InputError  # noqa: E402


def _replayed(primary: str, standby: str) -> None:
    """Wait until the standby has replayed what the primary wrote so far."""
    with psycopg.connect(primary, autocommit=True) as c:
        lsn = c.execute("SELECT pg_current_wal_lsn()").fetchone()[0]
    with psycopg.connect(standby, autocommit=True) as s:
        for _ in range(300):
            if s.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (lsn,)).fetchone()[0]:
                return
            time.sleep(0.1)
    raise AssertionError("the standby did not catch up in 30 s")


def test_the_primarys_table_of_the_standbys_input_is_the_input(pg_url, pg_standby, tmp_path):
    """Read on the standby, replaced on the primary: the run published over its
    own input, exit 0 (same_server tells the two apart by address and start
    time). Refused by the system identifier and the database they share, as
    a view on the standby over the primary's table is; another table of the
    primary is fine."""
    name = f"rp_{uuid.uuid4().hex[:8]}"  # (not "standby": the messages are looked for it)
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(f"CREATE TABLE {name} AS SELECT g AS id, 20 + g % 50 AS age, 'd' || g % 3 AS d "
                  "FROM generate_series(1, 2000) g")
    _replayed(pg_url, pg_standby.url)
    args = ["--qi", "age", "--sensitive", "d", "-k", "5", "-l", "2", "--workers", "1", "--drop", "id"]
    try:
        for table in (name, f"{name}_v"):  # (the view, made below, would block the swap itself)
            p = subprocess.run([sys.executable, "-m", "sqlanon", "anonymize", pg_standby.url, "--table", table,
                                "-o", pg_url, "--target-table", name, "--overwrite", *args],
                               capture_output=True, text=True, timeout=300)
            assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
            assert ("is a standby of the other server" if table == name else "holds rows the input") in p.stderr, (
                p.stderr)
            with psycopg.connect(pg_url, autocommit=True) as c:
                c.execute(f"CREATE OR REPLACE VIEW {name}_v AS SELECT * FROM {name}")
            _replayed(pg_url, pg_standby.url)
        with psycopg.connect(pg_url) as c:  # the input is as it was
            assert c.execute(f"SELECT count(id), count(DISTINCT age) FROM {name}").fetchone() == (2000, 50)
        p = subprocess.run([sys.executable, "-m", "sqlanon", "anonymize", pg_standby.url, "--table", name,
                            "-o", pg_url, "--target-table", f"{name}_anon", *args],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        with psycopg.connect(pg_url) as c:
            assert c.execute(f"SELECT count(*) FROM {name}_anon").fetchone()[0] == 2000
    finally:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f"DROP VIEW IF EXISTS {name}_v")
            for t in (name, f"{name}_anon", f"{name}_anon__metrics"):
                c.execute(f"DROP TABLE IF EXISTS {t}")


def test_a_session_the_server_ends_is_the_inputs_failure_not_the_qis_type(pg_url):
    """A standby's replay ended the run's snapshot session during the type
    probes: the run said "quasi-identifier 'age' is integer on the server,
    whose values a fragment's WHERE clause cannot compare (...): cast it in
    a view", exit 2. A session the server ends (pg_terminate_backend, as
    recovery does) is now the input's failure; a type without the operator
    is still the QI's."""
    source = warehouse.PostgresSource(conn=warehouse.Conn(pg_url), table=("public", "t_probe"))
    spec = AnonymizationSpec(quasi_identifiers=(QuasiIdentifier("age"),), k=2)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute("DROP TABLE IF EXISTS public.t_probe")
        admin.execute("CREATE TABLE public.t_probe (age integer, p point)")
        try:
            with psycopg.connect(pg_url) as victim:
                admin.execute("SELECT pg_terminate_backend(%s)", (victim.info.backend_pid,))
                with pytest.raises(InputError, match=r"^cannot read .*t_probe: .*terminat"):
                    coordinator._refuse_uncuttable_qis(source, spec, [("age", "integer")], victim)
            with psycopg.connect(pg_url) as victim:
                admin.execute("SELECT pg_terminate_backend(%s)", (victim.info.backend_pid,))
                with pytest.raises(InputError, match=r"^cannot read "):
                    coordinator._groupable(victim, source, "age")
            with psycopg.connect(pg_url) as live:  # a point has no equality: the column's, as before
                assert coordinator._groupable(live, source, "p") is False
                assert coordinator._groupable(live, source, "age") is True
        finally:
            admin.execute("DROP TABLE IF EXISTS public.t_probe")


def test_one_server_by_its_socket_and_by_tcp_is_one(pg_server, pg_url, tmp_path):
    """Read over TCP, replaced over the unix socket of the same server: the
    two addresses made two servers to same_server (and neither is a standby),
    and the run replaced its own input, exit 0."""
    if pg_server.external:
        pytest.skip("needs the server's unix socket (a server the tests started)")
    socket_url = (f"{pg_url.rsplit('@', 1)[0]}@/{pg_url.rsplit('/', 1)[1]}"
                  f"?host={pg_server.socket_dir}&port={pg_server.port}")
    assert warehouse.same_server(warehouse.Conn(pg_url), warehouse.Conn(socket_url))
    name = f"rp_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as c:
        c.execute(f"CREATE TABLE {name} AS SELECT g AS id, 20 + g % 50 AS age, 'd' || g % 3 AS d "
                  "FROM generate_series(1, 200) g")
    try:
        p = subprocess.run([sys.executable, "-m", "sqlanon", "anonymize", pg_url, "--table", name, "-o", socket_url,
                            "--target-table", name, "--overwrite", "--qi", "age", "-k", "2", "--workers", "1"],
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 2 and "is the input" in p.stderr, p.stderr
        with psycopg.connect(pg_url) as c:
            assert c.execute(f"SELECT count(DISTINCT age) FROM {name}").fetchone()[0] == 50
    finally:
        with psycopg.connect(pg_url, autocommit=True) as c:
            c.execute(f"DROP TABLE IF EXISTS {name}")


def test_a_lock_timeout_in_a_probe_is_the_inputs_failure_not_the_qis_type(pg_url):
    """A lock another session holds past the role's lock_timeout was blamed on
    the QI: "is integer on the server, whose values a fragment's WHERE clause
    cannot compare (canceling statement due to lock timeout)", exit 2."""
    name = f"rp_{uuid.uuid4().hex[:8]}"
    source = warehouse.PostgresSource(conn=warehouse.Conn(pg_url), table=("public", name))
    spec = AnonymizationSpec(quasi_identifiers=(QuasiIdentifier("age"),), k=2)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"CREATE TABLE {name} (age integer, s text)")
        try:
            with psycopg.connect(pg_url) as locker, psycopg.connect(pg_url) as probe:
                locker.execute(f"LOCK TABLE {name} IN ACCESS EXCLUSIVE MODE")
                probe.execute("SET lock_timeout = '100ms'")
                with pytest.raises(InputError, match=r"^cannot read .*: canceling statement due to lock timeout"):
                    coordinator._refuse_uncuttable_qis(source, spec, [("age", "integer")], probe)
                with pytest.raises(InputError, match="lock timeout"):
                    coordinator._groupable(probe, source, "s")
        finally:
            admin.execute(f"DROP TABLE IF EXISTS {name}")


def test_a_conflict_with_recovery_says_what_to_do():
    assert "max_standby_streaming_delay" in warehouse.recovery_hint(
        "ERROR:  canceling statement due to conflict with recovery")
    assert "snapshot ended" in warehouse.recovery_hint('ERROR: invalid snapshot identifier: "00000002-0000008D-1"')
    assert warehouse.recovery_hint("ERROR: permission denied for table t") == ""
