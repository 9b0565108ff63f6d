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
_signal = [signal.SIGINT]
_depth = 0
_deferring = 0


def received() -> bool:
    """Whether a SIGINT (or SIGTERM) arrived since the outermost :func:`watching` began."""
    return _received.is_set()


def received_signal() -> int:
    """Which signal :func:`received` saw last (SIGINT or SIGTERM)."""
    return _signal[0]


def check() -> None:
    """Raise KeyboardInterrupt if a SIGINT arrived, even if something swallowed it."""
    if _received.is_set():
        raise KeyboardInterrupt


@contextlib.contextmanager
def watching() -> Iterator[None]:
    """Record SIGINTs while the block runs (main thread only; SIG_IGN stays ignored)."""
    global _depth
    previous = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    if previous is None or previous is signal.SIG_IGN:
        yield  # not ours to handle: a thread, or a process told to ignore Ctrl-C (`cmd &`)
        return
    if _depth == 0:
        _received.clear()

    def handler(signum, frame):
        _received.set()
        _signal[0] = signum
        if _deferring:
            return
        if callable(previous) and signum == signal.SIGINT:
            previous(signum, frame)  # Python's default raises KeyboardInterrupt
        else:
            raise KeyboardInterrupt

    term = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGINT, handler)
    if term is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, handler)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        signal.signal(signal.SIGINT, previous)
        if term is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, term)


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
