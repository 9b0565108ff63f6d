"""The exceptions sqlanon raises.

Every error a user can cause is a :class:`SqlanonError` with a one-line message
that names the column, key, file or value at fault. The CLI turns them into
``Error: <message>`` and an exit code: 2 for usage and configuration errors,
1 for errors found while running (data, privacy constraints, I/O).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable


class SqlanonError(Exception):
    """Base class of all sqlanon errors."""

    exit_code = 1


class ConfigError(SqlanonError, ValueError):
    """A bad argument, option or configuration key (exit code 2)."""

    exit_code = 2


class HierarchyError(SqlanonError, ValueError):
    """A generalization hierarchy file is malformed or misses a value."""

    exit_code = 1


class InputError(SqlanonError):
    """The input cannot be read, or lacks a column the job names."""

    exit_code = 1


class PrivacyError(SqlanonError):
    """The data cannot satisfy the requested k or l."""

    exit_code = 1


class VerificationError(SqlanonError):
    """A generalized table failed the k-anonymity / l-diversity check."""

    exit_code = 1


_FLAG = re.compile(
    r"(?<![\w-])--([a-z][a-z-]*)"
    r"(?:=('[^']*'|\"[^\"]*\"|[\w.:/-]+)"  # --metrics='m.parquet', --executor=dask
    r"|\s+([^\s=()']+)=(\w+))?"  # --generalization city=set
    r"(?![\w-])"
)

_CLI_ONLY = frozenset({"config", "json", "quiet", "debug", "verbose", "help"})
"""Flags no library function takes."""


def _argument(flag: re.Match) -> str:
    """The library's spelling of one flag of a message."""
    name, value = flag[1].replace("-", "_"), flag[2]
    if name in _CLI_ONLY:
        return flag[0]
    if name == "generalization" and flag[3]:
        return f"generalization={{{flag[3]!r}: {flag[4]!r}}}"
    if name in ("overwrite", "no_overwrite"):
        return f"overwrite={name == 'overwrite'}"
    name = {"hierarchy": "hierarchies"}.get(name, name)
    if value:
        return f"{name}=" + (value if value[0] in "'\"" else repr(value))
    return f"{name}=" + (f" {flag[3]}={flag[4]}" if flag[3] else "")


def in_library_terms(function: Callable) -> Callable:
    """Make ``function``'s sqlanon errors name the library's arguments
    (``target_table=``, ``overwrite=True``) where they name the command
    line's flags (``--target-table``, ``--overwrite``): the CLI and the
    library share the checks and their messages. ``function.with_flags`` is
    the function itself, for the CLI."""

    @functools.wraps(function)
    def library(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except SqlanonError as exc:
            exc.args = tuple(redact_urls(_FLAG.sub(_argument, a)) if isinstance(a, str) else a for a in exc.args)
            raise

    library.with_flags = function
    return library


_URL_PASSWORD = re.compile(r"(\b[A-Za-z][\w+.-]*://[^:/@\s'\"]*:)[^\s'\"]*@")
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&\s'\"]*", re.IGNORECASE)


def redact_urls(text: str) -> str:
    """``text`` with the password of every URL in it masked
    (``postgresql://user:***@host/db``, ``?password=***``): a message may
    quote a URL given where a path was expected."""
    return _QUERY_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1***@", text))
