# --------------------------------------------------------------------------- PostgreSQL (tests/pg_server.py)
# A session-wide throwaway PostgreSQL server, started on first use only.
# SQLANON_TEST_PG_URL=postgresql://user:pw@host:port/db uses that server instead.
# Tests that use these fixtures are marked @pytest.mark.postgres.

import pytest as _pg_pytest


@_pg_pytest.fixture(scope="session")
def pg_server():
    """The PgServer (url, password, log_file, data_dir, libpq_dsn(), wait_for_log())."""
    from pg_server import PgUnavailable, server_from_env_or_start

    import os

    try:
        server = server_from_env_or_start()
    except PgUnavailable as exc:
        if os.environ.get("CI"):  # CI must run the PostgreSQL tests, not skip them
            _pg_pytest.fail(f"PostgreSQL is required in CI: {exc}")
        _pg_pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


@_pg_pytest.fixture(scope="session")
def pg_url(pg_server):
    """postgresql://sqlanon:<password>@127.0.0.1:<port>/sqlanon_test"""
    return pg_server.url
