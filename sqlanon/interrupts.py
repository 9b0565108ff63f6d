"""Ctrl-C during a run: never swallowed, and never half-way through publishing.

DuckDB turns a SIGINT that arrives during a query into ``RuntimeError("Query
interrupted")``, consuming the KeyboardInterrupt; code that handles database
errors could then report a misleading error, or carry on and publish. While
:func:`watching` is active (a run, in the main thread), a SIGINT also sets a
flag: :func:`check` raises KeyboardInterrupt if it is set (the coordinator
checks before it publishes), and a failure that follows it comes out as the
KeyboardInterrupt it is. Inside :func:`deferred` (publishing: a swap and the
metrics, short) a SIGINT is only recorded, so the output and its metrics are
either both the old ones or both the new ones.

A SIGTERM (how ``timeout``, systemd and Kubernetes stop a job), and a SIGHUP
(the terminal or SSH session the run was started from went away), are
handled the same way while no one else handles them: the run stops, cleans up and reports
it, instead of dying with its staging files left behind; in a library call
the process then ends by the signal, as it would have without sqlanon.
Another, 2 s or more after the first, ends the process at once (a run
stuck where the first is not seen).

A signal the host handles itself (a task runner's timeout: SIGALRM and a
handler that raises, as Airflow's ``execution_timeout``, ``timeout-decorator``
and pytest-timeout do) has its handler called when it arrives, as always, but
an exception the handler raises is kept and raised from sqlanon's own code
(:func:`check`, the run's waits, the end of :func:`watching`), not at the
bytecode the signal found: raised inside DuckDB it came out as
``RuntimeError("Query interrupted")``, or was swallowed with DuckDB's lazy
import of pandas it cut short (the run went on and published), and such an
import could leave CPython's import lock held, on which the worker pool's
start then waited for ever (helper-60). The run's DuckDB queries are
interrupted so that it stops soon.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import secrets
import signal
import socket
import sys
import threading
import time
import weakref
from collections.abc import Iterator

__all__ = ["watching", "deferred", "check", "received", "received_signal"]

log = logging.getLogger("sqlanon")

_received = threading.Event()
_signals: set[int] = set()
"""The signals received since the outermost :func:`watching` began."""
_depth = 0
_deferring = 0
_published = False
"""Whether the outermost :func:`watching`'s run has published (:func:`published`)."""
_hold_to_exit = False
"""Whether this process ends once its command is done (:func:`hold_to_exit`)."""
_late: list[int] = []
"""Stop signals that came after a command's run that published, once its :func:`watching` had ended."""
_late_first: list[float] = []
"""When the first of :data:`_late` came (monotonic seconds)."""
_host_errors: list[BaseException] = []
"""What a host's signal handler raised during the outermost :func:`watching`,
not raised yet (the first is raised)."""
_host_raised: list[BaseException] = []
"""The one :func:`check` raised: the block's exit raises it again if
something turned it into another exception."""
_connections: weakref.WeakSet = weakref.WeakSet()
"""The DuckDB connections the watched run opened (in the main thread):
interrupted when a host's handler raises."""
_cancels: dict[tuple, tuple] = {}
"""Ways to stop what the run's queries wait on beyond DuckDB (:func:`on_stop`): (function, args), once each."""
_ours: set[int] = set()
"""The stop signals the outermost :func:`watching` handles (not a host's)."""
_first_stop: dict[int, float] = {}
"""When each stop signal first came (monotonic seconds) since the outermost :func:`watching` began."""
AGAIN_AFTER = 2.0
"""Seconds after the first SIGTERM (SIGHUP) from which another ends the
process at once: ``timeout`` sends its SIGTERM to the run and then to its
process group, and a hangup reaches a job twice (the kernel's, the
shell's), a few milliseconds apart; such a pair once ended a run before it
cleaned up (helper-39)."""


def received() -> bool:
    """Whether a SIGINT (or SIGTERM, SIGHUP) arrived since the outermost :func:`watching` began."""
    return _received.is_set()


_STOPS = (signal.SIGTERM, signal.SIGHUP)
"""Signals whose default action ends the process: after one, a library call
ends the process by it once it has cleaned up."""


def received_signal() -> int:
    """Which signal :func:`received` saw: SIGTERM or SIGHUP if one came (a
    request to stop outranks a Ctrl-C after it), else SIGINT."""
    return next((s for s in _STOPS if s in _signals), signal.SIGINT)


def check() -> None:
    """Raise what a host's signal handler raised (in the main thread, not
    while publishing), or KeyboardInterrupt if a SIGINT, SIGTERM or SIGHUP
    arrived, even if something swallowed it."""
    if _published:
        return  # the run's outcome is decided: the end of watching() tells it
    if _host_errors and not _deferring and threading.current_thread() is threading.main_thread():
        exc = _host_errors.pop(0)
        _host_raised[:] = [exc]
        raise exc
    if _received.is_set():
        raise KeyboardInterrupt


def register(con) -> None:
    """A DuckDB connection of the run: interrupted if a host's handler raises
    (only in the main thread of a watched run; workers have their own)."""
    if _depth and threading.current_thread() is threading.main_thread():
        _connections.add(con)


def on_stop(cancel, *args) -> None:
    """``cancel(*args)``, a way to stop a query DuckDB waits on elsewhere (a
    PostgreSQL server's, which DuckDB's interrupt does not reach while it
    waits on the server), is called in a thread of its own when the
    watched run (main thread) is asked to stop.

    Python runs a signal's handler only once the main thread is back in
    Python, and a query waiting on the server holds it in DuckDB (a
    ``postgres_query`` reads its result's columns before DuckDB looks for
    signals): a SIGTERM, a second one and Ctrl-C all waited for a lock
    another session held (helper-38). The signal's number reaches a thread
    of ours at once (``signal.set_wakeup_fd``), which cancels."""
    if _depth and threading.current_thread() is threading.main_thread():
        _cancels.setdefault((cancel, *args), (cancel, args))  # once per server, however many sessions
        _relay_signals()


_TOKEN = secrets.token_hex(6)
"""This process's part of a session name (processes in containers share pids)."""
_run_token: str | None = None
"""The watched run's own part of a session name (:func:`session_name`)."""


def session_name() -> str:
    """A name for the database sessions of the caller's run, which a stop
    cancels by name: the watched run's (main thread) own, else one no stop
    cancels. Another run's sessions on the same server (another container
    with the same pid, a run in a thread) had their queries cancelled
    when this one stopped (helper-39)."""
    watched = _run_token is not None and threading.current_thread() is threading.main_thread()
    return f"sqlanon-{os.getpid()}-{_run_token if watched else _TOKEN}"


_relay: tuple | None = None
"""(reader, writer, the wakeup fd before ours) while :func:`_relay_signals` runs."""


def _relay_signals() -> None:
    """Have Python's C-level signal handler write each signal's number to a
    socket that a thread of ours reads (the fd set before, asyncio's, say,
    still gets it): a stop signal cancels the run's server queries."""
    global _relay
    if _relay is not None:
        return
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    try:
        before = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except ValueError:  # not the main thread after all
        reader.close()
        writer.close()
        return
    _relay = (reader, writer, before)
    threading.Thread(target=_relay_loop, args=(reader, before), daemon=True, name="sqlanon-signals").start()


def _relay_loop(reader: socket.socket, before: int) -> None:
    with reader:
        while True:
            try:
                data = reader.recv(64)
            except OSError:
                return
            if not data or _END in data:  # closed, or _end_relay's word
                return
            signals = bytes(b for b in data if b != _CANCEL)
            if before != -1 and signals:
                with contextlib.suppress(OSError):
                    os.write(before, signals)
            # A stop of ours (a host's graceful SIGINT handler is left in
            # charge) or a host's kept error, not while publishing, which
            # runs to its end.
            if (_ours.intersection(signals) or _CANCEL in data) and not _holding():
                _cancel_all(list(_cancels.values()))


_CANCEL, _END = 0xFE, 0xFF
"""The relay's own words (no signal has these numbers): cancel (a host's
error was kept), and end."""


def _end_relay() -> None:
    """Put the wakeup fd back as it was and end the relay's thread."""
    global _relay
    if _relay is None:
        return
    reader, writer, before = _relay
    _relay = None
    signal.set_wakeup_fd(before)
    with writer:
        with contextlib.suppress(OSError):
            writer.send(bytes([_END]))


def _interrupt_queries(servers: bool = False) -> None:
    """Interrupt the run's DuckDB queries and, with ``servers``, have the
    relay cancel its server queries (a stop signal of ours tells it by
    itself). Called in a signal handler: no thread starts here (a signal
    landing inside Thread.start would wait on its lock for good)."""
    for con in list(_connections):
        try:
            con.interrupt()
        except Exception:  # noqa: BLE001 - closed meanwhile
            pass
    if servers and _relay is not None:
        with contextlib.suppress(OSError):  # full: a cancel is on its way already
            _relay[1].send(bytes([_CANCEL]))


def _cancel_all(cancels: list[tuple]) -> None:
    for cancel, args in cancels:
        try:
            cancel(*args)
        except Exception as exc:  # noqa: BLE001 - a stop goes on without it (the query ends by itself)
            log.debug("could not cancel the run's queries (%s: %s)", type(exc).__name__, exc)


def _keep_hosts_errors(hosts: object):
    """A handler that calls the host's ``hosts`` and keeps what it raises."""

    def handler(signum, frame):
        try:
            hosts(signum, frame)
        except BaseException as exc:  # noqa: BLE001 - pytest-timeout's Failed, a SystemExit: the host's, raised later
            _host_errors.append(exc)
            if not _holding():  # publishing runs to its end; the error comes after it
                _interrupt_queries(servers=True)

    handler.sqlanon_watching = True  # deferred() leaves it in place
    return handler


def _host_error() -> BaseException | None:
    return _host_errors[0] if _host_errors else (_host_raised[0] if _host_raised else None)


@contextlib.contextmanager
def watching(library: bool = True) -> Iterator[None]:
    """Record SIGINTs, SIGTERMs and SIGHUPs while the block runs (main thread only).

    Each signal is handled only while it is not someone else's: a SIGINT
    with Python's own handler (not one left ignored, as ``cmd &`` starts it,
    nor a host's own handler: a graceful stop lets the call finish), a
    SIGTERM or SIGHUP with the default action (not a host's handler, nor
    ``nohup``'s ignoring). Another SIGTERM (SIGHUP), :data:`AGAIN_AFTER`
    seconds or more after the first, ends the process by it at once, as
    it would have without sqlanon, unless publishing.

    When the outermost block ends after a signal: an exception that stands
    for it (DuckDB's "Query interrupted") comes out as KeyboardInterrupt.
    With ``library`` (a call of the library, not the CLI, which reports
    these itself), a block that ran to its end (the signal came while it
    published) raises KeyboardInterrupt then, and after a SIGTERM the
    process ends by the signal, as it would have without sqlanon, once the
    block has cleaned up (a host that catches KeyboardInterrupt would have
    survived its stop); a SIGHUP likewise.

    Every other signal with a Python handler (a host's: a task runner's
    SIGALRM timeout) has it called as it arrives, but what the handler
    raises is kept: the run's DuckDB queries are interrupted, :func:`check`
    raises it (not while publishing), and so does the outermost block's end,
    in place of the failure it caused or after a block that ran to its end
    (it came while publishing). The host's handlers are back afterwards.
    """
    global _depth, _run_token, _published
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        signum: signal.getsignal(signum)
        for signum, ours in ((signal.SIGINT, lambda h: h is signal.default_int_handler),
                             (signal.SIGTERM, lambda h: h is signal.SIG_DFL),
                             (signal.SIGHUP, lambda h: h is signal.SIG_DFL))
        if ours(signal.getsignal(signum))
    }
    if _depth == 0:
        _received.clear()
        _signals.clear()
        _host_errors.clear()
        _host_raised.clear()
        _ours.clear()
        _ours.update(int(s) for s in previous)
        _first_stop.clear()
        _run_token = secrets.token_hex(6)

    def handler(signum, frame):
        first = _first_stop.setdefault(signum, time.monotonic())
        _signals.add(signum)
        _received.set()
        if _deferring:
            return
        if signum in _STOPS and time.monotonic() - first >= AGAIN_AFTER:
            # The first could not stop the run (a wait that never sees the
            # KeyboardInterrupt, stuck on an import lock an interrupted
            # import left held: helper-35): end the process as without sqlanon.
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        if _published:  # recorded only: the run's clean-up goes on (a second SIGTERM still ends a stuck one)
            return
        # Raised inside a query, DuckDB reports "Query interrupted" but does
        # not stop it: the cleanup's next statement ran it to its end first.
        # (The server's queries: the relay has cancelled them already.)
        _interrupt_queries()
        raise KeyboardInterrupt

    handler.sqlanon_watching = True  # not a host's: deferred() leaves it in place
    hosts = {s: h for s in signal.valid_signals() if s not in previous and callable(h := signal.getsignal(s))
             and not getattr(h, "sqlanon_watching", False)}
    kept = {s: _keep_hosts_errors(h) for s, h in hosts.items()}
    for signum, keeper in kept.items():
        signal.signal(signum, keeper)
    for signum in previous:
        signal.signal(signum, handler)
    _depth += 1
    outermost = _depth == 1
    unraisable = sys.unraisablehook

    def quiet_unraisable(info):
        # The handler's KeyboardInterrupt raised while the main thread ran a
        # weakref callback or __del__ (importlib's _get_module_lock cb, at the
        # end of any lazy import) cannot propagate: Python printed it as
        # "Exception ignored in ..." with a traceback, before the one-line
        # "Terminated" (the signal is recorded: check() stops the run).
        if isinstance(info.exc_value, KeyboardInterrupt) and _received.is_set():
            return
        unraisable(info)

    if outermost:
        sys.unraisablehook = quiet_unraisable
    try:
        yield
    except BaseException as exc:
        error = _host_error() if outermost else None
        if error is not None and error is not exc:
            _host_errors.clear()
            raise error  # what the host's handler raised (the exception it caused as its context)
        if isinstance(exc, KeyboardInterrupt) or not isinstance(exc, Exception):
            raise
        if outermost and _received.is_set():
            raise KeyboardInterrupt from exc
        raise
    else:
        if outermost and _host_errors:
            raise _host_errors.pop(0)  # it came while publishing (or after the run's last check)
        if outermost and library and _received.is_set():
            raise KeyboardInterrupt("interrupted once publishing had begun: the output and its metrics were "
                                    "published first")
    finally:
        # A command's run that published: a signal from here to the process's
        # end (its exit handlers: the worker pool's, temporary files') is only
        # recorded, then told (:func:`late_signals`). With the handlers put
        # back, a SIGTERM there ended the process by it (exit 143, "nothing
        # published", after "wrote …") and a Ctrl-C printed a traceback from
        # an exit handler (helper-145). One AGAIN_AFTER seconds after the
        # first ends the process as it asks: an exit handler stuck there.
        hold = outermost and _hold_to_exit and not library and _published
        _depth -= 1
        if outermost and sys.unraisablehook is quiet_unraisable:  # not one the host put in place meanwhile
            sys.unraisablehook = unraisable
        for signum, old in previous.items():
            signal.signal(signum, _record_late if hold else old)
        for signum, keeper in kept.items():
            if signal.getsignal(signum) is keeper:  # not one the host put in place meanwhile
                signal.signal(signum, hosts[signum])
        if outermost:
            stop = received_signal()
            _received.clear()  # a later call, from a thread too, starts afresh (the CLI still reads _signals)
            _host_errors.clear()
            _host_raised.clear()
            _connections.clear()
            _cancels.clear()
            _end_relay()
            _run_token = None
            _published = False
            if stop in _STOPS and stop in previous and library:
                os.kill(os.getpid(), stop)


def hold_to_exit() -> None:
    """This process ends once its command is done (the ``sqlanon`` script):
    after a run that published, a stop signal is only recorded until then
    (:func:`late_signals`), as while publishing."""
    global _hold_to_exit
    _hold_to_exit = True


def _record_late(signum, frame) -> None:
    """Record a stop signal after a published run; one :data:`AGAIN_AFTER`
    seconds or more after the first ends the process as the signal does
    (an exit handler is stuck). A pair a few ms apart is one
    request, as `timeout` sends it to the run and then to its process group:
    ending on the second one exited 143 after "wrote …"."""
    now = time.monotonic()
    _late_first[:] = _late_first or [now]
    _late.append(signum)
    if now - _late_first[0] >= AGAIN_AFTER:
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def late_signals() -> list[int]:
    """The stop signals that came after a published run's :func:`watching` ended."""
    return list(_late)


def watched(function):
    """``function`` run inside :func:`watching` (a library call), from its
    first line: a host's timeout during its checks of the input (DuckDB
    queries, the lazy imports they make) is kept too."""

    @functools.wraps(function)
    def call(*args, **kwargs):
        with watching():
            return function(*args, **kwargs)

    return call


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Run the block to its end even on SIGINT (which is still recorded); refuse to start after one.

    A signal the host handles itself (a task runner's timeout: SIGALRM and a
    handler that raises) has its exception kept too (:func:`watching` kept
    it; a handler the host put in place since is kept here) and raised once
    the block is done: raised between the output's swap and its metrics, it
    left the output published without them for good (helper-35)."""
    global _deferring
    check()
    late = _keep_late_hosts()
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
        for signum, (host, keeper) in late.items():
            if signal.getsignal(signum) is keeper:
                signal.signal(signum, host)
        if not _depth and _host_errors:  # no watching() to raise it at its end
            raise _host_errors.pop(0)


def published() -> None:
    """The watched run (main thread) has published its output and metrics:
    from here to the end of the outermost :func:`watching`, a stop signal
    is only recorded, as while publishing, and :func:`check` raises
    nothing; the end of the block tells the caller (a library call's
    KeyboardInterrupt "interrupted once publishing had begun", the CLI's exit 0).
    A Ctrl-C or SIGTERM 10 ms after the swap landed in the run's clean-up
    (closing DuckDB, shutting the pool down) and came out as "Interrupted;
    nothing was published." with exit 130/143, the output replaced: a
    scheduler would run it again (helper-40)."""
    global _published
    if _depth and threading.current_thread() is threading.main_thread():
        _published = True


def _holding() -> bool:
    """Whether a stop signal is only recorded now: while publishing, or after it."""
    return bool(_deferring) or _published


def _keep_late_hosts() -> dict[int, tuple]:
    """Wrap the Python handlers of signals that are neither sqlanon's nor
    already kept by :func:`watching` (main thread only); per signal, the
    host's handler and its keeper."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    late = {s: (h, _keep_hosts_errors(h)) for s in signal.valid_signals() if callable(h := signal.getsignal(s))
            and not getattr(h, "sqlanon_watching", False)}
    for signum, (_, keeper) in late.items():
        signal.signal(signum, keeper)
    return late
