# --------------------------------------------------------------------------- PostgreSQL (tests/pg_server.py)
# A throwaway PostgreSQL server per test process (pytest-xdist worker), started on first use only.
# SQLANON_TEST_PG_URL=postgresql://user:pw@host:port/db uses that server instead.
# Tests that use these fixtures are marked @pytest.mark.postgres.

import sys as _sys

import pytest as _pg_pytest

# pytest caches a test module's assertion-rewritten bytecode in
# tests/__pycache__ unless bytecode writing is off, as PYTHONDONTWRITEBYTECODE=1
# (this machine image's default) turns it: every test process then rewrote
# every module again, ~5.5 s of CPU each at the start of every run (4 of them
# on 2 cores). The test modules are rewritten after this file; the setting
# is this process's alone (the sqlanon processes the tests start keep the
# environment's).
_sys.dont_write_bytecode = False


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
def pg_standby(pg_server):
    """A streaming hot standby of ``pg_server`` (PgServer.start_standby), started on first use;
    skipped with an external server (SQLANON_TEST_PG_URL), which the tests cannot copy."""
    from pg_server import PgUnavailable

    try:
        standby = pg_server.start_standby()
    except PgUnavailable as exc:
        _pg_pytest.skip(str(exc))
    try:
        yield standby
    finally:
        standby.stop()


@_pg_pytest.fixture(scope="session")
def pg_url(pg_server):
    """postgresql://sqlanon:<password>@127.0.0.1:<port>/sqlanon_test"""
    return pg_server.url


@_pg_pytest.hookimpl(tryfirst=True)  # before xdist's own, which reads the groups: after it, none held
def pytest_collection_modifyitems(items):
    """How pytest-xdist (``--dist loadgroup``) shares the tests out: each
    worker starts its own throwaway PostgreSQL cluster on first use; an
    external server (SQLANON_TEST_PG_URL) is shared, and tests there would
    meet each other's tables: they all run in one worker then."""
    import os

    if not os.environ.get("SQLANON_TEST_PG_URL"):
        return
    for item in items:
        if "pg_server" in getattr(item, "fixturenames", ()):
            item.add_marker(_pg_pytest.mark.xdist_group("postgres"))


# --------------------------------------------------------------------------- test processes


@_pg_pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config):
    """``-n auto`` (pyproject's default): one test process more than cores
    (``--maxprocesses`` caps it). Many tests wait on subprocesses, servers
    and JVMs: on 2 cores 2 processes kept the CPUs ~70 % busy, 3 took the
    run from 9.3 to 8.3 minutes and 4 no further (8.9). A number in
    PYTEST_XDIST_AUTO_NUM_WORKERS (pytest-xdist's own setting) wins."""
    import os

    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return len(os.sched_getaffinity(0)) + 1


# --------------------------------------------------------------------------- signal handlers


@_pg_pytest.fixture(autouse=True)
def _ctrl_c_handler_as_it_was():
    """Each test leaves SIGINT's handler as it found it: a test that makes a
    SparkContext in this process left pyspark's (which cancels Spark jobs
    and raises a bare KeyboardInterrupt) to every later test of the worker,
    where a run took it for a host's own handler."""
    import signal

    before = signal.getsignal(signal.SIGINT)
    yield
    if signal.getsignal(signal.SIGINT) is not before:
        signal.signal(signal.SIGINT, before)


# --------------------------------------------------------------------------- bytecode


def pytest_configure(config):
    """Compile sqlanon's modules to bytecode once, before the tests start
    their hundreds of sqlanon processes (CLI runs, fork servers, workers).
    Under PYTHONDONTWRITEBYTECODE=1 (this machine image's default) an
    editable install's modules have no .pyc: every one of those processes
    compiled the package again (~0.35 s each). A wheel's install compiles
    them as pip installs it; this does the same for the checkout (the
    controller only: xdist's workers find them written)."""
    import compileall
    from pathlib import Path

    if hasattr(config, "workerinput"):
        return
    package = Path(__file__).resolve().parent.parent / "sqlanon"
    if package.is_dir():
        compileall.compile_dir(str(package), quiet=2)
