"""The same worker function on the local pool, Dask distributed and Spark."""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import pickle
import re
import signal
import socket
import socketserver
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlanon
from sqlanon import ConfigError
from sqlanon.worker import CRASH_ONCE_ENV

QI = ["age", "zip", "day"]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    rng = np.random.default_rng(4)
    n = 30_000
    t = pa.table(
        {
            "id": np.arange(n),
            "age": rng.integers(18, 90, n),
            "zip": np.char.add("2", rng.integers(1000, 9999, n).astype(str)),
            "day": (np.datetime64("2020-01-01") + rng.integers(0, 1000, n)).astype("datetime64[D]"),
            "disease": rng.choice(["flu", "cold", "covid", "none"], n),
        }
    )
    path = tmp_path_factory.mktemp("ex") / "people.parquet"
    pq.write_table(t, path)
    return path


def run(source, out, executor, **kw):
    return sqlanon.anonymize(
        source, out, qi=QI, k=5, l=2, sensitive=["disease"], workers=2, fragments=4, seed=3, sample=0.01,
        executor=executor, **kw,
    )


@pytest.fixture(scope="module")
def local_result(source, tmp_path_factory):
    return run(source, tmp_path_factory.mktemp("local") / "out.parquet", "local")


def check_same(result, reference, out):
    m, ref = result.metrics, reference.metrics
    assert (m.rows, m.classes, m.dp, m.min_class_size) == (ref.rows, ref.classes, ref.dp, ref.min_class_size)
    assert m.ncp == ref.ncp  # summed in fragment order: bit for bit
    assert [f.predicates for f in result.plan.fragments] == [f.predicates for f in reference.plan.fragments]
    v = sqlanon.verify(out, qi=QI, k=5, l=2, sensitive=["disease"])
    assert v.ok and v.rows == 30_000


def recorded_tasks(monkeypatch) -> list:
    """The fragment tasks a run makes, as it makes them."""
    from sqlanon import coordinator

    made = []
    real = coordinator._task
    monkeypatch.setattr(coordinator, "_task", lambda *a, **kw: made.append(real(*a, **kw)) or made[-1])
    return made


def test_dask_matches_local(source, tmp_path, local_result, monkeypatch):
    """... and leaves its host's environment and Dask's logger as they were:
    the nannies' PYTHONHASHSEED and OMP_NUM_THREADS=1 reached every process
    the host started after, and a host's INFO level for Dask's logger stayed
    WARNING (helper-104)."""
    import logging

    out = tmp_path / "out.parquet"
    made = recorded_tasks(monkeypatch)
    for name in ("PYTHONHASHSEED", "OMP_NUM_THREADS", "MALLOC_TRIM_THRESHOLD_", "__DASK_PARENT_PID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "3")  # the host's own
    monkeypatch.setattr(logging.getLogger("distributed"), "level", logging.INFO)
    before = dict(os.environ)
    r = run(source, out, "dask")
    check_same(r, local_result, out)
    assert r.to_dict()["executor"] == "dask"
    # The spec and statistics went to the cluster once, not with each task, nor through the staging area.
    assert made and all(t.spec is None and t.stats is None and t.shared is None for t in made)
    assert dict(os.environ) == before
    assert logging.getLogger("distributed").level == logging.INFO


@pytest.mark.spark
def test_spark_matches_local(source, tmp_path, local_result, monkeypatch, caplog):
    """Verbose too, a local master's JVM binds the loopback address: with -v its
    driver port, unauthenticated, was open on the host's network address
    (helper-168)."""
    from pyspark.sql import SparkSession

    out = tmp_path / "out.parquet"
    made = recorded_tasks(monkeypatch)
    launched = []
    real = SparkSession.Builder.getOrCreate

    def get_or_create(builder):
        launched.append(os.environ.get("SPARK_LOCAL_IP"))
        return real(builder)

    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", get_or_create)
    with caplog.at_level(logging.INFO, logger="sqlanon"):  # as -v runs it
        r = run(source, out, "spark")
    check_same(r, local_result, out)
    assert made and all(t.spec is None and t.stats is None and t.shared is None for t in made)
    assert launched == ["127.0.0.1"] and "SPARK_LOCAL_IP" not in os.environ


def test_a_large_domain_goes_to_a_remote_dask_cluster_once(tmp_path):
    """A prefix QI's domain (every distinct value) went with every task:
    1M e-mails in 8 fragments sent 8 × 25 MiB through the scheduler (a run
    took 11.4 s, 6.3 s since; BENCHMARKS section 3) and Dask warned of a
    large graph on the CLI's stderr. It is sent once; the output is the local run's."""
    import warnings

    import dask
    from distributed import LocalCluster

    n = 40_000
    src = tmp_path / "emails.parquet"
    duckdb.execute(f"""COPY (SELECT i AS id, 'user' || (hash(i) % 100000000)::VARCHAR || '@'
        || ['gmail.com', 'corp.example'][1 + i % 2] AS email, 20 + i % 50 AS age, 'dx' || (i % 5)::VARCHAR AS dx
        FROM range({n}) t(i)) TO '{src}' (FORMAT parquet)""")

    def anonymize(out, **kw):
        return sqlanon.anonymize(src, out, qi=["email", "age"], generalization={"email": "prefix"}, k=5, l=2,
                                 sensitive=["dx"], workers=2, fragments=4, seed=3, **kw)

    local = anonymize(tmp_path / "local.parquet")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0") as cluster, \
            dask.config.set({"distributed.admin.large-graph-warning-threshold": "200 kB"}), \
            warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        remote = anonymize(tmp_path / "remote.parquet", executor="dask", scheduler=cluster.scheduler_address)
    assert not [w for w in seen if "large graph" in str(w.message)]
    assert (remote.metrics.classes, remote.metrics.ncp) == (local.metrics.classes, local.metrics.ncp)
    read = "SELECT * FROM read_parquet(?) ORDER BY id"
    assert duckdb.execute(read, [str(tmp_path / "remote.parquet")]).fetchall() == \
        duckdb.execute(read, [str(tmp_path / "local.parquet")]).fetchall()


@pytest.mark.parametrize("executor", ["dask", pytest.param("spark", marks=[pytest.mark.spark, pytest.mark.slow])])
def test_killed_task_is_retried_without_duplicates(source, tmp_path, monkeypatch, executor, local_result):
    marker = tmp_path / "crashed"
    monkeypatch.setenv(CRASH_ONCE_ENV, str(marker))
    out = tmp_path / "out.parquet"
    r = run(source, out, executor)
    assert marker.exists(), "no task was killed"
    check_same(r, local_result, out)
    ids = duckdb.execute("SELECT count(*), count(DISTINCT id) FROM read_parquet(?)", [str(out)]).fetchone()
    assert ids == (30_000, 30_000)


def test_killed_local_worker_fails_the_run_cleanly(source, tmp_path, monkeypatch):
    monkeypatch.setenv(CRASH_ONCE_ENV, str(tmp_path / "crashed"))
    out = tmp_path / "out.parquet"
    with pytest.raises(sqlanon.InputError, match="worker process died"):
        run(source, out, "local")
    assert not out.exists()


def test_remote_cluster_needs_absolute_paths(source, tmp_path, monkeypatch):
    monkeypatch.chdir(source.parent)
    with pytest.raises(ConfigError, match="relative local path: .* every worker mounts, or a database URL$"):
        sqlanon.anonymize(
            source.name, str(tmp_path / "o.parquet"), qi=QI, k=5, executor="dask", scheduler="tcp://127.0.0.1:1"
        )
    # An output cannot be a database URL there (refused as such): not advised (helper-56).
    with pytest.raises(ConfigError, match="^the output 'o.parquet' is a relative local path: .* every worker mounts$"):
        sqlanon.anonymize(source, "o.parquet", qi=QI, k=5, executor="dask", scheduler="tcp://127.0.0.1:1")


class _Unloadable:
    """Pickled anywhere, loaded nowhere (as a class a worker's host lacks); by
    a builtin, which a worker imports whatever its sys.path (not this module)."""

    def __reduce__(self):
        return int, ("no such class here",)


def test_spec_and_statistics_that_do_not_load_on_the_cluster_are_named(source, tmp_path, monkeypatch):
    """What the tasks take as their spec and statistics failed to load on a
    worker: the run said only that some fragment failed, with the loader's
    error (helper-74). One line names what failed."""
    from sqlanon.executors import DaskExecutor

    share = DaskExecutor.share
    monkeypatch.setattr(DaskExecutor, "share", lambda self, *objects: share(self, *objects, _Unloadable()))
    out = tmp_path / "out.parquet"
    with pytest.raises(sqlanon.InputError, match=r"^fragment \d+ failed on the dask executor: the run's spec and "
                                                 r"statistics, sent to the cluster, did not load there: invalid "
                                                 r"literal for int\(\) with base 10: 'no such class here'") as err:
        run(source, out, "dask")
    assert err.value.exit_code == 1 and not out.exists()


def test_an_aborted_dask_run_keeps_its_error_when_its_client_has_closed():
    """A run whose scheduler went away for good failed with its own line; the
    abort's cancelling of futures on the client, closed by then, raised
    ClosedClientError, which replaced it as an internal error (helper-74)."""
    from types import SimpleNamespace

    from sqlanon.executors import DaskExecutor

    def closed(**kwargs):
        raise RuntimeError("Client is closed. Can't send cancel-keys message.")

    dask = DaskExecutor.__new__(DaskExecutor)
    dask._executor, dask._cluster = SimpleNamespace(shutdown=closed), None
    dask._client = SimpleNamespace(close=lambda: None)
    dask.shutdown(abort=True)
    with pytest.raises(RuntimeError, match="Client is closed"):
        dask.shutdown()  # not an abort: a failure to stop is the run's to report


def test_unknown_executor_and_misplaced_options(source, tmp_path):
    with pytest.raises(ConfigError, match="did you mean 'dask'"):
        run(source, tmp_path / "o.parquet", "dusk")
    with pytest.raises(ConfigError, match="scheduler= goes with executor='dask'"):
        run(source, tmp_path / "o.parquet", "local", scheduler="tcp://x:1")


def test_task_timeout_fails_the_run_naming_the_fragment(source, tmp_path, monkeypatch):
    """And removes the staging area again once the workers are stopped: a
    worker that started the next fragment as the area was removed made its
    spill directory in it, left behind (1 run in ~20; helper-82)."""
    from sqlanon import executors, io

    steps = []
    for cls, name in ((executors.LocalExecutor, "shutdown"), (io.Staging, "discard")):
        real = getattr(cls, name)
        monkeypatch.setattr(cls, name, lambda self, *a, _real=real, _name=name, **kw: (
            steps.append(_name), _real(self, *a, **kw))[1])
    out = tmp_path / "out.parquet"
    with pytest.raises(sqlanon.InputError, match=r"fragment \d+ did not finish within 0.001 s \(task_timeout=\)"):
        run(source, out, "local", task_timeout=0.001)
    assert not out.exists() and not list(tmp_path.iterdir())
    assert steps == ["discard", "shutdown", "discard"], steps


def test_missing_extra_names_it(source, tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_distributed(name, *args, **kwargs):
        if name == "distributed" or name.startswith("distributed."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_distributed)
    with pytest.raises(ConfigError, match=r"install sqlanon's dask extra \(in its checkout: "
                                          r"pip install -e '\.\[dask\]'\)"):
        run(source, tmp_path / "o.parquet", "dask")


def test_abort_kills_a_running_task():
    import time as _time

    from sqlanon.executors import LocalExecutor

    pool = LocalExecutor(1)
    fut = pool.submit(_time.sleep, 600)
    _time.sleep(0.5)
    t0 = _time.monotonic()
    pool.shutdown(abort=True)
    assert _time.monotonic() - t0 < 10
    with pytest.raises(Exception):
        fut.result(timeout=10)


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0] == "Z"  # ended, not reaped yet
    except FileNotFoundError:
        return True


def test_an_abort_ends_the_process_of_a_running_task():
    """ProcessPoolExecutor cannot cancel a running task, and an abort's
    shutdown does not wait for it: a failed or stopped run (Ctrl-C,
    SIGTERM) left its worker at its fragment (its CPU, its server session
    and snapshot) until the task's end, and the interpreter waited that
    long at exit; the task's future only timed out meanwhile (helper-143).
    The abort ends the worker's process."""
    import time as _time
    from concurrent.futures.process import BrokenProcessPool

    from sqlanon.executors import LocalExecutor

    pool = LocalExecutor(1)
    fut = pool.submit(_time.sleep, 600)
    pids = list(pool._pool._processes)
    try:
        _time.sleep(0.5)
        pool.shutdown(abort=True)
        with pytest.raises(BrokenProcessPool):
            fut.result(timeout=10)
        deadline = _time.monotonic() + 10
        while not all(map(_gone, pids)) and _time.monotonic() < deadline:
            _time.sleep(0.05)
        assert pids and all(map(_gone, pids)), pids
    finally:
        for pid in pids:  # a worker left running would hold this process's exit for its 600 s
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.spark
@pytest.mark.slow  # Spark runs of their own (test_spark_matches_local is the default run's)
def test_spark_leaves_a_callers_session_and_the_runs_ctrl_c_handling(source, tmp_path, local_result, monkeypatch):
    """In a notebook the session is the caller's: it is used and left running
    (it used to be stopped under the caller). A session started here is
    stopped, and pyspark's own SIGINT handler does not replace the run's
    (sqlanon.interrupts: without it a Ctrl-C while publishing could leave the
    output published without its metrics)."""
    import signal

    from pyspark.sql import SparkSession

    from sqlanon import interrupts
    from sqlanon.executors import SparkExecutor

    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    sent = []
    share = SparkExecutor.share
    monkeypatch.setattr(SparkExecutor, "share", lambda self, *objects: sent.append(share(self, *objects)) or sent[-1])
    try:
        out = tmp_path / "out.parquet"
        check_same(run(source, out, "spark"), local_result, out)
        assert spark.range(3).count() == 3  # still running
        # Its spec and statistics, broadcast to the session's executors, are gone from them.
        assert len(sent) == 1 and not sent[0]._jbroadcast.isValid()
        # From another thread (Airflow, a web service), where pyspark's
        # active session is not the caller's: it was stopped under them.
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(1) as thread:
            check_same(thread.submit(run, source, tmp_path / "t.parquet", "spark").result(), local_result,
                       tmp_path / "t.parquet")
        assert spark.range(3).count() == 3
    finally:
        spark.stop()
    path = list(sys.path)
    with interrupts.watching():
        ours = signal.getsignal(signal.SIGINT)
        pool = SparkExecutor(None, 1, 0)
        try:
            assert signal.getsignal(signal.SIGINT) is ours
        finally:
            pool.shutdown()
    assert SparkSession.getActiveSession() is None
    # pyspark puts its session's file directory on sys.path and leaves it
    # there, gone, when the session stops: one more entry per call.
    assert sys.path == path


def test_a_scheduler_without_workers_or_unreachable_fails_with_exit_1(source, tmp_path, monkeypatch):
    """A scheduler without workers took the tasks and the run waited for
    ever; an unreachable one was a usage error (exit 2: 'fix the job'),
    though a retry once the cluster is back works."""
    from distributed import LocalCluster

    from sqlanon import executors

    monkeypatch.setattr(executors, "WAIT_FOR_WORKERS", 2.0)
    monkeypatch.setattr(executors, "CONNECT_TIMEOUT", 2.0)
    out = tmp_path / "out.parquet"
    with LocalCluster(n_workers=0, processes=False, dashboard_address="127.0.0.1:0") as cluster:
        with pytest.raises(sqlanon.InputError, match="has no workers") as err:
            run(source, out, "dask", scheduler=cluster.scheduler_address)
    assert type(err.value) is sqlanon.InputError and not out.exists()
    with pytest.raises(sqlanon.InputError, match="cannot reach the Dask scheduler") as err:
        run(source, out, "dask", scheduler="tcp://127.0.0.1:1")
    assert err.value.exit_code == 1
    # The cluster's task slots are the run's workers (it said --workers', or this host's CPUs).
    made = recorded_tasks(monkeypatch)
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address="127.0.0.1:0") as cluster:
        r = sqlanon.anonymize(source, out, qi=QI, k=5, l=2, sensitive=["disease"], workers=7, executor="dask",
                              scheduler=cluster.scheduler_address)
        # A remote cluster's staging area is its group's to write: nothing there is loaded as code (helper-71);
        # the spec and statistics go to the cluster once, not with each task.
        assert made and all(t.shared is None and t.spec is None for t in made)
        # and so are the plan's, --explain'd (it planned --workers' fragments: helper-23)
        plan = sqlanon.anonymize(source, out, qi=QI, k=5, l=2, sensitive=["disease"], workers=7, executor="dask",
                                 scheduler=cluster.scheduler_address, explain=True, overwrite=True)
        assert plan.workers == 2 and plan.explain()["fragments"] == r.explain()["fragments"]
        assert plan.explain()["executor"] == "dask" and not plan.explain()["csv_copy"]  # a remote cluster copies none
        assert len(cluster.scheduler.clients) == 1  # its own: the plan's connection closed
    assert r.workers == 2 and len(r.plan.fragments) == 2
    # Connecting to the cluster is timed apart from the statistics' read (a JVM's start read as 'read': helper-56).
    assert 0 <= r.timings["cluster"] < r.timings["total"] and r.timings["read"] >= 0


def _call_in(source, out, how: str) -> str:
    """Run the library with 2 local workers from a daemonic pool worker or a forked child; its outcome."""
    script = textwrap.dedent(f"""\
        import multiprocessing as mp, os, sqlanon
        def call(_=None):
            try:
                sqlanon.anonymize({str(source)!r}, {str(out)!r}, qi={QI!r}, k=5, workers=2, overwrite=True)
                return "ok"
            except Exception as exc:
                return f"{{type(exc).__name__}}: {{exc}}"
        if __name__ == "__main__":
            if {how!r} == "daemonic":
                with mp.get_context("fork").Pool(1) as pool:
                    print(pool.map(call, [1])[0])
            else:
                assert call() == "ok"
                r, w = os.pipe()
                if os.fork() == 0:
                    os.write(w, call().encode()); os._exit(0)
                os.wait()
                print(os.read(r, 10000).decode())
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    return done.stdout.strip()


def test_local_workers_from_a_daemonic_process_or_a_forked_child_are_refused_in_one_line(source, tmp_path):
    """From a multiprocessing.Pool or Celery prefork worker (daemonic), the
    pool raised 'AssertionError: daemonic processes are not allowed to have
    children'; in a child forked after a run, 'ChildProcessError: No child
    processes' (the fork server is the parent's) (helper-35)."""
    assert _call_in(source, tmp_path / "d.parquet", "daemonic").startswith(
        "ConfigError: local worker processes cannot start from a daemonic process")
    assert _call_in(source, tmp_path / "f.parquet", "forked").startswith(
        "ConfigError: this process was forked from one that had started sqlanon's local worker pool")


def test_a_dask_worker_of_another_sqlanon_version_is_named_at_once(source, tmp_path):
    """A worker with another version of sqlanon installed ran the fragments
    without a word, though the refusal of one without sqlanon asks for 'the
    same version as here' (helper-56). Its installed version is asked first."""
    from distributed import LocalCluster

    older = tmp_path / "older"
    older.mkdir()
    (older / "sitecustomize.py").write_text(textwrap.dedent("""\
        import importlib.metadata
        _version = importlib.metadata.version
        importlib.metadata.version = lambda name: "0.0.9" if name == "sqlanon" else _version(name)
    """))
    out = tmp_path / "out.parquet"
    with LocalCluster(n_workers=0, processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster:
        worker = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address, "--nthreads", "1",
             "--no-dashboard", "--no-nanny"],
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(older), *sys.path])},
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            with pytest.raises(sqlanon.InputError, match=r"Dask worker tcp://\S+ \(0\.0\.9\) of .* runs another "
                                                         r"version of sqlanon than this host's \d"):
                run(source, out, "dask", scheduler=cluster.scheduler_address)
            assert not out.exists() and worker.poll() is None
        finally:
            worker.terminate()
            worker.wait(30)


def test_a_dask_worker_without_sqlanon_is_named_at_once(source, tmp_path):
    """A worker that cannot import sqlanon closed itself on its first task
    (Dask cannot deserialize it), and the run failed a minute later saying
    only that the cluster had had no workers for 60 s. It is asked first."""
    from distributed import LocalCluster

    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(textwrap.dedent("""\
        import importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path, target=None):
                if name.split(".")[0] == "sqlanon":
                    raise ModuleNotFoundError(name)
        sys.meta_path.insert(0, Block())
    """))
    out = tmp_path / "out.parquet"
    with LocalCluster(n_workers=0, processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0") as cluster:
        worker = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address, "--nthreads", "1",
             "--no-dashboard", "--no-nanny"],
            env={**os.environ, "PYTHONPATH": str(blocker)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            started = time.monotonic()
            with pytest.raises(sqlanon.InputError, match=r"Dask worker tcp://\S+ of .* cannot import sqlanon"):
                run(source, out, "dask", scheduler=cluster.scheduler_address)
            assert time.monotonic() - started < 40 and not out.exists()
            assert worker.poll() is None  # asked, not killed by a task it could not read
        finally:
            worker.terminate()
            worker.wait(30)


def test_a_scheduler_address_that_never_answers_or_is_not_dask_fails_with_one_line(source, tmp_path, monkeypatch):
    """A port that accepts but never answers (the dashboard's, mistyped for
    the scheduler's) waited for ever, Dask's timeout not covering its
    handshake; one that answers something else (an SSH banner) ended in
    'internal error (MemoryError …)' (helper-42)."""
    import socket
    import threading

    from sqlanon import executors

    monkeypatch.setattr(executors, "CONNECT_TIMEOUT", 2.0)
    servers, accepted = [], []
    for banner in (b"", b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n"):
        srv = socket.create_server(("127.0.0.1", 0))
        servers.append(srv)

        def serve(srv=srv, banner=banner):
            with contextlib.suppress(OSError):
                while True:
                    conn, _ = srv.accept()
                    accepted.append(conn)
                    conn.sendall(banner)

        threading.Thread(target=serve, daemon=True).start()
    try:
        for srv, why in zip(servers, ("no answer in 2 s", "is not a Dask scheduler")):
            t0 = time.monotonic()
            with pytest.raises(sqlanon.InputError, match=f"cannot reach the Dask scheduler at .*{why}"):
                run(source, tmp_path / "o.parquet", "dask", scheduler=f"tcp://127.0.0.1:{srv.getsockname()[1]}")
            assert time.monotonic() - t0 < 30
    finally:
        for sock in servers + accepted:
            sock.close()


def test_a_failed_connection_leaves_no_client_for_a_later_garbage_collection(monkeypatch):
    """A Client whose connection failed stayed in reference cycles (through
    its error's traceback) until some later garbage collection finalized it
    (its close stops its IO loop). One landing in the IO-loop thread that a
    later LocalCluster's LoopRunner.start waits for deadlocked on Dask's
    class-wide LoopRunner lock: a long-lived process (a notebook, a
    scheduler's worker) that ran once with a wrong --scheduler could hang its
    next run. The half-built Client is finalized before the error is raised."""
    from distributed import Client

    from sqlanon import executors

    finalized = []

    class Spy(Client):
        def __del__(self):
            finalized.append(True)
            super().__del__()

    # A refused connection and a host name that does not resolve are told at
    # once: the client retried both for its whole timeout, 30-40 s, and called
    # the name 'Timed out trying to connect' (helper-56).
    for address, why in (("tcp://127.0.0.1:1", "connection refused"),
                         ("tcp://nosuchhost.invalid:8786", "the host name does not resolve")):
        started = time.monotonic()
        with pytest.raises(sqlanon.InputError, match=f"cannot reach the Dask scheduler at '{address}': {why}"):
            executors._connect(Spy, address)
        assert time.monotonic() - started < 10 and finalized == []  # no client made
    monkeypatch.setattr(executors, "CONNECT_TIMEOUT", 1.0)
    monkeypatch.setattr(executors, "_refused", lambda scheduler: None)  # the client's own failure, below
    with pytest.raises(sqlanon.InputError, match="cannot reach the Dask scheduler at 'tcp://127.0.0.1:1'") as err:
        executors._connect(Spy, "tcp://127.0.0.1:1")
    assert finalized == [True]
    assert err.value.__cause__ is None and err.value.__context__ is None  # nothing holds the Client's frames
    with pytest.raises(ConfigError, match="cannot reach the Dask scheduler at 'no-such-protocol://x'"):
        executors._connect(Spy, "no-such-protocol://x")
    assert finalized == [True, True]


def test_the_probe_names_what_a_cluster_worker_cannot_reach(tmp_path):
    """Workers of a remote cluster without the run's storage read or
    anonymized their fragment, then failed writing it, after every retry
    (helper-42): a probe task says what they cannot reach first."""
    from sqlanon.worker import FragmentTask, probe, run_fragment

    present = tmp_path / "in.parquet"
    present.write_bytes(b"x")
    st = present.stat()
    seen = (str(present), st.st_size, st.st_mtime_ns)
    assert probe(((seen, (str(tmp_path / "gone.parquet"), 1, 1)), str(tmp_path))) == \
        f"the input file {str(tmp_path / 'gone.parquet')!r}"
    assert probe(((), str(tmp_path / "nowhere"))).startswith(f"the staging directory {str(tmp_path / 'nowhere')!r}")
    # A host whose "shared" lake is a copy of its own: other rows were published, exit 0 when no column
    # passed through to be compared (helper-12). The probe and every task compare size and modification time.
    present.write_bytes(b"xy")
    assert probe(((seen,), str(tmp_path))) == (f"the input file {str(present)!r} as the coordinator sees it (this "
                                               "host's has another size or modification time: another copy, or "
                                               "changed since the run began)")
    task = FragmentTask(0, "", (), None, None, {}, str(tmp_path / "p.parquet"), inputs=(seen,))
    with pytest.raises(sqlanon.InputError, match=f"the worker on host '{socket.gethostname()}' cannot reach the "
                                                  "input file .* as the coordinator sees"):
        run_fragment(task)
    st = present.stat()
    assert probe((((str(present), st.st_size, st.st_mtime_ns),), str(tmp_path))) == ""


def test_a_workers_spill_directory_is_its_users_only_and_gone_with_the_task(source, tmp_path, monkeypatch):
    """A remote cluster's staging area takes the umask's mode (its group's
    workers write parts there), and DuckDB made each worker's spill
    directory so too: spilled input rows readable by others (helper-71).
    Two attempts of one fragment (a cluster's retry, speculation) shared it,
    the first to finish removing it under the other (helper-72)."""
    import stat

    from sqlanon import io as sio
    from sqlanon.engine import column_stats
    from sqlanon.worker import FragmentTask, run_fragment

    spec = sqlanon.build_spec(QI, k=5)
    table = pq.read_table(source)

    staging = tmp_path / "staging"
    staging.mkdir(mode=0o777)
    spill = staging / "spill-0"
    modes = []
    real = sio.connect

    def connect(*args, **kwargs):
        if kwargs.get("temp_directory"):
            modes.append(stat.S_IMODE(os.stat(kwargs["temp_directory"]).st_mode))
        return real(*args, **kwargs)

    monkeypatch.setattr(sio, "connect", connect)
    task = FragmentTask(0, "", (), sio.open_source(str(source)), spec, column_stats(table, spec),
                        str(staging / "p.parquet"), temp_directory=str(spill))
    assert run_fragment(task).rows == table.num_rows
    assert modes == [0o700] and not list(staging.glob("spill*"))
    # One of each attempt: a directory of that name made before (by another attempt of the
    # fragment, or by a member of the group, 0777) is not used, nor removed.
    spill.mkdir(mode=0o777)
    assert run_fragment(task).rows == table.num_rows
    assert modes == [0o700, 0o700] and spill.exists() and list(staging.glob("spill*")) == [spill]


@pytest.mark.parametrize(("executor", "option", "value"), [
    ("dask", "scheduler", "notaurl"),
    pytest.param("spark", "spark_master", "no-such-master", marks=pytest.mark.spark),
    pytest.param("spark", "spark_master", "local[x]", marks=pytest.mark.spark),  # a JVM started, exit 1
    pytest.param("spark", "spark_master", "local[0]", marks=pytest.mark.spark),
])
def test_unusable_cluster_address_is_a_config_error(source, tmp_path, executor, option, value):
    out = tmp_path / "out.parquet"
    with pytest.raises(ConfigError, match=re.escape(value)) as err:
        run(source, out, executor, **{option: value})
    assert "\n" not in str(err.value)
    assert not out.exists()


def test_an_unreachable_spark_master_fails_at_once_in_one_line(source, tmp_path):
    """Spark's driver tried a standalone master that did not answer for
    ~80 s, printed ~130 lines of Java stack traces and failed on 'Cannot
    call methods on a stopped SparkContext'. Now one line at once, before a
    JVM starts."""
    out = tmp_path / "out.parquet"
    args = [sys.executable, "-m", "sqlanon.cli", "anonymize", str(source), "-o", str(out), "--qi", ",".join(QI),
            "-k", "5", "--executor", "spark", "--spark-master", "spark://127.0.0.1:1,127.0.0.1:2"]
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1
    assert p.stderr == "Error: cannot reach the Spark master 'spark://127.0.0.1:1,127.0.0.1:2': Connection refused\n"
    assert not out.exists()


@pytest.mark.slow  # a Spark run of its own (test_spark_matches_local is the default run's)
def test_spark_submits_master_is_the_runs(source, tmp_path):
    """A driver started by `spark-submit --master spark://…` (README's
    'Spark, step by step') started a session of its own in local mode: the
    job ran on the driver, exit 0, whatever the master (helper-38). The
    master spark-submit gave is the run's (here one that does not answer)."""
    import pyspark

    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    driver = tmp_path / "sqlanon_driver.py"
    driver.write_text('from sqlanon.cli import entry\nentry(prog_name="sqlanon")\n')
    out = tmp_path / "out.parquet"
    p = subprocess.run([str(submit), "--master", "spark://127.0.0.1:1", str(driver), "anonymize", str(source),
                        "-o", str(out), "--qi", ",".join(QI), "-k", "5", "--executor", "spark"],
                       capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert p.returncode == 1, (p.stdout, p.stderr)
    # (spark-submit hands the driver's stderr to its stdout, beside the JVM's warnings)
    assert "Error: cannot reach the Spark master 'spark://127.0.0.1:1': Connection refused" in p.stdout.splitlines()
    assert not out.exists()
    # Without --master spark-submit says local[*]: --workers stays the run's (helper-39).
    p = subprocess.run([str(submit), str(driver), "-v", "anonymize", str(source), "-o", str(out), "--qi",
                        ",".join(QI), "-k", "5", "--executor", "spark", "--workers", "1", "--retries", "4"],
                       capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "Spark master local[1,5]: 1 task slot(s)" in p.stdout


class _Banner(socketserver.BaseRequestHandler):
    """A server that speaks first, as SSH does."""

    def handle(self):
        self.request.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")


@pytest.mark.parametrize("server", ["http", "banner"])
def test_a_port_that_is_no_spark_masters_rpc_port_is_refused_at_once(source, tmp_path, server):
    """Given for the master's, the web UI's (8080) or REST port (6066), or
    another service's (a Dask scheduler's): the driver tried for ~80 s and
    printed ~170 lines of Java stack traces (helper-28, helper-56). An HTTP
    answer tells at once, and so does a server that speaks first (Dask's
    handshake, SSH's banner), which a master's RPC port never does: before a JVM starts."""
    import http.server
    import threading

    if server == "http":
        serving = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    else:
        serving = socketserver.TCPServer(("127.0.0.1", 0), _Banner)
    threading.Thread(target=serving.serve_forever, daemon=True).start()
    try:
        master = f"spark://127.0.0.1:{serving.server_address[1]}"
        out = tmp_path / "out.parquet"
        args = [sys.executable, "-m", "sqlanon.cli", "anonymize", str(source), "-o", str(out), "--qi", ",".join(QI),
                "-k", "5", "--executor", "spark", "--spark-master", master]
        t0 = time.monotonic()
        p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    finally:
        serving.shutdown()
        serving.server_close()
    assert p.returncode == 2 and time.monotonic() - t0 < 30
    why = (f"{master!r} answers HTTP: it is a Spark master's web UI or REST port" if server == "http" else
           f"the server at {master!r} speaks first, which a Spark master never does: it is another service's port "
           "(a Dask scheduler's?)")
    assert p.stderr == (f"Error: {why}, not the port its driver connects to (the spark://host:port its web UI "
                        "shows, 7077 by default)\n")
    assert not out.exists()


@pytest.mark.parametrize(("flag", "url"), [("--scheduler", "tcp://[::1]:99999"),
                                           ("--spark-master", "spark://a:7077,b:70770")])
def test_a_cluster_address_with_a_port_out_of_range_is_a_usage_error(source, tmp_path, flag, url):
    """tcp://host:99999 waited 30 s to fail with exit 1 (helper-28)."""
    executor = "dask" if flag == "--scheduler" else "spark"
    with pytest.raises(ConfigError, match=rf"^{flag.lstrip('-').replace('-', '_')}= '.*' names port \d+: a port is "
                                          "1 to 65535$"):
        sqlanon.anonymize(source, tmp_path / "o.parquet", qi=QI, k=5, executor=executor,
                          **{flag.lstrip("-").replace("-", "_"): url})


def test_spark_health_check_and_shutdown_after_its_jvm_or_executors_are_gone(monkeypatch):
    """A standalone run whose only worker was lost waited for ever; a JVM
    that died mid-run made the clean-up fail ('Connection refused'), as an
    internal error in place of the run's own (helper-28). Spark stand-ins:
    the JVM's answers are what is tested."""
    from types import SimpleNamespace

    from sqlanon import executors
    from sqlanon.errors import InputError

    def refused(*args):
        raise ConnectionRefusedError(111, "Connection refused")

    status = SimpleNamespace(size=lambda: 1)  # the driver alone
    context = SimpleNamespace(_jsc=SimpleNamespace(sc=lambda: SimpleNamespace(getExecutorMemoryStatus=lambda: status)),
                              cancelAllJobs=refused)
    spark = executors.SparkExecutor.__new__(executors.SparkExecutor)
    spark._spark, spark.remote = SimpleNamespace(sparkContext=context, stop=refused), True
    spark._vacancy = executors._Vacancy("the Spark cluster", "executors")
    spark._threads, spark._owned, spark._log_config = executors.ThreadPoolExecutor(1), False, None
    monkeypatch.setattr(executors, "WAIT_FOR_WORKERS", 0.0)
    spark.check_health()  # the first look: no executor since now
    time.sleep(0.01)
    with pytest.raises(InputError, match="^the Spark cluster has had no executors for 0 s; nothing was published$"):
        spark.check_health()
    spark.remote = False  # a local master's executor is its driver
    spark.check_health()
    context._jsc, context.broadcast = SimpleNamespace(sc=refused), refused
    for call in (spark.check_health, lambda: spark.share("spec", "stats")):
        with pytest.raises(InputError, match=r"^the Spark driver's JVM went away \(the connection to Spark's JVM was "
                                             r"lost \(\[Errno 111\] Connection refused\)\); nothing was published$"):
            call()

    def full(*args):  # pyspark pickles a broadcast to the driver's temp directory first (helper-76)
        raise pickle.PicklingError("Could not serialize broadcast: OSError: [Errno 28] No space left on device")

    context.broadcast = full
    with pytest.raises(InputError, match=r"^the run's spec and statistics could not be sent to the Spark cluster "
                                         r"\(Could not serialize broadcast: OSError: \[Errno 28\] No space left on "
                                         r"device\); nothing was published$"):
        spark.share("spec", "stats")
    spark._owned, spark._broadcasts = True, [SimpleNamespace(destroy=refused)]
    spark.shutdown(abort=True)  # cancelAllJobs, the broadcast's destroy, stop: refused, and no error of its own
    with pytest.raises(ConnectionRefusedError):
        executors.SparkExecutor.shutdown(spark)  # not an abort: a failure to stop is the run's to report


def test_a_callers_remote_spark_session_gets_the_remote_clusters_checks(source, tmp_path, monkeypatch):
    """Under a caller's SparkSession on a spark:// master a relative input
    was not refused (the check went by --spark-master alone), and the run
    failed on a fragment on the cluster (helper-28)."""
    from sqlanon import executors

    seen = []
    monkeypatch.setattr(executors, "remote_cluster", lambda *args: seen.append(args) or True)
    monkeypatch.chdir(source.parent)
    with pytest.raises(ConfigError, match=f"^the input '{source.name}' is a relative local path: with "
                                          "executor='spark' on a remote cluster give an absolute path"):
        sqlanon.anonymize(source.name, tmp_path / "o.parquet", qi=QI, k=5, executor="spark")
    assert seen == [("spark", None, None)]


def test_spark_errors_are_told_by_their_meaningful_line():
    """A failed Spark task's error is a generic line, a Python traceback and the
    error itself last; a failed start is a py4j line and a Java trace. The run's
    one-line error says what went wrong (it said 'An exception was thrown from
    the Python worker:')."""
    from sqlanon.executors import SparkExecutor

    task = Exception("An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
                     '  File "worker.py", line 1, in f\n    raise ValueError(x)\nValueError: disk full\n')
    assert SparkExecutor.describe_error(task) == "ValueError: disk full"
    start = Exception("An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
                      ": org.apache.spark.SparkException: Could not parse Master URL: 'x'\n\tat org.apache.spark.X")
    assert SparkExecutor.describe_error(start) == "org.apache.spark.SparkException: Could not parse Master URL: 'x'"


def test_a_spark_tasks_own_error_comes_back_as_that_error():
    """Spark hands back a task's exception as text only: a worker's
    HierarchyError (a usage error, exit 2 with the local pool and Dask) was
    reported as 'fragment 0 failed on the spark executor:
    sqlanon.errors.HierarchyError: …', an InputError, exit 1, which a
    scheduler retries (helper-156). Other errors stay as they were."""
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    from sqlanon.errors import HierarchyError
    from sqlanon.executors import SparkExecutor

    def failing(text):
        def collect():
            raise RuntimeError(text)

        rdd = SimpleNamespace(map=lambda call: SimpleNamespace(collect=collect))
        ex = object.__new__(SparkExecutor)
        ex._spark = SimpleNamespace(sparkContext=SimpleNamespace(parallelize=lambda items, n: rdd))
        ex._threads = ThreadPoolExecutor(1)
        try:
            return ex.submit(None, "task").exception()
        finally:
            ex._threads.shutdown()

    trace = "An exception was thrown from the Python worker:\nTraceback (most recent call last):\n  File \"w.py\"\n"
    own = failing(trace + "sqlanon.errors.HierarchyError: hierarchy h.csv has no leaf for value(s) 'x'\n")
    assert type(own) is HierarchyError and str(own) == "hierarchy h.csv has no leaf for value(s) 'x'"
    other = failing(trace + "ValueError: disk full\n")
    assert type(other) is RuntimeError and SparkExecutor.describe_error(other) == "ValueError: disk full"
    # Another error whose message's last line reads like one of sqlanon's is that other error (helper-157)
    forged = failing(trace + "    raise RuntimeError(x)\nRuntimeError: x\nsqlanon.errors.ConfigError: forged\n")
    assert type(forged) is RuntimeError


def test_a_library_calls_workers_warn_through_its_logging_not_on_stderr(source, tmp_path, monkeypatch, caplog,
                                                                         capfd):
    """The local pool's fork server printed its own warnings (the kernel's:
    no C compiler, no writable cache, a SQLANON_KERNEL of another value) on
    the host's stderr as 'Warning: …' lines, past its logging, though a
    library call prints nothing (helper-175). They reach the host's logging."""
    monkeypatch.setenv("SQLANON_KERNEL", "bogus")  # a new environment: a new server, which warns as it loads
    caplog.set_level("WARNING", logger="sqlanon")
    r = sqlanon.anonymize(source, tmp_path / "o.parquet", qi=QI, k=5, workers=2)
    assert r.metrics.rows == 30_000
    assert "SQLANON_KERNEL='bogus' is neither 'jit' nor 'auto'" in caplog.text, caplog.text
    assert "bogus" not in capfd.readouterr().err


def test_task_timeout_with_one_worker_says_it_is_not_applied(source, tmp_path, caplog):
    caplog.set_level("WARNING", logger="sqlanon")
    r = sqlanon.anonymize(source, tmp_path / "o.parquet", qi=QI, k=5, workers=1, task_timeout=0.001)
    assert r.metrics.rows == 30_000
    assert "the task timeout applies to worker processes" in caplog.text


def test_the_local_dask_cluster_takes_no_stranger():
    """helper-37: the LocalCluster sqlanon starts listened on a plain TCP port
    of 127.0.0.1, where any local user's Client could run code as ours (and
    read the task's database password). It speaks TLS with a key of its own.
    Its HTTP pages, scheduler's and workers', were open to them too (logs,
    call stacks, task names: helper-165); only /health answers."""
    import urllib.error
    import urllib.request

    from distributed import Client
    from distributed.security import Security

    from sqlanon.executors import DaskExecutor

    def status(url):
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return answer.status
        except urllib.error.HTTPError as exc:
            return exc.code

    ex = DaskExecutor(None, 1, 0)
    try:
        pages = [ex._client.dashboard_link.rsplit("/", 1)[0]]
        for worker in ex._client.scheduler_info()["workers"].values():
            pages.append(f"http://{worker['host']}:{worker['services']['dashboard']}")
        assert len(pages) == 2
        for page in pages:
            assert status(page + "/health") == 200
            assert [status(page + path) for path in ("/info/main/workers.html", "/metrics", "/json/counts.json",
                                                     "/statics/")] == [404] * 4, page
        address = ex._client.scheduler.address
        assert address.startswith("tls://")
        with pytest.raises((OSError, TimeoutError)):  # a key and certificate of its own: not trusted
            Client(address, security=Security.temporary(), timeout=3)
        with pytest.raises((OSError, TimeoutError)):
            Client(address.replace("tls://", "tcp://"), timeout=3)
        gc.collect()  # the failed Clients now, not in a later test's LoopRunner.start (see above)
        assert ex._client.submit(sum, [1, 2]).result() == 3
    finally:
        ex.shutdown()


def test_the_local_dask_cluster_has_no_dashboard_with_bokeh_installed(monkeypatch):
    """With bokeh installed (dask[complete]) the scheduler added its Bokeh
    dashboard (task stream, profiles: call stacks) to its HTTP server
    whatever its routes, for every local user: it is asked for none. The
    scheduler runs in this process, so a stand-in for Bokeh's dashboard
    module tells whether it is asked to serve one."""
    import types

    import distributed

    from sqlanon.executors import DaskExecutor

    served = []
    package = types.ModuleType("distributed.dashboard")
    package.__path__ = []
    package.scheduler = types.ModuleType("distributed.dashboard.scheduler")
    package.scheduler.connect = lambda *args, **kwargs: served.append(args)
    monkeypatch.setitem(sys.modules, "distributed.dashboard", package)
    monkeypatch.setitem(sys.modules, "distributed.dashboard.scheduler", package.scheduler)
    monkeypatch.setattr(distributed, "dashboard", package, raising=False)
    ex = DaskExecutor(None, 1, 0)
    try:
        assert ex._client.submit(sum, [1, 2]).result() == 3
    finally:
        ex.shutdown()
    assert served == []


def test_an_aborted_dask_cluster_is_marked_while_it_closes():
    """A Ctrl-C's teardown made the scheduler warn of a worker killed
    mid-handshake under the CLI's one line (about one run in ten): the
    executor marks the teardown for the CLI's filter (above) while the
    cluster closes, and leaves the loggers' levels alone (a library host's
    own Dask logging; two runs at once left them at CRITICAL), as they were
    before the executor started (it quiets Dask's INFO lines meanwhile; a
    host's level stayed WARNING for good: helper-104)."""
    import logging

    from sqlanon import executors

    levels = {name: logging.getLogger(name).level for name in ("distributed", "tornado", "tornado.application")}
    ex = executors.DaskExecutor(None, 1, 0)
    seen = []
    close = ex._cluster.close
    ex._cluster.close = lambda: (seen.append(executors.TEARING_DOWN.is_set()), close())[1]
    ex.shutdown(abort=True)
    assert seen == [True] and not executors.TEARING_DOWN.is_set()
    assert {name: logging.getLogger(name).level for name in levels} == levels


def test_dask_keeps_stderr_for_errors(source, tmp_path):
    """Dask logs its cluster's life at INFO; on the CLI's stderr (its error
    channel) that was ~34 lines per run. Only with -v now. And with Dask's
    port 8787 taken (another cluster running) its scheduler warned that it
    moved to another port."""
    import socket
    import subprocess
    import sys

    args = [sys.executable, "-m", "sqlanon.cli", "anonymize", str(source), "-o", str(tmp_path / "o.parquet"),
            "--qi", ",".join(QI), "-k", "5", "--workers", "2", "--executor", "dask", "--quiet"]
    with socket.socket() as taken:
        try:
            taken.bind(("", 8787))
            taken.listen()
        except OSError:  # already in use: the same condition
            pass
        p = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stderr == "", p.stderr


@pytest.mark.spark
@pytest.mark.slow  # Spark runs of their own (test_spark_matches_local is the default run's)
def test_spark_keeps_stderr_for_errors(source, tmp_path):
    """Every quiet local Spark run printed Java's 'Using incubator modules'
    warning and Spark's 'Setting default log level' banner on the CLI's
    stderr, its error channel (helper-40), and ~9 lines more (log4j's
    default profile, WARNs about the host's address and native Hadoop,
    pyspark's pandas FutureWarning); an error still gets its line. Both
    ways in: ``python -m sqlanon`` and the ``sqlanon`` script's module.
    Its Python workers import nothing from the directory the run started
    in (`-m pyspark.daemon` put it first on their path: helper-25), and
    they run the run's interpreter, not the first `python3` on PATH (a
    venv's sqlanon called by cron: helper-101)."""
    import shutil

    args = ["anonymize", str(source), "-o", str(tmp_path / "o.parquet"),
            "--qi", ",".join(QI), "--workers", "2", "--executor", "spark", "--quiet"]
    here = tmp_path / "here"
    here.mkdir()
    (here / "pyarrow.py").write_text("raise ImportError('the working directory was on the path')\n")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3").write_text("#!/bin/sh\necho \"the PATH's python3 ran\" >&2\nexit 3\n")
    (tmp_path / "bin" / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    env.pop("PYSPARK_PYTHON", None)
    script = Path(sys.executable).with_name("sqlanon")
    p = subprocess.run([str(script) if script.exists() else shutil.which("sqlanon"), *args, "-k", "5", "--json"],
                       capture_output=True, text=True, timeout=300, cwd=here, env=env)
    assert p.returncode == 0 and p.stderr == "", p.stderr
    p = subprocess.run([sys.executable, "-m", "sqlanon.cli", *args, "-k", "999999", "--overwrite"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 1 and p.stderr.startswith("Error: cannot reach k=999999") and p.stderr.count("\n") == 1


@pytest.mark.parametrize("how", ["file", "stdin", "module"])
def test_a_script_without_a_main_guard_runs_with_a_worker_pool(tmp_path, how):
    """Workers used to import the caller's script again, as multiprocessing
    does: a script without `if __name__ == "__main__":` (the README's
    example pasted as is) ran anonymize() in every worker, which died ('a
    worker process died before fragment 0 could start'), and a script read
    from stdin could not be imported at all."""
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"age": [20 + i % 40 for i in range(400)]}), src)
    out = tmp_path / "out.parquet"
    script = textwrap.dedent(f"""
        import sqlanon
        result = sqlanon.anonymize({str(src)!r}, {str(out)!r}, qi=["age"], k=5, workers=2, fragments=2)
        print("rows", result.metrics.rows)
    """)
    if how == "file":
        path = tmp_path / "job.py"
        path.write_text(script)
        proc = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
    elif how == "module":  # python -m jobs.nightly: workers used to run the module again, and died
        (tmp_path / "jobs").mkdir()
        (tmp_path / "jobs" / "__init__.py").write_text("")
        (tmp_path / "jobs" / "nightly.py").write_text(script)
        proc = subprocess.run([sys.executable, "-m", "jobs.nightly"], capture_output=True, text=True, timeout=300,
                              cwd=tmp_path)
    else:
        proc = subprocess.run([sys.executable, "-"], input=script, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["rows", "400"]
    assert pq.read_metadata(out).num_rows == 400


def test_the_callers_own_pool_works_after_a_run(tmp_path):
    """The worker pool's fork server is multiprocessing's one per process; it
    used to stay behind after a run, telling the caller's own forkserver
    pools that its script was already loaded: they could not find its
    functions and hung."""
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"age": [20 + i % 40 for i in range(400)]}), src)
    script = textwrap.dedent(f"""
        import multiprocessing as mp
        import sqlanon

        def square(x):
            return x * x

        if __name__ == "__main__":
            mp.set_forkserver_preload(["json"])  # the caller's own, kept beside sqlanon's (helper-92)
            for run in range(2):
                sqlanon.anonymize({str(src)!r}, {str(tmp_path / "o.parquet")!r}, qi=["age"], k=5, workers=2,
                                  overwrite=True)
                with mp.get_context("forkserver").Pool(2) as pool:
                    print(pool.map(square, [1, 2, 3]))
            from multiprocessing import forkserver
            print(forkserver._forkserver._preload_modules)
    """)
    (tmp_path / "job.py").write_text(script)
    proc = subprocess.run([sys.executable, str(tmp_path / "job.py")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[1, 4, 9]", "[1, 4, 9]", "['json', 'sqlanon._preload']"]


def test_two_calls_at_once_from_two_threads_leave_the_environment_as_it_was(tmp_path):
    """The pool's start sets PYTHONSAFEPATH, PYTHONPATH and the caller's
    script in the environment for the fork server, and puts the caller's
    values back: two calls at once from two threads each saved the other's
    as the caller's, and the host kept them for good (its next script run
    found no module beside it; helper-92)."""
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"age": [20 + i % 40 for i in range(400)]}), src)
    script = textwrap.dedent(f"""
        import os, threading
        import sqlanon

        before = dict(os.environ)
        for attempt in range(3):
            calls = [threading.Thread(target=sqlanon.anonymize,
                                      args=({str(src)!r}, {str(tmp_path)!r} + f"/o{{i}}.parquet"),
                                      kwargs=dict(qi=["age"], k=5, workers=2, overwrite=True)) for i in range(2)]
            [t.start() for t in calls]
            [t.join() for t in calls]
            changed = {{k for k in before.keys() | os.environ.keys() if before.get(k) != os.environ.get(k)}}
            print(sorted(changed))
    """)
    (tmp_path / "host.py").write_text(script)
    proc = subprocess.run([sys.executable, str(tmp_path / "host.py")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["[]"] * 3, proc.stdout
    assert pq.read_metadata(tmp_path / "o0.parquet").num_rows == pq.read_metadata(tmp_path / "o1.parquet").num_rows


def test_a_guardless_script_run_after_a_call_of_the_host_is_not_run_again_by_the_workers(tmp_path):
    """The fork server gives its workers the caller's script as their
    __main__, as it was when the server started: a script without a main
    guard that a host ran later (IPython's %run, runpy) was imported again
    by every worker, whose own anonymize() call then failed the run as a
    worker 'killed, or out of memory?' (helper-92). A changed __main__
    starts a new server."""
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"age": [20 + i % 40 for i in range(400)]}), src)
    (tmp_path / "job.py").write_text(textwrap.dedent(f"""
        import sqlanon
        print("job", __name__)
        sqlanon.anonymize({str(src)!r}, {str(tmp_path / "job.parquet")!r}, qi=["age"], k=5, workers=2, overwrite=True)
    """))
    (tmp_path / "host.py").write_text(textwrap.dedent(f"""
        import runpy
        import sqlanon

        if __name__ == "__main__":
            for night in range(3):
                sqlanon.anonymize({str(src)!r}, {str(tmp_path / "host.parquet")!r}, qi=["age"], k=5, workers=2,
                                  overwrite=True)
                runpy.run_path({str(tmp_path / "job.py")!r}, run_name="__main__")
    """))
    proc = subprocess.run([sys.executable, str(tmp_path / "host.py")], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["job __main__"] * 3 and proc.stderr == ""


def test_a_variable_set_after_a_call_reaches_the_next_calls_workers(tmp_path):
    """The local workers fork from a server that keeps the environment it
    started with: a PGPASSWORD a notebook set after a first run (on a file)
    reached the coordinator of a run on PostgreSQL but not its workers,
    which failed with 'no password supplied' (helper-160). A changed
    environment starts a new server; an unchanged one is kept."""
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"age": [20 + i % 40 for i in range(400)]}), src)
    (tmp_path / "host.py").write_text(textwrap.dedent(f"""
        import multiprocessing as mp, os
        from multiprocessing import forkserver
        import sqlanon

        def late(_):
            return os.environ.get("SQLANON_TEST_LATE")

        if __name__ == "__main__":
            servers = []
            for night in range(3):
                if night == 2:
                    os.environ["SQLANON_TEST_LATE"] = "set"
                sqlanon.anonymize({str(src)!r}, {str(tmp_path / "out.parquet")!r}, qi=["age"], k=5, workers=2,
                                  overwrite=True)
                servers.append(forkserver._forkserver._forkserver_pid)
            with mp.get_context("forkserver").Pool(1) as pool:  # forks from the same server
                print(servers[0] == servers[1] != servers[2], pool.map(late, [0]))
    """))
    proc = subprocess.run([sys.executable, str(tmp_path / "host.py")], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["True ['set']"] and proc.stderr == ""


def test_a_main_module_without_its_spec_runs_as_ipythons_second_run_of_a_script(tmp_path):
    """IPython's %run of a script it ran before clears the namespace of the
    module it runs it in, ``__spec__`` with it; multiprocessing reads
    ``__main__.__spec__`` as it starts the fork server and each worker: the
    second %run failed with "AttributeError: module '__main__' has no
    attribute '__spec__'" (helper-122). Done here as IPython does it."""
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"age": [20 + i % 40 for i in range(400)]}), src)
    (tmp_path / "job.py").write_text(textwrap.dedent(f"""
        import sqlanon
        r = sqlanon.anonymize({str(src)!r}, {str(tmp_path / "job.parquet")!r}, qi=["age"], k=5, workers=2,
                              overwrite=True)
        print("job", r.metrics.rows)
    """))
    (tmp_path / "host.py").write_text(textwrap.dedent(f"""
        import sys, types
        main = types.ModuleType("__main__")  # IPython's InteractiveShell.new_main_mod, on its second call
        for night in range(2):
            main.__dict__.clear()
            main.__name__, main.__file__ = "__main__", {str(tmp_path / "job.py")!r}
            host, sys.modules["__main__"] = sys.modules["__main__"], main
            try:
                exec(compile(open(main.__file__).read(), main.__file__, "exec"), main.__dict__)
            finally:
                sys.modules["__main__"] = host
    """))
    proc = subprocess.run([sys.executable, str(tmp_path / "host.py")], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["job 400"] * 2 and proc.stderr == ""


def test_the_fork_server_is_not_started_again_under_a_pool_of_the_hosts(tmp_path):
    """Started again for a new __main__, the fork server took the host's
    own forkserver pool down with it, mid-task (helper-93): while it has
    processes of its own it stays, and a warning says the script then needs
    its main guard (this one has it: its run succeeds)."""
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"age": [20 + i % 40 for i in range(400)]}), src)
    (tmp_path / "job.py").write_text(textwrap.dedent(f"""
        import sqlanon
        if __name__ == "__main__":
            sqlanon.anonymize({str(src)!r}, {str(tmp_path / "job.parquet")!r}, qi=["age"], k=5, workers=2)
            print("job ok")
    """))
    (tmp_path / "host.py").write_text(textwrap.dedent(f"""
        import multiprocessing, runpy, time
        from concurrent.futures import ProcessPoolExecutor
        import sqlanon

        def slow(x):
            time.sleep(3)
            return x * 2

        if __name__ == "__main__":
            sqlanon.anonymize({str(src)!r}, {str(tmp_path / "host.parquet")!r}, qi=["age"], k=5, workers=2)
            with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("forkserver")) as pool:
                task = pool.submit(slow, 21)
                time.sleep(0.5)
                runpy.run_path({str(tmp_path / "job.py")!r}, run_name="__main__")
                print("host task", task.result())
    """))
    proc = subprocess.run([sys.executable, str(tmp_path / "host.py")], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["job ok", "host task 42"]
    assert "is not the one the local workers' server started with, which other processes still use" in proc.stderr


@pytest.mark.parametrize("imported", ["in the thread", "by the main thread"])
def test_a_call_from_a_thread_the_main_thread_did_not_wait_for_is_refused_by_name(tmp_path, imported):
    """A script whose main thread returns while its thread calls sqlanon:
    Python refuses new atexit hooks and futures then, and the call failed
    with a bare RuntimeError, no SqlanonError for a host to catch (helper-92)."""
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"age": [20 + i % 40 for i in range(400)]}), src)
    (tmp_path / "late.py").write_text(textwrap.dedent(f"""
        import threading, time
        {"import sqlanon" if imported == "by the main thread" else ""}

        def job():
            time.sleep(0.3)
            import sqlanon
            try:
                sqlanon.anonymize({str(src)!r}, {str(tmp_path / "o.parquet")!r}, qi=["age"], k=5, workers=2)
            except sqlanon.ConfigError as exc:
                print(exc.exit_code, exc)

        threading.Thread(target=job).start()
    """))
    proc = subprocess.run([sys.executable, str(tmp_path / "late.py")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    assert proc.stdout.startswith("2 the interpreter is shutting down (its main thread has returned), and sqlanon's "
                                  "work cannot start now: have the main thread wait for this thread (thread.join())")
    assert not (tmp_path / "o.parquet").exists()


def test_a_script_without_the_main_guard_is_told_so(source, tmp_path):
    """Dask's worker processes import the script that started a LocalCluster:
    one calling sqlanon outside `if __name__ == "__main__"` ran again in each,
    and the run blamed a kill or a lack of memory (helper-12)."""
    script = tmp_path / "job.py"
    script.write_text(f"import sqlanon\nsqlanon.anonymize({str(source)!r}, {str(tmp_path / 'o.parquet')!r}, "
                      f"qi={QI!r}, k=5, executor='dask', workers=1, overwrite=True)\n")
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1].endswith(
        'this script run again: Dask\'s worker processes import it, so call sqlanon under `if __name__ == "__main__"`)')


def test_the_fork_server_never_dies_of_a_ctrl_c_while_it_starts():
    """A Ctrl-C reaches the whole process group: while the fork server's
    interpreter started or imported sqlanon it printed 'Fatal Python error:
    init_import_site' or a KeyboardInterrupt traceback under the CLI's
    'Interrupted' line (4 of 8 tries 0.3-0.45 s into a run). It starts with
    SIGINT blocked, and ignores it before unblocking."""
    import subprocess
    import sys

    probe = textwrap.dedent("""
        import multiprocessing.forkserver as fs
        from sqlanon import executors
        executors.start_local_server()
        status = open(f"/proc/{fs._forkserver._forkserver_pid}/status").read()
        field = lambda name: int(status.split(name + ":")[1].split()[0], 16)
        print(bool((field("SigBlk") | field("SigIgn")) & 2))  # SIGINT is signal 2: bit 1
    """)
    for _ in range(3):
        p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
        assert p.stdout.strip() == "True", p.stdout + p.stderr


def test_a_lost_scheduler_is_named_and_dasks_own_errors_left_to_the_run():
    """Losing the scheduler mid-run printed 'Error: ' (Dask's own empty error
    log line) then 'fragment 18 failed on the dask executor: CancelledError'."""
    import concurrent.futures
    import logging
    import types

    from sqlanon import executors
    from sqlanon import cli as cli_module
    from sqlanon.cli import _cluster_errors_left_to_the_run

    cli_module._REPORTED.clear()  # (set by an earlier in-process run's failure)

    pool = object.__new__(executors.DaskExecutor)
    pool._client = types.SimpleNamespace(status="closed")
    assert pool.describe_error(concurrent.futures.CancelledError()) == \
        "the connection to the Dask scheduler was lost (client closed)"
    assert pool.describe_error(ValueError("bad\nmore")) == "bad"

    def record(name, level):
        return logging.LogRecord(name, level, __file__, 1, "", None, None)

    root = logging.getLogger()
    before = root.level
    root.setLevel(logging.WARNING)
    try:
        assert not _cluster_errors_left_to_the_run(record("distributed.worker", logging.ERROR))
        assert _cluster_errors_left_to_the_run(record("distributed.worker", logging.WARNING))
        assert _cluster_errors_left_to_the_run(record("sqlanon", logging.ERROR))
        py4j = logging.LogRecord("root", logging.ERROR, "/x/site-packages/py4j/java_gateway.py", 1,
                                 "KeyboardInterrupt while sending command.", None, None)
        assert not _cluster_errors_left_to_the_run(py4j)  # logging.exception(): the root logger
        assert not _cluster_errors_left_to_the_run(record("tornado.application", logging.ERROR))
        executors.TEARING_DOWN.set()  # a cluster closed after a failure or a Ctrl-C: its warnings too
        try:
            assert not _cluster_errors_left_to_the_run(record("distributed.comm.tcp", logging.WARNING))
            assert _cluster_errors_left_to_the_run(record("sqlanon", logging.WARNING))
        finally:
            executors.TEARING_DOWN.clear()
        cli_module._REPORTED.set()  # the run's one line printed: a nanny's late 'exit status was already read' too
        try:
            assert not _cluster_errors_left_to_the_run(record("distributed.nanny", logging.WARNING))
        finally:
            cli_module._REPORTED.clear()
        root.setLevel(logging.INFO)  # -v: everything
        assert _cluster_errors_left_to_the_run(record("distributed.worker", logging.ERROR))
    finally:
        root.setLevel(before)


def test_a_cluster_starts_only_once_the_columns_are_checked(source, tmp_path, monkeypatch):
    """A column typo with --executor spark waited ~30 s for the JVM (and
    its log lines) before its one-line error."""
    from sqlanon import executors

    started = []
    monkeypatch.setattr(executors, "make_executor", lambda *a, **kw: started.append(a))
    for executor in ("dask", "spark"):
        with pytest.raises(ConfigError, match="qi= names column 'nope', which is not in"):
            sqlanon.anonymize(source, tmp_path / "o.parquet", qi=["nope"], k=5, workers=2, executor=executor)
    assert not started


@pytest.mark.spark
def test_a_spark_start_cut_short_leaves_no_jvm(source, tmp_path):
    """SIGTERM while Spark started left its JVM running for good (orphaned,
    its gateway thread alive), after a Java stack trace on stderr."""
    import os
    import signal
    import subprocess
    import sys
    import time
    import uuid

    mark = f"SQLANON_TEST_MARK={uuid.uuid4().hex}"
    args = [sys.executable, "-m", "sqlanon", "anonymize", str(source), "-o", str(tmp_path / "o.parquet"),
            "--qi", ",".join(QI), "-k", "5", "--workers", "2", "--executor", "spark", "--quiet"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, mark.split("=")[0]: mark.split("=")[1]})
    time.sleep(3)  # the JVM is starting
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 143 and "Exception in thread" not in err, err

    def marked() -> list[int]:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    if mark.encode() in f.read():
                        found.append(int(pid))
            except OSError:
                continue
        return found

    deadline = time.monotonic() + 15
    while marked() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not marked()


def test_a_dask_worker_without_the_input_is_named_before_any_fragment(source, tmp_path):
    """One probe task answered for one worker: a host without the shared
    mount got fragments, failed them, and Dask retried them there, mid-run.
    Every worker is asked before any fragment; the one that lacks the input
    is named."""
    from distributed import LocalCluster

    hide = tmp_path / "hide_input.py"  # this worker's host does not mount the input
    hide.write_text(textwrap.dedent(f"""
        import os
        real = getattr(os, "real_stat", os.stat)  # Dask imports a preload twice
        def stat(path, *args, **kwargs):
            if os.fspath(path) == {str(source)!r}:
                raise FileNotFoundError(2, "No such file or directory", path)
            return real(path, *args, **kwargs)
        os.real_stat, os.stat = real, stat
    """))
    out = tmp_path / "o.parquet"
    with LocalCluster(n_workers=1, processes=False, protocol="tcp://", host="127.0.0.1",
                      dashboard_address="127.0.0.1:0") as cluster:
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", cluster.scheduler_address,
                                   "--nthreads", "1", "--no-nanny", "--preload", str(hide), "--name", "no-mount"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while len(cluster.scheduler.workers) < 2:
                assert time.monotonic() < deadline, "the second worker did not join"
                time.sleep(0.2)
            address = next(a for a, w in cluster.scheduler.workers.items() if w.name == "no-mount")
            with pytest.raises(sqlanon.InputError) as err:
                run(source, out, "dask", scheduler=cluster.scheduler_address)
            assert str(err.value) == (f"the Dask worker {address} cannot reach the input file {str(source)!r}: a "
                                      "remote cluster needs the input and the output's directory on storage that "
                                      "every worker mounts at the same path")
            assert not out.exists()
        finally:
            worker.terminate()
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:  # not left running, nor hiding the test's own failure
                worker.kill()
                worker.wait()


def test_a_cluster_that_loses_every_worker_fails_the_run(source, tmp_path, monkeypatch):
    """With its only worker killed mid-run the scheduler kept the tasks and
    the run waited for ever, without a word."""
    from distributed import LocalCluster

    from sqlanon import coordinator, executors

    monkeypatch.setattr(executors, "WAIT_FOR_WORKERS", 1.0)
    monkeypatch.setattr(coordinator, "HEALTH_CHECK_SECONDS", 0.5)
    real = executors.make_executor
    with LocalCluster(n_workers=1, processes=False, dashboard_address="127.0.0.1:0") as cluster:
        def without_workers(*args, **kwargs):
            pool = real(*args, **kwargs)
            cluster.scale(0)  # every worker gone before a fragment is handed out
            cluster.sync(cluster._correct_state)
            return pool

        monkeypatch.setattr(executors, "make_executor", without_workers)
        out = tmp_path / "o.parquet"
        with pytest.raises(sqlanon.InputError, match="the Dask cluster has had no workers for 1 s"):
            run(source, out, "dask", scheduler=cluster.scheduler_address)
    assert not out.exists()


def test_the_resource_tracker_keeps_its_warnings_off_the_clis_stderr():
    """A run failing while its pool started ended without waiting for the
    pool, and multiprocessing's resource tracker, which outlives it, wrote
    'There appear to be 1 leaked semaphore objects' to the CLI's stderr
    after its one line (about 1 run in 8 of a SQLite test)."""
    import subprocess
    import sys

    probe = textwrap.dedent("""
        from multiprocessing import resource_tracker
        from sqlanon import executors
        executors.start_local_server()
        print(open(f"/proc/{resource_tracker._resource_tracker._pid}/cmdline").read().split(chr(0)))
    """)
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert "-Wignore:resource_tracker:UserWarning" in p.stdout, p.stdout + p.stderr


def test_a_torn_down_pools_thread_keeps_its_traceback_off_stderr():
    """A run failing while its worker pool started tore the pool down, and
    the pool's management thread could then fail ('Bad file descriptor' in
    terminate_broken), printing a thread traceback after the run's one-line
    error (CI, about 1 run in 10). Only those threads are quieted."""
    import threading

    from sqlanon import executors

    def fail() -> None:
        raise OSError(9, "Bad file descriptor")

    seen = []
    previous, installed = threading.excepthook, executors._excepthook
    threading.excepthook = lambda args: seen.append(args.thread.name)
    executors._excepthook = None  # as in a fresh process
    try:
        torn_down = threading.Thread(target=fail, name="pool manager")
        executors._quiet_after_abort(torn_down)
        torn_down.start()
        torn_down.join()
        other = threading.Thread(target=fail, name="another thread")
        other.start()
        other.join()
    finally:
        threading.excepthook, executors._excepthook = previous, installed
    assert seen == ["another thread"]


def test_a_worker_forked_as_the_run_ends_prints_no_traceback():
    """A run refused right after start-up ended while the fork server was
    starting a worker, which found the pool's semaphore gone: its traceback
    (FileNotFoundError in SemLock.__setstate__) came under the CLI's one
    line (a fresh-clone CI run); and one forked as a stopped run closed the
    pipe it reads its start from (EOFError in spawn._main, helper-40). The
    fork server's excepthook drops those, and prints every other failure as before."""
    code = textwrap.dedent("""
        import os, sys
        from multiprocessing import spawn
        import sqlanon._preload
        here = {}
        exec(compile("def __setstate__():\\n    raise FileNotFoundError(2, 'No such file or directory')\\n",
                     "/usr/lib/python3/multiprocessing/synchronize.py", "exec"), here)
        gone, parent = os.pipe()
        os.close(parent)
        for fn in (here["__setstate__"], lambda: spawn._main(gone, -1), lambda: 1 / 0):
            try:
                fn()
            except Exception:
                sys.excepthook(*sys.exc_info())
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "ZeroDivisionError" in p.stderr, p.stderr
    assert "FileNotFoundError" not in p.stderr and "EOFError" not in p.stderr, p.stderr


def test_the_callers_own_fork_server_workers_keep_its_environment(tmp_path):
    """sqlanon starts multiprocessing's (shared) fork server with its own
    PYTHONSAFEPATH and PYTHONPATH, so that it imports nothing from the working
    directory; the caller's own pool on that server then ran Python scripts
    without their directory on the path (helper-25). The server puts the
    caller's environment back for what it forks."""
    script = tmp_path / "caller.py"
    script.write_text(textwrap.dedent(f"""
        import multiprocessing, os
        from concurrent.futures import ProcessPoolExecutor
        import pyarrow as pa, pyarrow.parquet as pq
        import sqlanon

        def env():
            return [os.environ.get(n) for n in ("PYTHONSAFEPATH", "PYTHONPATH", "SQLANON_ENV_BEFORE")]

        if __name__ == "__main__":
            pq.write_table(pa.table({{"age": [20 + i % 40 for i in range(400)]}}), {str(tmp_path / "s.parquet")!r})
            sqlanon.anonymize({str(tmp_path / "s.parquet")!r}, {str(tmp_path / "o.parquet")!r}, qi=["age"], k=5,
                              workers=2)
            with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("forkserver")) as pool:
                print(pool.submit(env).result(), env())
    """))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONSAFEPATH", "PYTHONPATH")}
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env=env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["[None,", "None,", "None]", "[None,", "None,", "None]"], p.stdout


def test_a_library_call_leaves_the_callers_multiprocessing_settings_as_they_were(tmp_path):
    """A call left the caller's process changed: multiprocessing's start
    method fixed ('fork', which the caller's set_start_method('spawn') then
    refused: 'context has already been set'), the resource tracker's -W
    filter in sys.warnoptions, and SQLANON_CALLER_SCRIPT in os.environ
    (helper-35)."""
    script = tmp_path / "caller.py"
    script.write_text(textwrap.dedent(f"""
        import multiprocessing, os, sys
        import pyarrow as pa, pyarrow.parquet as pq
        import sqlanon

        def double(x):
            return 2 * x

        if __name__ == "__main__":
            before = (multiprocessing.get_start_method(allow_none=True), list(sys.warnoptions), dict(os.environ))
            pq.write_table(pa.table({{"age": [20 + i % 40 for i in range(400)]}}), {str(tmp_path / "s.parquet")!r})
            sqlanon.anonymize({str(tmp_path / "s.parquet")!r}, {str(tmp_path / "o.parquet")!r}, qi=["age"], k=5,
                              workers=2)
            after = (multiprocessing.get_start_method(allow_none=True), list(sys.warnoptions), dict(os.environ))
            print(before == after, [n for n in after[2] if n not in before[2]], after[:2])
            multiprocessing.set_start_method("spawn")
            with multiprocessing.Pool(1) as pool:
                print(pool.map(double, [21]))
    """))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["True [] (None, [])", "[42]"], p.stdout


def test_explain_counts_a_local_spark_masters_own_slots(source, tmp_path):
    """--explain took --workers for the task slots of every local executor,
    but a local Spark master's are its own (local[8]: 8): the plan said a CSV
    input would be copied for its fragments where the run did not (helper-85).
    No JVM starts for a plan."""
    from sqlanon.executors import local_spark_slots

    assert [local_spark_slots(m, 2) for m in (None, "local[8]", "local[8,3]", "local", "spark://h:7077")] == [
        2, 8, 8, 1, 2]
    csv = tmp_path / "in.csv"
    duckdb.sql(f"SELECT * FROM read_parquet('{source}')").write_csv(str(csv))
    for master, copied in (("local[8]", False), ("local[2]", True), (None, True)):
        plan = run(csv, tmp_path / "o.parquet", "spark", spark_master=master, explain=True).explain()
        assert (plan["executor"], plan["csv_copy"]) == ("spark", copied), master


def test_explain_asks_a_remote_cluster_whatever_names_it(monkeypatch):
    """--explain planned --workers' fragments where the run then used the
    cluster's slots: for a scheduler, a remote master, and (helper-25) the
    remote master of the caller's active Spark session."""
    from types import SimpleNamespace

    from pyspark.sql import SparkSession

    from sqlanon.executors import remote_cluster

    assert remote_cluster("dask", "tcp://h:8786", None) and not remote_cluster("dask", None, None)
    assert remote_cluster("spark", None, "spark://h:7077") and not remote_cluster("spark", None, "local[2]")
    for master, remote in (("spark://h:7077", True), ("local-cluster[2,1,1024]", True), ("local[4]", False)):
        session = SimpleNamespace(sparkContext=SimpleNamespace(master=master))
        monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: session))
        assert remote_cluster("spark", None, None) is remote
    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))
    assert not remote_cluster("spark", None, None) and not remote_cluster("local", None, None)


def test_workers_are_sized_by_a_containers_memory_limit(tmp_path, monkeypatch):
    """The default memory limits came from the machine's memory, so a
    container's workers were given more than the container has (helper-26)."""
    from sqlanon import executors

    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    v2, v1 = tmp_path / "memory.max", tmp_path / "memory.limit_in_bytes"
    monkeypatch.setattr(executors, "CGROUP_MEMORY_LIMITS", (str(v2), str(v1)))
    monkeypatch.setattr(executors, "own_cgroup_limits", lambda: [])
    assert executors.total_memory() == physical  # neither file
    v2.write_text("max\n")
    v1.write_text(f"{2**30}\n")
    assert executors.total_memory() == 2**30
    v2.write_text(f"{3 * 2**30}\n")
    assert executors.total_memory() == min(physical, 3 * 2**30)
    v2.write_text(f"{2**62}\n")  # no limit, as v1 says it
    assert executors.total_memory() == physical


def test_workers_are_sized_by_the_processs_own_cgroup(tmp_path, monkeypatch):
    """A run capped by its own cgroup (``systemd-run --scope -p
    MemoryMax=2G``, a batch job's), not a container's root, was sized by the
    machine's memory: each of 2 workers got ~9.4 GB under a 2 GiB cap
    (helper-123). Its cgroup's limit and its ancestors' count, v2 and v1."""
    from sqlanon import executors

    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    monkeypatch.setattr(executors, "CGROUP_ROOT", str(tmp_path))
    monkeypatch.setattr(executors, "CGROUP_MEMORY_LIMITS", ())
    proc = tmp_path / "cgroup"
    proc.write_text("4:memory:/jobs/run1\n1:cpu:/x\n0::/user.slice/run-1.scope\n")
    assert executors.own_cgroup_limits(str(proc)) == []  # no files: no limit
    (tmp_path / "user.slice" / "run-1.scope").mkdir(parents=True)
    (tmp_path / "user.slice" / "run-1.scope" / "memory.max").write_text("max\n")
    (tmp_path / "user.slice" / "memory.max").write_text(f"{3 * 2**30}\n")
    (tmp_path / "memory" / "jobs" / "run1").mkdir(parents=True)
    (tmp_path / "memory" / "jobs" / "run1" / "memory.limit_in_bytes").write_text(f"{2**31}\n")
    assert sorted(executors.own_cgroup_limits(str(proc))) == [2**31, 3 * 2**30]
    assert executors.own_cgroup_limits(str(tmp_path / "none")) == []  # no /proc: the root's files only
    monkeypatch.setattr(executors, "own_cgroup_limits", lambda: [2**31])
    assert executors.total_memory() == min(physical, 2**31)


def test_a_long_spark_error_keeps_its_end_which_says_why():
    """A task's error cut to 300 characters lost its reason, at the end of a
    line that starts with a long connection string (helper-56)."""
    from sqlanon import executors

    options = " ".join(f"-c setting_{i}=value_{i}" for i in range(20))
    line = (f'Unable to connect to Postgres at "host=db.example port=5432 options=\'{options}\'": connection to '
            "server failed: fe_sendauth: no password supplied")
    cut = executors._spark_error(RuntimeError(f"An error occurred while calling o1.collect.\n: {line}\n\tat x.y(z)"))
    assert cut.startswith("Unable to connect to Postgres at") and cut.endswith("fe_sendauth: no password supplied")
    assert " … " in cut and len(cut) <= 300
    assert executors._spark_error(RuntimeError("short and clear")) == "short and clear"
    # A long word is cut inside, not dropped whole (it became 'Py4JJavaError: … end': helper-57).
    cut = executors._cut("Py4JJavaError: " + "x" * 400 + " end")
    assert cut.startswith("Py4JJavaError: xxx") and cut.endswith("xxx end") and 290 <= len(cut) <= 310


def test_a_dask_cluster_without_workers_at_the_probe_is_probed_by_a_task():
    """Every worker gone (an adaptive cluster scaled down while the run
    sampled): asked on each of none, the probe passed, and fragments went to
    workers no one had probed (helper-75). One task asks the worker that starts for it."""
    from concurrent.futures import Future
    from types import SimpleNamespace

    from sqlanon import coordinator

    answer = Future()
    answer.set_result("the input file '/in.parquet'")
    pool = SimpleNamespace(name="dask", submit_to_each=lambda fn, arg: {}, submit=lambda fn, arg: answer,
                           describe_error=str)
    with pytest.raises(sqlanon.InputError, match=r"^a Dask worker cannot reach the input file '/in.parquet'"):
        coordinator._probe_cluster(pool, (("/in.parquet", 1, 1),), SimpleNamespace(parts_dir="/staging"))


def test_a_probe_that_hangs_on_a_dask_worker_fails_the_run_in_time(tmp_path, monkeypatch):
    """A probe on Dask's Client.run ran on the worker's event loop, with no
    time limit: a hung mount's stat held the run (and the worker's heartbeats)
    for as long as it hung (helper-75). Probe tasks are held to the deadline,
    and the late worker is named."""
    from types import SimpleNamespace

    from distributed import LocalCluster

    from sqlanon import coordinator, executors, worker

    monkeypatch.setattr(coordinator, "PROBE_SECONDS", 1.0)
    monkeypatch.setattr(coordinator, "HEALTH_CHECK_SECONDS", 0.2)
    monkeypatch.setattr(worker, "other_version", lambda inputs: time.sleep(5) or "")  # a hung mount, for a while
    with LocalCluster(n_workers=1, processes=False, dashboard_address="127.0.0.1:0") as cluster:
        pool = executors.DaskExecutor(cluster.scheduler_address, 1, 0)
        try:
            address = next(iter(cluster.scheduler.workers))
            t0 = time.monotonic()
            with pytest.raises(sqlanon.InputError, match=f"^the Dask worker {re.escape(address)} did not run a "
                                                         "first probe task in 1 s$"):
                coordinator._probe_cluster(pool, ((str(tmp_path / "in.parquet"), 1, 1),),
                                           SimpleNamespace(parts_dir=str(tmp_path)))
            assert time.monotonic() - t0 < 10
        finally:
            pool.shutdown(abort=True)


def test_a_dask_worker_that_leaves_during_the_probe_is_not_waited_for(tmp_path, monkeypatch):
    """A probe held to a worker that left (scaled down, restarted) waited for
    ever, then the run failed naming it as late though the others had
    answered; the worker gone runs no fragment. With none left, the worker
    that starts is asked."""
    import threading
    from types import SimpleNamespace

    from distributed import LocalCluster

    from sqlanon import coordinator, executors, worker

    monkeypatch.setattr(coordinator, "PROBE_SECONDS", 30.0)
    monkeypatch.setattr(coordinator, "HEALTH_CHECK_SECONDS", 0.2)
    monkeypatch.setattr(worker, "other_version", lambda inputs: time.sleep(2) or "")
    with LocalCluster(n_workers=2, processes=False, dashboard_address="127.0.0.1:0") as cluster:
        pool = executors.DaskExecutor(cluster.scheduler_address, 2, 0)
        try:
            threading.Timer(0.5, lambda: cluster.scale(1)).start()
            t0 = time.monotonic()
            coordinator._probe_cluster(pool, ((str(tmp_path / "in.parquet"), 1, 1),),
                                       SimpleNamespace(parts_dir=str(tmp_path)))
            assert time.monotonic() - t0 < 15
        finally:
            pool.shutdown(abort=True)


def test_every_dask_worker_counts_where_scheduler_info_lists_five(monkeypatch):
    """distributed 2025.4-2026.6's scheduler_info() listed the first five
    workers only (dask/distributed#9045): a cluster of seven was taken for
    five task slots, and the last two got fragments unprobed (helper-76)."""
    from distributed import Client, LocalCluster

    from sqlanon import executors

    listed = Client.scheduler_info

    def five(self, *args, **kwargs):
        info = listed(self, *args, **kwargs)
        return {**info, "workers": dict(list(info["workers"].items())[:5])}

    monkeypatch.setattr(Client, "scheduler_info", five)
    with LocalCluster(n_workers=7, threads_per_worker=1, processes=False, dashboard_address="127.0.0.1:0") as cluster:
        pool = executors.DaskExecutor(cluster.scheduler_address, 7, 0)
        try:
            assert pool.slots == 7
            probes = pool.submit_to_each(abs, -1)
            assert sorted(probes) == sorted(cluster.scheduler.workers)
            assert [f.result(timeout=30) for f in probes.values()] == [1] * 7
        finally:
            pool.shutdown()


def test_a_failed_call_gives_the_host_its_thread_excepthook_back(source, tmp_path, monkeypatch):
    """A failed call's torn-down pool quiets its management thread's
    traceback with a threading.excepthook of its own, which stayed in the
    host's place for the life of the process (helper-104); the host's comes
    back once that thread has ended."""
    import threading
    import time

    seen = []
    hook = seen.append
    monkeypatch.setattr(threading, "excepthook", hook)
    sqlanon.anonymize(source, tmp_path / "o.parquet", qi=QI, k=5, workers=2)  # the pool's server is up
    assert threading.excepthook is hook
    with pytest.raises(sqlanon.ConfigError):  # found once the pool is starting
        sqlanon.anonymize(source, tmp_path / "o.parquet", qi=[*QI, "nope"], k=5, workers=2, overwrite=True)
    deadline = time.monotonic() + 20
    while threading.excepthook is not hook and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.excepthook is hook
    t = threading.Thread(target=lambda: 1 / 0)
    t.start()
    t.join()
    assert [a.exc_type for a in seen] == [ZeroDivisionError]


def test_dask_executors_alive_at_once_give_the_host_its_state_back_when_the_last_goes(monkeypatch):
    """Each executor noted the host's environment and Dask's log level as it
    started: a second run started while the first's nannies had set theirs
    noted those, and left them (PYTHONHASHSEED=6640, OMP_NUM_THREADS=1) and
    Dask's INFO lines on (helper-106). The first notes, the last puts back;
    an executor that fails to start (a scheduler that refuses) counts out."""
    import logging

    from sqlanon import executors

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("PYTHONHASHSEED", "7")
    monkeypatch.setattr(logging.getLogger("distributed"), "level", logging.INFO)
    executors._dask_host_taken()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as a nanny of the first sets them
    monkeypatch.setenv("PYTHONHASHSEED", "6640")
    executors._dask_host_taken()
    executors._dask_host_back()
    assert os.environ["OMP_NUM_THREADS"] == "1" and logging.getLogger("distributed").level == logging.WARNING
    executors._dask_host_back()
    assert "OMP_NUM_THREADS" not in os.environ and os.environ["PYTHONHASHSEED"] == "7"
    assert logging.getLogger("distributed").level == logging.INFO
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(sqlanon.SqlanonError):
        executors.DaskExecutor(f"tcp://127.0.0.1:{port}", 1, 0)
    assert logging.getLogger("distributed").level == logging.INFO and executors._dask_users == 0


def test_a_hosts_hook_chained_on_the_quiet_one_makes_no_loop(monkeypatch):
    """A host that wrapped the stand-in hook in its own (H2 calling the hook
    it found) had that H2 taken as its hook by the next failed call: every
    thread's exception then went H2 -> stand-in -> H2 ... RecursionError,
    and its first hook was lost (helper-106)."""
    import threading

    from sqlanon import executors

    seen = []
    monkeypatch.setattr(threading, "excepthook", lambda args: seen.append("H1"))
    monkeypatch.setattr(executors, "_excepthook", None)
    hold = threading.Event()
    pools = [threading.Thread(target=hold.wait) for _ in range(2)]  # a torn-down pool's threads, still running
    pools[0].start()
    executors._quiet_after_abort(pools[0])
    found = threading.excepthook

    def chained(args):
        seen.append("H2")
        found(args)

    threading.excepthook = chained
    pools[1].start()
    executors._quiet_after_abort(pools[1])
    other = threading.Thread(target=lambda: 1 / 0)
    other.start()
    other.join()
    hold.set()
    for t in pools:
        t.join()
    assert seen == ["H2", "H1"]
    assert threading.excepthook is chained  # the host's, as it left it


def test_a_dask_local_clusters_resource_tracker_keeps_its_warnings_off_the_clis_stderr():
    """A Ctrl-C while a Dask LocalCluster's workers started left a semaphore
    registered, and the tracker, started for the cluster without the local
    pool's -W option, printed four lines of warnings under the CLI's one
    (seen once, in a CI run's test of that Ctrl-C)."""
    import subprocess
    import sys

    probe = textwrap.dedent("""
        import sys, time
        from multiprocessing import resource_tracker
        from sqlanon import executors
        executors._start_tracker()
        for _ in range(500):  # read once it has run its command (empty just after the fork)
            line = open(f"/proc/{resource_tracker._resource_tracker._pid}/cmdline").read()
            if "resource_tracker" in line:
                break
            time.sleep(0.01)
        print(line.split(chr(0)))
        print("left", sys.warnoptions)
    """)
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert "-Wignore:resource_tracker:UserWarning" in p.stdout, p.stdout + p.stderr
    assert "left []" in p.stdout, p.stdout  # the process's own options as they were
