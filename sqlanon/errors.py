"""The exceptions sqlanon raises.

Every error a user can cause is a :class:`SqlanonError` with a one-line message
that names the column, key, file or value at fault. The CLI turns them into
``Error: <message>`` and an exit code: 2 for usage and configuration errors
and for a column of the input the run refuses before any work (a retry
fails the same way), 1 for errors found while running (an input not there
or unreadable, privacy constraints, I/O).
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import functools
import inspect
import logging
import re
from collections.abc import Callable


class SqlanonError(Exception):
    """Base class of all sqlanon errors."""

    exit_code = 1


class ConfigError(SqlanonError, ValueError):
    """A bad argument, option or configuration key, or a column of the input
    the run refuses up front: of a type or holding values it cannot read or
    publish safely, one the files of a lake disagree on, a header's name
    twice (exit code 2)."""

    exit_code = 2


class HierarchyError(SqlanonError, ValueError):
    """A generalization hierarchy file is missing, malformed or misses a
    value of the data (exit code 2: the job's hierarchy needs fixing, a
    retry would fail the same way)."""

    exit_code = 2


class InputError(SqlanonError):
    """The input cannot be read, or lacks a column the job names."""

    exit_code = 1


class PrivacyError(SqlanonError):
    """The data cannot satisfy the requested k or l."""

    exit_code = 1


class VerificationError(SqlanonError):
    """A generalized table failed the k-anonymity / l-diversity check."""

    exit_code = 1


_QUOTED = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
"""A quoted name, path or value (Python's repr): left as it is."""

_FLAG = re.compile(
    rf"(?P<quoted>{_QUOTED})"
    r"|(?<![\w-])--(?P<flag>[a-z][a-z-]*)"
    rf"(?:=(?P<value>{_QUOTED}|[\w.:/-]+)"  # --metrics='m.parquet', --executor=dask
    rf"|\s+(?P<column>{_QUOTED}|[^\s=()']+)=(?P<kind>\w+))?"  # --generalization 'my city'=set
    r"(?![\w-])"
)

LIBRARY_FLAGS = frozenset({
    "qi", "k", "l", "sensitive", "hierarchy", "generalization", "drop", "keep", "overwrite", "no-overwrite",
    "interval-format", "table", "target-table", "workers", "fragments", "fragmentation", "sample", "seed",
    "worker-memory", "metrics", "explain", "executor", "scheduler", "spark-master", "retries", "task-timeout",
    "date-order", "encoding",
})
"""The CLI's flags that are arguments of the library (``--hierarchy`` as
``hierarchies=``): only these are rewritten; ``--json`` or a word such as
``--x`` in a list of column names stays as it is."""


def install_extra(name: str) -> str:
    """How to install an optional extra. sqlanon is not on PyPI: ``pip install
    'sqlanon[postgres]'`` would fail, or fetch another project of that name
    (helper-201)."""
    return f"install sqlanon's {name} extra (in its checkout: pip install -e '.[{name}]')"


def _argument(m: re.Match) -> str:
    """The library's spelling of one flag of a message (a quoted name,
    path or value, which may hold anything, stays as it is)."""
    if m["quoted"] is not None:
        return m[0]
    if m["flag"] not in LIBRARY_FLAGS:
        return m[0]
    name, value, column = m["flag"].replace("-", "_"), m["value"], m["column"]
    if column is not None and column[0] not in "'\"":
        column = repr(column)
    if name in ("generalization", "hierarchy") and column:  # not "hierarchies= race=FILE" (helper-51)
        return f"{'hierarchies' if name == 'hierarchy' else name}={{{column}: {m['kind']!r}}}"
    if name in ("overwrite", "no_overwrite"):
        return f"overwrite={name == 'overwrite'}"
    name = {"hierarchy": "hierarchies"}.get(name, name)
    if value:
        return f"{name}=" + (value if value[0] in "'\"" else repr(value))
    return f"{name}=" + (f" {m['column']}={m['kind']}" if column else "")


_LIBRARY_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar("sqlanon_library_call", default=False)
"""Whether this thread is inside a library call (:func:`in_library_terms`)."""


def _library_warnings(record: logging.LogRecord) -> bool:
    """A warning of a sqlanon logger in the library's terms, as
    :func:`in_library_terms` has its errors, inside a library call of this
    thread ('retries= applies to Dask and Spark': helper-60); a filter,
    it keeps every record."""
    if record.levelno >= logging.WARNING and _LIBRARY_CALL.get():
        message = record.getMessage()
        shown = _FLAG.sub(_argument, message)
        if shown != message:
            record.msg, record.args = shown, ()
    return True


LOGGERS = ("sqlanon", "sqlanon.executors", "sqlanon.io")
"""The loggers sqlanon logs to (a logger's filters apply to its own records only)."""

# Installed once, each call only marks its context: nested calls and other
# threads each see their own (adding and removing it per call did not: helper-63).
for _name in LOGGERS:
    logging.getLogger(_name).addFilter(_library_warnings)


def in_library_terms(function: Callable) -> Callable:
    """Make ``function``'s sqlanon errors name the library's arguments
    (``target_table=``, ``overwrite=True``) where they name the command
    line's flags (``--target-table``, ``--overwrite``): the CLI and the
    library share the checks and their messages. ``function.with_flags`` is
    the function itself, for the CLI."""

    params = inspect.signature(function).parameters
    named = None if any(p.kind is p.VAR_KEYWORD for p in params.values()) else list(params)

    @functools.wraps(function)
    def library(*args, **kwargs):
        unknown = [k for k in kwargs if named is not None and k not in named]
        if unknown:  # Python's error, with the argument meant: a job file's 'hierarchy' is 'hierarchies' here
            close = difflib.get_close_matches(unknown[0], named, n=1, cutoff=0.6)
            raise TypeError(f"{function.__name__}() got an unexpected keyword argument {unknown[0]!r}"
                            + (f" (did you mean {close[0]!r}?)" if close else ""))
        token = _LIBRARY_CALL.set(True)
        try:
            return function(*args, **kwargs)
        except SqlanonError as exc:
            exc.args = tuple(redact_urls(_FLAG.sub(_argument, a)) if isinstance(a, str) else a for a in exc.args)
            redact_chain(exc)
            raise
        except BaseException as exc:
            redact_chain(exc)
            raise
        finally:
            _LIBRARY_CALL.reset(token)

    library.with_flags = function
    return library


# A password runs to the next '@' (as SQLAlchemy parses it), quotes and raw
# spaces included, but not past another URL: for a URL without one
# (host:port) the mask may take in the text up to an '@' later on its line,
# the slip being towards hiding, but never a second URL's start.
# To the *last* '@' before the line's end (an unencoded '@' in a password,
# 'user:Sup@Secret9@host', must not show its second half).
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][\w+.-]*://[^:/@\s'\"]*:)(?:(?!://)[^\n])*@")
# ?password= and libpq's ?sslpassword= (a client key's passphrase).
_QUERY_PASSWORD = re.compile(r"([?&]\w*password=)[^&\s'\"]*", re.IGNORECASE)
# A libpq key=value string: password=secret, password='se cret', password=se\ cret
# (a value runs to a space or a URL's '&').
_KEYWORD_PASSWORD = re.compile(
    r"""(\b\w*password\s*=\s*)('(?:[^'\\]|\\.)*'?|"(?:[^"\\]|\\.)*"?|(?:\\.|[^\s&])+)""", re.IGNORECASE)


AFTER_SHUTDOWN = ("the interpreter is shutting down (its main thread has returned), and sqlanon's work cannot start "
                  "now: have the main thread wait for this thread (thread.join())")
"""A call from a thread still running once the main thread has returned:
Python then refuses new atexit hooks and new futures, and the call failed
with a bare RuntimeError (helper-92)."""


def redact_urls(text: str) -> str:
    """``text`` with the password of every URL in it masked
    (``postgresql://user:***@host/db``, ``?password=***``), and any libpq
    ``password=…``: a message may quote a URL or a connection string given
    where a path was expected."""
    text = _QUERY_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", text))
    return _KEYWORD_PASSWORD.sub(r"\1***", text)


def redact_chain(exc: BaseException | None, _seen: set[int] | None = None) -> None:
    """Mask URLs' passwords in the text of ``exc`` and of each exception a
    traceback shows with it (raised from, or during; an exception group's
    members): a driver's error may quote the whole connection string
    ('Unable to connect to Postgres at "… password='…'"'), and a one-line
    message masked did not mask the error chained to it, shown by --debug
    and by a library host's logged traceback (helper-71). The text a
    traceback prints: the arguments, an OSError's file names, notes, and a
    click error's message."""
    seen = set() if _seen is None else _seen
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        with contextlib.suppress(Exception):  # an exception whose attributes cannot be set
            exc.args = tuple(redact_urls(a) if isinstance(a, str) else a for a in exc.args)
            for name in ("filename", "filename2", "message"):
                if isinstance(getattr(exc, name, None), str):
                    setattr(exc, name, redact_urls(getattr(exc, name)))
            if isinstance(getattr(exc, "__notes__", None), list):
                exc.__notes__ = [redact_urls(n) if isinstance(n, str) else n for n in exc.__notes__]
        for member in getattr(exc, "exceptions", None) or ():
            if isinstance(member, BaseException):
                redact_chain(member, seen)
        exc = exc.__cause__ if exc.__cause__ is not None else None if exc.__suppress_context__ else exc.__context__


def plain_log_line(level: str, message: str) -> str:
    """A log record as the CLI shows it without -v, ``Warning: …`` as errors
    read ``Error: …``, URLs' passwords masked; the worker pool's warnings
    read so too (:mod:`sqlanon._preload`)."""
    return redact_urls(f"{level.capitalize()}: {message}")
