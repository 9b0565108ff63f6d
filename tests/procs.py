"""Finding a run's processes in /proc, for the tests that kill one mid-run."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Callable


def children(pid: int) -> list[int]:
    """Direct children of ``pid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            if ppid == pid:
                out.append(int(entry.name))
    return out


def descendants(pid: int) -> list[int]:
    """Every process below ``pid``."""
    out, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        out += kids
        todo += kids
    return out


def session_members(sid: int) -> list[int]:
    """The live processes (zombies are ended ones) of session ``sid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":  # after the name: state, ppid, pgrp, session
            out.append(int(entry.name))
    return out


def pool_workers(pid: int) -> list[int]:
    """The local pool's worker processes: children of the run's fork server."""
    servers = []
    for child in children(pid):
        try:
            if b"forkserver" in Path(f"/proc/{child}/cmdline").read_bytes():
                servers.append(child)
        except OSError:
            continue
    return [w for s in servers for w in children(s)]


def kill_a_worker_when(proc, ready: Callable[[], bool], timeout: float = 60) -> bool:
    """SIGKILL one pool worker of the run ``proc`` (a Popen) as soon as
    ``ready()`` holds; False if the run ended or ``timeout`` passed first."""
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        workers = pool_workers(proc.pid)
        if workers and ready():
            os.kill(workers[-1], signal.SIGKILL)
            return True
        time.sleep(0.02)
    return False
