"""Where worker tasks run: a local process pool, Dask distributed, or Spark.

Every executor maps :class:`~sqlanon.worker.FragmentTask` descriptions to
:class:`~sqlanon.worker.FragmentResult` s through the same worker function,
:func:`sqlanon.worker.run_fragment`. A task carries a WHERE clause, never
rows (the spec and the global statistics go to the engine once: ``share``):
each task opens its own DuckDB connection to the source and writes its own
Parquet part, so the engine only schedules tasks and returns metrics; no data
is shuffled through it.

An executor has ``submit(fn, task, *handles) -> concurrent.futures.Future``,
``share(*objects)`` (sends what every task needs once, returning a handle
whose value ``submit`` hands ``fn`` as one argument, the tuple of those
objects; ``None`` where the coordinator writes them to its staging area
instead),
``shutdown(abort=False)`` (``abort`` kills running tasks after a failure or a
timeout), and ``slots`` (tasks that run at once), from which the
coordinator sizes each task's DuckDB ``threads`` and ``memory_limit`` so that
N tasks × DuckDB threads never oversubscribe a host.

* ``local`` (default): a process pool on this machine whose workers fork from
  a server that has imported sqlanon (:class:`LocalExecutor`).
* ``dask``: ``--scheduler tcp://host:8786``, or a ``LocalCluster`` of
  ``--workers`` processes when no address is given. Retries are Dask's own
  (``retries=``): a task whose worker dies is rerun elsewhere and rewrites its
  own part file, so a retry never duplicates rows.
* ``spark``: ``--spark-master URL`` (default ``local[N]``); each task is a
  one-element RDD mapped through the worker function, so Spark schedules and
  retries it (``spark.task.maxFailures``; in local mode ``local[N,F]``).

Dask and Spark are optional extras: ``pip install -e '.[dask]'`` or
``'.[spark]'`` in sqlanon's checkout.
"""

from __future__ import annotations

import contextlib
import gc
import importlib.metadata
import importlib.util
import json
import logging
import multiprocessing
import os
import pickle
import re
import select
import signal
import socket
import sys
import tempfile
import threading
import time
import warnings
import weakref
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor

from . import errors
from .errors import AFTER_SHUTDOWN, ConfigError, InputError, install_extra

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 30.0
"""Seconds to reach a Dask scheduler."""

TEARING_DOWN = threading.Event()
"""Set while a cluster is closed after a failure or a stop: the run reports
its own one line, and what Dask logs of its teardown (a worker killed
mid-handshake: 'TLS handshake failed … Connection reset by peer') is no
news. The CLI shows none of Dask's records meanwhile (without -v); the
library leaves its host's logging alone."""

WAIT_FOR_WORKERS = 60.0
"""Seconds a Dask scheduler may take to have its first worker."""

EXECUTORS = ("local", "dask", "spark")


CGROUP_MEMORY_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")
"""Where a container's memory limit is (cgroup v2, v1)."""


def total_memory() -> int:
    """The machine's memory, or the container's limit when lower: sized by
    the machine's, a container's workers were given more than it has
    (helper-26)."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in CGROUP_MEMORY_LIMITS:
        try:
            with open(path, encoding="ascii") as f:
                text = f.read().strip()
        except (OSError, ValueError):
            continue
        if text.isdigit():  # 'max' (v2) or a huge number (v1) when there is none
            physical = min(physical, int(text))
            break
    return min([physical, *own_cgroup_limits()])


CGROUP_ROOT = "/sys/fs/cgroup"
"""Where the cgroup hierarchies are mounted."""


def own_cgroup_limits(proc: str = "/proc/self/cgroup") -> list[int]:
    """The memory limits of this process's own cgroup and its ancestors, as
    ``/proc/self/cgroup`` names them: a run capped by ``systemd-run --scope
    -p MemoryMax=2G`` or a batch scheduler's job cgroup (not a container's
    root, :data:`CGROUP_MEMORY_LIMITS`) was sized by the machine's memory,
    its workers given ~10 GB each under a 2 GB cap (helper-123)."""
    limits = []
    try:
        with open(proc, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return limits
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            base, name = CGROUP_ROOT, "memory.max"  # v2
        elif "memory" in controllers.split(","):
            base, name = f"{CGROUP_ROOT}/memory", "memory.limit_in_bytes"  # v1
        else:
            continue
        rel = path.strip("/")
        while rel and not rel.startswith(".."):  # the cgroup, then its ancestors (the root's is the caller's)
            try:
                with open(f"{base}/{rel}/{name}", encoding="ascii") as f:
                    text = f.read().strip()
            except (OSError, ValueError):
                text = ""
            if text.isdigit():
                limits.append(int(text))
            rel = os.path.dirname(rel)
    return limits


def default_workers() -> int:
    """``--workers`` when not given: one per CPU."""
    return os.cpu_count() or 1


def remote_cluster(executor: str, scheduler: str | None, spark_master: str | None) -> bool:
    """Whether a run goes to a cluster of the user's, whose task slots are
    its workers: a Dask scheduler's, or a Spark master that is not local,
    named or the caller's active session's (helper-25; one set only in
    Spark's own configuration shows once a session starts)."""
    if executor == "dask":
        return scheduler is not None
    if executor != "spark":
        return False
    if spark_master is None and "pyspark" in sys.modules:  # a session only if the caller made one
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        spark_master = active.sparkContext.master if active is not None else None
    spark_master = spark_master or submitted_master()
    return spark_master is not None and remote_master(spark_master)


def submitted_master() -> str | None:
    """The master ``spark-submit --master`` gave, when this process is the
    driver spark-submit started (its JVM, named by PYSPARK_GATEWAY_PORT,
    holds it as ``spark.master``): a session started with a master of
    sqlanon's own ran the whole job on the driver, in local mode, and
    passed over the checks of a remote cluster (helper-38). Only a remote
    one: spark-submit without ``--master`` says ``local[*]``, which took
    the place of ``--workers`` and ``--retries`` (helper-39)."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    try:
        from pyspark import SparkConf, SparkContext
    except ImportError:
        return None
    SparkContext._ensure_initialized()  # connects to spark-submit's JVM; no context is made (no public call)
    master = SparkConf().get("spark.master", None)
    # A local one is spark-submit's default (local[*]): --workers and --retries make the run's.
    return master if master is not None and remote_master(master) else None


def in_process(executor: str, workers: int | None, explain: bool = False) -> bool:
    """Whether a run needs no executor: ``--explain``, or one local worker
    (the coordinator then anonymizes the single fragment itself)."""
    return explain or (executor == "local" and (workers or default_workers()) == 1)


SCRIPT_ENV = "SQLANON_CALLER_SCRIPT"
"""The caller's script, as multiprocessing would have workers import it."""

MODULE_ENV = "SQLANON_CALLER_MODULE"
"""The caller's main module when it runs as ``python -m jobs.nightly``."""


def _forkserver_context():
    # forkserver: workers fork from a clean server process that has imported
    # sqlanon and loaded the compiled kernel once, instead of forking the
    # coordinator (DuckDB and Arrow threads make fork unsafe) or paying a full
    # interpreter start per worker (spawn).
    from multiprocessing import forkserver

    ctx = multiprocessing.get_context("forkserver")
    # Beside the caller's own (set_forkserver_preload: the server is one per process, theirs too; helper-92),
    # but for '__main__' (multiprocessing's default), which would run the caller's script in the server.
    theirs = [m for m in getattr(forkserver._forkserver, "_preload_modules", [])
              if m not in ("__main__", "sqlanon._preload")]
    ctx.set_forkserver_preload([*theirs, "sqlanon._preload"])
    # A worker would import the caller's script again (multiprocessing does,
    # for functions defined there): a script without `if __name__ ==
    # "__main__":` then ran its anonymize() call in every worker, which died,
    # and a script read from stdin cannot be imported at all. The workers run
    # only sqlanon's code: the server tells them the script is already there,
    # and runs it only if a worker (of the caller's own pool) looks into it
    # (sqlanon._preload; the script is named to the server as it starts:
    # _imports_of_this_process).
    return ctx


def _main_spec() -> None:
    """Give the caller's ``__main__`` the ``__spec__`` attribute every module
    has, where a host dropped it: IPython's %run of a script it ran before
    clears the module's namespace, ``__spec__`` with it, and multiprocessing
    (this module's :func:`_callers_main`, each worker's start, Dask's
    nannies) read it as ``main.__spec__``: the second %run failed with
    "AttributeError: module '__main__' has no attribute '__spec__'".
    None is what a script's ``__main__`` holds (and the first %run's)."""
    main = sys.modules.get("__main__")
    if main is not None and not hasattr(main, "__spec__"):
        with contextlib.suppress(AttributeError, TypeError):
            main.__spec__ = None


def _callers_main() -> dict[str, str | None]:
    """The caller's script and ``-m`` module, as multiprocessing tells its workers."""
    from multiprocessing import spawn

    _main_spec()
    data = spawn.get_preparation_data("sqlanon")
    return {SCRIPT_ENV: data.get("init_main_from_path") or None, MODULE_ENV: data.get("init_main_from_name") or None}


@contextlib.contextmanager
def callers_start_method() -> Iterator[None]:
    """Leave multiprocessing's default start method as the caller had it.

    Starting a process (the fork server, a worker) fixes it for good when
    it was not set ('fork'): a caller's set_start_method('spawn') after a
    run was refused ('context has already been set') (helper-35)."""
    before = multiprocessing.get_start_method(allow_none=True)
    try:
        yield
    finally:
        if before is None:
            multiprocessing.set_start_method(None, force=True)  # "not set", as documented for force


_own_server = False
"""Whether this process started the fork server itself (the CLI does)."""


def start_local_server() -> None:
    """Start the local pool's fork server now, without waiting for it.

    It needs about a second to import sqlanon and load the compiled kernel.
    The CLI calls this before it imports the coordinator (DuckDB, Arrow,
    numpy), so the two load on two cores at once; the :class:`LocalExecutor`
    of the run then finds the server running (or ready soon) and forks its
    workers from it.
    """
    global _own_server
    _forkserver_context()
    _start_server(to_stderr=True)
    _own_server = True


QUIET_TRACKER = "ignore:resource_tracker:UserWarning"
"""A -W option for multiprocessing's resource tracker (see :func:`_start_server`)."""


_SERVER_STARTING = threading.Lock()
"""Held while a fork server starts: two library calls from two threads at
once each saved the other's variables as the caller's and put them back
last, leaving PYTHONSAFEPATH, PYTHONPATH and the caller's script in the
host's environment for good (helper-92)."""


def _start_server(to_stderr: bool = False) -> None:
    """Start multiprocessing's fork server (if not running) with Ctrl-C
    blocked: the mask is inherited, so a Ctrl-C (sent to the whole process
    group) while the new interpreter starts is held until sqlanon._preload
    discards it; it printed 'Fatal Python error: init_import_site' under the
    CLI's one line. This process gets its own Ctrl-C once unblocked. One
    thread at a time (:data:`_SERVER_STARTING`). ``to_stderr`` (the CLI's):
    the server and its workers print their warnings on stderr, as the CLI's
    read; else they log them to a file whose records :func:`replay_server_log`
    gives this process's logging (a library call prints nothing)."""
    with _SERVER_STARTING:
        _start_server_alone(to_stderr)


SERVER_LOG_ENV = "SQLANON_SERVER_LOG"
"""The file the fork server and its workers log sqlanon's records to, one
JSON line each (``[logger, level, message]``), when a library call started it."""

_server_log: list = [None, 0]
"""The running fork server's log file (None: it prints on stderr) and how much of it this process has logged."""

_SERVER_LOG_READ = threading.Lock()


def replay_server_log() -> None:
    """Log here, through this process's logging, the records the fork server
    and its workers logged since the last call (:data:`SERVER_LOG_ENV`): a
    library call's warnings of the workers' kernel (no C compiler, no
    writable cache) reached its host's stderr as ``Warning: …`` lines,
    past its logging (helper-175)."""
    with _SERVER_LOG_READ:
        path, start = _server_log
        if path is None:
            return
        try:
            with open(path, "rb") as f:
                f.seek(start)
                data = f.read()
        except OSError:
            return
        whole = data[:data.rfind(b"\n") + 1]  # a record being written is read next time
        _server_log[1] = start + len(whole)
    for line in whole.splitlines():
        try:
            name, level, message = json.loads(line)
        except ValueError:
            continue
        logging.getLogger(name).log(level, "%s", message)


_server_main: dict[str, str | None] | None = None
"""The caller's script and module (:func:`_callers_main`) the running fork
server was started with, which it gives its workers as their ``__main__``."""


_server_env: dict[str, str] | None = None
"""This process's environment when the running fork server started: the
workers it forks have that one, not the caller's of a later run."""


def _start_server_alone(to_stderr: bool) -> None:
    global _server_main, _server_env
    from multiprocessing import forkserver, util

    main = _callers_main()
    env = dict(os.environ)
    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)  # no public handle
    changed = sorted(n for n in {*env, *(_server_env or {})} if env.get(n) != (_server_env or {}).get(n))
    if pid is not None and _server_env is not None and changed and main == _server_main:
        # A variable set (or changed) since the server started: a
        # notebook's PGPASSWORD for a PostgreSQL input, after a first run on
        # a file. The coordinator saw it, the workers did not ('no password
        # supplied' from the workers only; helper-160).
        if _children(pid):
            log.warning("the environment changed since the local workers' server started (%s), and other "
                        "processes still use it: this run's workers have the environment as it was then",
                        ", ".join(changed[:5]) + (", …" if len(changed) > 5 else ""))
        else:
            _end_server(pid)
    if pid is not None and _server_main is not None and main != _server_main:
        # The caller's __main__ changed since (IPython's %run, runpy): the
        # server would give the workers the old one, and they would import
        # the new script as multiprocessing's own __mp_main__, running a
        # call it makes without a main guard again in each (helper-92).
        # Not while it has processes of its own: a pool of the caller's
        # forked from it lost every worker (helper-93).
        if _children(pid):
            log.warning("the script running (%s) is not the one the local workers' server started with, which "
                        "other processes still use: each worker imports it, so its call of sqlanon needs an `if "
                        "__name__ == \"__main__\":` guard", main.get(SCRIPT_ENV) or main.get(MODULE_ENV))
        else:
            _end_server(pid)
    _short_socket_directory()
    # The caller's own -W options back once the tracker and the server have started (helper-35).
    with _imports_of_this_process(), _quiet_tracker(), contextlib.ExitStack() as unquiet:
        # The tracker first: starting it unblocks SIGINT (it blocks it for its own start).
        _start_tracker()
        # SIGHUP blocked for good, as in the tracker (see there), workers included.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGHUP})
        log_file = None if to_stderr else os.path.join(util.get_temp_dir(), f"sqlanon-server-{time.time_ns()}.log")
        if log_file:  # for the server to read as it starts (util's directory: this process's, private)
            os.environ[SERVER_LOG_ENV] = log_file
            unquiet.callback(os.environ.pop, SERVER_LOG_ENV, None)
        try:
            forkserver.ensure_running()
            if getattr(forkserver._forkserver, "_forkserver_pid", None) != pid:  # a new server: this environment
                _server_env = env
                with _SERVER_LOG_READ:
                    _server_log[:] = [log_file, 0]
            _server_main = main
        except ChildProcessError as exc:  # (an OSError) its server is the parent's: ChildProcessError (helper-35)
            raise ConfigError("this process was forked from one that had started sqlanon's local worker pool, which "
                              "stays the parent's: run it with one worker here (workers=1, --workers 1), or from a "
                              "fresh process") from exc
        except OSError as exc:
            if "AF_UNIX path too long" not in str(exc):
                raise
            raise ConfigError(f"the local worker pool's socket would be in {util.get_temp_dir()!r}, too long a "
                              "path for a socket: set TMPDIR to a shorter one") from exc
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


_SOCKET_ROOM = 107 - len("/pymp-12345678/listener-12345678")
"""How long the temporary directory's path may be for the fork server's
socket (``<TMPDIR>/pymp-*/listener-*``): a socket's path holds 107 bytes."""


def _short_socket_directory() -> None:
    """Have multiprocessing make its directory (the fork server's socket)
    in /tmp when TMPDIR's path is too long for a socket: the run failed as
    an internal error ('AF_UNIX path too long'). Only that directory, which
    holds sockets and nothing of the data; the rest stays in TMPDIR."""
    from multiprocessing import util

    if len(os.fsencode(tempfile.gettempdir())) > _SOCKET_ROOM and os.access("/tmp", os.W_OK | os.X_OK):
        saved, tempfile.tempdir = tempfile.tempdir, "/tmp"
        try:
            util.get_temp_dir()  # made now, in /tmp, and kept for this process (once made, only returned)
        finally:
            tempfile.tempdir = saved


@contextlib.contextmanager
def _imports_of_this_process():
    """Have the interpreters multiprocessing starts (``python -c …``: the
    fork server, the resource tracker) import from this process's
    ``sys.path``, not from the working directory, which ``-c`` puts first:
    a ``pandas.py`` or a ``sqlanon/`` where a run started was imported by
    every worker (helper-24), which ran its code, or another sqlanon's.
    Python 3.11's fork server takes no ``sys.path`` of its parent; the
    environment it inherits does (PYTHONSAFEPATH: no working directory;
    PYTHONPATH: this process's path, a ``''`` in it being the directory it
    started in). The fork server puts the caller's values back
    (:data:`ENV_BEFORE`) for the processes it forks: a worker of the
    caller's own pool (the server is multiprocessing's, shared) ran Python
    scripts without their directory on the path (helper-25). The caller's
    script (:data:`SCRIPT_ENV`, :data:`MODULE_ENV`) goes to the server the
    same way, and no further."""
    main = _callers_main()
    saved = {name: os.environ.get(name) for name in ("PYTHONSAFEPATH", "PYTHONPATH", *main)}
    os.environ[ENV_BEFORE] = json.dumps(saved)
    os.environ["PYTHONSAFEPATH"] = "1"
    os.environ["PYTHONPATH"] = os.pathsep.join(os.path.abspath(p) if p else os.getcwd() for p in sys.path)
    for name, value in main.items():  # for sqlanon._preload; the caller's own values back after
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    try:
        yield
    finally:
        restore_environment(json.dumps(saved))


ENV_BEFORE = "SQLANON_ENV_BEFORE"
"""The caller's PYTHONSAFEPATH and PYTHONPATH, as JSON, while a server starts."""


def restore_environment(before: str | None) -> None:
    """Put back the variables :func:`_imports_of_this_process` set (``before``: their JSON)."""
    os.environ.pop(ENV_BEFORE, None)
    for name, value in json.loads(before or "{}").items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@contextlib.contextmanager
def _quiet_tracker() -> Iterator[None]:
    """:data:`QUIET_TRACKER` among this process's -W options meanwhile, which
    multiprocessing's resource tracker and the fork server take as they
    start. The tracker outlives a run that fails or is interrupted while its
    pool starts (the CLI then ends without waiting for the pool), and wrote
    'leaked semaphore objects' warnings to the CLI's stderr after its one line."""
    quieted = QUIET_TRACKER not in sys.warnoptions
    if quieted:
        sys.warnoptions.append(QUIET_TRACKER)
    try:
        yield
    finally:
        if quieted:
            sys.warnoptions.remove(QUIET_TRACKER)


def _start_tracker() -> None:
    """Start multiprocessing's resource tracker (if not running), quiet
    (:func:`_quiet_tracker`: a Ctrl-C while a Dask LocalCluster's workers
    started printed four lines of its warnings under the CLI's one), with
    SIGHUP blocked, for good (the mask is inherited): a hangup (the terminal
    went away) reaches the whole process group, and killed it, and it
    printed a traceback per shared-memory name as the coordinator, which
    handles the hangup, cleaned up. Starting it unblocks SIGINT in this thread."""
    from multiprocessing import resource_tracker

    hangup = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP})
    try:
        with _quiet_tracker():
            resource_tracker.ensure_running()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, hangup)


def stop_local_server() -> None:
    """End the fork server that :func:`start_local_server` started, at once.

    For a run that failed: the server may still be loading (~1 s), and until
    it exits it holds the CLI's stdout and stderr, so whoever reads them to
    the end would wait for it; a worker start in flight then fails instead of
    waiting for it. The next pool in this process starts a new server.
    """
    if not _own_server:
        return
    from multiprocessing import forkserver

    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)  # no public handle
    if pid is not None:
        _end_server(pid)


def _end_server(pid: int) -> None:
    """Kill the fork server ``pid`` and wait until it has died (a zombie has
    closed its files), so that the CLI, whose own exit is quick, ends with
    the server gone rather than merely signalled. Not reaped:
    multiprocessing waits for it itself before it starts the next server,
    and takes it for alive until it can be reaped (a zombie to /proc may
    not be one yet to waitpid: a restart then found the old server
    'running', and the next process start made a server without the
    caller's script; helper-92)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return  # already gone; multiprocessing reaps it on its next start
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is not None:
                return  # exited, and left for multiprocessing to reap
        except ChildProcessError:  # not this process's child: as /proc tells
            if _process_state(pid) in (None, "Z"):
                return
        time.sleep(0.002)


def _process_state(pid: int) -> str | None:
    """A process's state letter from /proc (R, S, Z…), or None if it is gone
    (or /proc cannot tell)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return None


def exit_with(pid: int) -> None:
    """Worker initializer: end this process when the coordinator ``pid`` ends
    (and leave Ctrl-C to the coordinator).

    A worker forks from the fork server and holds both ends of its task
    queue, so after a coordinator killed outright (``kill -9``, the OOM
    killer) it would wait for tasks forever, and keep the server (and any
    pipe the CLI's output went to) alive. A thread waits on the
    coordinator's pidfd (Linux 5.3+; elsewhere it polls once a second).
    """
    # Ctrl-C is the coordinator's to handle (it stops the pool); a worker
    # interrupted while idle would only print a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):  # no pidfd here

        def wait() -> None:
            while True:
                time.sleep(1)
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    os._exit(1)
                except PermissionError:
                    pass
    else:

        def wait() -> None:
            select.select([fd], [], [])
            os._exit(1)

    threading.Thread(target=wait, daemon=True, name="sqlanon-exit-with-coordinator").start()


_ABORTED: weakref.WeakSet = weakref.WeakSet()
"""Management threads of process pools that a failed run tore down."""
_excepthook = None
"""The host's ``threading.excepthook`` while :func:`_quiet_hook` stands in for it."""
_hook_lock = threading.Lock()


def _quiet_hook(args) -> None:
    if args.thread is not None and args.thread in _ABORTED:
        log.debug("a stopped worker pool's thread ended with %s: %s", args.exc_type.__name__, args.exc_value)
        return
    (_excepthook or threading.__excepthook__)(args)


def _quiet_after_abort(thread: threading.Thread | None) -> None:
    """Keep the traceback of ``thread`` (a pool's management thread) off
    stderr: a pool torn down while its workers start may fail in it ('Bad
    file descriptor' in terminate_broken), after the run's one-line error.
    The host's hook is put back once every such thread has ended: it stayed
    replaced for the life of the process (helper-104)."""
    global _excepthook
    if thread is None:
        return
    with _hook_lock:
        _ABORTED.add(thread)
        # Not while the hook stands in a chain the host built on it (a hook of
        # the host's that calls it): taking that one made a loop (helper-106).
        if _excepthook is None and threading.excepthook is not _quiet_hook:
            _excepthook = threading.excepthook
            threading.excepthook = _quiet_hook
    threading.Thread(target=_hook_back_after, args=(thread,), daemon=True, name="sqlanon-pool-watch").start()


def _hook_back_after(thread: threading.Thread) -> None:
    """Put the host's ``threading.excepthook`` back once ``thread`` has ended
    (and no other torn-down pool's thread runs), unless the host has set
    another one meanwhile."""
    global _excepthook
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (thread.ident is None or thread.is_alive()):  # not started yet, or running
        if thread.ident is None:
            time.sleep(0.05)
        else:
            thread.join(0.5)
    with _hook_lock:
        if threading.excepthook is _quiet_hook and not any(t.is_alive() for t in list(_ABORTED)):
            threading.excepthook, _excepthook = _excepthook or threading.__excepthook__, None


class LocalExecutor:
    """A process pool whose workers fork from a server that has imported sqlanon."""

    name = "local"
    remote = False

    def __init__(self, workers: int) -> None:
        if not threading.main_thread().is_alive():  # "cannot schedule new futures after interpreter shutdown"
            raise ConfigError(AFTER_SHUTDOWN + ", or run it with one worker (workers=1: its work then runs in this "
                              "thread)")
        if multiprocessing.current_process().daemon:  # it raised AssertionError from the pool's first start (helper-35)
            raise ConfigError("local worker processes cannot start from a daemonic process (a multiprocessing.Pool "
                              "or Celery prefork worker): run it with one worker there (workers=1, --workers 1: its "
                              "work then runs in that process)")
        # The fork server is multiprocessing's, one per process, shared with
        # the caller's own forkserver pools (sqlanon._preload lets those find
        # the caller's functions); it stays up for the next run.
        ctx = _forkserver_context()
        _start_server()
        self.slots = workers
        self.host_slots = workers
        self.memory_per_slot = int(total_memory() * 0.8 / workers)
        self._pool = ProcessPoolExecutor(
            max_workers=workers, mp_context=ctx, initializer=exit_with, initargs=(os.getpid(),)
        )
        self._warming = False

    def warm(self) -> None:
        """Start the worker processes (blocks until the fork server is ready).

        Runs in a thread while the coordinator reads. If the run fails first
        and shuts the pool down, or the pool cannot start, there is nothing
        to report here: the run has its error already, or its first task
        submission reports the broken pool as a one-line error.
        """
        self._warming = True
        try:
            self._pool.submit(os.getpid).result()
        except Exception as exc:  # noqa: BLE001 - nothing to report here (see above)
            # BrokenProcessPool, CancelledError, EOFError, OSError... and
            # whatever a pool torn down under its feet raises (CI once saw an
            # uncaught one print a thread traceback after the run's error).
            log.debug("worker pool warm-up ended early (%s: %s)", type(exc).__name__, exc)
        finally:
            self._warming = False
        replay_server_log()  # the server's, as it loaded the kernel

    def share(self, *objects) -> None:
        """The coordinator writes them to its private staging area (:meth:`sqlanon.io.Staging.share`)."""

    def submit(self, fn, task, *handles) -> Future:
        return self._pool.submit(fn, task, *handles)

    def shutdown(self, abort: bool = False) -> None:
        """Stop the pool; ``abort`` (after a failure or a timeout) kills running tasks."""
        if abort:
            _quiet_after_abort(getattr(self._pool, "_executor_manager_thread", None))
        if abort and self._warming:
            # A run that failed while the fork server was still loading: the
            # pool's shutdown would wait for it (~1 s) to fork the first worker.
            stop_local_server()
        if abort:
            # ProcessPoolExecutor cannot cancel a running task: end its process.
            for proc in list(getattr(self._pool, "_processes", {}).values()):
                proc.kill()
            # Even without waiting, the pool's shutdown takes the lock that a
            # worker's start holds, and a start can hang for good: a SIGTERM
            # or Ctrl-C that cuts an import short in the main thread leaves
            # that module's import lock held (CPython), and the start imports
            # multiprocessing.popen_forkserver. A stopped run must end: give
            # the shutdown a moment, then leave the pool behind.
            closer = threading.Thread(target=self._pool.shutdown, kwargs={"wait": False, "cancel_futures": True},
                                      daemon=True, name="sqlanon-pool-shutdown")
            closer.start()
            closer.join(timeout=3.0)
            if closer.is_alive():
                log.debug("the worker pool did not stop in time (a worker start is stuck); leaving it")
        else:
            self._pool.shutdown(wait=True, cancel_futures=True)
        replay_server_log()  # the workers'


class _Vacancy:
    """How long a cluster has had nothing to run tasks on: past
    :data:`WAIT_FOR_WORKERS` seconds the run fails (every worker lost, the
    tasks waited for ever)."""

    def __init__(self, cluster: str, workers: str) -> None:
        self.cluster, self.workers = cluster, workers
        self.since: float | None = None

    def saw(self, any_worker: bool) -> None:
        if any_worker:
            self.since = None
            return
        now = time.monotonic()
        if self.since is None:
            self.since = now
        elif now - self.since > WAIT_FOR_WORKERS:
            raise InputError(f"{self.cluster} has had no {self.workers} for {WAIT_FOR_WORKERS:g} s; nothing was "
                             "published")


class DaskExecutor:
    """Tasks on a Dask distributed cluster (or a LocalCluster)."""

    name = "dask"
    _shared = None
    """What :meth:`share` sent (a ``distributed.Future``)."""
    _holds_host = False
    """Whether this executor counts among those :func:`_dask_host_back` waits for."""

    def __init__(self, scheduler: str | None, workers: int, retries: int) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError as exc:
            raise ConfigError(f"--executor=dask needs Dask distributed: {install_extra('dask')}") from exc
        _dask_host_taken()
        with contextlib.ExitStack() as on_failure:
            # A LocalCluster that failed to start (a Ctrl-C meanwhile) is still
            # closing, and its INFO lines would reach the CLI's error channel:
            # Dask's logger stays quiet then (the full suite's Ctrl-C test).
            on_failure.callback(_dask_host_back, level=scheduler is not None)
            self._start(Client, LocalCluster, scheduler, workers, retries)
            on_failure.pop_all()
        self._holds_host = True

    def _start(self, Client, LocalCluster, scheduler: str | None, workers: int, retries: int) -> None:  # noqa: N803
        self.remote = scheduler is not None
        if scheduler is None:
            try:  # TLS with a key made for this cluster: on a plain port any local user could run code in it
                from distributed.security import Security

                security = Security.temporary()
            except ImportError as exc:
                raise ConfigError("--executor=dask secures its LocalCluster with TLS, which needs cryptography: "
                                  + install_extra("dask")) from exc
            # The scheduler serves HTTP even without a dashboard, on 8787 unless
            # told: a port in use (a user's own cluster) printed a warning. Its
            # pages (logs, call stacks, task names) and the workers' would be
            # open to every local user, unlike the TLS port: only /health is served.
            import dask.config

            with dask.config.set({f"distributed.{role}.http.routes": ["distributed.http.health"]
                                  for role in ("scheduler", "worker")}):
                self._cluster = _start_local_cluster(
                    LocalCluster, security=security,
                    n_workers=workers, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0",
                    # With bokeh installed the scheduler adds its dashboard whatever the routes say.
                    scheduler_kwargs={"dashboard": False},
                    memory_limit=int(total_memory() * 0.8 / workers),
                    preload=[*_dask_preloads(), __name__],  # dask_setup below, after the user's own
                    env={_DASK_QUIET_ENV: "" if log.isEnabledFor(logging.INFO) else "1"},
                )
            self._client = Client(self._cluster)
            log.info("Dask LocalCluster of %d workers", workers)
        else:
            self._cluster = None
            self._client = _connect(Client, scheduler)
            try:  # a scheduler without workers took every task and never ran one
                self._client.wait_for_workers(1, timeout=WAIT_FOR_WORKERS)
            except (TimeoutError, OSError) as exc:
                self._client.close()
                raise InputError(f"the Dask scheduler at {scheduler!r} has no workers (waited "
                                 f"{WAIT_FOR_WORKERS:g} s); start some, then rerun") from exc
            _refuse_workers_without_sqlanon(self._client, scheduler)
        # Every worker's threads (scheduler_info listed five workers in distributed 2025.4-2026.6:
        # helper-76); the memory per thread of those it lists.
        threads = list(self._client.nthreads().values()) or [1]
        info = self._client.scheduler_info().get("workers", {}).values()
        self.slots = max(1, sum(threads))
        self.host_slots = max(threads)
        self.memory_per_slot = int(min([(w.get("memory_limit") or total_memory()) / max(1, w.get("nthreads", 1))
                                        for w in info] or [total_memory()]))
        self._retries = retries
        self._vacancy = _Vacancy("the Dask cluster", "workers")
        # A concurrent.futures view of the client: Dask schedules and retries.
        self._executor = self._client.get_executor(retries=retries, pure=False)

    def warm(self) -> None:
        """Dask workers are already running."""

    def check_health(self) -> set[str]:
        """Fail the run when the cluster has had no worker for
        :data:`WAIT_FOR_WORKERS` seconds (every worker killed: the tasks
        waited for ever), or the scheduler cannot be reached. Returns the
        workers it has now (:meth:`workers_now`), which the probe asks too."""
        workers = self.workers_now()
        self._vacancy.saw(bool(workers))
        return workers

    def submit_to_each(self, fn, arg) -> dict[str, Future]:
        """``fn(arg)`` as a task on every worker the cluster has now, each
        held to its worker: worker address → its future; empty while the
        cluster has no worker."""
        # Before the tasks queued there (a shared cluster's), once: a probe that fails fails alike again.
        return {w: self._executor.submit(fn, arg, workers=[w], allow_other_workers=False, priority=1, retries=0)
                for w in sorted(self.workers_now())}

    def workers_now(self) -> set[str]:
        """The addresses of every worker the cluster has now. ``Client.nthreads``,
        not ``scheduler_info()``: from distributed 2025.4 to 2026.6 that listed
        the first five workers only (dask/distributed#9045, #9308)."""
        try:
            return set(self._client.nthreads())
        except (OSError, TimeoutError) as exc:
            raise InputError(f"the connection to the Dask scheduler was lost ({exc}); nothing was published") from exc

    def describe_error(self, exc: BaseException) -> str:
        """A failed task's reason; a cancelled one's: the scheduler went away
        (the message was 'CancelledError', or nothing at all)."""
        from .io import first_line

        if type(exc).__name__ == "CancelledError":
            if self._client.status != "running":
                return f"the connection to the Dask scheduler was lost (client {self._client.status})"
            return "Dask cancelled the task (its scheduler or worker went away)"
        if self._shared is not None and self._shared.status == "error":  # every fragment's, not this one's (helper-74)
            return f"the run's spec and statistics, sent to the cluster, did not load there: {first_line(exc)}"
        return first_line(exc)

    def share(self, *objects):
        """Send ``objects`` (the run's spec and statistics) to the cluster
        once for every task, as a task's result that the tasks take as an
        argument: with each task, a million-value prefix domain went through
        the scheduler once per fragment (25 MiB each, and Dask warned of a
        large graph on stderr; BENCHMARKS section 3). A task rather than a
        scatter: Dask makes its result again should every worker holding it
        be lost, where scattered data would be gone. Pickled here: Dask
        leaves bytes as they are, and would walk the statistics' containers
        looking for futures."""
        import dask

        with dask.config.set({"distributed.admin.large-graph-warning-threshold": "1 TiB"}):  # sent once, on purpose
            self._shared = self._client.submit(pickle.loads, pickle.dumps(objects, protocol=pickle.HIGHEST_PROTOCOL),
                                               pure=False, retries=self._retries)
        return self._shared

    def submit(self, fn, task, *handles) -> Future:
        return self._executor.submit(fn, task, *handles)  # Dask hands a future's result to fn

    def shutdown(self, abort: bool = False) -> None:
        if abort:
            TEARING_DOWN.set()
        try:
            # A client that lost its scheduler for good has closed itself: cancelling its
            # futures raised ClosedClientError, an internal error in place of the run's own
            # ('the connection to the Dask scheduler was lost'; helper-74).
            try:
                self._executor.shutdown(wait=False)
            except Exception as exc:  # noqa: BLE001 - whatever a closed client raises
                if not abort:
                    raise
                log.debug("stopping the Dask executor: %s", exc)
            self._client.close()  # cancels what is still running
            if self._cluster is not None:
                if abort:
                    # A worker in the middle of a task ends only when the task
                    # does, and the cluster's close waits 4 s before it kills it.
                    _kill_workers([self._cluster])
                # Its nannies warn of a worker that took over 4 s to stop (a loaded
                # machine), on the CLI's stderr after a run that succeeded (helper-196).
                nanny = logging.getLogger("distributed.nanny")
                was = nanny.level
                if not log.isEnabledFor(logging.INFO):
                    nanny.setLevel(logging.ERROR)
                try:
                    self._cluster.close()
                finally:
                    nanny.setLevel(was)
        finally:
            TEARING_DOWN.clear()
            if self._holds_host:
                self._holds_host = False
                _dask_host_back()


_dask_lock = threading.Lock()
_dask_users = 0
_dask_host: tuple[int, dict[str, str | None]] | None = None
"""The 'distributed' logger's level and the nanny variables (:func:`_nanny_variables`)
as they were before the first of the Dask executors alive in this process."""


def _dask_host_taken() -> None:
    """Note the host's state before this process's first live Dask executor,
    and quiet Dask's INFO lines (on the CLI's stderr, its error channel;
    warnings stay; -v shows everything). The last executor to go puts it
    back (:func:`_dask_host_back`): a host's level for Dask's logger stayed
    WARNING for good, and the nannies' variables (PYTHONHASHSEED=6640,
    OMP_NUM_THREADS=1, …) stayed in its environment, inherited by every
    process it started later (helper-104); taken per executor, two runs at
    once left them (helper-106)."""
    global _dask_users, _dask_host
    with _dask_lock:
        if _dask_users == 0:
            _dask_host = (logging.getLogger("distributed").level, {n: os.environ.get(n) for n in _nanny_variables()})
        _dask_users += 1
        if not log.isEnabledFor(logging.INFO):
            logging.getLogger("distributed").setLevel(logging.WARNING)


def _dask_host_back(level: bool = True) -> None:
    """One Dask executor fewer; the last puts back what :func:`_dask_host_taken`
    noted (``level``: the logger's level too)."""
    global _dask_users, _dask_host
    with _dask_lock:
        _dask_users -= 1
        if _dask_users or _dask_host is None:
            return
        (was, environ), _dask_host = _dask_host, None
        if level:
            logging.getLogger("distributed").setLevel(was)
        for name, value in environ.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _nanny_variables() -> set[str]:
    """The variables a Dask nanny sets in its own process's environment
    before it starts a worker (distributed's nanny.py): its configured ones,
    a fixed PYTHONHASHSEED, and its parent's PID."""
    import dask

    names = {"PYTHONHASHSEED", "__DASK_PARENT_PID"}
    for key in ("distributed.nanny.pre-spawn-environ", "distributed.nanny.environ"):
        names.update(map(str, dask.config.get(key, default=None) or {}))
    return names


def _refuse_workers_without_sqlanon(client, scheduler: str) -> None:
    """A worker that cannot import sqlanon fails to read its first task and
    closes itself (Dask's handling of a task it cannot deserialize): the run
    then said only that the cluster had had no workers for a minute. Asked
    first (``importlib.util.find_spec``, a function every worker has), the
    run names the workers and what they lack."""
    try:
        found = client.run(importlib.util.find_spec, "sqlanon", on_error="return")
    except (OSError, TimeoutError) as exc:
        client.close()
        raise InputError(f"the connection to the Dask scheduler at {scheduler!r} was lost ({exc})") from exc
    missing = sorted(address for address, spec in found.items() if spec is None or isinstance(spec, BaseException))
    if missing:
        client.close()
        many = len(missing) > 1
        raise InputError(f"the Dask worker{'s' if many else ''} {', '.join(missing)} of {scheduler!r} "
                         f"cannot import sqlanon: install it (the same version as here) where "
                         f"{'they run' if many else 'it runs'}, then rerun")
    # Another version's workers ran the fragments without a word (helper-56): the
    # installed distribution's version, asked with a function every worker has.
    try:
        ours = importlib.metadata.version("sqlanon")
        theirs = client.run(importlib.metadata.version, "sqlanon", on_error="return")
    except importlib.metadata.PackageNotFoundError:
        return  # run from a source tree: nothing to compare with
    except (OSError, TimeoutError) as exc:
        client.close()
        raise InputError(f"the connection to the Dask scheduler at {scheduler!r} was lost ({exc})") from exc
    other = sorted(f"{address} ({version})" for address, version in theirs.items()
                   if isinstance(version, str) and version != ours)
    if other:
        client.close()
        many = len(other) > 1
        raise InputError(f"the Dask worker{'s' if many else ''} {', '.join(other)} of {scheduler!r} "
                         f"run{'' if many else 's'} another version of sqlanon than this host's {ours}: install "
                         "the same version everywhere, then rerun")


def _connect(client, scheduler: str):
    """``client(scheduler)`` within :data:`CONNECT_TIMEOUT` in all, or a
    ConfigError (not an address: exit 2) or InputError (unreachable, a retry
    may work: exit 1) naming the scheduler.

    Dask's own timeout does not cover the handshake, which an endpoint that
    accepts the connection but never answers (the dashboard's port, mistyped
    for the scheduler's) left waiting for ever: the attempt runs in a thread,
    left behind (a daemon) when it does not end in time.

    A Client whose construction failed stays in reference cycles (through
    its error's traceback), finalized by whatever garbage collection comes
    next; its close stops its IO loop under Dask's class-wide LoopRunner lock,
    so a collection inside a later LocalCluster's ``LoopRunner.start`` (which
    holds that lock) deadlocked. So the error is dropped where it happened,
    its message kept, and the cycles collected there and then."""
    refused = _refused(scheduler)
    if refused:
        raise InputError(f"cannot reach the Dask scheduler at {scheduler!r}: {refused}")
    outcome: dict = {}

    def connect() -> None:
        where = f"cannot reach the Dask scheduler at {scheduler!r}"
        try:
            outcome["client"] = client(scheduler, timeout=CONNECT_TIMEOUT)
        except (ValueError, TypeError) as exc:  # not an address at all: the job is wrong
            outcome["error"] = ConfigError(f"{where}: {exc}")
        except (OSError, TimeoutError) as exc:  # the cluster is down
            outcome["error"] = InputError(f"{where}: {exc}")
        except Exception as exc:  # noqa: BLE001 - an answer Dask could not read (a MemoryError for a frame size)
            outcome["error"] = InputError(f"{where}: what answers there is not a Dask scheduler "
                                          f"({type(exc).__name__})")
        if "error" in outcome:
            gc.collect()

    thread = threading.Thread(target=connect, name="sqlanon-dask-connect", daemon=True)
    thread.start()
    deadline = time.monotonic() + CONNECT_TIMEOUT + 5
    while thread.is_alive() and time.monotonic() < deadline:
        thread.join(0.05)
    if thread.is_alive():
        raise InputError(f"cannot reach the Dask scheduler at {scheduler!r}: no answer in {CONNECT_TIMEOUT:g} s "
                         "(the scheduler's port, 8786 unless set, not its dashboard's?)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["client"]


def _refused(scheduler: str) -> str | None:
    """Why a TCP scheduler address (``tcp://host:port``) cannot be reached at
    once, a refused connection or a host name that does not resolve, else
    None: Dask's client retried both until its timeout, 30-40 s, and said
    'Timed out trying to connect' for a name that does not exist (helper-56).
    A port that does not answer is left to the client's own timeout."""
    scheme, sep, address = scheduler.rpartition("://")
    host, _, port = (address if sep else scheduler).rpartition(":")
    if scheme not in ("", "tcp") or not host or not port.isdigit():
        return None
    try:
        # Short: a port that does not answer waits for the client's own timeout after it.
        socket.create_connection((host.strip("[]"), int(port)), timeout=min(2.0, CONNECT_TIMEOUT / 6)).close()
    except socket.gaierror as exc:
        return f"the host name does not resolve ({exc.strerror})"
    except ConnectionRefusedError:
        return "connection refused (no scheduler listens on that port)"
    except (OSError, UnicodeError, ValueError):
        return None  # a timeout, an odd address: the client says what it makes of it
    return None


def _start_local_cluster(local_cluster, **kwargs):
    """``local_cluster(**kwargs)``, started so that a Ctrl-C meanwhile ends
    the run with its one line.

    A Ctrl-C at a terminal reaches the worker processes too, and one still
    starting printed its own traceback (or 'Fatal Python error') before
    :func:`dask_setup` could make it ignore SIGINT; and the cluster left
    half-started made Dask's exit hook fail (~30 lines of 'AssertionError:
    Status.init'). So the cluster starts in a thread that blocks SIGINT:
    Dask's threads, which it creates, and the processes they launch inherit
    the mask, while this thread stays free to take the Ctrl-C. On one, the
    processes already launched are stopped and Dask's exit hook is told to
    leave the cluster alone (the thread goes on, its processes are stopped
    again on the way out). SIGHUP likewise (the coordinator handles a
    hangup and stops them)."""
    from distributed.deploy.spec import SpecCluster

    # Starting multiprocessing's resource tracker unblocks SIGINT in the
    # thread that starts it: start it here, before.
    _start_tracker()
    known, before = set(SpecCluster._instances), _children()
    outcome: dict = {}

    def start() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGHUP})
        try:
            outcome["cluster"] = local_cluster(**kwargs)
        except Exception as exc:  # noqa: BLE001 - raised again in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=start, name="sqlanon-dask-start", daemon=True)
    with contextlib.ExitStack() as on_failure:
        on_failure.callback(_abandon_new_clusters, known, before)
        thread.start()
        while thread.is_alive():
            thread.join(0.05)
        on_failure.pop_all()
    if "error" in outcome:
        if isinstance(outcome["error"], RuntimeError):  # 'Nanny failed to start.': a worker died starting
            main = sys.modules.get("__main__")
            script = sys.modules.get("sqlanon._script")  # the console script's main module holds its entry
            ours = script is not None and getattr(main, "entry", None) is script.entry
            why = ("killed, out of memory, or this script run again: Dask's worker processes import it, so "
                   "call sqlanon under `if __name__ == \"__main__\"`"
                   if getattr(main, "__spec__", None) is None and getattr(main, "__file__", None) and not ours else
                   "killed, or out of memory?")  # a script run as a file is imported again (helper-12), not ours
            raise InputError(f"the local Dask cluster did not start ({outcome['error']}): a worker process died "
                             f"while starting ({why})") from outcome["error"]
        raise outcome["error"]
    return outcome["cluster"]


def _abandon_new_clusters(known: set, before: set[int]) -> None:
    """After a LocalCluster's start was cut short: stop the processes it has
    launched (now and at exit), and take it off the list of Dask's exit
    hook, which cannot close a cluster whose workers never ran."""
    import atexit

    from distributed.deploy.spec import SpecCluster

    abandoned = set(SpecCluster._instances) - known
    for cluster in abandoned:
        SpecCluster._instances.discard(cluster)
    _stop_new_children(before)
    atexit.register(_kill_workers, abandoned)


def _kill_workers(clusters) -> None:
    """Kill the worker processes of ``clusters`` (LocalClusters) now, their
    nannies told first not to start new ones in their place."""
    for cluster in clusters:
        for nanny in list(getattr(cluster, "workers", {}).values()):
            pid = getattr(nanny, "pid", None)
            if pid:
                nanny.close_gracefully("sqlanon run aborted")
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)


def _dask_preloads() -> list[str]:
    """The worker preloads the user's Dask configuration names (a preload
    passed to the cluster replaces them)."""
    import dask

    configured = dask.config.get("distributed.worker.preload", default=[]) or []
    return [configured] if isinstance(configured, str) else list(configured)


_DASK_QUIET_ENV = "SQLANON_DASK_QUIET"
"""Set to 1 in the environment of a LocalCluster's workers when the run logs
less than INFO (no ``-v``): :func:`dask_setup` then silences their Dask logs."""


def dask_setup(worker) -> None:
    """Run by every worker process of sqlanon's own LocalCluster as it starts
    (Dask's preload hook).

    Those processes share the terminal's process group, so a Ctrl-C reached
    each of them too, and each printed a KeyboardInterrupt traceback (~30
    lines) under the CLI's one line: they ignore SIGINT, and the
    coordinator, which handles it, stops them. Without ``-v`` their Dask
    logs are off as well (a task cancelled by the stop logged a warning):
    the coordinator reports what went wrong. A worker that Dask restarts
    runs this again."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if os.environ.get(_DASK_QUIET_ENV) == "1":
        logging.getLogger("distributed").setLevel(logging.CRITICAL)


def _spark_error(exc: BaseException) -> str:
    """The line that says what went wrong in a Spark/py4j error: they start
    with a generic line and carry a Java or Python stack trace (a task's
    Python error is the traceback's last line)."""
    if isinstance(exc, ConnectionError) or type(exc).__name__ == "Py4JNetworkError":  # its JVM is gone
        return f"the connection to Spark's JVM was lost ({exc})"
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if any(ln.startswith("Traceback (most recent call last)") for ln in lines):
        return _cut(lines[-1])
    for ln in lines:
        if not ln.startswith(("An error occurred while calling", "at ", "py4j.", "Traceback")):
            return _cut(ln.removeprefix(": "))
    return _cut(lines[0]) if lines else type(exc).__name__


_TASKS_OWN_ERROR = re.compile(r"^sqlanon\.errors\.(\w+): (.+)$")


def _tasks_own_error(exc: BaseException) -> errors.SqlanonError | None:
    """A Spark task's own sqlanon error (the exception's line of the Python
    traceback Spark reports: 'sqlanon.errors.HierarchyError: …') as that
    error, or None. Dask hands the task's exception back as it was raised;
    Spark only its text, and the run reported 'fragment 0 failed on the
    spark executor: sqlanon.errors.InputError: …', and a worker's usage
    error (a value no hierarchy leaf names, exit 2 elsewhere) as a runtime
    one, exit 1, which a scheduler retries (helper-156)."""
    lines = str(exc).splitlines()
    frames = [i for i, ln in enumerate(lines) if ln.startswith('  File "')]
    # The exception's own line: the first unindented one after the traceback's last frame
    # (the last line of all may be a line of another error's message, helper-157).
    header = next((ln for ln in lines[frames[-1] + 1:] if ln and not ln[0].isspace()), "") if frames else ""
    found = _TASKS_OWN_ERROR.match(header.rstrip())
    kind = getattr(errors, found.group(1), None) if found else None
    if not (isinstance(kind, type) and issubclass(kind, errors.SqlanonError)):
        return None
    return kind(found.group(2))


def _cut(line: str, most: int = 300) -> str:
    """``line`` in at most about ``most`` characters: its start and its end,
    cut between words ('…' says where). The end is kept as it often says
    why: 'Unable to connect to Postgres at "<a long connection string>":
    <the reason>' lost its reason (helper-56)."""
    if len(line) <= most:
        return line
    half = most // 2
    head, tail = line[:half], line[-half:]
    # Between words where a word break is near (not a word of 150 characters cut to nothing).
    head = head.rsplit(" ", 1)[0] if " " in head[half // 2:] else head
    tail = tail.split(" ", 1)[1] if " " in tail[:half // 2] else tail
    return f"{head} … {tail}"


_SPARK_LOG4J = """\
status = error
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
"""


def _quiet_local_spark(builder) -> tuple[object, str]:
    """A local Spark printed ~8 lines on stderr (the CLI's error channel) per
    run: its default log4j profile, its WARNs about the host's address and
    native Hadoop. Its own errors stay; -v leaves Spark as configured. A
    user's cluster (a remote master) is never touched. Returns the builder
    and the log4j2 file (this run's own, private: removed at shutdown)."""
    fd, path = tempfile.mkstemp(prefix="sqlanon-spark-log4j2-", suffix=".properties")
    with os.fdopen(fd, "w") as f:
        f.write(_SPARK_LOG4J)
    return builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{path}"), path


@contextlib.contextmanager
def _jvm_stderr_quiet():
    """Launch the JVM with its stderr on /dev/null: it printed Java's
    'Using incubator modules' warning and Spark's 'Setting default log
    level' banner on the CLI's stderr, the error channel, in every quiet
    local run. (What goes wrong reaches the run as a Python exception;
    ``-v`` leaves stderr alone.) fd 2 is this process's again after."""
    sys.stderr.flush()
    saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def _children(root: int | None = None) -> set[int]:
    """The process ids of the descendants of ``root`` (this process by default; Linux /proc: empty elsewhere)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = set(), {os.getpid() if root is None else root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _stop_new_children(before: set[int]) -> None:
    """Terminate the descendants started since ``before`` (the JVM pyspark
    launched, a LocalCluster's workers)."""
    for pid in _children() - before:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass


_MASTER = re.compile(r"(local(\[([1-9]\d*|\*)(\s*,\s*\d+)?\])?|local-cluster\[\s*\d+\s*(,\s*\d+\s*){2}\]"
                     r"|yarn|(spark|k8s|mesos)://\S+)")
"""Spark's master URLs; 'local[x]' and 'local[0]' started a JVM to fail with exit 1 (helper-12)."""


def planned_slots(executor: str, workers: int, spark_master: str | None) -> int:
    """The task slots a run on this host would have (``--explain``'s plan
    starts no executor): one in process, a local Spark master's own
    (:func:`local_spark_slots`), else ``--workers`` (the local pool's
    processes, a LocalCluster's one-thread workers). A remote cluster's are
    its own, asked of it."""
    if in_process(executor, workers):
        return 1
    return local_spark_slots(spark_master, workers) if executor == "spark" else workers


def local_spark_slots(master: str | None, workers: int) -> int:
    """The task slots of a local Spark master (``local``: 1, ``local[N]``: N,
    ``local[*]``: the CPUs), as its run would have them; ``workers`` when
    none is named (the run's own ``local[workers]``) or it is not one."""
    master = master or submitted_master()
    m = re.fullmatch(r"local(?:\[\s*([1-9]\d*|\*)\s*(?:,\s*\d+\s*)?\])?", master or "")
    if master is None or m is None:
        return workers
    return 1 if m.group(1) is None else (default_workers() if m.group(1) == "*" else int(m.group(1)))


def _check_standalone_master(master: str) -> None:
    """A standalone master (``spark://host:port``, several for HA) that none
    of whose addresses answers: Spark's driver tried for ~80 s, printed
    ~130 lines of Java stack traces and then failed on 'a stopped
    SparkContext'. One TCP connection per address tells at once."""
    if not master.startswith("spark://"):
        return
    why = ""
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        if not port.isdigit():
            return  # not host:port: Spark will say what it makes of it
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT / 6) as conn:
                first = _speaks_first(conn)
                http = not first and int(port) != 7077 and _answers_http(conn)
        except UnicodeError:
            return  # a host name IDNA cannot encode ('a..b'): Spark will say what it makes of it
        except OSError as exc:
            why = why or (exc.strerror or type(exc).__name__)
            continue
        # The job names the wrong port: exit 2.
        where = "the port its driver connects to (the spark://host:port its web UI shows, 7077 by default)"
        if first:
            raise ConfigError(f"the server at {'spark://' + address!r} speaks first, which a Spark master never "
                              f"does: it is another service's port (a Dask scheduler's?), not {where}")
        if http:
            raise ConfigError(f"{'spark://' + address!r} answers HTTP: it is a Spark master's web UI or REST port, "
                              f"not {where}")
        return
    raise InputError(f"cannot reach the Spark master {master!r}: {why}")


def _speaks_first(conn: socket.socket, wait: float = 0.5) -> bool:
    """Whether the server at ``conn`` sends something before it is asked: a
    Spark master's RPC port waits for its driver, where a Dask scheduler
    (its handshake), SSH or SMTP speak at once; given for a master, the
    driver tried for ~80 s and printed Java stack traces (helper-56)."""
    try:  # not select(): a process with more than 1023 files open raised ValueError
        conn.settimeout(wait)
        return bool(conn.recv(1))  # b'': it closed the connection, which says nothing
    except OSError:  # socket.timeout among them: it waits to be asked
        return False


def _answers_http(conn: socket.socket) -> bool:
    """Whether the server at ``conn`` answers an HTTP request: a Spark
    master's web UI (8080) or REST port (6066) given for its RPC port, on
    which the driver tried for ~80 s and printed ~170 lines of Java stack
    traces (helper-28). Not asked of port 7077: a master's RPC port logs a
    warning for the request it cannot read."""
    try:
        conn.settimeout(2)
        conn.sendall(b"HEAD / HTTP/1.0\r\n\r\n")
        return conn.recv(5) == b"HTTP/"
    except OSError:
        return False


def remote_master(master: str) -> bool:
    """Whether a Spark master runs executors outside this process's working
    directory: everything but local[...] (local-cluster[...] runs them in
    directories of their own)."""
    return not (master == "local" or master.startswith("local["))


@contextlib.contextmanager
def _driver_calls() -> Iterator[None]:
    """Calls on the Spark driver's JVM: one that has gone fails the run in one line."""
    try:
        yield
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - py4j's errors of a JVM that went away, of every kind
        raise InputError(f"the Spark driver's JVM went away ({_spark_error(exc)}); nothing was published") from None


class SparkExecutor:
    """Tasks as one-element RDDs on a Spark cluster (or ``local[N]``)."""

    name = "spark"
    _log_config: str | None = None
    """The log4j2 file of a quiet local run (see :func:`_quiet_local_spark`)."""

    def __init__(self, master: str | None, workers: int, retries: int) -> None:
        try:
            from pyspark.sql import SparkSession
        except ImportError as exc:
            raise ConfigError(f"--executor=spark needs PySpark: {install_extra('spark')}") from exc
        active = SparkSession.getActiveSession()
        if active is None:
            from pyspark import SparkContext

            if SparkContext._active_spark_context is not None:
                # The caller's, started in another thread (pyspark's active
                # session is per thread): taken for one of ours, it was stopped.
                active = SparkSession.builder.getOrCreate()
        # A caller's session (a notebook's, say) is used as it is and left
        # running; only a session started here is configured and stopped.
        self._owned = active is None
        if active is not None:
            self._spark = active
            log.info("using the active Spark session (master %s)", active.sparkContext.master)
        else:
            master = master or submitted_master() or f"local[{workers},{retries + 1}]"
            if not _MASTER.fullmatch(master):  # the job's fault (exit 2), found before a JVM starts
                raise ConfigError(f"cannot start Spark with master {master!r}: not a Spark master URL (local[N], "
                                  "local-cluster[…], spark://host:port, yarn, k8s://…)")
            _check_standalone_master(master)
            ours = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
            builder = (
                SparkSession.builder.master(master)
                .appName("sqlanon")
                .config("spark.task.maxFailures", str(retries + 1))
                .config("spark.ui.enabled", "false")
                .config("spark.ui.showConsoleProgress", "false")
                .config("spark.python.worker.reuse", "true")
            )
            if not remote_master(master):
                # Its Python workers run `python -m pyspark.daemon` where the run started, whose directory
                # -m puts first on their path: a pyarrow.py there was imported by every worker (helper-25).
                builder = builder.config("spark.executorEnv.PYTHONSAFEPATH", "1")
            quiet = not remote_master(master) and not log.isEnabledFor(logging.INFO)
            if quiet:
                builder, self._log_config = _quiet_local_spark(builder)
            # The JVM is launched with this environment: on a local master, no
            # 'your hostname resolves to a loopback address', and, verbose too,
            # no driver port open on the host's network address (-v bound it
            # there, unauthenticated: helper-168); the caller's environment is
            # left as it was.
            local_ip = os.environ.get("SPARK_LOCAL_IP")
            # A local master's Python workers ran the first `python3` on PATH
            # (pyspark's default), not this interpreter: a cron job calling a
            # venv's sqlanon had them import another sqlanon, or none (helper-101).
            python = None if remote_master(master) or not sys.executable else os.environ.get("PYSPARK_PYTHON", "")
            try:
                if not remote_master(master) and local_ip is None:
                    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
                if python == "":
                    os.environ["PYSPARK_PYTHON"] = sys.executable
                with warnings.catch_warnings(), contextlib.ExitStack() as on_failure:
                    warnings.simplefilter("ignore", FutureWarning)  # pyspark's 'pandas >= 3.0.0', every run
                    # A start cut short (Ctrl-C, SIGTERM, an error) left the
                    # JVM it had launched running for good, orphaned.
                    on_failure.callback(_stop_new_children, _children())
                    if self._log_config is not None:
                        on_failure.callback(os.unlink, self._log_config)
                    with _jvm_stderr_quiet() if quiet else contextlib.nullcontext():
                        self._spark = builder.getOrCreate()
                    on_failure.pop_all()
            except Exception as exc:  # noqa: BLE001 - py4j/Java errors of every kind
                # Exit 1: the job is right (its master has a master's form), the cluster or Java is not.
                raise InputError(f"cannot start Spark with master {master!r}: {_spark_error(exc)}") from None
            finally:
                if local_ip is None:
                    os.environ.pop("SPARK_LOCAL_IP", None)
                if python == "":
                    os.environ.pop("PYSPARK_PYTHON", None)
                if ours is not None and signal.getsignal(signal.SIGINT) is not ours:
                    # pyspark installs its own Ctrl-C handler; the run's own
                    # (sqlanon.interrupts: never publish after a Ctrl-C, never
                    # stop half-way through publishing) must stay in charge.
                    signal.signal(signal.SIGINT, ours)
            self._spark.sparkContext.setLogLevel("ERROR")
        sc = self._spark.sparkContext
        self.remote = remote_master(sc.master)
        self.slots = max(1, sc.defaultParallelism)
        log.info("Spark master %s: %d task slot(s)", sc.master, self.slots)
        self.host_slots = self.slots if not self.remote else int(sc.getConf().get("spark.executor.cores", "1"))
        self.memory_per_slot = int(total_memory() * 0.8 / self.slots) if not self.remote else 2**30
        # Spark runs jobs submitted from several driver threads concurrently:
        # one thread per slot, one single-task job per fragment.
        self._threads = ThreadPoolExecutor(max_workers=self.slots)
        self._broadcasts: list = []
        self._vacancy = _Vacancy("the Spark cluster", "executors")
        if self._owned and getattr(sc, "_accumulatorServer", None) is not None:
            # A JVM that dies mid-run ends its connection to pyspark's
            # accumulator server, which printed an EOFError traceback above
            # the run's one line (helper-28); the run says what happened.
            sc._accumulatorServer.handle_error = lambda request, address: None

    def warm(self) -> None:
        """Spark's Python workers start with the first job."""

    def check_health(self) -> None:
        """Fail the run when its Spark driver's JVM has gone, or a cluster
        has had no executor for :data:`WAIT_FOR_WORKERS` seconds: with its
        only worker lost, a standalone run waited for ever (Spark waits for
        resources; helper-28). A local master's executor is the driver."""
        with _driver_calls():
            executors = self._spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # less the driver
        self._vacancy.saw(executors > 0 or not self.remote)

    describe_error = staticmethod(_spark_error)

    def share(self, *objects):
        """Send ``objects`` (the run's spec and statistics) to the cluster
        once for every task, as a broadcast variable (each executor fetches it
        once, its Python workers load it once): carried by each task, they
        were pickled with every fragment's closure (see :meth:`DaskExecutor.share`)."""
        with _driver_calls():
            try:
                shared = self._spark.sparkContext.broadcast(objects)
            except pickle.PicklingError as exc:  # pyspark's own: it writes them to the driver's temp directory
                # first ('Could not serialize broadcast: OSError: [Errno 28] …'; helper-76)
                raise InputError(f"the run's spec and statistics could not be sent to the Spark cluster ({exc}); "
                                 "nothing was published") from None
        self._broadcasts.append(shared)
        return shared

    def submit(self, fn, task, *handles) -> Future:
        sc = self._spark.sparkContext

        def call(one):  # on the executor: the broadcasts' values
            return fn(one, *(b.value for b in handles))

        def run():
            try:
                return sc.parallelize([task], 1).map(call).collect()[0]
            except Exception as exc:  # noqa: BLE001 - re-raised: as the task's own error where it was one
                own = _tasks_own_error(exc)
                if own is None:
                    raise
                raise own from exc

        return self._threads.submit(run)

    def shutdown(self, abort: bool = False) -> None:
        # A driver's JVM that died mid-run fails every call to it: the
        # clean-up's error ('Connection refused') replaced the run's own, as
        # an internal error (helper-28). What can be stopped is stopped.
        if abort:
            with contextlib.suppress(Exception):
                self._spark.sparkContext.cancelAllJobs()
        self._threads.shutdown(wait=not abort, cancel_futures=True)
        for shared in self._broadcasts:  # a caller's session goes on: their copies on its executors go
            with contextlib.suppress(Exception):  # py4j's, of a JVM that went away
                shared.destroy()
        self._broadcasts.clear()
        if self._owned:
            from pyspark import SparkFiles

            # pyspark put the session's file directory first on sys.path, and
            # leaves it there, gone, when the session stops (one per call).
            files = None
            with contextlib.suppress(Exception):
                files = SparkFiles.getRootDirectory()
            try:
                self._spark.stop()
            except Exception as exc:  # noqa: BLE001 - py4j's, of a JVM that went away
                if not abort:
                    raise
                log.debug("stopping Spark: %s", _spark_error(exc))
            sys.path[:] = [p for p in sys.path if p != files]
        if self._log_config is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._log_config)


def make_executor(
    name: str, workers: int, *, scheduler: str | None = None, spark_master: str | None = None, retries: int = 2
):
    """The executor called ``name`` (one of :data:`EXECUTORS`)."""
    _main_spec()  # Dask's nannies start as multiprocessing's processes too
    if name == "local":
        return LocalExecutor(workers)
    if name == "dask":
        return DaskExecutor(scheduler, workers, retries)
    if name == "spark":
        return SparkExecutor(spark_master, workers, retries)
    raise ConfigError(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")
