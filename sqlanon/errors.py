"""The exceptions sqlanon raises.

Every error a user can cause is a :class:`SqlanonError` with a one-line message
that names the column, key, file or value at fault. The CLI turns them into
``Error: <message>`` and an exit code: 2 for usage and configuration errors,
1 for errors found while running (data, privacy constraints, I/O).
"""

from __future__ import annotations


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
