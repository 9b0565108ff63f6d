"""Ctrl-C during a run: never swallowed, and never half-way through publishing.

DuckDB turns a SIGINT that arrives during a query into ``RuntimeError("Query
interrupted")``, consuming the KeyboardInterrupt; code that handles database
errors could then report a misleading error, or carry on and publish. While
:func:`watching` is active (a run, in the main thread), a SIGINT also sets a
flag: :func:`check` raises KeyboardInterrupt if it is set (the coordinator
checks before it publishes), and the CLI reports any failure that follows it
as the interrupt it is. Inside :func:`deferred` (publishing: a swap and the
metrics, short) a SIGINT is only recorded, so the output and its metrics are
either both the old ones or both the new ones.

A SIGTERM (how ``timeout``, systemd and Kubernetes stop a job) is handled the
same way while no one else handles it: the run stops, cleans up and reports
it, instead of dying with its staging files left behind.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["watching", "deferred", "check", "received", "received_signal"]

_received = threading.Event()
_signal = signal.SIGINT
_depth = 0
_deferring = 0


def received() -> bool:
    """Whether a SIGINT (or SIGTERM) arrived since the outermost :func:`watching` began."""
    return _received.is_set()


def received_signal() -> int:
    """Which signal :func:`received` saw last (SIGINT or SIGTERM)."""
    return _signal


def check() -> None:
    """Raise KeyboardInterrupt if a SIGINT or SIGTERM arrived, even if something swallowed it."""
    if _received.is_set():
        raise KeyboardInterrupt


@contextlib.contextmanager
def watching() -> Iterator[None]:
    """Record SIGINTs and SIGTERMs while the block runs (main thread only).

    Each signal is handled only if it is not someone else's: a SIGINT left
    ignored (``cmd &`` without job control starts it so) stays ignored, and
    a SIGTERM someone installed a handler for keeps it; each independently.
    """
    global _depth
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {
        signum: signal.getsignal(signum)
        for signum, ours in ((signal.SIGINT, lambda h: h is not signal.SIG_IGN and h is not None),
                             (signal.SIGTERM, lambda h: h is signal.SIG_DFL))
        if ours(signal.getsignal(signum))
    }
    if not previous:
        yield
        return
    if _depth == 0:
        _received.clear()
    default_int = previous.get(signal.SIGINT)

    def handler(signum, frame):
        global _signal
        _received.set()
        _signal = signum
        if _deferring:
            return
        if callable(default_int) and signum == signal.SIGINT:
            default_int(signum, frame)  # Python's default raises KeyboardInterrupt
        else:
            raise KeyboardInterrupt

    for signum in previous:
        signal.signal(signum, handler)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        for signum, old in previous.items():
            signal.signal(signum, old)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Run the block to its end even on SIGINT (which is still recorded); refuse to start after one."""
    global _deferring
    check()
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
