"""Lake sources and targets, read and written through DuckDB.

Sources (``INPUT`` on the command line):

* a Parquet or CSV file: ``people.parquet``, ``people.csv`` (``.tsv``:
  tab-separated; ``.csv.gz``, ``.csv.zst``: compressed);
* a glob or a directory of them (hive-partitioned directories too):
  ``'lake/people/*.parquet'``, ``lake/people/``;
* a table in a DuckDB database file: ``warehouse.duckdb --table hr.people``.

Targets (``-o OUTPUT``):

* a Parquet or CSV file: ``out.parquet``, ``out.csv`` (or ``.tsv``,
  ``.csv.gz``…, written as named);
* a directory of Parquet part files: a path ending in ``/`` or without a
  file extension, e.g. ``out/``;
* a table in a DuckDB database file: ``warehouse.duckdb --target-table hr.people_anon``.

Every output is assembled aside (a hidden staging file, directory or table
next to the target), verified, and only then swapped in: a crash, kill or
Ctrl-C at any point leaves an existing target as it was, and the next run
removes the staging left behind by a dead run.
"""

from __future__ import annotations

import base64
import codecs
import collections
import contextlib
import csv
import ctypes
import errno
import fcntl
import functools
import glob
import json
import logging
import os
import pickle
import re
import shutil
import stat
import sys
import time
import urllib.parse
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

import duckdb
import pyarrow as pa

from . import interrupts
from .config import (GLOB_ESCAPED, csv_dialect, file_format, format_suffix, has_wildcard, listed, missing_table,
                     physical_path, table_text)
from .errors import ConfigError, InputError
from .sql import fold_name, ident, literal, render
from .sql.render import ASCII_LOWER, ASCII_UPPER

log = logging.getLogger(__name__)
_T = TypeVar("_T")

DUCKDB_SUFFIXES = (".duckdb", ".ddb", ".db")
STAGING_MARK = ".sqlanon-staging-"
LOCK_MARK = ".sqlanon-lock"


def connect(
    memory_limit: str | None = None, threads: int | None = None, temp_directory: str | None = None
) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB connection (one per process or worker).

    ``temp_directory``: where it spills (DuckDB's default is ``.tmp`` in the
    working directory, which a scheduled job's may not allow, and where a
    crashed worker's files stayed); a run's own staging area, removed with it.

    DuckDB's own progress bar is off: it would write to stdout, which belongs
    to ``--json``; the CLI shows progress by fragment instead. The time zone
    is UTC: a ``TIMESTAMPTZ`` written as text (CSV, ``bounds``, pass-through)
    reads the same whichever machine ran the job, as the QI labels do.
    """
    config = {}
    if memory_limit:
        config["memory_limit"] = memory_limit
    if threads:
        config["threads"] = threads
    if temp_directory:
        config["temp_directory"] = temp_directory
    con = duckdb.connect(":memory:", config=config)
    interrupts.register(con)  # a host's timeout stops its queries
    con.execute("SET enable_progress_bar = false")
    con.execute("SET TimeZone = 'UTC'")  # not in ``config``: ICU is not loaded yet there
    return con


ENCODINGS = ("utf-8", "latin-1", "utf-16")
"""The text encodings of CSV inputs DuckDB reads (``read_csv``'s ``encoding``)."""


def refuse_unreadable_text(paths: list[str], encoding: str | None = None, flag: bool = True) -> None:
    """Refuse a CSV input that is not text of its encoding as DuckDB reads
    it, or a compressed one that ends before its end (a copy or download
    cut short).

    DuckDB reads a gzip file's rows up to the cut without a word: a run
    published 15,273 of 20,000 rows, the last value cut too ('co' for
    'copd', one more value for ℓ), exit 0 (helper-107); a cut zstd file
    failed on its last row's columns, or was said to be empty. A byte that
    is no UTF-8 past the rows DuckDB's sniffer reads made a text column's
    scan an internal error ('Attempted to access index 2 within vector of
    size 1', DuckDB 1.4), which ends the connection; only a scan that reads
    no text named the line. Each file is read (decompressed) once to its
    end and decoded (as ``encoding``, one of :data:`ENCODINGS`; None:
    UTF-8) as DuckDB decodes it (:func:`_first_undecodable`): ~25 ms per
    25 MB of text, ~75 ms gzip. ``flag``: whether the command has
    ``--encoding`` (verify reads UTF-8 only)."""
    for path in paths:
        compression = "gzip" if path.endswith(".gz") else "zstd" if path.endswith(".zst") else None
        if compression is None and not path.lower().endswith((".csv", ".tsv")):
            continue
        try:
            with open(path, "rb") as fh:
                if compression == "gzip":
                    bad = _first_undecodable(_gunzipped(fh), encoding)
                elif compression == "zstd":
                    bad = _first_undecodable(_unzstd(fh), encoding)
                else:
                    bad = _first_undecodable(iter(lambda: fh.read(1 << 20), b""), encoding)
        except OSError as exc:
            raise InputError(f"cannot read {path!r}: {exc.strerror}") from None
        except _Cut as exc:
            raise InputError(f"{path!r} is a cut {compression} file ({exc}): its last rows would be lost; copy it "
                             "again") from None
        except (zlib.error, pa.ArrowException) as exc:
            raise InputError(f"{path!r} is not a whole {compression} file ({exc}): copy it again") from None
        if bad is None:
            continue
        line, why = bad  # a retry fails alike: exit 2, as a .csv.bz2's
        if line is None:  # latin-1 read, UTF-8 written: every accent two characters (helper-114)
            log.warning("%r reads as UTF-8 too, holding characters past ASCII: --encoding %s makes each of them two "
                        "(GenÃ¨ve); leave it out if the file is UTF-8", path, encoding)
        elif encoding:
            raise ConfigError(f"cannot read {path!r}: line {line} {why} (--encoding {encoding})")
        else:
            raise ConfigError(f"cannot read {path!r}: line {line} is not UTF-8 text, as CSV inputs are read by "
                              "default: " + ("name its encoding (--encoding latin-1, utf-16) or convert the file "
                                             "first" if flag else
                                             "convert the file first (e.g. iconv -f LATIN1 -t UTF-8 in.csv > out.csv)"))


_C1 = re.compile(rb"[\x80-\x9f]")
"""Bytes DuckDB's latin-1 reader refuses (ISO-8859-1's control codes;
Windows-1252's €, curly quotes and dashes)."""
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
"""Characters past U+FFFF (an emoji), whose surrogate pairs DuckDB's utf-16 reader refuses."""


class _Cut(Exception):
    """A compressed stream that ends before its end."""


def _gunzipped(fh) -> Iterator[bytes]:
    """The gzip stream ``fh`` decompressed, its members one after another."""
    d, pending = zlib.decompressobj(wbits=31), b""
    while chunk := pending or fh.read(1 << 20):
        pending = b""
        if d.eof:
            if not chunk.strip(b"\0"):  # the zeros some writers pad a file with
                continue
            d = zlib.decompressobj(wbits=31)  # the next member
        yield d.decompress(chunk, 1 << 24)
        while d.unconsumed_tail:
            yield d.decompress(d.unconsumed_tail, 1 << 24)
        pending = d.unused_data if d.eof else b""
    if not d.eof:
        raise _Cut("it ends before its end-of-stream marker")


def _unzstd(fh) -> Iterator[bytes]:
    """The zstd stream ``fh`` decompressed (pyarrow's reader: it knows a cut frame)."""
    stream = pa.CompressedInputStream(pa.PythonFile(fh, mode="r"), "zstd")
    while True:
        try:
            chunk = stream.read(1 << 20)
        except OSError as exc:  # pyarrow's, without an errno: not the file's reading
            if "Truncated" not in str(exc):
                raise pa.ArrowInvalid(str(exc)) from None  # 'Unknown frame descriptor': not a whole one
            raise _Cut("it ends inside a frame") from None
        if not chunk:
            return
        yield chunk


def _first_undecodable(chunks: Iterator[bytes], encoding: str | None = None) -> tuple[int | None, str] | None:
    """The first line of the text ``chunks`` that DuckDB's reader of
    ``encoding`` (None: UTF-8) does not take, and why; None: none. Every
    chunk is read.

    DuckDB reads less than Python's codecs do (helper-114): its latin-1
    refuses bytes 0x80-0x9F, its utf-16 is little-endian only (a
    big-endian file's byte-order mark read as garbled text) and refuses
    characters past U+FFFF; and Python's UTF-16 decodes any bytes of even
    length (a Latin-1 file read so is one garbled line, which an error then
    quoted: its lines must end as UTF-16's). A file named latin-1 that is
    UTF-8 (every accent two characters) is said so: ``(None, ...)`` when it
    reads as latin-1 too (a warning), else its line."""
    utf16, latin1 = encoding == "utf-16", encoding == "latin-1"
    codec = "utf-16-le" if utf16 else encoding or "utf-8"
    text, lines, bad = codecs.getincrementaldecoder(codec)(), 0, None
    as_utf8 = codecs.getincrementaldecoder("utf-8")() if latin1 else None
    beyond_ascii, first = False, True
    for data in chunks:
        if latin1:
            if bad is None and (found := _C1.search(data)):
                bad = (lines + data.count(b"\n", 0, found.start()) + 1,
                       "holds a byte of 0x80-0x9F, which DuckDB's latin-1 does not read (Windows-1252's euro sign, "
                       "curly quotes or dashes?): convert the file first (e.g. iconv -f CP1252 -t UTF-8)")
            lines += data.count(b"\n")
            beyond_ascii = beyond_ascii or not data.isascii()
            if as_utf8 is not None:  # to the end: a UTF-8 file is said so
                try:
                    as_utf8.decode(data)
                except UnicodeDecodeError:
                    as_utf8 = None
            continue
        if bad is not None:
            continue  # to the end: a cut stream is said first
        if utf16 and first and data[:2] == b"\xfe\xff":
            bad = (1, "is big-endian UTF-16 (its byte-order mark), which DuckDB reads as little-endian only: convert "
                      "the file first (e.g. iconv -f UTF-16 -t UTF-8)")
            continue
        held = text.getstate()[0]  # a character's first bytes, from the chunk before: exc.start counts them
        try:
            decoded = text.decode(data)
        except UnicodeDecodeError as exc:  # the line holding the byte
            bad = (lines + (held + data)[:exc.start].decode(codec, "replace").count("\n") + 1,
                   f"is not {'UTF-16 (little-endian)' if utf16 else 'UTF-8'} text")
            continue
        if utf16 and first and data and "\n" not in decoded and b"\n" in data:
            bad = (1, "is not UTF-16 text (its line ends are no UTF-16 line ends)")
            continue
        first = first and not data
        if utf16 and (found := _ASTRAL.search(decoded)):
            bad = (lines + decoded.count("\n", 0, found.start()) + 1,
                   "holds a character past U+FFFF (an emoji?), which DuckDB's utf-16 does not read: convert the "
                   "file first (e.g. iconv -f UTF-16 -t UTF-8)")
            continue
        lines += decoded.count("\n")
    if bad is None and not latin1:
        try:
            text.decode(b"", final=True)  # a sequence cut at the end
        except UnicodeDecodeError:
            bad = (lines + 1, f"is not {'UTF-16 (little-endian)' if utf16 else 'UTF-8'} text")
    if as_utf8 is not None and beyond_ascii:
        try:
            as_utf8.decode(b"", final=True)
        except UnicodeDecodeError:
            return bad
        if bad is None:
            return (None, "UTF-8")
        return (bad[0], "is UTF-8 text (an accented letter's two bytes), not latin-1: leave --encoding out")
    return bad


def fingerprint(paths: list[str]) -> dict[str, tuple[int, int, int] | None]:
    """Identity, size and modification time of each file (None: missing), to
    tell whether an input changed during a run (a file replaced by an
    upstream ``mv`` at night is read half old, half new)."""
    out: dict[str, tuple[int, int, int] | None] = {}
    for p in paths:
        try:
            st = os.stat(p)
            out[p] = (st.st_ino, st.st_size, st.st_mtime_ns)
        except OSError:
            out[p] = None
    return out


def abandon_source(con: duckdb.DuckDBPyConnection) -> None:
    """End a failed reader's source transaction and attachment here, where a
    server that has gone away is only an error: left to ``close()``, DuckDB's
    postgres extension fails its ROLLBACK in a destructor and aborts the
    process ('terminate called after throwing an instance of
    duckdb::Exception')."""
    for stmt in ("ROLLBACK", 'DETACH DATABASE IF EXISTS "__sqlanon_src"'):  # io's and warehouse's alias
        with contextlib.suppress(duckdb.Error):
            con.execute(stmt)


_CONVERT = re.compile(r"Could not convert string .* to ")

_CSV_CAUSE = re.compile(
    r"(Error when converting column|Expected Number of Columns|Value with unterminated quote|Invalid unicode"
    r"|Maximum line size|Line does not fit|Invalid CSV)"
)
"""The line of DuckDB's CSV error that says what is wrong. It is found by
what it says, not by its place: the row's text comes before it (``Original
Line:``), on the same line, on the next one (Windows line ends), or over
several (a quoted field's line breaks), and must never be taken for it."""


_LINE_SIZE = re.compile(r"Maximum line size of (\d+) bytes exceeded\. Actual Size: ?(\d+) bytes")
LONGEST_LINE = 1 << 30
"""The longest CSV line sqlanon reads back, in bytes: DuckDB allocates its
buffers after ``max_line_size`` (2**31 failed, out of memory)."""


def longer_lines(exc: BaseException, current: int | None) -> int | None:
    """The ``max_line_size`` to read a CSV file again with, when DuckDB's
    read failed on a line past the current one (a 3 MB text value: 2 MB is
    its default): twice that line, or four times the current limit if more,
    so a longer one further on takes few more reads. None: another error,
    or a line past :data:`LONGEST_LINE`."""
    found = _LINE_SIZE.search(str(exc))
    if found is None:
        return None
    size = max(2 * int(found[2]), 4 * (current or int(found[1])))
    return min(size, LONGEST_LINE) if int(found[2]) < LONGEST_LINE and size > (current or 0) else None


def with_longer_lines(read: Callable[[int | None], _T], line_size: int | None = None, what: str = "the input",
                      whose: Callable[[InputError], bool] = lambda exc: True) -> _T:
    """``read(line_size)``, and while it fails on a CSV line of ``what``
    past that limit, again with a larger one (:func:`longer_lines`): a text
    value of 3 MB failed the run, DuckDB's CSV reader taking lines of 2 MB.
    ``whose(error)``: whether the error is of the file ``read`` reads (and
    not of another it reads too)."""
    while True:
        try:
            return read(line_size)
        except InputError as exc:
            # The size is in DuckDB's error, or (a line among those its sniffer reads) in our hint only.
            size = (longer_lines(exc.__cause__ or exc, line_size) or longer_lines(exc, line_size)) if whose(exc) \
                else None
            if size is None:
                raise
            log.info("%s has lines past %d bytes: reading it with a limit of %d", what, line_size or 2_000_000, size)
            line_size = size


_CSV_UNCONVERTED = re.compile(r"CSV Error on Line: (?P<line>\d+)\b.*?Error when converting column "
                              r"\"(?P<column>.*?)\"\. Could not convert string .* to '(?P<type>[A-Z_ ]+)'", re.S)
"""DuckDB's error of a CSV value its column's guessed type cannot take."""


_UNQUALIFIED_MISSING = re.compile(
    r'\b(?:relation|type) "[^".]+" does not exist|\bfunction [^\s".(]+\([^)]*\) does not exist')
"""A PostgreSQL error about a relation, type or function named without its
schema: every name of a run's own statements is qualified, so user code the
server ran for it (a view's function, a policy, trigger, constraint, domain
check, index expression, event trigger) looked it up on the run's path."""


def _binds(con: duckdb.DuckDBPyConnection, relation: str) -> bool:
    """Whether DuckDB binds a query of ``relation`` (a view whose tables and
    columns are there); reads no row, and leaves a transaction usable."""
    try:
        con.execute(f"DESCRIBE SELECT * FROM {relation}")
    except duckdb.Error:
        return False
    return True


@contextlib.contextmanager
def _as_default_database(con: duckdb.DuckDBPyConnection, name: str):
    """``name`` (an attached file) as ``con``'s default database while the
    block runs, as it is to the file's own users: a view of schema ``rpt``
    naming ``anon`` unqualified finds ``main.anon`` of its file opened
    directly, but not of the file attached under another name (it was taken
    for broken already, and a replacing table broke it, exit 0)."""
    was = con.execute("SELECT current_database(), current_schema()").fetchone()
    con.execute(f"USE {ident(name)}")
    try:
        yield
    finally:
        con.execute(f"USE {ident(list(was))}")


def lost_columns(target: str, old: list[str], new: list[str], same=lambda name: name) -> list[tuple]:
    """The warning (``log.warning``'s arguments, in a list: none or one)
    that the columns of the table ``target`` replaces (``old``) that the
    output lacks (``new``; compared as ``same`` makes them) went with it: a
    column someone added to last night's output (an analyst's notes)
    vanished with its values, without a word (helper-100). Said once the
    replacing is committed (a failure after it replaces nothing)."""
    kept = {same(n) for n in new}
    gone = [n for n in old if same(n) not in kept]
    if not gone:
        return []
    return [("%s: the replaced table's %s %s %s not in the output and %s with it, values and all", target,
             "column" if len(gone) == 1 else "columns", listed(gone, 10),
             *(("was", "went") if len(gone) == 1 else ("were", "went")))]


def safe_path_hint(line: str) -> str:
    """What to add to a PostgreSQL error ``line`` that :data:`_UNQUALIFIED_MISSING`
    matches: the run's sessions work on ``search_path = pg_catalog, pg_temp``
    (warehouse.SAFE_PATH), where such a name is not found."""
    if not _UNQUALIFIED_MISSING.search(line):
        return ""
    return ("; the run's sessions use search_path = pg_catalog, pg_temp: code the server runs for them (a view's "
            "function, a policy, trigger, constraint or domain check) must name that schema, or have a "
            "search_path of its own (ALTER FUNCTION ... SET search_path = ...)")


def first_line(exc: BaseException) -> str:
    """An error as one line: its first. DuckDB's CSV errors put their cause
    further down: it is added, with the file. Data stays out: never the
    row's text (the ``Original Line``), nor the value a conversion failed
    on (``Could not convert string "John Smith" to 'BIGINT'``); the line
    number finds it."""
    lines = str(exc).strip().splitlines()
    if not lines:
        return type(exc).__name__
    server = re.match(r'(.*Failed to (?:prepare|execute) (?:query|COPY)) "', lines[0])
    # PostgreSQL's error ends the statement DuckDB quotes over many lines:
    # 'ERROR: …', or libpq's own ('server closed the connection unexpectedly').
    cause = next((x.rsplit('": ', 1)[1] for x in reversed(lines) if '": ' in x), None) if server else None
    if server and cause and cause.strip():
        line = f"{server[1]}: {' '.join(cause.split())}"
    elif "Error when sniffing file" in lines[0] and len(lines) > 1:
        # The file is named by the caller (DuckDB's name is "" for a list of files).
        line = (re.sub(r' ?"[^"]*"\.?$', "", lines[0]) + ": " + lines[1].strip()
                + " (mixed line ends, an encoding other than UTF-8, a line over 2 MB, a damaged or cut compressed "
                  "file, or, to verify, a quote escaped by a backslash where CSV doubles it?)")
    elif "CSV Error on Line" not in lines[0]:
        line = lines[0]
    else:
        why = next((x.strip() for x in lines[1:] if _CSV_CAUSE.match(x.strip())), "")
        file = next((x.split("=", 1)[1].strip() for x in lines if x.strip().startswith("file = ")), "")
        line = lines[0] + (f" of {file}" if file else "") + (f": {why}" if why else "")
        if _LINE_SIZE.search(line):
            line += " (a line longer than DuckDB's CSV reader takes: write the file as Parquet)"
        elif "Invalid unicode" in line:  # what to do, not only what is wrong (helper-107)
            line += (" (CSV inputs are read as UTF-8: convert the file first, e.g. iconv -f LATIN1 -t UTF-8 "
                     "in.csv > out.csv)")
    return _CONVERT.sub("Could not convert a value to ", line)


_format_of = file_format


def split_table_name(name: str) -> list[str]:
    """``schema.table`` → ``[schema, table]``; quote a part holding a dot: ``"a.b".c``."""
    part = r'"((?:[^"]|"")+)"|([^."][^.]*)'  # quoted, or bare (not starting with a quote)
    m = re.fullmatch(rf"(?:{part})(?:\.(?:{part}))?", name)
    if m is None:  # 'a..b', '"x"y', '.t'; a part holding a dot is quoted: "a.b".c
        raise ConfigError(f"bad table name {name!r}: use table or schema.table")
    q1, p1, q2, p2 = m.groups()
    out = [q1.replace('""', '"') if q1 is not None else p1]
    if q2 is not None or p2 is not None:
        out.append(q2.replace('""', '"') if q2 is not None else p2)
    return out


def duckdb_table_key(table: Sequence[str]) -> tuple[str, str]:
    """A table name as DuckDB resolves it: schema ``main`` by default, case-insensitive (:func:`fold_name`)."""
    schema = table[0] if len(table) == 2 else "main"
    return fold_name(schema), fold_name(table[-1])


_NAMED = (f"translate(schema_name, '{ASCII_UPPER}', '{ASCII_LOWER}') = ? AND "
          f"translate(table_name, '{ASCII_UPPER}', '{ASCII_LOWER}') = ?")
"""A condition on DuckDB's catalog functions: the table of a :func:`duckdb_table_key` (two parameters)."""


# --------------------------------------------------------------------------- sources


class DuckDBReadable:
    """Sources that DuckDB reads itself: queries run on the worker's connection."""

    dialect = "duckdb"

    def export_snapshot(self):
        """``(source, holder)``: files have no snapshot to share (see the
        PostgreSQL source); the source must not change during a run."""
        return self, None

    def arrow_schema(self, con: duckdb.DuckDBPyConnection) -> pa.Schema:
        """Column names and types, from a query that reads no rows. A type
        DuckDB cannot hand to Arrow at all (TIME_NS) failed with its words
        alone, no column named (helper-133): named, with what to do."""
        stmt = render("schema.sql", relation=self.relation)
        try:
            return con.execute(stmt.sql, stmt.params).fetch_arrow_table().schema
        except duckdb.NotImplementedException as exc:
            named = self._unconvertible(con) if "Arrow Conversion" in str(exc) else []
            if not named:
                raise self.unreadable(exc) from exc
            raise ConfigError(f"column {named[0][0]!r} of {self.describe()!r} is {named[0][1]}, which DuckDB cannot "
                              "hand over to the anonymizer or any output (not even to leave it out): cast it in a "
                              "view of the table (a TIME_NS to TIME; any type to text)") from None
        except duckdb.Error as exc:
            raise self.unreadable(exc) from exc

    def _unconvertible(self, con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
        """The first column (name, DuckDB type) that Arrow cannot take, each
        column tried alone: its type's text would also match a struct's field
        or an enum's value spelt so ('STRUCT(TIME_NS INTEGER)')."""
        with contextlib.suppress(duckdb.Error):  # then the probe's own error is the message
            for n, t, *_ in con.execute(f"DESCRIBE SELECT * FROM {self.relation}").fetchall():
                try:
                    con.execute(f"SELECT {ident(n)} FROM {self.relation} LIMIT 0").fetch_arrow_table()
                except duckdb.NotImplementedException:
                    return [(n, t)]
        return []

    def fetch(self, con: duckdb.DuckDBPyConnection, stmt, types=None) -> pa.Table:
        """Run a rendered statement over this source (in DuckDB's types: ``types`` is for other databases)."""
        try:
            return con.execute(stmt.sql, stmt.params).fetch_arrow_table()
        except duckdb.Error as exc:
            raise self.unreadable(exc) from exc

    def unreadable(self, exc: duckdb.Error) -> InputError | ConfigError:
        """The error of a read that failed: a CSV value the type DuckDB
        guessed for its column cannot take ('n/a' at line 25,002 among
        numbers, past the rows it guesses from) is the file's, which every
        retry meets: exit 2, by line and column, never the value (it was
        exit 1, read by a scheduler as 'retry later': helper-67)."""
        m = _CSV_UNCONVERTED.search(str(exc)) if isinstance(exc, duckdb.ConversionException) else None
        if m is None:
            return InputError(f"cannot read {self.describe()!r}: {first_line(exc)}")
        file = re.search(r"^\s*file = (.*)$", str(exc), re.M)  # which of a lake's files
        where = file[1].strip() if file and file[1].strip() else self.describe()
        return ConfigError(f"column {m['column']!r} of {where!r} holds, on line {int(m['line']):,}, a "
                           f"value that DuckDB, reading the column as {m['type']} (it guesses a column's type from "
                           "its first 20,480 rows), cannot read: correct the value or make it empty (NULL), convert "
                           "the file with that column typed (e.g. to Parquet), or drop it (--drop)")

    left_out: tuple[str, ...] = ()
    """Columns the fragments never read (:meth:`leave_out`)."""

    def leave_out(self, drop: Sequence[str]):
        """The source whose fragments never read the ``drop`` columns (nor
        its CSV copy, :meth:`Staging.parsed_copy`): a dropped column that
        cannot be read failed every fragment, such as a CSV file's holding a
        value its guessed type cannot take ('n/a' among numbers past the
        sniffed rows), whose error said to drop it (--drop), or a view's
        whose expression fails."""
        return replace(self, left_out=tuple(drop))

    @property
    def kept_columns(self) -> str:
        """The select list of a fragment's pull: every column but :attr:`left_out`."""
        return f"* EXCLUDE ({', '.join(ident(c) for c in self.left_out)})" if self.left_out else "*"

    def rows_sql(self) -> str:
        """DuckDB's query of every row a fragment's pull may take, in its columns."""
        return f"SELECT {self.kept_columns} FROM {self.relation}"

    def give_way(self, con: duckdb.DuckDBPyConnection) -> None:
        """Nothing: no lock of a file or a DuckDB table holds a read up (a server's table's may)."""

    def redact(self, text: str) -> str:
        """``text`` as it may be logged: a file's reads name no secret."""
        return text

    def select(self, con: duckdb.DuckDBPyConnection, where: str | None = None, params=()) -> pa.Table:
        """The rows satisfying ``where`` (a fragment's clause), as Arrow."""
        sql = self.rows_sql() + (f" WHERE {where}" if where else "")
        try:
            return con.execute(sql, list(params)).fetch_arrow_table()
        except duckdb.OutOfMemoryException as exc:  # not the input's fault, as "cannot read" said (helper-26)
            raise InputError(f"a fragment of {self.describe()!r} did not fit in a worker's memory ({first_line(exc)}): "
                             "raise --worker-memory, or cut more --fragments") from exc
        except duckdb.Error as exc:
            raise self.unreadable(exc) from exc


@dataclass(frozen=True)
class FileSource(DuckDBReadable):
    """Parquet or CSV files: one file, a glob, or a directory of part files."""

    path: str
    fmt: str
    hive: bool = False
    base: str = ""
    """The directory named on the command line (directory sources)."""
    globs: tuple[str, ...] = ()
    """What DuckDB reads when not ``path`` alone: a directory's or a glob's
    files, listed once (escaped), so that every query of the run reads the
    same files, and only those :func:`lake_files` keeps."""
    as_text: bool = False
    """CSV: read every column as the text written (no type guessing), as the
    k/l check of a CSV output must: "1.0" and "1.00" are two values there."""
    text_columns: tuple[str, ...] = ()
    """CSV: the columns read as the text written, the others typed by
    DuckDB's guess. A CSV output's pass-through columns: "yes", "1.00" and
    "1e3" come out as written, not as true, 1.0 and 1000.0. A partition key
    among them is read as the text of its directory names (``hive_types``:
    in ``types``, DuckDB 1.4 fails, and invalidates the connection)."""
    hive_keys: tuple[str, ...] = ()
    """The hive partition keys of the files (``year`` of ``year=2019/``)."""
    coarse: tuple[str, ...] = ()
    """Columns DuckDB may read coarser than the files hold them (Parquet
    nanosecond timestamps with a time zone, nanosecond times and INT96
    timestamps, read to microseconds): one holding a digit past the
    microsecond (:func:`finer_than_microseconds`, asked only of the columns
    a run keeps) can neither pass through unchanged nor be generalized truthfully."""
    date_formats: tuple[str | None, str | None] = (None, None)
    """CSV: the ``dateformat`` and ``timestampformat`` to read with (see
    :func:`csv_date_formats`); None: DuckDB's sniffer guesses."""
    ours: bool = False
    """CSV written by sqlanon: read in the dialect DuckDB writes (comma,
    double quotes), not the one DuckDB's sniffer guesses from the first
    rows, which when none of them is quoted is "no quoting", and a later
    ``"[72, 73]"`` then reads as two columns."""
    file_column: str | None = None
    """A column naming each row's file (``read_csv``'s ``filename``), for checks file by file."""
    rfc_quotes: bool = False
    """CSV: a quote inside a quoted value is written twice (RFC 4180), as
    pandas and Python's csv module read it; DuckDB's sniffer, seeing a
    backslash before a quote, took it for the escape of the whole file, and
    verify read a value written with a doubled backslash and the one
    written with one as one value, two to every reader (helper-181)."""
    hive_null_types: tuple[tuple[str, str], ...] = ()
    """``(key, type)``: the type DuckDB gives a partition key from its
    values when none is :data:`HIVE_NULL`, which makes it VARCHAR (see
    :func:`_hive_null_types`)."""
    max_line_size: int | None = None
    """CSV: the longest line the reader takes, in bytes (None: DuckDB's
    2,000,000; see :func:`longer_lines`)."""
    left_out: tuple[str, ...] = ()
    """Columns the fragments never read (:meth:`DuckDBReadable.leave_out`)."""
    null_strings: tuple[str, ...] = ()
    """CSV: the texts read as NULL (``nullstr``); none: DuckDB's, the empty field only."""
    every_row: bool = False
    """CSV: the columns' types guessed from every row, not the first 20,480 (a whole extra pass)."""
    encoding: str | None = None
    """CSV: the files' text encoding, one of :data:`ENCODINGS` (None: UTF-8)."""

    def files(self) -> list[str]:
        """The files the run reads (listed once, :attr:`globs`)."""
        if not self.globs:
            return [self.path]
        return [f for g in self.globs for f in glob.glob(g)] or list(self.globs)

    @property
    def root(self) -> str:
        """The file, directory, or (for a glob) the directory before the first
        wildcard: one :func:`glob.escape` wrote is a character of its name (a
        job file's directory team[a]: :func:`absolute_pattern`)."""
        if self.base:
            return self.base
        if any(ch in self.path for ch in "*?[") and not os.path.isfile(self.path):
            parts = self.path.split(os.sep)
            fixed = next(i for i, part in enumerate(parts) if has_wildcard(part) or i == len(parts) - 1)
            head = os.sep.join(parts[:fixed])
            return GLOB_ESCAPED.sub(r"\1", head) or (os.sep if self.path.startswith(os.sep) else ".")
        return self.path

    @property
    def relation(self) -> str:
        """The source as an SQL relation (a DuckDB table function call)."""
        # Absolute: a task may run in another working directory (Dask, Spark).
        # DuckDB reads each as a glob: a file's own name escaped (its directory may be named [a]).
        paths = [absolute_pattern(p) for p in self.globs] or [glob.escape(os.path.abspath(self.path))]
        keys = {fold_name(k) for k in self.hive_keys}
        # Spark and Hive write a NULL partition value so; DuckDB reads the text.
        nulls = [k for k in self.hive_keys if any(f"{os.sep}{k}={HIVE_NULL}{os.sep}" in p for p in paths)]
        hive_text = [c for c in self.text_columns if fold_name(c) in keys]
        types = {} if self.as_text else {k: t for k, t in self.hive_null_types if k not in hive_text}
        return render(
            "read_file.sql", paths=paths, fmt=self.fmt, hive=self.hive, as_text=self.as_text,
            text_columns=[c for c in self.text_columns if fold_name(c) not in keys],
            hive_text=hive_text, ours=self.ours or self.rfc_quotes, header=True,
            delim=self.delimiter, dateformat=self.date_formats[0], timestampformat=self.date_formats[1],
            hive_nulls=[(k, types.get(k)) for k in nulls], hive_null=HIVE_NULL, filename=self.file_column,
            max_line_size=self.max_line_size, null_strings=list(self.null_strings), every_row=self.every_row,
            encoding=self.encoding, compression=csv_compression(paths),
        ).sql

    @property
    def delimiter(self) -> str | None:
        """CSV: the delimiter to read with: a tab for ``.tsv``, a comma for
        our own output, else None (DuckDB's sniffer guesses: ``;`` is common)."""
        if self.fmt != "csv":
            return None
        delimiter = csv_dialect(self.path)[0]
        return delimiter if delimiter != "," or self.ours else None

    def attach(self, con: duckdb.DuckDBPyConnection) -> None:
        """Nothing to attach: files are read by the table function."""

    def detach(self, con: duckdb.DuckDBPyConnection) -> None:
        """Nothing to detach."""

    def describe(self) -> str:
        return self.base or self.path

    def same_path(self, other: str) -> bool:
        try:
            return os.path.exists(other) and any(
                os.path.samefile(other, p) for g in self.globs or (self.path,) for p in glob.glob(g, recursive=True)
            )
        except OSError:
            return False


READER_NULLS = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>",
                "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")
"""The texts pandas' ``read_csv`` reads as NaN by default (pyarrow's, in a
column it types otherwise than as text, are these but ``<NA>`` and
``None``): a CSV output's ℓ is checked read so too, where 'NA' beside '5'
and '5.0' made DuckDB's guess text, two values there, one to pandas
(helper-95)."""


PARSED_COPY = "input.parquet"
"""The name of a CSV source's copy in a run's staging area (:meth:`Staging.parsed_copy`)."""
PRIVATE = "private"
"""The directory of a run's staging area that holds that copy, this user's only."""


@dataclass(frozen=True)
class ParsedCopy(FileSource):
    """A CSV source parsed once for a run's fragments (:meth:`Staging.parsed_copy`):
    named after the source it holds, in a fragment's errors too."""

    of: str = ""
    """The CSV source's own name (:meth:`FileSource.describe`)."""

    def describe(self) -> str:
        return self.of


def csv_text(source: FileSource) -> FileSource:
    """``source`` read as the text written, every column (:attr:`FileSource.as_text`),
    for the checks on a CSV file's text: its partition keys too, as the text of
    their directory names (:attr:`FileSource.text_columns`). ``all_varchar``
    types CSV cells only: DuckDB still types a key from its directory names
    (``year=2020`` a BIGINT, ``dt=2020-01-01`` a DATE), where those checks'
    ``trim()`` failed the run; and it reads ``dt=2020-01-01 10:00:00.1234567``
    as a TIMESTAMP cut to microseconds, which its text tells."""
    return replace(source, as_text=True, text_columns=tuple(dict.fromkeys([*source.text_columns, *source.hive_keys])))


DATE_ORDERS = ("DMY", "MDY")


def _swap_day_month(fmt: str | None) -> str | None:
    """``fmt`` with day and month swapped when it writes both as numbers
    before the year (``%d/%m/%Y`` → ``%m/%d/%Y``), else None (ISO dates
    are never read the other way)."""
    if not fmt:
        return None
    d, m, y = fmt.find("%d"), fmt.find("%m"), max(fmt.find("%Y"), fmt.find("%y"))
    if d < 0 or m < 0 or y < max(d, m):
        return None
    return fmt.replace("%d", "\0").replace("%m", "%d").replace("\0", "%m")


FILE_COLUMN = "__sqlanon_file"
"""The column naming each row's file, where a check reads a lake file by file."""


def file_column(names: Sequence[str]) -> str:
    """:data:`FILE_COLUMN`, lengthened until the lake's columns (``names``)
    hold no such name in any case: a lake's own __sqlanon_file column failed
    the run with DuckDB's binder error, --drop'ped too (helper-199)."""
    taken = {n.lower() for n in names}
    name = FILE_COLUMN
    while name in taken:
        name += "_"
    return name


def csv_date_formats(con: duckdb.DuckDBPyConnection, source: FileSource, schema: pa.Schema, columns: Sequence[str],
                     order: str | None) -> tuple[str | None, str | None]:
    """The ``dateformat`` and ``timestampformat`` to read a CSV source with.

    DuckDB's sniffer takes '01/02/2020' day first when no value tells (a US
    file of the 1st to the 12th of a month), and it guesses each file of a
    lake apart: every such date of ``columns`` (typed as ``schema`` says)
    would be published as another date, in one file among others read right.
    ``order`` (``DMY``, ``MDY``) says which: the formats sniffed from a file
    that holds such dates, day and month in that order, for every file.
    Without it a file whose values of a column all read both ways is
    refused, naming the column, the file and a value. Returns None for
    DuckDB's guess.
    """
    dated = [c for c in columns if pa.types.is_date(schema.field(c).type) or pa.types.is_timestamp(schema.field(c).type)]
    if source.ours or not dated:
        return (None, None)
    files = source.files()
    # Numbers before the year: day and month when both are 12 or less (and differ) read both ways.
    pattern = r"^\s*(\d{1,2})[/.-](\d{1,2})[/.-]\d{2}(\d{2})?\b"
    name = file_column(schema.names)
    text = csv_text(replace(source, text_columns=(), date_formats=(None, None),
                            file_column=None if len(files) == 1 else name)).relation
    file = ident(name)

    def parts(c: str) -> tuple[str, str, str]:
        v = f"nullif(trim({ident(c)}), '')"
        return (v, *(f"TRY_CAST(regexp_extract({v}, {literal(pattern)}, {g}) AS INTEGER)" for g in (1, 2)))

    def query(sql: str) -> list[tuple]:
        try:
            return con.execute(sql).fetchall()
        except duckdb.Error as exc:
            raise InputError(f"cannot read {source.describe()!r}: {first_line(exc)}") from exc

    if order is not None:  # the formats of a file that holds such dates, in that order, for every file
        found = [(files[0],)] if len(files) == 1 else query(
            f"SELECT {file} FROM {text} WHERE " + " OR ".join(f"{a} IS NOT NULL" for _, a, _ in map(parts, dated))
            + " LIMIT 1")
        if not found:
            return (None, None)
        numeric = found[0][0]
        options = "quote = '\"', comment = ''" + (
            f", delim = {literal(source.delimiter)}" if source.delimiter else "") + (
            f", encoding = {literal(source.encoding)}" if source.encoding else "")
        try:
            compression = csv_compression([numeric])  # (told from the name cut at a '?': helper-192)
            formats = con.execute(f"SELECT DateFormat, TimestampFormat FROM sniff_csv({literal(glob.escape(numeric))}, "
                                  f"compression = {literal(compression)}, "
                                  f"{options})").fetchone()
        except duckdb.Error as exc:
            raise InputError(f"cannot read {numeric!r}: {first_line(exc)}") from exc
        out = []
        for fmt in formats:
            swapped = _swap_day_month(fmt)
            day_first = swapped is not None and fmt.find("%d") < fmt.find("%m")
            out.append(fmt if swapped is None or day_first == (order == "DMY") else swapped)
        return (out[0], out[1])
    # A value tells the order when its day or month is past 12, or it is not of numbers before the year (ISO).
    told = {c: f"NOT coalesce({a} <= 12 AND {b} <= 12, false)" for c, (_, a, b) in zip(dated, map(parts, dated))}
    untold: dict[str, tuple[str, str]] = {}  # column -> (where, a value that reads both ways)
    if len(files) == 1:  # one value that tells ends the scan (ISO dates at the first row)
        for c in dated:
            v, a, b = parts(c)
            if not query(f"SELECT 1 FROM {text} WHERE {v} IS NOT NULL AND {told[c]} LIMIT 1"):
                example = query(f"SELECT {v} FROM {text} WHERE {a} <> {b} LIMIT 1")
                if example:
                    untold[c] = (source.describe(), example[0][0])
    else:  # file by file, as DuckDB guesses each apart: one pass for every column
        aggregates = ", ".join(f"bool_or({told[c]}) FILTER (WHERE {v} IS NOT NULL), min({v}) FILTER (WHERE {a} <> {b})"
                               for c, (v, a, b) in zip(dated, map(parts, dated)))
        for row in query(f"SELECT {file}, {aggregates} FROM {text} GROUP BY {file} ORDER BY {file}"):
            for i, c in enumerate(dated):
                if row[1 + 2 * i] is False and row[2 + 2 * i] is not None:
                    untold.setdefault(c, (row[0], row[2 + 2 * i]))
    for c in dated:
        where, example = untold.get(c, (None, None))
        if example is not None:
            what = "dates" if pa.types.is_date(schema.field(c).type) else "timestamps"
            raise ConfigError(
                f"column {c!r} of {where!r} holds {what} such as {example!r} that read day first "
                "and month first alike (DuckDB reads them day first): say which with --date-order=DMY or "
                "--date-order=MDY, or write them as ISO dates (2020-01-31)"
            )
    return (None, None)


def csv_to_csv(source, target) -> bool:
    """Whether a run reads CSV and writes CSV: its pass-through columns are
    then read as text (:attr:`FileSource.text_columns`)."""
    return (
        isinstance(source, FileSource) and source.fmt == "csv"
        and isinstance(target, FileTarget) and target.fmt == "csv"
    )


@dataclass(frozen=True)
class DuckDBSource(DuckDBReadable):
    """A table in a DuckDB database file, attached read-only by every reader."""

    path: str
    table: tuple[str, ...]
    left_out: tuple[str, ...] = ()
    """Columns the fragments never read (:meth:`DuckDBReadable.leave_out`)."""

    @property
    def root(self) -> str:
        return self.path

    @property
    def relation(self) -> str:
        return ident(["__sqlanon_src", *self.table])

    def attach(self, con: duckdb.DuckDBPyConnection) -> None:
        try:
            path = os.path.abspath(self.path)
            con.execute(f"ATTACH {render('attach.sql', path=path).sql} AS \"__sqlanon_src\" (READ_ONLY)")
            # A view's unqualified names, as the file's own connections resolve them (its main schema):
            # hr.people AS SELECT * FROM adults failed, "Table with name adults does not exist!".
            con.execute("SET search_path = 'memory.main,__sqlanon_src.main'")
            # Every worker attaches: the table alone is looked up, the file's list only for the error.
            relations = ("(SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = '__sqlanon_src' "
                         "UNION ALL SELECT schema_name, view_name FROM duckdb_views() "
                         "WHERE database_name = '__sqlanon_src' AND NOT internal)")
            there = con.execute(f"SELECT count(*) FROM {relations} WHERE {_NAMED}",
                                duckdb_table_key(self.table)).fetchone()[0]
            found = [] if there else con.execute(f"SELECT * FROM {relations} ORDER BY ALL").fetchall()
        except duckdb.Error as exc:
            raise InputError(f"cannot open DuckDB file {self.path!r}: {first_line(exc)}") from exc
        if not there:
            # A typo failed as DuckDB's catalog error, exit 1, where a column's names its close match (helper-42).
            names = [table_text([b] if a == "main" else [a, b]) for a, b in found]
            raise ConfigError(missing_table(table_text(self.table), repr(self.path), names))

    def detach(self, con: duckdb.DuckDBPyConnection) -> None:
        """Release the file (a DuckDB target in the same file attaches it read-write)."""
        con.execute("RESET search_path")
        con.execute('DETACH DATABASE IF EXISTS "__sqlanon_src"')

    def describe(self) -> str:
        return f"{self.path} table {table_text(self.table)}"

    def same_path(self, other: str) -> bool:
        return os.path.exists(other) and os.path.samefile(other, self.path)

    def generated_reads(self) -> list[tuple[str, str]]:
        """``(generated column, column its expression reads)`` of the tables
        the input reads (:meth:`tables_read`): a DuckDB DEFAULT cannot read a
        column, so a default that does is a generated column's expression."""
        tables = self.tables_read()
        con = connect()
        try:
            self.attach(con)
            pairs = []
            for schema, table, column, expr in con.execute(
                    "SELECT schema_name, table_name, column_name, column_default FROM duckdb_columns() "
                    "WHERE database_name = '__sqlanon_src' AND column_default IS NOT NULL").fetchall():
                if duckdb_table_key((schema, table)) in tables:
                    parsed = json.loads(con.execute("SELECT json_serialize_sql(?)", [f"SELECT {expr}"]).fetchone()[0])
                    pairs += [(column, read) for read in dict.fromkeys(_column_refs(parsed))]
            return pairs
        finally:
            con.close()

    def tables_read(self) -> set[tuple[str, str]]:
        """The tables of the file whose rows the input reads (:meth:`reads`)."""
        return self.reads().tables

    def files_read(self) -> list[str]:
        """The local files whose rows the input reads through its views (:meth:`reads`)."""
        return self.reads().existing_files()

    def reads(self) -> "Reads":
        """The tables of the file whose rows the input reads, as
        :func:`duckdb_table_key`: the table itself, or every table below a
        view (views over views followed). DuckDB records no dependencies of a
        view, so its query (the text DuckDB keeps, ``CREATE VIEW … AS``
        dropped) is parsed by DuckDB (``json_serialize_sql``) for the tables
        it names. Where a name could mean more than one table (unqualified:
        the view's schema or ``main``; a CTE of that name) all count: this
        refuses an output, and a refusal too many is one line, a table
        overwritten is its rows. A table macro the view calls is followed as
        a view is, every overload, and so is a scalar macro's expression;
        ``query_table()`` and ``query()``, which name tables in text, may read
        any (a view over them replaced its own table: helper-17, helper-20).

        And the local files the views read (``read_parquet('x.parquet')``,
        ``FROM 'x.csv'``, a glob), as absolute patterns (``~`` and relative
        names resolved as DuckDB resolves them): an output there replaced
        them, and a change of one during the run went unseen. Files named
        only at run time (``query()``, a macro's argument, an expression)
        make the reads ``opaque``."""
        con = connect()
        try:
            self.attach(con)
            # What each view, and each macro (every overload; a name may be a view's and a macro's), reads.
            views: dict[tuple, list[tuple[str, str]]] = {}
            for schema, name, sql in con.execute(
                    "SELECT schema_name, view_name, sql FROM duckdb_views() "
                    "WHERE database_name = '__sqlanon_src' AND NOT internal").fetchall():
                m = _VIEW_HEADER.fullmatch(sql.strip())
                views.setdefault((fold_name(schema), fold_name(name)), []).append(
                    (fold_name(schema), m.group(1) if m else ""))
            tables = {duckdb_table_key(t) for t in con.execute(
                "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = '__sqlanon_src'").fetchall()}
            schemas = {schema for schema, _ in tables | set(views)}
            for schema, name, kind, body in con.execute(
                    "SELECT schema_name, function_name, function_type, macro_definition FROM duckdb_functions() "
                    "WHERE database_name = '__sqlanon_src' AND function_type IN ('table_macro', 'macro')").fetchall():
                query = body if kind == "table_macro" else f"SELECT {body}"  # a scalar macro: an expression
                views.setdefault(("macro", fold_name(schema), fold_name(name)), []).append((fold_name(schema), query))
            found: set[tuple[str, str]] = set()
            names: list[str] = []  # of files
            opaque = False
            todo, seen = [duckdb_table_key(self.table)], set()
            while todo:
                key = todo.pop()
                if key in seen:
                    continue
                seen.add(key)
                if key in tables:
                    found.add(key)
                for schema, query in views.get(key, ()):
                    parsed = json.loads(con.execute("SELECT json_serialize_sql(?)", [query]).fetchone()[0])
                    if parsed.get("error"):  # not parsed: every table might be read
                        return Reads(tables, [], True)
                    for ref in _base_tables(parsed):
                        name, in_schema = fold_name(ref["table_name"]), fold_name(ref.get("schema_name", ""))
                        if in_schema in schemas:
                            todo.append((in_schema, name))
                        else:  # unqualified, or a database's name (db.table); or a file's ('x.parquet')
                            todo += [(schema, name), ("main", name)]
                            if not {(schema, name), ("main", name)} & (tables | set(views)):
                                names.append(ref["table_name"])
                    for call in _function_calls(parsed):  # in FROM or in an expression
                        name, in_schema = fold_name(call["function_name"]), fold_name(call.get("schema", ""))
                        if name in ("query_table", "query"):
                            return Reads(tables, [], True)
                        if name in _FILE_READERS and call.get("children"):
                            named = _constant_texts(call["children"][0])
                            opaque = opaque or named is None
                            names += named or []
                        todo += [("macro", s, name) for s in ((in_schema,) if in_schema in schemas else (schema, "main"))]
            # Patterns DuckDB globs from the working directory: escaped as such (helper-190)
            patterns = [absolute_pattern(os.path.expanduser(name)) for name in names]
            return Reads(found, list(dict.fromkeys(patterns)), opaque)
        finally:
            con.close()


_VIEW_HEADER = re.compile(
    r'CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP(?:ORARY)?\s+)?VIEW\s+'
    r'(?:(?:"(?:[^"]|"")*"|[^\s".(]+)\.)*(?:"(?:[^"]|"")*"|[^\s".(]+)\s*'  # [db.][schema.]name
    r'(?:\((?:"(?:[^"]|"")*"|[^")])*\)\s*)?AS\s+(.*?);?\s*',  # (column aliases) AS query
    re.DOTALL | re.IGNORECASE,
)
"""The query of the text DuckDB keeps for a view (``duckdb_views().sql``)."""


def _nodes(node):
    """Every object of a ``json_serialize_sql`` tree, depth first."""
    if isinstance(node, list):
        for item in node:
            yield from _nodes(item)
    elif isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _nodes(value)


def _base_tables(tree) -> list[dict]:
    """The table references (``BASE_TABLE``) of a ``json_serialize_sql`` tree."""
    return [n for n in _nodes(tree) if n.get("type") == "BASE_TABLE"]


def _column_refs(tree) -> list[str]:
    """The names of the columns (``COLUMN_REF``) a ``json_serialize_sql`` tree reads."""
    return [n["column_names"][-1] for n in _nodes(tree) if n.get("class") == "COLUMN_REF" and n.get("column_names")]


_FILE_READERS = frozenset({
    "read_parquet", "parquet_scan", "read_csv", "read_csv_auto", "sniff_csv", "read_json", "read_json_auto",
    "read_ndjson", "read_ndjson_auto", "read_json_objects", "read_ndjson_objects", "read_text", "read_blob",
})
"""DuckDB's table functions that read files named by their first argument."""


def _constant_texts(node: dict) -> list[str] | None:
    """The text constants of an argument: ``'x'`` or a list of them, ``['x',
    'y']``; None when it is known only at run time (a macro's parameter, an
    expression)."""
    if node.get("class") == "CONSTANT":
        value = node.get("value") or {}
        return [value["value"]] if not value.get("is_null") and isinstance(value.get("value"), str) else []
    if node.get("class") == "FUNCTION" and node.get("function_name") == "list_value":
        texts = [_constant_texts(child) for child in node.get("children", [])]
        return None if None in texts else [t for each in texts for t in each]
    return None


@dataclass(frozen=True)
class Reads:
    """What a DuckDB input reads (:meth:`DuckDBSource.reads`)."""

    tables: set[tuple[str, str]]
    files: list[str]
    """Absolute paths or glob patterns of the local files its views read."""
    opaque: bool = False
    """Whether it may read files it names only at run time."""

    def existing_files(self) -> list[str]:
        """The files that :attr:`files` names now: a pattern's matches, or,
        as DuckDB reads a pattern that matches nothing, the file of that very
        name (``raw[1].parquet``, which ``glob`` took for ``raw1.parquet``
        only: a view over it let ``-o 'raw[1].parquet' --overwrite`` replace
        its raw rows; helper-87)."""
        out: list[str] = []
        for pattern in self.files:
            found = [f for f in sorted(glob.glob(pattern, recursive=True)) if os.path.isfile(f)]
            named = GLOB_ESCAPED.sub(r"\1", pattern)  # (the working directory: escaped, absolute_pattern)
            out += found or ([named] if os.path.isfile(named) else [])
        return out


def _function_calls(tree) -> list[dict]:
    """The function calls (``FUNCTION``: in FROM or in an expression) of a ``json_serialize_sql`` tree."""
    return [n for n in _nodes(tree) if n.get("class") == "FUNCTION" and isinstance(n.get("function_name"), str)]


Source = FileSource | DuckDBSource  # and warehouse.PostgresSource


def csv_compression(paths: Sequence[str]) -> str | None:
    """The compression of CSV ``paths`` that all share one by their suffix
    (``gzip``, ``zstd``; ``none`` uncompressed), given to DuckDB's reader: it
    tells it from the name after cutting a ``?`` and what follows, and read
    ``w?/a.csv.gz`` as text (helper-190). None for a mix (it tells each)."""
    kinds = {"gzip" if p.lower().endswith(".gz") else "zstd" if p.lower().endswith(".zst") else "none" for p in paths}
    return kinds.pop() if len(kinds) == 1 else None


def absolute_pattern(pattern: str) -> str:
    """A glob ``pattern`` made absolute, the working directory it is relative
    to escaped: made absolute as text, a directory named team[a] read
    teama's files (os.path.abspath; helper-188)."""
    if os.path.isabs(pattern):
        return os.path.normpath(pattern)  # as os.path.abspath made it ('x/../y/*' matched against y/new: helper-192)
    return os.path.normpath(os.path.join(glob.escape(os.getcwd()), pattern))


def utf8_path(path: str, what: str) -> str:
    """``path``, unless its name cannot reach DuckDB, which takes UTF-8 paths
    only: bytes that are not UTF-8 come to Python as surrogates, and failed
    as an internal error (or after every fragment, for an output)."""
    if any("\udc80" <= ch <= "\udcff" for ch in path):
        raise InputError(f"cannot use {what} {path!r}: its name is not valid UTF-8 (rename it; in a C locale, set "
                         "LANG=C.UTF-8)")
    return path


def open_source(path: str | os.PathLike, table: str | None = None, max_line_size: int | None = None,
                encoding: str | None = None, flag: bool = True) -> Source:
    """Resolve a source argument; the error names the path when nothing is there.
    ``max_line_size``: CSV lines up to that many bytes (:func:`longer_lines`);
    ``encoding``: CSV files' text encoding (:data:`ENCODINGS`; None: UTF-8),
    ``flag``: whether the command takes another (``--encoding``)."""
    spec = utf8_path(os.fspath(path), "input")
    # (a directory named lake.db is a lake: it was 'a DuckDB database' (helper-25))
    if table is not None or (spec.lower().endswith(DUCKDB_SUFFIXES) and not os.path.isdir(spec)):
        if table is None:
            if not os.path.exists(spec):  # said it was a DuckDB database (helper-24)
                raise InputError(f"DuckDB file {spec!r} does not exist")
            if os.path.isfile(spec):
                _check_duckdb_file(spec, "--table")  # a SQLite hr.db: a URL, as that says
            raise ConfigError(f"{spec!r} is a DuckDB database: name the table with --table")
        if os.path.isdir(spec):
            raise ConfigError(f"{spec!r} is a directory, not a DuckDB file: --table names a table of a DuckDB "
                              "file (a directory is read as a lake of files, without --table)")
        if not os.path.isfile(spec):
            raise InputError(f"DuckDB file {spec!r} does not exist")
        _check_duckdb_file(spec, "--table")
        return DuckDBSource(spec, tuple(split_table_name(table)))
    if os.path.isdir(spec):
        _refuse_table_format(spec)
        files = lake_files(os.path.join(glob.escape(spec), "**", "*"), spec)
        if not files:
            raise InputError(f"directory {spec!r} holds no .parquet, .csv or .tsv files (names starting with _ or . "
                             "are skipped)")
        fmt = _one_format(files, f"directory {spec!r}")
        keys = _hive_keys(files, spec)
        _refuse_keys_above(spec, keys)  # before every file's footer is read
        refuse_unreadable_text(files, encoding, flag)  # before the sniffer reads it to the cut
        coarse = _check_file_columns(files, fmt, spec, max_line_size, encoding)
        return _hive_null_types(FileSource(files[0], fmt, bool(keys), spec, tuple(glob.escape(f) for f in files),
                                           hive_keys=keys, coarse=coarse, max_line_size=max_line_size,
                                           encoding=encoding if fmt == "csv" else None))
    fmt = _format_of(spec)
    if fmt is None and not os.path.exists(spec) and not any(ch in spec for ch in "*?["):
        raise InputError(f"input {spec!r} does not exist")
    if fmt is None:
        raise ConfigError(
            f"cannot tell the format of {spec!r}: name a .parquet, .csv or .tsv file, a glob, a directory "
            "or a .duckdb file with --table"
        )
    if any(ch in spec for ch in "*?[") and not os.path.isfile(spec):
        root = FileSource(spec, fmt).root
        _refuse_table_format(root)
        files = lake_files(spec, root)
        if not files:
            raise InputError(f"no file matches {spec!r} (names starting with _ or . below {root!r} are skipped)")
        fmt = _one_format(files, repr(spec))
        keys = _hive_keys(files, root)
        _refuse_keys_above(root, keys)  # before every file's footer is read
        refuse_unreadable_text(files, encoding, flag)  # before the sniffer reads it to the cut
        coarse = _check_file_columns(files, fmt, root, max_line_size, encoding)
        return _hive_null_types(FileSource(spec, fmt, bool(keys), globs=tuple(glob.escape(f) for f in files),
                                           hive_keys=keys, coarse=coarse, max_line_size=max_line_size,
                                           encoding=encoding if fmt == "csv" else None))
    if not os.path.isfile(spec):
        if os.path.exists(spec):  # it is read more than once: statistics, sample, fragments
            raise InputError(f"input {spec!r} is not a regular file (a pipe or a device): write it to a file first")
        raise InputError(f"input file {spec!r} does not exist")
    if not os.access(spec, os.R_OK):
        raise InputError(f"input file {spec!r} is not readable")
    refuse_unreadable_text([spec], encoding, flag)  # before the sniffer reads it to the cut
    coarse = _check_file_columns([spec], fmt, max_line_size=max_line_size, encoding=encoding)
    return replace(exact_file(spec, fmt), coarse=coarse, max_line_size=max_line_size,
                   encoding=encoding if fmt == "csv" else None)


_TABLE_FORMATS = (
    (("_delta_log",), "Delta Lake"), ((".hoodie",), "Hudi"), (("metadata/*.metadata.json", "data"), "Iceberg"),
)
"""What marks a directory as a table of a table format (all of them), and its name."""


def _refuse_table_format(root: str) -> None:
    """Refuse a directory that is (or lies in) a Delta Lake, Iceberg or Hudi
    table: its data files hold rows deleted since and older versions of
    rewritten ones until the table is vacuumed; only its log says which
    files make the table now. (A table below the input's root is refused
    by :func:`lake_files`.)"""
    here = os.path.abspath(root)
    while True:
        _refuse_table_directory(here)
        parent = os.path.dirname(here)
        if parent == here:
            return
        here = parent


def _refuse_table_directory(directory: str) -> None:
    """Refuse ``directory`` if it is the top of a table of a table format."""
    for markers, name in _TABLE_FORMATS:
        if all(glob.glob(os.path.join(glob.escape(directory), m)) for m in markers):
            raise ConfigError(
                f"{directory!r} is a {name} table: its directory also holds the files of deleted rows and of older "
                "versions, which only its log tells apart; export a snapshot of it (e.g. to Parquet) and "
                "anonymize that"
            )


def _refuse_tables_below(files: list[str], root: str) -> None:
    """Refuse a table of a table format in a directory between ``root``
    (checked with its ancestors) and a file of the input: a lake of
    tables (``lake/people/_delta_log``) read as files published every
    version of every row."""
    top = os.path.abspath(root)
    checked = {top}
    for f in files:
        here = os.path.dirname(os.path.abspath(f))
        while here not in checked and here.startswith(top + os.sep):
            checked.add(here)
            _refuse_table_directory(here)
            here = os.path.dirname(here)


HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
"""The partition directory name (``city=__HIVE_DEFAULT_PARTITION__``) that
Spark and Hive write for a NULL value."""

_COMPRESSED_CSV = re.compile(r"\.(csv|tsv)\.(gz|zst|zstd|bz2|xz|lzma|lz4|lz|zip|7z|br|z|sz|snappy)$", re.IGNORECASE)
"""A compressed CSV file: DuckDB reads ``.gz`` and ``.zst`` (lower case) ones."""


def lake_files(pattern: str, root: str) -> list[str]:
    """The data files ``pattern`` matches, sorted, skipping every file or
    directory below ``root`` whose name starts with ``_`` or ``.``, as Spark,
    Hive and Arrow do: Spark's ``_temporary/`` attempts, a writer's hidden
    in-progress file and ``_SUCCESS`` would otherwise be read as more rows
    (copies of people: a class of k rows holding fewer than k people)."""
    def hidden(f: str) -> bool:
        return any(part.startswith(("_", ".")) for part in Path(os.path.relpath(f, root)).parts if part != "..")

    matched = sorted(glob.glob(pattern, recursive=True, include_hidden=True))
    # A data file's, or a directory's (a partition moved away: year=2020 -> /cold/2020, helper-25): a link
    # named as another kind of file (README.md) is no data.
    broken = next((f for f in matched if (_format_of(f) or not Path(f).suffix or "=" in Path(f).name)
                   and _dangling(f) and not hidden(f)), None)
    if broken is not None:  # its rows were left out, without a word (helper-17)
        raise InputError(f"{broken!r} is a link to {os.readlink(broken)!r}, which does not exist: its rows would not "
                         "be read; mend the link or leave it out of the input")
    files = [f for f in matched if _format_of(f) and os.path.isfile(f)]
    kept = [utf8_path(f, "input file") for f in files if not hidden(f)]
    if len(kept) < len(files):
        log.info("skipped %d file(s) under names starting with _ or . below %s", len(files) - len(kept), root)
    unread = next((f for f in matched if _COMPRESSED_CSV.search(f) and not _format_of(f) and not hidden(f)), None)
    if unread is not None:  # it was left out, without a word
        if _COMPRESSED_CSV.search(unread)[2].lower() in ("gz", "zst"):
            raise ConfigError(f"{unread!r} would not be read: DuckDB tells a compressed CSV file by a lower-case "
                              "suffix (.gz, .zst); rename it")
        raise ConfigError(f"{unread!r} would not be read: DuckDB reads compressed CSV files as .gz or .zst only; "
                          "decompress it, or compress it with gzip or zstd")
    unnamed = next((f for f in matched if not _format_of(f) and not hidden(f) and _parquet_magic(f)), None)
    if unnamed is not None:  # Hive's 000000_0, Impala's .parq: every reader of the directory reads it (helper-181)
        raise ConfigError(f"{unnamed!r} is a Parquet file whose name does not end in .parquet, which sqlanon would "
                          "not read: rename it (.parquet), or move it out of the input")
    _refuse_tables_below(kept, root)
    seen: dict[tuple[int, int], str] = {}
    for f in kept:
        st = os.stat(f)
        first = seen.setdefault((st.st_dev, st.st_ino), f)
        if first != f:  # a 'latest' symlink, a hard link, a symlink loop
            raise ConfigError(f"{first!r} and {f!r} are one file (a link): its rows would be read twice (every "
                              "person in two rows of a class); leave the link out of the input")
    return kept


def _parquet_magic(path: str) -> bool:
    """Whether ``path`` is a regular file that starts as a Parquet file does (``PAR1``)."""
    try:
        if not os.path.isfile(path):
            return False
        with open(path, "rb") as f:
            return f.read(4) == b"PAR1"
    except OSError:  # unreadable: not read either way, as before
        return False


def _dangling(path: str) -> bool:
    """Whether ``path`` is a symlink whose target does not exist (not one of
    a loop, too deep to follow: a file reached twice, said as such)."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return os.path.islink(path)
    except OSError:
        return False
    return False


def _one_format(files: list[str], what: str) -> str:
    """The format of a lake's files, which must all have one (and one CSV delimiter)."""
    fmts = {_format_of(f) for f in files}
    # Exit 2, as a lake's other files it would not read as given are: a retry fails alike (helper-87).
    if len(fmts) > 1:
        raise ConfigError(f"{what} mixes Parquet and CSV files: name one kind with a glob (dir/*.parquet)")
    if len({csv_dialect(f)[0] for f in files}) > 1:
        raise ConfigError(f"{what} mixes .csv and .tsv files: name one kind with a glob (dir/*.csv)")
    return fmts.pop()


def _csv_lines(path: str, encoding: str | None = None) -> Iterator[str]:
    """The lines of a CSV file as written (gzip or zstd: uncompressed, as
    Arrow streams them; decoded as ``encoding``, None: UTF-8), without their
    ends; none past what cannot be read."""
    import io as _io

    compression = csv_dialect(path)[1]
    try:
        raw = pa.OSFile(path) if compression == "none" else pa.CompressedInputStream(pa.OSFile(path), compression)
        with _io.TextIOWrapper(raw, encoding=encoding or "utf-8-sig", errors="replace", newline="") as fh:
            for line in fh:
                yield line.rstrip("\r\n")
    except (OSError, EOFError, pa.ArrowException):
        return


def looks_delimited(name: str) -> bool:
    """Whether a CSV input's one column ``name`` holds a delimiter: its header read whole."""
    return bool(re.search(r"[,;\t|]", name))


def read_as_one_column(where: str, name: str) -> str:
    """The error of a CSV input ``where`` read as the one column ``name``."""
    return (f"{where} reads as one column, {name!r}: DuckDB could not tell its delimiter (a row with more or "
            "fewer fields than the header, such as an unquoted comma in a value?)")


def csv_break(files: Sequence[str], header: str, encoding: str | None = None) -> str:
    """Where CSV ``files`` whose header reads as the one column ``header``
    (DuckDB's sniffer could not tell their dialect) break, read strictly
    with the delimiter the header holds: ``" (line 1501 of 'x.csv': Expected
    Number of Columns: 3 Found: 2)"``, or ``""``. The sniffer's failure named
    neither the line nor the cause (helper-42). As :func:`first_line`, not
    the row's text: it is the input's data (and its place in DuckDB's error
    moves with the file's line ends: helper-47)."""
    # The delimiter that splits the header into the most fields, quotes kept
    # ('id;"age, years";dx' is three fields of ';', not two of ','): helper-45.
    fields = {d: len(next(csv.reader([header], delimiter=d, quotechar='"'), [])) for d in (",", ";", "\t", "|")}
    delim = max(fields, key=lambda d: fields[d])
    if fields[delim] < 2:
        return ""
    columns = "{" + ", ".join(f"'c{i}': 'VARCHAR'" for i in range(fields[delim])) + "}"
    con = connect()
    try:
        for f in files:
            try:
                con.execute(f"SELECT count(*) FROM read_csv({literal(glob.escape(f))}, delim = {literal(delim)}, "
                            "quote = '\"', "
                            f"escape = '\"', header = true, auto_detect = false, columns = {columns}, "
                            f"strict_mode = true, encoding = {literal(encoding or 'utf-8')})").fetchall()
            except duckdb.Error as exc:
                lines = str(exc).splitlines()
                where = re.search(r"CSV Error on Line: (\d+)", lines[0] if lines else "")
                if where is None:
                    continue
                at = next((i for i, x in enumerate(lines) if _CSV_CAUSE.match(x.strip())), len(lines))
                cause = lines[at].strip().rstrip(".") if at < len(lines) else ""
                # The row's text, to find its line: DuckDB counts records, and a quoted value over
                # several lines put the line it named a few lines above the row (helper-47).
                row = next(("\n".join([x[len("Original Line: "):], *lines[i + 1 : at]]).strip("\r\n")
                            for i, x in enumerate(lines[:at]) if x.startswith("Original Line: ")), "")
                number = int(where.group(1))
                line = _line_holding(f, [x.rstrip("\r") for x in row.split("\n")], number, encoding) if (
                    row.strip()) else None
                return f" (line {line or number} of {f!r}{': ' + cause if cause else ''})"
        return ""
    finally:
        con.close()


def _line_holding(path: str, row: list[str], row_number: int, encoding: str | None = None) -> int | None:
    """The line of ``path`` where ``row``'s lines stand one after another,
    from line ``row_number`` on (the row's number as DuckDB counts rows: no
    row starts above it; a row the same as an earlier one's start, inside a
    quoted value, was taken for it: helper-48), or None."""
    window: collections.deque[str] = collections.deque(maxlen=len(row))
    for number, line in enumerate(_csv_lines(path, encoding), 1):
        window.append(line)
        first = number - len(row) + 1
        if first >= row_number and list(window) == row:
            return first
    return None


def exact_file(path: str, fmt: str) -> FileSource:
    """The file ``path`` as a source, read as named even when the name holds
    glob characters (``data[1].parquet`` would read ``data1.parquet``)."""
    return FileSource(path, fmt, globs=(glob.escape(path),)) if any(c in path for c in "*?[") else FileSource(path, fmt)


CSV_HEADER_BLANKS = "".join(map(chr, [0x20, 0xA0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000]))
"""What DuckDB trims from a CSV header cell to name its column: Unicode's
space separators (category Zs), not tabs."""


def _check_file_columns(files: list[str], fmt: str, root: str | None = None,
                        max_line_size: int | None = None, encoding: str | None = None) -> tuple[str, ...]:
    """Refuse files whose columns DuckDB would rename or misread, by file and name.

    DuckDB renames a repeated column name (``age`` → ``age_1``) and an empty
    one (``column3``): the run would anonymize one ``age`` and publish the
    other as it is. A hive partition key that is also a file's column
    replaces that column's values. And a Parquet DECIMAL of more than 38
    digits is read as a wrong double (DuckDB 1.4).

    Returns:
        The columns DuckDB may read coarser than written: Parquet nanosecond
        timestamps with a time zone, nanosecond times and INT96 timestamps
        (see :attr:`FileSource.coarse`).
    """
    con = connect()
    try:
        # Each file by its escaped name: DuckDB expands 'data[1].parquet' as a
        # pattern (and reads data1.parquet); it reports the file by its name.
        if fmt == "parquet":
            rows = con.execute(
                "SELECT file_name, name, num_children, precision, logical_type, type, converted_type, scale "
                "FROM parquet_schema(?)",
                [[glob.escape(f) for f in files]]
            ).fetchall()
            by_file: dict[str, list[tuple]] = {}
            for row in rows:
                by_file.setdefault(row[0], []).append(row[1:])
            columns = {f: _top_level(elements) for f, elements in by_file.items()}
            if len(columns) > 1:
                columns = _with_duration_units(con, columns)
        else:
            columns = {}
            for f in files:
                # The header row as text, read as the run reads the file, without partition keys.
                relation = render("read_file.sql", paths=[glob.escape(f)], fmt=fmt, hive=False, header=False,
                                  as_text=True, text_columns=(), hive_text=(), ours=False,
                                  delim=exact_file(f, fmt).delimiter, dateformat=None, timestampformat=None,
                                  hive_nulls=(), hive_null=HIVE_NULL, filename=None, max_line_size=max_line_size,
                                  encoding=encoding, compression=csv_compression([f])).sql
                try:
                    header = con.execute(f"SELECT * FROM {relation} LIMIT 1").fetchone()
                except duckdb.Error as exc:  # the file of a lake, and where it breaks (helper-47)
                    hint = csv_break([f], next(_csv_lines(f, encoding), ""), encoding) if (
                        "Error when sniffing file" in str(exc)) else ""
                    raise InputError(f"cannot read {f!r}: {first_line(exc)}{hint}") from exc
                if header is None:  # DuckDB would read a column "column0" from it
                    raise InputError(f"{f!r} is empty: a CSV file starts with its header row")
                # DuckDB names a column by its header cell trimmed of spaces (Unicode's, not tabs):
                # ' age' and 'age' are two 'age's to it, and ' ' no name.
                columns[f] = [(None if name is None else name.strip(CSV_HEADER_BLANKS), None, None, None, None)
                              for name in header]
    except duckdb.Error as exc:
        gone = next((f for f in files if not os.path.lexists(f)), None)
        if gone is not None:  # listed a moment ago: a directory swapped in by another run's --overwrite (helper-170)
            raise InputError(f"cannot read {root or files[0]!r}: {changed_during_run(gone)}; rerun once it is "
                             "complete") from exc
        raise InputError(f"cannot read {root or files[0]!r}: {first_line(exc)}") from exc
    finally:
        con.close()
    if fmt != "parquet" and any(len(cols) > 1 for cols in columns.values()):
        # One file of a lake the sniffer gave up on: where it breaks, not the columns it lacks (helper-45).
        for f, cols in columns.items():
            if len(cols) == 1 and cols[0][0] and looks_delimited(cols[0][0]):
                raise InputError(read_as_one_column(repr(f), cols[0][0]) + csv_break([f], cols[0][0], encoding))
    coarse: dict[str, None] = {}
    for f, cols in columns.items():
        keys = {fold_name(k) for k in _hive_keys([f], root)} if root else set()
        seen: dict[str, str] = {}
        for i, (name, precision, logical, kind, _) in enumerate(cols, 1):
            if name is None or name == "":
                raise ConfigError(f"column {i} of {f!r} has no name: give it one")
            if fold_name(name) in seen:
                other = seen[fold_name(name)]
                named = repr(name) if other == name else f"{other!r} and {name!r} (DuckDB's names ignore case)"
                raise ConfigError(f"{f!r} has two columns named {named}: rename one")
            seen[fold_name(name)] = name
            if fold_name(name) in keys:
                raise ConfigError(
                    f"column {name!r} of {f!r} is also a hive partition key of its directory, whose value "
                    "would replace the column's: rename one"
                )
            if (logical and "NANOS=NanoSeconds()" in logical and (
                    "isAdjustedToUTC=1" in logical or logical.startswith("TimeType"))) or (
                    kind == "timestamps" and not logical):
                # TIMESTAMP(NANOS) with a zone, TIME(NANOS), INT96 (Impala's, legacy Spark's):
                # DuckDB reads microseconds
                coarse[name] = None
            if precision is not None and precision > 38:
                raise ConfigError(
                    f"column {name!r} of {f!r} is a DECIMAL of {precision} digits; DuckDB reads at most 38 "
                    "exactly (this one as a wrong double), and --drop cannot keep it from the file: rewrite the "
                    "file with that column cast (e.g. to text) or without it"
                )
    # After each file's own names: 'age' (text) beside 'Age' (integers) in one
    # file was told as a type clash of the file with itself (helper-23).
    _check_same_columns(columns)
    _check_same_kinds(columns)
    return tuple(coarse)


def finer_than_microseconds(files: list[str], column: str) -> str | None:
    """The first file of ``files`` whose Parquet nanosecond column holds a
    value with a digit past the microsecond (DuckDB reads it cut there), or
    None: pandas writes a zoned datetime64[ns] column so, holding whole
    microseconds mostly, which DuckDB reads exactly. Reads that column of
    each file (pyarrow), named as DuckDB matches it (``TS`` in one file,
    ``ts`` in the next: read as ``ts``, whole microseconds were refused); a
    file that cannot be read fails the run by name (it was refused as
    holding nanoseconds)."""
    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    for f in files:
        try:
            names = pq.read_schema(f).names
            name = next((n for n in names if fold_name(n) == fold_name(column)), column)
            values = pq.read_table(f, columns=[name]).column(0)
        except (OSError, pa.ArrowException, KeyError) as exc:
            raise InputError(f"cannot read column {column!r} of {f!r}: {first_line(exc)}") from None
        if getattr(values.type, "unit", None) != "ns":  # an old TIMESTAMP_MILLIS, say: nothing past the microsecond
            continue
        ticks = pc.fill_null(values.cast(pa.int64(), safe=False), 0).to_numpy(zero_copy_only=False)
        if np.any(ticks % 1000):
            return f
    return None


def _check_same_columns(columns: dict[str, list[tuple]]) -> None:
    """The files of one input must have the same column names (any order).

    DuckDB unions them by name: a column renamed in a later file (``sex`` →
    ``gender``) would read as NULL for its rows under the old name, a QI
    with holes, and the new name would pass through unchanged, raw; so would
    a column only some files have.
    """
    if len(columns) < 2:
        return
    (first, cols), *others = sorted(columns.items())
    want = {fold_name(c[0]): c[0] for c in cols}
    for f, cols in others:
        have = {fold_name(c[0]): c[0] for c in cols}
        adds = [have[n] for n in have if n not in want]
        lacks = [want[n] for n in want if n not in have]
        if adds or lacks:
            def names(xs: list[str]) -> str:
                return ", ".join(map(repr, xs[:5])) + (f" and {len(xs) - 5} more" if len(xs) > 5 else "")

            diff = "; ".join(x for x in (adds and f"it has {names(adds)}", lacks and f"it lacks {names(lacks)}") if x)
            raise ConfigError(
                f"{f!r} does not have the columns of {first!r} ({diff}): the files of one input must share "
                "their columns, or a renamed one would be published raw; align the files or read them through a view"
            )


def _check_same_kinds(columns: dict[str, list[tuple]]) -> None:
    """The files of one input must agree on each column's kind of value
    (:func:`_parquet_kind`: a number, text, a date…).

    DuckDB reads the files as one table, every column in one type their
    types share: a nightly file whose ``age`` came as text ('21y') turned
    the whole column into text, and the QI's generalization from intervals
    into sets, without a word (and a pass-through column's output type).
    Widths may differ (INT32 and INT64, FLOAT and DOUBLE are one kind);
    integers beside floats may not (a 64-bit id read as a double loses
    digits), nor a zoned timestamp beside a naive one.

    Decimals must also fit one DECIMAL of at most 38 digits, as DuckDB
    reads them: decimal(10,2) beside decimal(12,4) read as decimal(12,4),
    exactly; decimal(38,2) beside decimal(38,4) read as decimal(38,2), the
    second file's values rounded (1.2345 published as 1.23, and a QI's
    interval missed its rows' values).
    """
    first: dict[str, tuple[str, str]] = {}
    # name → (digits before the point, file, type), (digits after it, file, type): the most of each
    decimals: dict[str, tuple[tuple[int, str, str], tuple[int, str, str]]] = {}
    for f, cols in sorted(columns.items()):
        for name, precision, _, kind, scale in cols:
            if kind is None:
                continue
            seen = first.setdefault(fold_name(name), (f, kind))
            if seen[1] != kind:
                raise ConfigError(
                    f"column {name!r} holds {kind} in {f!r} but {seen[1]} in {seen[0]!r}: DuckDB would read "
                    "both as one type, changing the column's generalization or output type; align the files "
                    "or read them through a view"
                )
            if kind != "decimals" or precision is None:
                continue
            typ = f"decimal({precision},{scale or 0})"
            whole, frac = (precision - (scale or 0), f, typ), (scale or 0, f, typ)
            most = decimals.setdefault(fold_name(name), (whole, frac))
            most = (max(most[0], whole, key=lambda x: x[0]), max(most[1], frac, key=lambda x: x[0]))
            decimals[fold_name(name)] = most
            if most[0][0] + most[1][0] > 38 and most[0][1] != most[1][1]:  # one file's own: refused below
                (_, f1, t1), (_, f2, t2) = most
                raise ConfigError(
                    f"column {name!r} holds {t1} in {f1!r} but {t2} in {f2!r}: DuckDB would read both as one "
                    f"DECIMAL of at most 38 digits, too few for {most[0][0]} before the point and {most[1][0]} "
                    "after, and round values; write the column with one type in every file, or read them "
                    "through a view"
                )


def _parquet_kind(physical: str | None, converted: str | None, logical: str | None, children: int | None) -> str | None:
    """What a Parquet column holds, as far as reading it beside other files
    changes: nested, dates, timestamps (with a zone or not), times,
    integers, floats, decimals, text, booleans, UUIDs or bytes; None for a
    column of NULLs only (pyarrow's NullType), which takes any type."""
    tags = f"{converted or ''} {logical or ''}".upper()
    if "NULLTYPE" in tags or "UNKNOWN" in tags:
        return None
    if children:
        return "a map" if "MAP" in tags else "a list" if "LIST" in tags else "a struct"
    if "TIMESTAMP" in tags:
        return "timestamps with a time zone" if "ISADJUSTEDTOUTC=1" in tags else "timestamps"
    for tag, kind in (("DATE", "dates"), ("TIME", "times"), ("INTERVAL", "intervals"), ("DECIMAL", "decimals"),
                      ("INT", "integers"), ("UUID", "UUIDs"), ("UTF8", "text"), ("STRING", "text"), ("ENUM", "text"),
                      ("JSON", "text")):
        if tag in tags:
            return kind
    return {"INT96": "timestamps", "INT32": "integers", "INT64": "integers", "FLOAT": "floats",
            "DOUBLE": "floats", "BOOLEAN": "booleans"}.get(physical, "bytes")


_DURATION_UNITS = {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "ns": "nanoseconds"}


def _with_duration_units(con: duckdb.DuckDBPyConnection, columns: dict[str, list[tuple]]) -> dict[str, list[tuple]]:
    """``columns`` (of Parquet files, by file) with the kind of an Arrow
    duration column made ``durations in <unit>``. Parquet has no duration:
    pyarrow writes one as INT64 counts of its unit, which only the file's
    Arrow schema (``ARROW:schema`` metadata) names, and DuckDB reads the
    counts: duration('s') in one file beside duration('ms') in another read
    as one BIGINT column, 300 and 300000 for the same five minutes. Asked
    only of the files with integers of no logical type."""
    plain = {f for f, cols in columns.items() for _, _, logical, kind, _ in cols if kind == "integers" and not logical}
    if not plain:
        return columns
    units: dict[str, dict[str, str]] = {}
    for f, value in con.execute("SELECT file_name, value FROM parquet_kv_metadata(?) WHERE key = 'ARROW:schema'",
                                [[glob.escape(f) for f in sorted(plain)]]).fetchall():
        try:
            schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(value)))
        except (ValueError, pa.ArrowException):
            continue  # not pyarrow's: no unit to tell
        units[f] = {field.name: field.type.unit for field in schema if pa.types.is_duration(field.type)}
    return {f: [(name, precision, logical, f"durations in {_DURATION_UNITS[units[f][name]]}", scale)
                if kind == "integers" and not logical and name in units.get(f, {}) else
                (name, precision, logical, kind, scale)
                for name, precision, logical, kind, scale in cols]
            for f, cols in columns.items()}


def _top_level(elements: list[tuple]) -> list[tuple]:
    """The top-level (name, precision, logical type, kind, scale) of a Parquet
    schema listed depth-first as (name, num_children, precision, logical
    type, physical type, converted type, scale), its root first."""
    out = []
    i = 1

    def past(i: int) -> int:  # the index after the subtree at i
        children = elements[i][1] or 0
        i += 1
        for _ in range(children):
            i = past(i)
        return i

    def leaf_kinds(i: int) -> list[str | None]:  # the kinds of the leaves below i, in order
        name, children, precision, logical, physical, converted, scale = elements[i]
        if not children:
            return [_parquet_kind(physical, converted, logical, children)]
        kinds, j = [], i + 1
        for _ in range(children):
            kinds += leaf_kinds(j)
            j = past(j)
        return kinds

    for _ in range(elements[0][1] or 0):
        name, children, precision, logical, physical, converted, scale = elements[i]
        kind = _parquet_kind(physical, converted, logical, children)
        if children:  # a list of integers is not a list of text (DuckDB reads both as VARCHAR[])
            leaves = leaf_kinds(i)
            kind = None if None in leaves else f"{kind} of {', '.join(sorted(set(leaves)))}"
        out.append((name, precision, logical, kind, scale))
        i = past(i)
    return out


def _partitions(file: str, root: str) -> list[tuple[str, str]]:
    """The ``(key, value)`` of each hive partition directory (``key=value``) of ``file`` below ``root``."""
    # '=x' is none: DuckDB reads a key only with a name (helper-69)
    return [tuple(part.split("=", 1)) for part in Path(os.path.relpath(file, root)).parts[:-1]
            if "=" in part and not part.startswith("=")]


def _hive_keys(files: list[str], root: str) -> tuple[str, ...]:
    """The hive partition keys (``key=value`` directories below ``root``) of
    ``files``, which every file must have (DuckDB reads a lake only so: a new
    night's ``day=…/region=eu/`` failed the run with its raw 'Hive partition
    mismatch', exit 1, helper-67)."""
    parts = {f: [key for key, _ in _partitions(f, root)] for f in files}
    by_file = {f: set(keys) for f, keys in parts.items()}
    first = files[0] if files else None
    other = next((f for f in files if by_file[f] != by_file[first]), None)
    if other is not None:
        def named(f: str) -> str:
            return f"{f!r} by {', '.join(sorted(by_file[f]))}" if by_file[f] else f"{f!r} by none"

        raise ConfigError(f"the files of {root!r} are partitioned by different keys ({named(first)}, {named(other)}): "
                          "DuckDB reads a hive-partitioned lake whose files have the same keys only; give them one "
                          "layout, or name the files of one layout (a glob)")
    return tuple({key: None for keys in parts.values() for key in keys})


def _refuse_keys_above(root: str, keys: tuple[str, ...]) -> None:
    """Refuse a hive-partitioned lake (``keys``) with a ``key=value``
    directory at or above its ``root``: DuckDB reads every such directory
    of a file's absolute path as a partition, so ``/data/site=berlin/lake``
    added a column ``site`` or replaced the files' own ``site`` values with
    'berlin', which the check of the pass-through columns, reading the same
    way, did not see."""
    if not keys:
        return
    for part in Path(os.path.abspath(root)).parts:
        if "=" in part:
            key = part.split("=", 1)[0]
            raise ConfigError(
                f"cannot read {root!r} as a hive-partitioned lake: DuckDB would read its directory {part!r} as a "
                f"partition too (a column {key!r}, replacing a file column of that name); read it through a "
                "path without '=' (a symbolic link to it), or rename that directory"
            )


def refuse_altered_hive_values(source: "FileSource", schema: pa.Schema, drop: tuple[str, ...] = (),
                               leave: str = "drop the key (--drop)") -> None:
    """Refuse partition values that DuckDB's reading of the directory names
    would change (helper-58, each exit 0 before): a key twice in one path
    (``k=1/k=2``: the outer value read, the inner lost); in a key typed as
    integers, a value not written as its number (``k=-00`` read as 0,
    ``k= 5`` as 5); in a key typed as timestamps, a UTC offset (dropped:
    the instant moved) or digits finer than a microsecond (cut)."""
    if not source.hive_keys:
        return
    values: dict[str, set[str]] = {k: set() for k in source.hive_keys}
    for f in source.files():
        parts = _partitions(f, source.root)
        keys = [k for k, _ in parts]
        twice = next((k for k in keys if keys.count(k) > 1), None)
        if twice is not None:
            raise ConfigError(f"{f!r} has the partition key {twice!r} twice in its path, of which DuckDB reads the "
                             "outer value only: rename the inner directory")
        for k, v in parts:
            cut = next((ch for ch in "\\?\n" if ch in v), None)
            if cut is not None and k not in drop and (cut != "\\" or k in schema.names):
                # DuckDB's reading of the name ends there: R\D and R\E both read 'R', one partition (helper-190);
                # at a '?' or a line break it loses the key, a column gone without a word (helper-192)
                raise ConfigError(f"partition directory '{k}={v}' of {source.describe()!r} holds {cut!r}, where "
                                  "DuckDB's reading of a directory's name ends (its value read cut, partitions "
                                  "merged): rename the directory (Spark and pyarrow write such a character as "
                                  f"{urllib.parse.quote(cut, safe='')}), or {leave}")
            if urllib.parse.unquote(v).lower() == "null" and k in schema.names and k not in drop:
                # DuckDB reads it as NULL, pyarrow and Spark as the text: beside a missing value, one class or
                # two (helper-191)
                raise ConfigError(f"partition directory '{k}={v}' of {source.describe()!r} holds the text "
                                  f"{urllib.parse.unquote(v)!r}, which DuckDB reads as a missing value and pyarrow "
                                  f"and Spark as that text: rename the directory ({k}={HIVE_NULL} for a missing "
                                  f"value), or {leave}")
            if k in values and v != HIVE_NULL:
                values[k].add(urllib.parse.unquote(v))  # as DuckDB decodes them (Spark writes 10%3A00)
    for key, seen in values.items():
        typ = schema.field(key).type if key in schema.names and key not in drop else None
        if typ is None:
            continue
        found = []
        if pa.types.is_integer(typ):
            found.append(("numbers not written as DuckDB reads them back",
                          [v for v in seen if not re.fullmatch(r"0|-?[1-9][0-9]*", v)]))
        elif pa.types.is_date(typ):  # '2020-1-1' beside '2020-01-01': one date, two texts to pyarrow (helper-191)
            found.append(("dates not written as DuckDB reads them back (YYYY-MM-DD)",
                          [v for v in seen if not re.fullmatch(r"-?[0-9]{4,}-[0-9]{2}-[0-9]{2}", v)]))
        elif pa.types.is_timestamp(typ) and getattr(typ, "tz", None) is None:
            found.append(("times finer than microseconds, which DuckDB reads cut to microseconds",
                          [v for v in seen if re.search(r"\.[0-9]{6}[0-9]*[1-9]", v)]))
            offset = r"[0-9]:[0-9]{2}(:[0-9]{2}(\.[0-9]*)?)?[+-][0-9]{1,2}(:?[0-9]{2})?$"
            found.append(("times with a UTC offset, which DuckDB reads without it (another instant)",
                          [v for v in seen if re.search(offset, v)
                           and not re.search(r"[+-]0{1,2}(:?00)?$", v)]))  # (a zero offset is UTC's)
        for what, odd in found:
            if odd:
                raise ConfigError(f"partition key {key!r} of {source.describe()!r} holds, in its directory names, "
                                 f"{what} ({', '.join(map(repr, sorted(odd)[:3]))}): rename those directories, or "
                                 f"{leave}")


_HIVE_TYPES = frozenset({"BIGINT", "INTEGER", "HUGEINT", "DOUBLE", "DATE", "TIMESTAMP", "BOOLEAN"})
"""The types DuckDB may give a partition key by its values (VARCHAR aside)."""


def _hive_null_types(source: FileSource) -> FileSource:
    """``source`` with :attr:`FileSource.hive_null_types` set.

    DuckDB types a partition key by its values (``year=2019`` an integer);
    one ``year=__HIVE_DEFAULT_PARTITION__`` (a NULL year, as Spark and Hive
    write it) made it VARCHAR, and a ``year`` QI took set generalization
    instead of intervals. The type it gets is asked of DuckDB over one file
    per other value of the key (no file opened beyond the first: the key's
    type comes from the paths)."""
    types = []
    for key in source.hive_keys:
        by_value: dict[str, str] = {}
        for f in source.files():
            for k, value in _partitions(f, source.root):
                if k == key:
                    by_value.setdefault(value, f)
        if HIVE_NULL not in by_value:
            continue
        others = [glob.escape(f) for v, f in by_value.items() if v != HIVE_NULL]
        if not others:
            continue  # NULL everywhere: no values to tell a type by
        probe = replace(source, globs=tuple(others), hive_null_types=())
        con = connect()
        try:
            typ = con.execute(f"DESCRIBE SELECT {ident(key)} FROM {probe.relation}").fetchone()[1]
        except duckdb.Error as exc:
            raise InputError(f"cannot read {source.root!r}: {first_line(exc)}") from exc
        finally:
            con.close()
        if typ in _HIVE_TYPES:
            types.append((key, typ))
    return replace(source, hive_null_types=tuple(types)) if types else source


SQLITE_HEADER = b"SQLite format 3\0"
"""The first 16 bytes of every SQLite database file."""


def is_sqlite(path: str) -> bool:
    """Whether ``path`` is a SQLite database file (by its header)."""
    try:
        with open(path, "rb") as f:
            return f.read(16) == SQLITE_HEADER
    except OSError:
        return False


def _check_duckdb_file(path: str, option: str, output: bool = False) -> None:
    """``path`` must be a DuckDB database (its header says so): not a Parquet or SQLite file."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as exc:
        raise InputError(f"cannot open DuckDB file {path!r}: {exc.strerror}") from exc
    if head == SQLITE_HEADER and output:  # a URL to it is refused as an output too
        raise ConfigError(f"{path!r} is a SQLite database, which sqlanon reads but does not write: write Parquet, "
                          "CSV, a DuckDB file or PostgreSQL")
    if head == SQLITE_HEADER:
        raise ConfigError(f"{path!r} is a SQLite database: name it as a URL, sqlite:///{os.path.abspath(path)}")
    if head[8:12] != b"DUCK":
        raise ConfigError(
            f"{path!r} is not a DuckDB database: {option} names a table in a DuckDB file (or behind a database URL)"
        )


def write_parquet(
    con: duckdb.DuckDBPyConnection, table: pa.Table, path: str, compression: str = "zstd", as_text: tuple[str, ...] = (),
    arrow_fields: Mapping[str, pa.Field] | None = None,
) -> None:
    """Write an Arrow table to one Parquet file with DuckDB (the ``as_text``
    columns as text, ``arrow_fields`` as :func:`copy_relation` does)."""
    copy_relation(con, table, path, "parquet", compression, as_text, arrow_fields=arrow_fields)


PARQUET_ROW_GROUP_ROWS = 122_880
"""DuckDB's own row group size: a part of it reads in parallel as DuckDB's parts do."""


def write_part(
    con: duckdb.DuckDBPyConnection, table: pa.Table, path: str, compression: str, as_text: tuple[str, ...] = (),
    arrow_fields: Mapping[str, pa.Field] | None = None, is_output: bool = False,
) -> None:
    """Write a worker's part file.

    A part that is only a way to the output (``is_output`` false: the
    coordinator reads it once more into a file or a table) whose columns are
    all of :func:`arrow_writes_exactly` types, none of them to be written as
    text, is written by pyarrow: three times faster than DuckDB's writer on
    the dictionary columns of generalized QIs (BENCHMARKS.md), and DuckDB
    reads it back with the same types and values. Every other part (a
    directory output's parts are the output) is written by DuckDB
    (:func:`write_parquet`); its ``arrow_fields`` only matter there."""
    if is_output or as_text or not all(arrow_writes_exactly(f.type) for f in table.schema):
        write_parquet(con, table, path, compression, as_text, arrow_fields)
        return
    import pyarrow.parquet as pq

    try:
        pq.write_table(table, path, compression=compression, row_group_size=PARQUET_ROW_GROUP_ROWS,
                       store_schema=False, use_dictionary=[f.name for f in table.schema if _few_values(f.type)],
                       **_as_duckdb_writes())
    except pa.ArrowNotImplementedError:  # values pyarrow cannot write (a dictionary holding a NULL): DuckDB can
        write_parquet(con, table, path, compression, as_text, arrow_fields)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(f"cannot write {path!r}: {first_line(exc)}{no_room_hint(exc)}") from exc


def _few_values(t: pa.DataType) -> bool:
    """Whether a column of type ``t`` is written with a dictionary, as DuckDB
    writes it: text and bytes (a generalized QI's few values). Numbers,
    dates and times are written plain: in dictionaries, a column of many
    values (a double, a timestamp, a decimal passing through) made a joined
    output a third larger than DuckDB's (helper-185)."""
    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_dictionary(t)


@functools.lru_cache(maxsize=None)
def _as_duckdb_writes() -> dict:
    """pyarrow's writer options that lay a part out as DuckDB's writer would,
    where this pyarrow takes them (26 does). One data page per row group:
    pyarrow cuts one every 20,000 rows, and DuckDB groups by the dictionary
    columns of its own layout faster (poker's k/l check of 1M rows 0.112 s
    from pyarrow's pages, 0.088 s from one per row group, 0.086 s from
    DuckDB's file; pyarrow writes it faster too, 0.066 against 0.072 s a
    500,000-row part). Decimals of up to 18 digits as integers, as DuckDB
    stores them (pyarrow's fixed-length bytes: +65 % for a decimal(12, 2))."""
    import inspect

    import pyarrow.parquet as pq

    taken = inspect.signature(pq.ParquetWriter.__init__).parameters
    options = {"max_rows_per_page": PARQUET_ROW_GROUP_ROWS, "store_decimal_as_integer": True}
    return {k: v for k, v in options.items() if k in taken}


def _row_groups(files: Sequence[Path], text: list[str]) -> Iterator[pa.Table]:
    """The row groups of Parquet ``files`` in order, their ``text`` columns as dictionaries."""
    import pyarrow.parquet as pq

    for file in files:
        part = pq.ParquetFile(file, read_dictionary=text)
        for i in range(part.num_row_groups):
            yield part.read_row_group(i)


def _text_bytes_per_row(table: pa.Table) -> float:
    """The mean bytes of text a row of ``table`` (dictionary-encoded text
    columns) holds once decoded, from the dictionaries' lengths."""
    import pyarrow.compute as pc

    total = 0.0
    for column in table.columns:
        for chunk in column.chunks:
            lengths = pc.binary_length(chunk.dictionary).take(chunk.indices)
            total += pc.sum(lengths).as_py() or 0
    return total / max(table.num_rows, 1)


def arrow_writes_exactly(t: pa.DataType) -> bool:
    """Whether pyarrow's Parquet writer stores a column of type ``t``, as
    DuckDB hands it over, so that DuckDB reads back the type and values it
    reads from its own writer's file (tests/test_io_parts.py checks each):
    flat types only. (Unlike DuckDB's writer, pyarrow's keeps -0.0 and 0.0
    apart within a dictionary.) Not: intervals (pyarrow cannot write them),
    DuckDB's opaque extension types (UHUGEINT, VARINT), nested types."""
    if pa.types.is_dictionary(t):
        return pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type)
    return (pa.types.is_boolean(t) or pa.types.is_integer(t) or pa.types.is_float32(t) or pa.types.is_float64(t)
            or pa.types.is_decimal128(t) or pa.types.is_string(t) or pa.types.is_large_string(t)
            or pa.types.is_string_view(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)
            or pa.types.is_date32(t) or pa.types.is_time64(t) or pa.types.is_timestamp(t) or pa.types.is_null(t))


def copy_relation(
    con: duckdb.DuckDBPyConnection, data: pa.Table | str, path: str, fmt: str, compression: str = "zstd",
    as_text: tuple[str, ...] = (), like: str | None = None, arrow_fields: Mapping[str, pa.Field] | None = None,
    plain: bool | None = None, params: Sequence = (), row_group_size: int | None = None,
) -> None:
    """``COPY`` an Arrow table or an SQL relation to a file. CSV: delimited and
    compressed as ``like`` (default ``path``) is named: a staging file's name
    does not end as its destination's. Parquet: ``arrow_fields`` (see
    :func:`restorable_fields`) are written into the file's ``ARROW:schema``;
    ``plain``: without dictionaries, as a -0.0 among 0.0 needs (None: a
    pass over the relation finds out, :func:`_negative_zero`), in row groups
    of ``row_group_size`` rows (None: DuckDB's). ``params``: the values the
    relation binds (then ``plain`` is given and ``arrow_fields`` are not)."""
    relation = data
    if isinstance(data, pa.Table):
        con.register("__sqlanon_out", data)
        relation = '"__sqlanon_out"'
    try:
        if fmt == "csv":
            delim, compression = csv_dialect(like or path)
        else:
            delim = None
        arrow_schema = None
        if fmt == "parquet" and (plain is None or arrow_fields):
            described = con.sql(f"SELECT * FROM {relation}")
            if plain is None:
                plain = _negative_zero(con, relation, described, skip=as_text)
            if arrow_fields and any(c in arrow_fields for c in described.columns):
                written = described.limit(0).fetch_arrow_table().schema  # as DuckDB hands the columns to Arrow
                written = pa.schema([pa.field(f.name, pa.string()) if f.name in as_text else f for f in written])
                arrow_schema = _arrow_schema(written, arrow_fields)
        stmt = render("copy_to.sql", relation=relation, path=path, fmt=fmt, compression=compression, as_text=as_text,
                      delim=delim, plain=plain, arrow_schema=arrow_schema, row_group_size=row_group_size)
        con.execute(stmt.sql, [*params, *stmt.params])  # the relation's come first in the statement
    except (duckdb.Error, OSError) as exc:
        raise InputError(f"cannot write {path!r}: {first_line(exc)}{_negative_interval_hint(con, relation, exc)}"
                         f"{no_room_hint(exc)}"
                         ) from exc
    finally:
        if isinstance(data, pa.Table):
            con.unregister("__sqlanon_out")


def changed_during_run(path: str) -> str:
    """What a run says of an input file ``path`` that changed while it read it."""
    return f"the input file {path!r} changed during the run (replaced, rewritten or removed)"


def no_room_hint(exc: BaseException) -> str:
    """What a run needs room for, when a write failed for it: the error
    named a hidden staging file, and not why the disk filled."""
    if getattr(exc, "errno", None) != errno.ENOSPC and "No space left on device" not in str(exc):
        return ""
    return (" (the disk is full: a run writes its parts (and first, for many fragments, a copy of the input: a "
            "CSV input's parsed, a Parquet input's or DuckDB table's ordered by fragment), then its new output, while "
            "the old one stays until it is replaced; the previous output is intact: free room, then rerun)")


def _negative_interval_hint(con: duckdb.DuckDBPyConnection, relation: str, exc: BaseException) -> str:
    """Which columns a Parquet write that failed on a negative INTERVAL
    holds intervals in: one in a list or struct (a top-level one is refused
    before the run, coordinator._check_negative_intervals) failed naming a
    staging part only (helper-30)."""
    if "do not support negative intervals" not in str(exc):
        return ""
    try:
        columns = [name for name, typ, *_ in con.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()
                   if "INTERVAL" in typ]
    except duckdb.Error:
        columns = []
    return (f" (column {', '.join(map(repr, columns)) or '?'}: an INTERVAL with a negative part, which Parquet cannot "
            "hold, and sqlanon's parts are Parquet on the way to every output; cast it to text in a view, or drop it "
            "with --drop)")


_NESTED_FLOAT = re.compile(r"\b(FLOAT|DOUBLE)\b")


def nests_floats(t: pa.DataType) -> bool:
    """Whether an Arrow type holds floats inside a list, struct or map
    (:func:`_negative_zero`: Parquet's dictionaries merge their -0.0 and 0.0)."""
    if pa.types.is_struct(t):
        return any(pa.types.is_floating(f.type) or nests_floats(f.type) for f in t)
    if pa.types.is_map(t):
        return any(pa.types.is_floating(x) or nests_floats(x) for x in (t.key_type, t.item_type))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return pa.types.is_floating(t.value_type) or nests_floats(t.value_type)
    return False


def _negative_zero(con: duckdb.DuckDBPyConnection, relation: str, described, skip: tuple[str, ...]) -> bool:
    """Whether a FLOAT or DOUBLE column of ``relation`` (but those in ``skip``)
    holds a -0.0, which DuckDB's Parquet dictionaries would turn into 0.0;
    true of a column nesting one (a list, struct or map of floats), which
    the dictionaries merge so too (a float8[] from PostgreSQL, where no
    checksum compares the values: helper-179)."""
    kept = [(c, str(t)) for c, t in zip(described.columns, described.types) if c not in skip]
    if any(t not in ("FLOAT", "DOUBLE") and _NESTED_FLOAT.search(t) for _, t in kept):
        return True
    floats = [c for c, t in kept if t in ("FLOAT", "DOUBLE")]
    if not floats:
        return False
    stmt = render("negative_zero.sql", relation=relation, columns=floats)
    return bool(con.execute(stmt.sql, stmt.params).fetchone()[0])


def _restorable(t: pa.DataType) -> bool:
    """An Arrow type that pyarrow reads back from a file's ``ARROW:schema``
    over what DuckDB writes for it, every value the same: a duration (the
    int64 count DuckDB reads and writes as it is), a time zone's name (the
    instants are UTC in the file either way), large and dictionary-encoded
    strings (pandas' unordered categoricals)."""
    if pa.types.is_dictionary(t):  # not an ordered one: DuckDB gives its categories back in another order
        return not t.ordered and (pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type))
    return (pa.types.is_duration(t) or pa.types.is_timestamp(t) and t.tz is not None
            or pa.types.is_large_string(t) or pa.types.is_large_binary(t))


def restorable_fields(files: Sequence[str], read: pa.Schema, columns: Sequence[str]) -> dict[str, pa.Field]:
    """The Arrow fields of ``columns`` that pyarrow (pandas, Polars…) wrote
    into Parquet files and DuckDB would not give back: DuckDB reads a
    duration as its int64 count, a zoned timestamp without its zone's name,
    a categorical as plain strings (``read``: the columns as DuckDB reads
    them), and those of pandas' nullable dtypes (:data:`_PANDAS_NULLABLE`,
    with their entry of pandas' metadata). Written into the output's
    ``ARROW:schema`` (:func:`copy_relation`), they make the pass-through
    columns read back as they were written. Only
    fields every file agrees on; a file without an ``ARROW:schema``
    (DuckDB's, Spark's) ends the search."""
    columns = [c for c in columns if _may_restore(read.field(c).type)]
    if not columns:  # no footer to read (an integer pass-through column cannot be any of them)
        return {}
    import pyarrow.parquet as pq

    found: dict[str, pa.Field] | None = None
    for path in files:
        try:
            f = pq.ParquetFile(path)
        except (OSError, pa.ArrowException):
            return {}  # unreadable to pyarrow: DuckDB's own error comes first elsewhere
        with contextlib.closing(f):
            if b"ARROW:schema" not in (f.metadata.metadata or {}):
                return {}
            schema = f.schema_arrow
        nullable = _pandas_nullable(schema)
        fields = {c: _with_pandas(schema.field(c), nullable.get(c)) for c in columns
                  if c in schema.names and (_restorable(schema.field(c).type) or c in nullable)}
        found = fields if found is None else {
            c: x for c, x in found.items()
            if c in fields and fields[c].equals(x) and _pandas_of(fields[c]) == _pandas_of(x)}
        if not found:
            return {}
    return found or {}


_PANDAS_NULLABLE = re.compile(r"U?Int(8|16|32|64)|Float(32|64)|boolean|string")
"""pandas' nullable dtypes (``numpy_type`` in its metadata), which the
Arrow type alone does not bring back: an ``Int64`` column with NULLs came
back as float64 (2^53 + 1 as 2^53: helper-41), ``string`` as ``str``."""
PANDAS_FIELD_KEY = b"sqlanon:pandas"
"""Where a field of :func:`restorable_fields` carries its column's entry of
pandas' metadata, which :func:`_arrow_schema` writes as the schema's."""


def _pandas_nullable(schema: pa.Schema) -> dict[str, dict]:
    """The entries of pandas' metadata in ``schema`` of its nullable-dtype columns, by name."""
    try:
        meta = schema.pandas_metadata or {}
        entries = [c for c in meta.get("columns", []) if isinstance(c, dict)]
    except (ValueError, TypeError, AttributeError):  # not pandas' JSON: nothing to restore
        return {}
    return {c["name"]: c for c in entries
            if isinstance(c.get("name"), str) and c.get("field_name", c["name"]) == c["name"]
            and isinstance(c.get("numpy_type"), str) and _PANDAS_NULLABLE.fullmatch(c["numpy_type"])}


def _pandas_of(f: pa.Field) -> bytes | None:
    """A field's entry of pandas' metadata (:func:`_with_pandas`), if any."""
    return (f.metadata or {}).get(PANDAS_FIELD_KEY)


def _with_pandas(f: pa.Field, entry: dict | None) -> pa.Field:
    return f if entry is None else f.with_metadata({**(f.metadata or {}), PANDAS_FIELD_KEY: json.dumps(entry)})


def _without_pandas(f: pa.Field) -> pa.Field:
    if PANDAS_FIELD_KEY not in (f.metadata or {}):
        return f
    rest = {k: v for k, v in f.metadata.items() if k != PANDAS_FIELD_KEY}
    return f.with_metadata(rest) if rest else f.remove_metadata()


def _may_restore(read: pa.DataType) -> bool:
    """Whether a column DuckDB reads as ``read`` may be :func:`_restorable`
    in its file, or hold one of :data:`_PANDAS_NULLABLE`."""
    t = pa.types
    return (t.is_integer(read) or t.is_floating(read) or t.is_boolean(read)
            or t.is_timestamp(read) and read.tz is not None or t.is_string(read)
            or t.is_large_string(read) or t.is_string_view(read) or t.is_binary(read) or t.is_large_binary(read)
            or t.is_binary_view(read))


def _arrow_schema(written: pa.Schema, fields: Mapping[str, pa.Field]) -> str:
    """The ``ARROW:schema`` value of a file of the ``written`` columns
    (pyarrow's serialized schema, base64), with ``fields`` where they apply
    and the written types elsewhere: pyarrow applies it by position, and
    skips a field whose type does not fit what the file holds."""
    chosen = [fields.get(f.name) or f for f in written]
    # pandas reads a column's dtype from the schema's metadata, not the field's.
    entries = [json.loads(f.metadata[PANDAS_FIELD_KEY]) for f in chosen if PANDAS_FIELD_KEY in (f.metadata or {})]
    chosen = [_without_pandas(f) for f in chosen]
    meta = {"index_columns": [], "column_indexes": [], "columns": entries} if entries else None
    schema = pa.schema(chosen, metadata={b"pandas": json.dumps(meta)} if meta else None)
    return base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")


# --------------------------------------------------------------------------- targets


def _keep_access(new: str, old: str) -> None:
    """Give ``new``, about to replace ``old``, the mode and group of ``old``:
    made under the umask, it widened an output kept 0600 (or 0700) to 0644 on
    every nightly run. The group as far as this user may set it."""
    try:
        st = os.stat(old)
    except OSError:
        return  # nothing replaced
    # Never set-user/group-ID on a file (a directory keeps its group's inheritance).
    mode = stat.S_IMODE(st.st_mode) & (0o2777 if stat.S_ISDIR(st.st_mode) else 0o777)
    if stat.S_ISDIR(st.st_mode) and not os.path.isdir(new):
        mode &= 0o666  # a file beside a directory output: no x bits
    with contextlib.suppress(OSError):  # a part a cluster's worker wrote as another user; a link
        _set_access(new, st.st_gid, mode)


def _set_access(path: str, gid: int, mode: int) -> None:
    """chown ``path`` to group ``gid`` (-1: none; as far as this user may)
    and chmod it to ``mode``, through the file itself, never a link's
    target: a staging area in a folder others may write could be swapped
    for one whose entry of that name links to any file, which the run then
    made 0777 (helper-116)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if gid != -1:
            with contextlib.suppress(OSError):  # a group this user is not in
                os.fchown(fd, -1, gid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _staging_name(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    return path.with_name(f".{path.name}{STAGING_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}")


BACKUP_MARK = ".sqlanon-backup-"


def _backup_name(path: Path) -> str:
    return str(path.with_name(f".{path.name}{BACKUP_MARK}{os.getpid()}"))


class PathLock:
    """An exclusive lock on a file or directory: ``flock`` on the hidden file
    ``.<name>.sqlanon-lock`` next to it, held until :meth:`release` (or the
    process ends, however it ends). Writers of an output, or of a metrics
    file several outputs share, take it, so that two runs (a scheduler's
    retry, two jobs) never publish over each other, and a run's clean-up
    never takes another live run's staging for a dead one's: the process
    ids in staging names cannot tell, across containers or NFS clients.

    The holder removes the lock file when it releases it; a run that locked
    a file meanwhile removed finds it gone and locks the new one. Where no
    lock can be taken (a filesystem without ``flock``, a directory we may
    not write), the run goes on unlocked and says so.
    """

    def __init__(self, path: str | os.PathLike, what: str) -> None:
        p = Path(os.path.abspath(os.fspath(path).rstrip("/") or "/"))
        self.path = p.with_name(f".{p.name}{LOCK_MARK}")
        self.what = what
        self.held = False
        self._fd: int | None = None

    def acquire(self, wait: float = 0.0, plan: bool = False) -> PathLock:
        """Take the lock, waiting up to ``wait`` seconds for another run to
        release it; :class:`InputError` if it does not. A SIGTERM or Ctrl-C
        ends the wait (KeyboardInterrupt), even where signals are deferred:
        nothing is published yet while a run waits for a lock (the metrics
        file's, 60 s at most, outlasted a scheduler's 30 s grace: helper-9).

        ``plan``: taken for a plan (``--explain``), which the lock file then
        says; one waiting for a plan waits up to :data:`PLAN_LOCK_WAIT`
        whatever ``wait``: a plan holds the output's lock while it reads it
        (a DuckDB file's tables), and a run starting then failed with
        'another sqlanon run is writing' (helper-180, helper-183)."""
        from . import interrupts

        start = time.monotonic()
        deadline = start + wait
        waiting = False
        while True:
            fd = self._open()
            if fd is None:
                return self
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                planning = _lock_holder(fd) == PLAN_HOLDER
                os.close(fd)
                if time.monotonic() >= (max(deadline, start + PLAN_LOCK_WAIT) if planning else deadline):
                    raise InputError(
                        f"another sqlanon {'plan (--explain)' if planning else 'run'} is "
                        f"{'reading' if planning else 'writing'} {self.what}; try again when it has finished "
                        f"(it holds {str(self.path)!r})"
                    ) from None
                if not waiting:
                    log.warning("waiting for another sqlanon %s to finish %s %s", "plan (--explain)" if planning
                                else "run", "reading" if planning else "writing", self.what)
                    waiting = True
                interrupts.check()
                time.sleep(0.05)
                continue
            except OSError as exc:  # ENOLCK, EOPNOTSUPP: a filesystem without locks
                os.close(fd)
                log.warning("cannot lock %s (%s); going on without the lock", self.what, exc.strerror)
                return self
            try:
                current = os.stat(self.path).st_ino
            except FileNotFoundError:
                current = None
            if current != os.fstat(fd).st_ino:  # its holder removed it as we locked it: lock the new one
                os.close(fd)
                continue
            self._fd, self.held = fd, True
            with contextlib.suppress(OSError):  # another user's file, opened read-only: said as a run's
                os.ftruncate(fd, 0)  # a dead plan's word left in it is not this holder's
                if plan:
                    os.pwrite(fd, PLAN_HOLDER, 0)
            return self

    def _open(self) -> int | None:
        """The lock file, created if need be (writable by all: another user's
        run must be able to lock it too); None if it cannot be opened.

        Never through a symbolic link, and only a regular file: in a directory
        others may write, a link planted at the lock's name made the run open
        (and make writable by all) whatever file it pointed to.
        """
        flags = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
        fd = None
        try:
            for _ in range(100):  # its holder may remove it between the two opens
                try:
                    fd = os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o666)
                except FileExistsError:
                    try:
                        fd = os.open(self.path, flags)
                    except FileNotFoundError:
                        continue
                else:
                    with contextlib.suppress(OSError):  # vfat, CIFS: no modes to set
                        os.fchmod(fd, 0o666)  # ours, just made: past the umask
                break
        except PermissionError as denied:
            try:  # another user's lock file, left by a run that crashed: flock works read-only too
                fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    self._refuse("a symbolic link")
                # No lock file to share: the cause is that it could not be made.
                cause = denied if isinstance(exc, FileNotFoundError) else exc
                log.warning("cannot lock %s (%s); going on without the lock", self.what, cause.strerror)
                return None
        except OSError as exc:  # a directory we cannot write: the run's own writes say so
            if exc.errno == errno.ELOOP:
                self._refuse("a symbolic link")
            log.warning("cannot lock %s (%s); going on without the lock", self.what, exc.strerror)
            return None
        if fd is None:
            log.warning("cannot lock %s (its lock file keeps changing); going on without the lock", self.what)
            return None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            self._refuse("not a regular file")
        return fd

    def _refuse(self, why: str) -> None:
        raise InputError(f"refusing to write {self.what}: its lock file {str(self.path)!r} is {why}, which sqlanon "
                         "never makes; remove it")

    def release(self) -> None:
        """Give the lock up, removing its file (see the class docstring)."""
        if self._fd is not None:
            try:
                os.unlink(self.path)  # while still holding it
            except OSError:
                pass
            os.close(self._fd)  # releases the flock
            self._fd = None
        self.held = False

    def __enter__(self) -> PathLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


PLAN_HOLDER = b"plan\n"
"""What a lock file holds while a plan (``--explain``) holds the lock (a run's is empty)."""
PLAN_LOCK_WAIT = 300.0
"""Seconds one waits for a lock a plan holds: the plan's reads of the input and the output."""


def _lock_holder(fd: int) -> bytes:
    """What the lock file open at ``fd`` says of its holder (empty: a run)."""
    try:
        return os.pread(fd, len(PLAN_HOLDER), 0)
    except OSError:
        return b""


def remove_stale_staging(path: str | os.PathLike, locked: bool = False) -> None:
    """Delete staging files and directories of earlier runs, and put back an
    output a dead run had moved aside to swap. ``locked``: this process holds
    the output's :class:`PathLock`, so any other run's staging is a dead
    run's; without it, those of processes still alive here are kept."""
    p = Path(path)

    def live(name: str, pattern: str) -> bool:
        if locked:
            return False
        m = re.search(pattern, name)
        return bool(m) and int(m.group(1)) != os.getpid() and alive(int(m.group(1)))

    for backup in p.parent.glob(f".{glob.escape(p.name)}{BACKUP_MARK}*"):
        # Of any owner: a dead run's backup keeps its output's (a colleague's, published first:
        # skipped, it left the output hidden for good; helper-72). Never a link.
        if backup.is_symlink() or live(backup.name, re.escape(BACKUP_MARK) + r"(\d+)$"):
            continue
        if p.exists():
            _remove(backup)  # the swap finished; only the clean-up was lost
        else:
            os.rename(backup, p)
    for stale in p.parent.glob(f".{glob.escape(p.name)}{STAGING_MARK}*"):
        if (not _ours(stale) or live(stale.name, re.escape(STAGING_MARK) + r"(\d+)-")
                or stale.name.endswith(CLAIM_SUFFIX)):
            continue
        if not _finish_metrics(stale, p):
            _remove(stale)
        _remove(str(stale) + CLAIM_SUFFIX)
    for claim in p.parent.glob(f".{glob.escape(p.name)}{STAGING_MARK}*{CLAIM_SUFFIX}"):
        if _ours(claim) and not os.path.exists(str(claim)[: -len(CLAIM_SUFFIX)]):
            _remove(claim)


def _ours(path: Path | str) -> bool:
    """Whether ``path`` is this user's own and not a link. Another user's
    entry named as a dead run's staging or claim (planted in a shared
    directory, /tmp) is not this run's to finish or remove: a staged
    "metrics file" linked to someone's private file, with a claim naming a
    file of mode 6777, had the run give that file the mode and the
    planter's group, and move the link over the output (helper-71)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return st.st_uid == os.getuid() and not stat.S_ISLNK(st.st_mode)


CLAIM_SUFFIX = ".publishes"
"""Beside a staged metrics file: which output it describes (StagedMetrics.belongs_to)."""


def _finish_metrics(staged: Path, path: Path) -> bool:
    """Swap in the metrics a dead run had staged, if the output they describe
    was published (it holds the staged output's inode) and their swap was all
    that was lost. Whether it did. With the access of the file it replaces,
    or else of that output (a 0600 file became 0644: helper-22)."""
    claim_path = str(staged) + CLAIM_SUFFIX
    if not _ours(claim_path):
        return False
    try:
        with open(claim_path, encoding="utf-8") as fh:
            claim = json.load(fh)
        st = os.stat(claim["output"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if (st.st_dev, st.st_ino) != (claim["dev"], claim["ino"]):
        return False
    file = staged / path.name if staged.is_dir() else staged  # (a file of its own before 2026-11-28)
    if not _ours(file) or not file.is_file():
        return False
    _keep_access(str(file), str(path) if path.exists() else claim["output"])
    os.replace(file, path)
    _remove(staged)
    log.warning("wrote the metrics of a run that ended after publishing %s and before writing them to %s",
                claim["output"], path)
    return True


def held_directory(fd: int, path: str) -> str:
    """A name of the directory open as ``fd`` (at ``path``) that stays that
    directory whatever is renamed meanwhile: ``/proc/self/fd/N`` where the
    system has it (Linux), else ``path``. A staging area next to the output
    sits in a directory others may write (a team's folder, not sticky):
    one could rename it away and put a directory of their own in its place,
    into which the run, writing by name, then put the input's rows
    (helper-115)."""
    held = f"/proc/self/fd/{fd}"
    return held if os.path.isdir(held) else path


def owned(uid: int, dev: int) -> bool:
    """Whether a file or directory this run made, found owned by ``uid``
    on device ``dev`` (its ``st_dev``), may be taken as still its own: this
    user's, or for root the user an NFS server's root squashing makes it
    (nobody), on an NFS mount only (:func:`_on_nfs`): elsewhere a file of
    nobody's is a local process's running as nobody, which could put a
    directory and pickle of its own in the place of a root run's (its code
    ran as root; helper-121). Not its mode: a filesystem without Unix modes
    (vfat, CIFS) reports 0755 whatever was asked, and every run failed
    there (helper-117)."""
    if uid == os.geteuid():
        return True
    return os.geteuid() == 0 and uid == NFS_NOBODY and _on_nfs(dev)


def _on_nfs(dev: int) -> bool:
    """Whether the device ``dev`` (a ``st_dev``) is an NFS mount's, as
    /proc/self/mountinfo tells; where it cannot tell (no /proc), taken as
    one (as before: root on a squashing mount must still run)."""
    want = f"{os.major(dev)}:{os.minor(dev)}"
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return True
    for line in lines:
        fields, _, rest = line.partition(" - ")
        fields = fields.split()
        if len(fields) > 2 and fields[2] == want:
            return rest.split()[:1] in (["nfs"], ["nfs4"])
    return False


NFS_NOBODY = 65534
"""The user an NFS server's root squashing maps root to, by default."""


def open_private(path: str) -> int:
    """Open the directory ``path``, made by this run, as a file descriptor
    (:func:`held_directory`), when it is still this user's (:func:`owned`);
    else the error."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise InputError(f"cannot open {path!r}: {exc.strerror}") from None
    st = os.fstat(fd)
    if not owned(st.st_uid, st.st_dev):
        os.close(fd)
        raise InputError(f"{path!r} is no longer this run's private directory (another user's: was the staging "
                         "area replaced while the run wrote it?); nothing was published")
    return fd


@contextlib.contextmanager
def held_private(path: str) -> Iterator[str]:
    """The directory ``path``, made by this run (:func:`open_private`), by a
    name that stays it (:func:`held_directory`) while in use."""
    fd = open_private(path)
    try:
        yield held_directory(fd, path)
    finally:
        os.close(fd)


def _same_directory(path: Path | str, made: tuple[int, int] | None) -> bool:
    """Whether ``path`` is still the directory made as ``made`` (its device
    and inode; None: not recorded, taken as it)."""
    if made is None:
        return True
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == made


def _remove(path: Path | str) -> None:
    p = Path(path)
    if p.is_dir() and not p.is_symlink():
        on_error = functools.partial(_retry_writable, str(p))
        shutil.rmtree(p, **({"onexc": on_error} if sys.version_info >= (3, 12) else {"onerror": on_error}))
    elif p.exists() or p.is_symlink():
        p.unlink(missing_ok=True)


def _retry_writable(top: str, func, path: str, _exc) -> None:
    """For :func:`shutil.rmtree` of ``top``: remove ``path`` again once its
    directory is writable (a staged directory output takes its old one's
    mode, 0555 too, and was left behind for good: helper-22), if that
    directory is ``top`` or inside it (never the one holding ``top``: the
    user's own, helper-25); else leave it."""
    parent = os.path.dirname(path)
    if os.path.commonpath([parent, top]) != top or func not in (os.unlink, os.rmdir):
        return
    # By descriptors, each folder opened without following a link: by name,
    # a folder of the tree (another user's "dead run's backup", planted
    # beside the output) swapped for a link between rmtree's error and this
    # retry had the run make any folder of its user's 0700 and remove the
    # entry of that name in it (helper-168).
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = None
    with contextlib.suppress(OSError):
        fd = os.open(top, flags)
        for name in Path(os.path.relpath(parent, top)).parts:
            if name in (".", ".."):
                continue
            fd, up = os.open(name, flags, dir_fd=fd), fd
            os.close(up)
        os.fchmod(fd, 0o700)
        func(os.path.basename(path), dir_fd=fd)
    if fd is not None:
        os.close(fd)


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (of any user)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_RENAME_EXCHANGE = 2


def _exchange(a: str, b: str) -> bool:
    """Atomically swap two paths (Linux ``renameat2(RENAME_EXCHANGE)``); False
    if the system or filesystem does not support it.

    Raises:
        OSError: it is supported and failed (a permission): the fallback of
            two renames would fail too, after moving the old one aside.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), b)


def cast_columns(relation: str, types: dict[str, str]) -> str:
    """``relation`` with the columns of ``types`` (name → DuckDB type) cast to it."""
    if not types:
        return relation
    back = ", ".join(f"CAST({ident(c)} AS {t}) AS {ident(c)}" for c, t in types.items())
    return f"(SELECT * REPLACE ({back}) FROM {relation})"


@dataclass
class Staging:
    """Where workers write their part files for one run, and its clean-up."""

    root: Path
    created: list[str] = field(default_factory=list)
    """Files this run created outside the staging area (a new DuckDB
    database), removed again if the run fails."""
    as_text: dict[str, str] = field(default_factory=dict)
    """Columns the parts hold as text, because Parquet cannot hold their
    values exactly (an INTERVAL keeps milliseconds in 32 bits): name → the
    DuckDB type :meth:`parts_relation` casts them back to."""
    cast_back: dict[str, str] = field(default_factory=dict)
    """Columns whose part type only needs a cast back to the input's (a
    fixed-size ``DOUBLE[2]`` comes out of Parquet as a list): name → type."""
    arrow_fields: dict[str, pa.Field] = field(default_factory=dict)
    """Pass-through columns whose Arrow types a Parquet output records
    (:func:`restorable_fields`)."""
    run: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    """This run's own mark, for names outside the staging area (a staging table)."""
    line_size: int | None = None
    """A CSV output's longest line, once reading it back found one past
    DuckDB's default (:func:`longer_lines`)."""
    made: tuple[int, int] | None = None
    """The area's device and inode as made (:meth:`check_ours`)."""

    @property
    def parts_dir(self) -> Path:
        return self.root / "parts"

    def check_ours(self) -> None:
        """Refuse to go on when the area is no longer the directory this run
        made, its user's own: another user who may write the output's folder
        renamed it away and put a directory of theirs in its place, whose
        contents the run would have verified and published (helper-115)."""
        if self.made is None:
            return
        try:
            st = os.lstat(self.root)
        except OSError as exc:
            raise InputError(f"the run's staging area {str(self.root)!r} is gone ({exc.strerror}); nothing was "
                             "published") from None
        if (st.st_dev, st.st_ino) != self.made or not owned(st.st_uid, st.st_dev):
            raise InputError(f"the run's staging area {str(self.root)!r} was replaced while the run wrote it (by "
                             "another user who may write the output's folder?); nothing was published")

    def share(self, *objects) -> str:
        """Write ``objects`` once for every task of the run, to load by the
        path (:func:`sqlanon.worker.shared`): with each task, a 500,000-leaf
        hierarchy or a million-value prefix domain was pickled once per
        fragment by the coordinator (0.46 s each, 26 MB) and sent through
        the pool. Pickled, as the tasks themselves are, into a new file only
        this user may read or write, in a staging area only this user may
        write (0700), for a local pool: never a cluster's (whose workers may
        write there as others of the group: helper-71), which gets them by
        its own means (:meth:`sqlanon.executors.DaskExecutor.share`)."""
        path = self.root / "shared.pickle"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(objects, fh, protocol=pickle.HIGHEST_PROTOCOL)
        except OSError as exc:  # a full disk (the test fills one)
            raise InputError(f"cannot write {str(path)!r}: {exc.strerror}{no_room_hint(exc)}") from exc
        return str(path)

    def parsed_copy(self, con: duckdb.DuckDBPyConnection, source: FileSource, signed_zeros: bool,
                    key: tuple[str, list] | None = None, row_group_size: int | None = None) -> FileSource:
        """The CSV ``source`` parsed once, into a Parquet file of the staging
        area, for the run's fragments to read: each fragment's ``WHERE`` over
        the CSV file parsed all of it (DuckDB cannot skip a CSV file's lines),
        so 16 fragments of 1M rows took 7.2 s where the same as Parquet took
        2.9 s (BENCHMARKS.md, section 2). Its rows, types and order are the
        source's as the run reads it (the statistics and checksums were
        read from the CSV file itself, so the output is still compared with
        it); only for a staging area this user alone may read (it holds the
        input's rows), and removed once the fragments are done
        (:meth:`drop_parsed_copy`). ``signed_zeros``: whether a FLOAT or
        DOUBLE column holds both -0.0 and 0.0 (the statistics' pass tells),
        which Parquet's dictionaries would make one (:func:`copy_relation`
        would parse the file once more to find out). With a ``key``, its rows
        ordered by fragment in row groups of ``row_group_size`` rows, as
        :meth:`clustered_copy`'s: each fragment still read all of the copy
        (256 fragments of 1M rows: ~20 s, against ~9 s from a Parquet input)."""
        sql, params = key or ("", [])
        kept = f"SELECT {source.kept_columns} FROM {source.relation}" + (f" ORDER BY {sql}" if key else "")
        try:
            path = self._private_copy(con, f"({kept})", signed_zeros, params, row_group_size)
        except (InputError, OSError) as exc:
            cause = exc.__cause__ if isinstance(exc, InputError) else exc
            if isinstance(cause, duckdb.Error) and PARSED_COPY not in str(cause) and not isinstance(
                    cause, duckdb.OutOfMemoryException):  # the CSV's reading failed
                raise source.unreadable(cause) from cause
            # The write failed: its error named a hidden file only.
            raise InputError(f"cannot copy the CSV input {source.describe()!r} for its fragments: "
                             f"{exc if isinstance(exc, InputError) else exc.strerror or exc}") from exc
        return ParsedCopy(path, "parquet", of=source.describe())

    def clustered_copy(self, con: duckdb.DuckDBPyConnection, source, key: tuple[str, list],
                       row_group_size: int, plain: bool) -> FileSource | None:
        """A Parquet ``source``, a DuckDB table or a PostgreSQL table (its
        ``rows_sql``) copied once into the staging
        area as Parquet, its rows ordered by ``key`` (their fragment's,
        :func:`sqlanon.fragmentation.cluster_key`) in row groups of
        ``row_group_size`` rows, for the run's fragments to read, or None
        (the copy failed, or would read back in other types: the fragments
        then read the source). Each fragment's ``WHERE`` over the source
        read all of it, its rows in every row group (DuckDB skips a row
        group only by its statistics, which unsorted values never exclude):
        256 fragments of 1M rows took ~16 s on 2 workers from Parquet, 10 s
        from a DuckDB table, ~90 s from PostgreSQL, a scan of the table on
        the server each (BENCHMARKS.md). Over the copy a fragment's bounds
        skip the row groups of the others. Kept, and removed, as
        :meth:`parsed_copy`'s (it holds the input's rows)."""
        sql, params = key
        kept = source.rows_sql()
        try:  # in its order: DuckDB keeps a subquery's ORDER BY through COPY's projection
            source.give_way(con)  # (a server's table: its read must not queue behind an ALTER for good)
            copy = ParsedCopy(self._private_copy(con, f"({kept} ORDER BY {sql})", plain, params, row_group_size),
                              "parquet", of=source.describe())
            alike = [r[:2] for r in con.execute(f"DESCRIBE {kept}").fetchall()] == [  # names and types: a
                r[:2] for r in con.execute(f"DESCRIBE SELECT * FROM {copy.relation}").fetchall()]  # table's NOT NULL
        except (InputError, duckdb.Error, OSError) as exc:
            if isinstance(exc.__cause__ if isinstance(exc, InputError) else exc, duckdb.InterruptException):
                self.drop_parsed_copy()
                raise
            why = first_line(exc)
        else:
            if alike:
                return copy
            why = "it reads back in other types"
        log.info("the fragments read the input itself (no ordered copy: %s)", source.redact(why))
        self.drop_parsed_copy()
        return None

    def _private_copy(self, con: duckdb.DuckDBPyConnection, relation: str, plain: bool, params: Sequence = (),
                      row_group_size: int | None = None) -> str:
        """Write ``relation`` (:func:`copy_relation`) as the run's one copy of
        its input, the path: into a directory of its own (this user's only:
        DuckDB writes the file readable by all, then made 0600, as the
        area's other files of the input's rows), by a name that stays it
        (the staging area may sit where others may rename: helper-115)."""
        private = self.root / PRIVATE
        os.mkdir(private, 0o700)
        with held_private(str(private)) as held:
            copy_relation(con, relation, f"{held}/{PARSED_COPY}", "parquet", plain=plain, params=params,
                          row_group_size=row_group_size)
            os.chmod(f"{held}/{PARSED_COPY}", 0o600)
        return str(private / PARSED_COPY)

    def drop_parsed_copy(self) -> None:
        """Remove :meth:`parsed_copy`'s file, if made: the output is written
        next, and the copy's room may be what it needs."""
        _remove(self.root / PRIVATE)

    def part_path(self, fragment_id: int) -> str:
        # Named after the run too: a directory output is swapped whole, but a
        # reader that listed the old parts and opened them after the swap
        # read the new ones of the same names, a mix of two runs, some people
        # twice, generalized differently (helper-9); now it fails to open them.
        return str(self.parts_dir / f"part-{fragment_id:05d}-{self.run}.parquet")

    def spill_dir(self, name: str) -> str:
        """The name after which each attempt at fragment ``name`` makes its
        own spill directory, DuckDB's ``temp_directory`` (:func:`sqlanon.worker.run_fragment`)."""
        return str(self.root / f"spill-{name}")

    def parts_relation(self) -> str:
        return cast_columns(self._raw_parts(), {**self.as_text, **self.cast_back})

    def _raw_parts(self) -> str:
        """The parts as written, by their names: DuckDB's glob finds no file
        below a directory whose name holds a backslash (helper-71); each name
        escaped, as the output's may hold glob characters ('a[x].parquet')."""
        files = tuple(glob.escape(str(f)) for f in sorted(self.parts_dir.glob("*.parquet")))
        return FileSource(files[0], "parquet", globs=files).relation

    def has_parts(self) -> bool:
        return any(self.parts_dir.glob("*.parquet"))

    def _arrow_writes_as_duckdb(self, schema: pa.Schema) -> bool:
        """Whether pyarrow may write the output from parts of ``schema`` (as
        :meth:`write_with_arrow` and :meth:`concatenate_parts` do) as DuckDB
        would: the parts need no cast back and carry no Arrow types to
        restore, and every column is of a type pyarrow writes as DuckDB does
        (:func:`arrow_writes_exactly`), timestamps in micro- or nanoseconds
        (pyarrow keeps seconds and milliseconds as milliseconds, which pandas
        then reads so, where DuckDB writes microseconds: helper-73)."""
        if self.as_text or self.cast_back or self.arrow_fields:
            return False
        coarse = any(pa.types.is_timestamp(f.type) and f.type.unit in ("s", "ms") for f in schema)
        return not coarse and all(arrow_writes_exactly(f.type) for f in schema)

    def concatenate_parts(self, path: str, compression: str) -> bool:
        """Write the parts into the one Parquet file ``path`` by copying their
        row groups as they are (no decoding, no re-encoding) and rewriting the
        footer, where pyarrow wrote every part (:func:`write_part`) with the
        same schema, every column chunk compressed with ``compression``, the
        row groups averaging at least half of DuckDB's size, and
        :meth:`_arrow_writes_as_duckdb`. Else False, and nothing is written."""
        import pyarrow.parquet as pq

        from . import parquet_concat

        files = sorted(self.parts_dir.glob("*.parquet"))
        try:
            metas = [pq.ParquetFile(f).metadata for f in files]
            if not self._arrow_writes_as_duckdb(metas[0].schema.to_arrow_schema()):
                return False
            groups = sum(m.num_row_groups for m in metas)
            if groups and sum(m.num_rows for m in metas) < groups * PARQUET_ROW_GROUP_ROWS // 2:
                # Many small parts (64 fragments of 1M rows): their row groups would be the file's,
                # slower to read (and the footers slower to parse) than DuckDB's 122,880-row ones.
                return False
            codec = compression.upper()
            for m in metas:  # one writer (its version's statistics are read by its name: helper-185)
                if not m.created_by.startswith("parquet-cpp") or m.created_by != metas[0].created_by or \
                        not m.schema.equals(metas[0].schema):
                    return False
                if any(m.row_group(i).column(j).compression != codec
                       for i in range(m.num_row_groups) for j in range(m.num_columns)):
                    return False
            return parquet_concat.concatenate([str(f) for f in files], path)  # (which removes a half-written file)
        except (OSError, pa.ArrowException, ValueError) as exc:
            raise InputError(f"cannot write {path!r} from the parts: {first_line(exc)}{no_room_hint(exc)}") from exc

    def write_with_arrow(self, path: str) -> bool:
        """Write the parts into the one Parquet file ``path`` with pyarrow,
        their text columns kept as the dictionaries they were written with,
        where a row's text is long: DuckDB's ``COPY`` decoded every row's
        generalized text (a set of ~450 names, ~6 KB a row) and took 11.6 s
        and a 6 GB peak for 1M rows (BENCHMARKS.md, section 8). Short texts
        stay DuckDB's to write: it reads its own files faster (poker's
        verification, 0.05 s against 0.08 s). Only where
        :meth:`_arrow_writes_as_duckdb` (it keeps -0.0 and 0.0 apart too);
        else False, and nothing is written."""
        import pyarrow.parquet as pq

        files = sorted(self.parts_dir.glob("*.parquet"))
        writer, written = None, False
        ours = not os.path.lexists(path)  # a file it makes is its own to remove, none else
        try:
            schema = pq.read_schema(files[0])
            if not self._arrow_writes_as_duckdb(schema):
                return False
            text = [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
            if not text:
                return False
            with contextlib.ExitStack() as open_writer:
                for table in _row_groups(files, text):
                    if writer is None:
                        if _text_bytes_per_row(table.select(text)) < 1024:  # the first row group tells
                            return False
                        writer = open_writer.enter_context(
                            pq.ParquetWriter(path, table.schema, compression="zstd", store_schema=False))
                    elif not table.schema.equals(writer.schema):  # parts of other types: DuckDB unifies them
                        break
                    writer.write_table(table, row_group_size=PARQUET_ROW_GROUP_ROWS)
                else:
                    written = writer is not None  # (parts without a row group: DuckDB's to write)
        except (OSError, pa.ArrowException) as exc:
            if writer is not None and ours:
                _remove(path)
            raise InputError(f"cannot write {path!r} from the parts: {first_line(exc)}{no_room_hint(exc)}") from exc
        if not written and ours:
            _remove(path)
        return written

    def regroup(self, con: duckdb.DuckDBPyConnection, qi: Sequence[str]) -> None:
        """Rewrite the parts as one, each published class's rows (the same
        ``qi`` values) together in a fresh random order, whichever fragments
        they came from."""
        raw = self._raw_parts()  # as written: no casts back
        keys = ", ".join(ident(c) for c in qi)
        aside = str(self.root / "regrouped.parquet")
        copy_relation(con, f"(SELECT * FROM {raw} ORDER BY hash({keys}), random())", aside, "parquet",
                      as_text=tuple(self.as_text), arrow_fields=self.arrow_fields)
        for part in self.parts_dir.glob("*.parquet"):
            part.unlink()
        os.rename(aside, self.part_path(0))

    def discard(self) -> None:
        """Remove the area: the directory this run made (:attr:`made`), never
        one put in its place (another user's rename of a directory of this
        user's to its name had its files removed: helper-116)."""
        if _same_directory(self.root, self.made):
            _remove(self.root)


@dataclass(frozen=True)
class LocalStagingTarget:
    """Targets whose staging area is a hidden directory next to them."""

    lock: PathLock | None = field(default=None, compare=False, repr=False, kw_only=True)
    """Held from :func:`open_target` until :meth:`release`: one run writes an output at a time."""

    def release(self) -> None:
        """Let another run write this output."""
        if self.lock is not None:
            self.lock.release()

    def part_compression_for(self, rows_per_part: float) -> str:
        """The codec of parts of about ``rows_per_part`` rows: the target's (:attr:`part_compression`)."""
        return self.part_compression

    def earlier_run(self, con: duckdb.DuckDBPyConnection, where: str | None, target: str) -> tuple[str, str] | None:
        """The parameters and start of the last run that published this
        output (``target``, as recorded) in its metrics file (``where``),
        read on ``con``."""
        return earlier_run_in_file(con, where or default_metrics_path(self.path), target)

    def _swap_with_metrics(self, con, metrics: pa.Table, where: str | None, swap_in: Callable[[], None],
                           staged_output: str, staging: Staging) -> str | None:
        """Stage the metrics file, ``swap_in()`` the output (``staged_output``
        moved into place), then swap the metrics in; the staged metrics go if
        the output's swap fails. A run killed between the two swaps left the
        output published without its metrics rows, and the next run deleted
        them (helper-9): the staged metrics name the output they belong to
        (:meth:`StagedMetrics.belongs_to`), and the next run to write the
        metrics file swaps them in if that output was published."""
        path = where or default_metrics_path(self.path)
        staged = stage_metrics_file(con, metrics, path)
        with contextlib.ExitStack() as on_failure:
            on_failure.callback(staged.discard)
            staged.belongs_to(self.path.rstrip("/"), staged_output)
            staging.check_ours()  # what was verified is what goes in place
            try:
                swap_in()
            except OSError as exc:  # EBUSY: a bind-mounted file or a mount point; EXDEV…
                raise InputError(f"cannot put {self.path!r} in place: {exc.strerror}") from exc
            on_failure.pop_all()
        staged.like = self.path.rstrip("/")
        return path if staged.after_publishing(self.describe()) else None

    dialect = "duckdb"
    """The engine that reads the output back (verification, checksums)."""
    exact_parts = False
    """Whether the parts are only a way to the output (a table, a CSV file):
    then they must hold every value exactly (:attr:`Staging.as_text`). The
    parts of a Parquet output hold what the output will."""
    parts_are_output = False
    """Whether the parts are published as they are (a directory of parts):
    then DuckDB writes them, as every output (:func:`write_part`)."""

    def typed_relation(self, staging: Staging, relation: str) -> str:
        """What the output's values are compared on: the output itself."""
        return relation

    def new_staging(self, shared: bool = False) -> Staging:
        """The staging area, readable by this user only: the workers' DuckDB
        spills there (the input's rows), and it would make its files readable
        by all. (The parts directory, a directory output, keeps the usual
        mode.) ``shared``: a cluster's workers write there, perhaps as
        another user of the group: the usual mode (the umask's)."""
        s = Staging(_staging_name(Path(self.path.rstrip("/"))))
        s.root.mkdir(mode=0o777 if shared else 0o700)
        st = os.lstat(s.root)
        s.made = (st.st_dev, st.st_ino)
        s.parts_dir.mkdir()
        return s

    def verifier(self):
        """None: verification runs on the coordinator's DuckDB connection."""
        return None

    def rollback(self, con, staging: Staging | None = None) -> None:
        """Nothing was published: the staging files are all there is to drop."""

    def unassemble(self, con, staging: Staging) -> None:
        """Undo :meth:`assemble`, to assemble again: nothing to undo, it
        rewrites the staged output."""


@dataclass(frozen=True)
class FileTarget(LocalStagingTarget):
    """A Parquet or CSV output file."""

    path: str
    fmt: str

    @property
    def part_compression(self) -> str:
        """A Parquet output's parts are concatenated into it as they are
        (:meth:`Staging.concatenate_parts`): compressed as the output is.
        A CSV output's are read once more and rewritten: compressed cheaply."""
        return "zstd" if self.fmt == "parquet" else "lz4"

    def part_compression_for(self, rows_per_part: float) -> str:
        """:attr:`part_compression` of parts of about ``rows_per_part`` rows:
        parts too small to be joined as they are (half a row group) are read
        once more and rewritten, and compressed cheaply (256 fragments of 1M
        rows in zstd: 7.06 s against 6.86 s in lz4)."""
        return self.part_compression if rows_per_part >= PARQUET_ROW_GROUP_ROWS // 2 else "lz4"

    def describe(self) -> str:
        return self.path

    def assemble(self, con: duckdb.DuckDBPyConnection, staging: Staging, empty: pa.Schema | None) -> str:
        """Gather the parts into the final file inside the staging area; return its relation."""
        out = self._staged(staging)
        if self.fmt == "parquet" and staging.has_parts() and (
                staging.concatenate_parts(out, self.part_compression) or staging.write_with_arrow(out)):
            return self.staged_relation(staging)
        data = f"(SELECT * FROM {staging.parts_relation()})" if staging.has_parts() else empty.empty_table()
        copy_relation(con, data, out, self.fmt, arrow_fields=staging.arrow_fields)
        return self.staged_relation(staging)

    def staged_relation(self, staging: Staging) -> str:
        """The staged output as a relation (a CSV file's values as their text)."""
        return FileSource(self._staged(staging), self.fmt, as_text=True, ours=True,
                          max_line_size=staging.line_size).relation

    def _staged(self, staging: Staging) -> str:
        """The output file in the staging area, named as the output ends (``out.csv.gz``)."""
        return str(staging.root / f"out{format_suffix(self.path)}")

    @property
    def exact_parts(self) -> bool:
        return self.fmt == "csv"

    def typed_relation(self, staging: Staging, relation: str) -> str:
        """A CSV file is read back with guessed types ("007" as 7): its values
        are compared on the typed parts it was written from."""
        if self.fmt == "csv" and staging.has_parts():
            return staging.parts_relation()
        return relation

    def read_back_relation(self, staging: Staging, every_row: bool = False, text: tuple[str, ...] = ()) -> str:
        """The staged output as its readers read it: a CSV file with the
        types DuckDB's sniffer guesses (pandas' are alike; ``every_row``:
        from every row; the columns ``text`` as text) and :data:`READER_NULLS`
        as NULL, under which values written two ways are one ('5' and '5.0', 'true' and 'TRUE')."""
        return FileSource(self._staged(staging), self.fmt, ours=True, max_line_size=staging.line_size,
                          null_strings=READER_NULLS, every_row=every_row, text_columns=text).relation

    def publish_with_metrics(self, con, staging: Staging, metrics: pa.Table, where: str | None) -> str | None:
        def swap_in() -> None:
            _keep_access(self._staged(staging), self.path)
            os.replace(self._staged(staging), self.path)

        path = self._swap_with_metrics(con, metrics, where, swap_in, self._staged(staging), staging)
        staging.discard()
        return path


@dataclass(frozen=True)
class DirectoryTarget(LocalStagingTarget):
    """A directory of Parquet part files, swapped in whole."""

    path: str
    part_compression = "zstd"
    """The parts are the output."""
    parts_are_output = True

    def describe(self) -> str:
        return self.path

    def assemble(self, con: duckdb.DuckDBPyConnection, staging: Staging, empty: pa.Schema | None) -> str:
        if not staging.has_parts():
            write_parquet(con, empty.empty_table(), staging.part_path(0), arrow_fields=staging.arrow_fields)
        return staging.parts_relation()

    def publish_with_metrics(self, con, staging: Staging, metrics: pa.Table, where: str | None) -> str | None:
        path = self._swap_with_metrics(con, metrics, where, lambda: self._swap_in(staging), str(staging.parts_dir),
                                       staging)
        staging.discard()
        return path

    def _swap_in(self, staging: Staging) -> None:
        target = self.path.rstrip("/")
        if os.path.exists(target):
            _keep_access(str(staging.parts_dir), target)
            old_parts = sorted(Path(target).glob("*.parquet"))
            for part in staging.parts_dir.iterdir() if old_parts else ():
                _keep_access(str(part), str(old_parts[0]))
            if not _exchange(str(staging.parts_dir), target):
                # No atomic exchange on this filesystem (NFS, FUSE…): keep the
                # old output under a backup name that the next run puts back
                # if we die between the two renames.
                old = _backup_name(Path(target))
                os.rename(target, old)
                try:
                    os.rename(staging.parts_dir, target)
                except OSError:
                    os.rename(old, target)  # as it was: the run fails, the output stays
                    raise
                _remove(old)
            # after the exchange the old directory sits in staging.parts_dir
        else:
            os.rename(staging.parts_dir, target)


@dataclass(frozen=True)
class DuckDBTarget(LocalStagingTarget):
    """A table in a DuckDB database file, replaced in one transaction."""

    path: str
    table: tuple[str, ...]
    overwrite: bool = field(default=True, kw_only=True)
    """Whether an existing table may be replaced; checked again when
    publishing (another process may have created it meanwhile)."""
    exact_parts = True
    part_compression = "lz4"
    """Parts are loaded into the database once: compress them cheaply."""

    def describe(self) -> str:
        return f"{self.path} table {table_text(self.table)}"

    def staging_table(self, staging: Staging) -> tuple[str, ...]:
        """The run's own table next to the target (an existing table of the
        name it once had, ``<target>__sqlanon_staging``, was dropped)."""
        return (*self.table[:-1], f"{self.table[-1]}__sqlanon_staging_{staging.run}")

    def metrics_table(self, where: str | None) -> tuple[str, ...]:
        """``--metrics`` as a table: ``schema.name`` as given, a bare name in the target's schema."""
        if not where:
            return (*self.table[:-1], f"{self.table[-1]}__metrics")
        parts = split_table_name(where)
        return tuple(parts) if len(parts) == 2 else (*self.table[:-1], parts[0])

    def check_metrics_target(self, where: str | None, schema: pa.Schema) -> None:
        """Before any work: an existing metrics table (``--metrics``'s, or
        the default next to the target) is sqlanon's and holds the run's
        rows (``schema``) exactly (found when publishing, after all the work)."""
        if (where and _format_of(where)) or not os.path.exists(self.path) or os.path.getsize(self.path) == 0:
            return
        table = self.metrics_table(where)
        have = self._catalog(f"SELECT column_name, data_type FROM duckdb_columns() WHERE database_name = "
                             f"'__sqlanon_chk' AND {_NAMED} ORDER BY column_index", duckdb_table_key(table))
        if have:
            refuse_unfit_metrics(schema, have, f"table {table_text(table)!r} in {self.path!r}", fold_name)

    def earlier_run(self, con: duckdb.DuckDBPyConnection, where: str | None, target: str) -> tuple[str, str] | None:
        """The parameters and start of the last run that published this
        table (``target``, as recorded) in its metrics file (read on ``con``)
        or table."""
        if where and _format_of(where):
            return earlier_run_in_file(con, where, target)
        if not os.path.exists(self.path) or os.path.getsize(self.path) == 0:
            return None
        # The run's input in the same file is attached already, and a second attach fails (helper-72).
        attached = next((name for name, path in con.execute("SELECT database_name, path FROM duckdb_databases()")
                         .fetchall() if path and os.path.realpath(path) == os.path.realpath(self.path)), None)
        stmt = render("earlier_run.sql", relation=ident([attached or "__sqlanon_chk", *self.metrics_table(where)]),
                      target=target)
        try:
            rows = con.execute(stmt.sql, stmt.params).fetchall() if attached else self._catalog(stmt.sql, stmt.params)
        except (InputError, duckdb.Error):  # no such table yet, or not sqlanon's (its own check says so)
            return None
        return rows[0] if rows else None

    def assemble(self, con: duckdb.DuckDBPyConnection, staging: Staging, empty: pa.Schema | None) -> str:
        """Load the parts into a staging table inside an open transaction."""
        if not os.path.exists(self.path):
            staging.created += [self.path, self.path + ".wal"]
        try:
            con.execute(f"ATTACH {render('attach.sql', path=os.path.abspath(self.path)).sql} AS \"__sqlanon_dst\"")
            con.execute("BEGIN TRANSACTION")
            name = ident(["__sqlanon_dst", *self.staging_table(staging)])
            if staging.has_parts():
                con.execute(f"CREATE TABLE {name} AS SELECT * FROM {staging.parts_relation()}")
            else:
                con.register("__sqlanon_empty", empty.empty_table())
                con.execute(f'CREATE TABLE {name} AS SELECT * FROM "__sqlanon_empty"')
        except duckdb.Error as exc:
            raise self.unwritable(exc) from exc
        return name

    def publish_with_metrics(self, con, staging: Staging, metrics: pa.Table, where: str | None) -> str | None:
        """Swap the staging table in and append the metrics rows, in one transaction."""
        if where and _format_of(where):
            swap = stage_metrics_file(con, metrics, where)
            swap.like = self.path
            location = where
        else:
            swap = None
            mtable = self.metrics_table(where)
            location = f"{self.path} table {table_text(mtable)}"
        target = ident(["__sqlanon_dst", *self.table])
        with contextlib.ExitStack() as on_failure:  # the staged metrics file goes unless all is committed
            if swap is not None:
                on_failure.callback(swap.discard)
            try:
                if not self.overwrite and con.execute(
                        f"SELECT count(*) FROM duckdb_tables() WHERE database_name = '__sqlanon_dst' AND {_NAMED}",
                        duckdb_table_key(self.table)).fetchone()[0]:
                    raise InputError(f"table {table_text(self.table)!r} was created in {self.path!r} during the run; "
                                     "nothing was published: pass --overwrite to replace it")
                kept, said = self._comments(con, staging)
                readers = self._reading_views(con)
                con.execute(f"DROP TABLE IF EXISTS {target}")
                staged = ident(["__sqlanon_dst", *self.staging_table(staging)])
                con.execute(f"ALTER TABLE {staged} RENAME TO {ident(self.table[-1])}")
                self._refuse_broken_views(con, readers)
                for what, comment in kept:
                    con.execute(f"COMMENT ON {what} IS {literal(comment, 'duckdb')}")
                if swap is None:
                    con.register("__sqlanon_metrics", metrics)
                    name = ident(["__sqlanon_dst", *mtable])
                    con.execute(f'CREATE TABLE IF NOT EXISTS {name} AS SELECT * FROM "__sqlanon_metrics" LIMIT 0')
                    # By name, adding the columns an older sqlanon's table lacks.
                    described = [r[:2] for r in con.execute(f"DESCRIBE {name}").fetchall()]
                    refuse_unfit_metrics(metrics.schema, described, f"table {table_text(mtable)!r} in {self.path!r}",
                                         fold_name, publishing=True)
                    have = {fold_name(n) for n, _ in described}  # DuckDB's names ignore case: "NCP" is ncp
                    for col, typ, *_ in con.execute('DESCRIBE SELECT * FROM "__sqlanon_metrics"').fetchall():
                        if fold_name(col) not in have:
                            con.execute(f"ALTER TABLE {name} ADD COLUMN {ident(col)} {typ}")
                    con.execute(f'INSERT INTO {name} BY NAME SELECT * FROM "__sqlanon_metrics"')
                con.execute("COMMIT")
            except duckdb.Error as exc:
                raise InputError(f"cannot publish {self.describe()!r}: {first_line(exc)}{no_room_hint(exc)}") from exc
            on_failure.pop_all()
        for args in said:
            log.warning(*args)
        if swap is not None and not swap.after_publishing(self.describe()):
            location = None
        staging.discard()
        return location

    def _reading_views(self, con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
        """The views of the target's file that may read the table being
        replaced (their SQL names it) and that work now: DuckDB keeps no
        dependencies, and a replacing table without a column a view reads
        broke the view, exit 0 (helper-158; PostgreSQL refuses it)."""
        if not self.overwrite:
            return []
        rows = con.execute("SELECT schema_name, view_name, sql FROM duckdb_views() WHERE database_name = "
                           "'__sqlanon_dst' AND NOT internal").fetchall()
        # 't' as a word, not in 'state'; a name with a quote is written doubled in the view's SQL
        spellings = {re.escape(fold_name(n)) for n in (self.table[-1], self.table[-1].replace('"', '""'))}
        name = re.compile(rf"(?<![\w$])(?:{'|'.join(spellings)})(?![\w$])")
        named = [(schema, view) for schema, view, text in rows if name.search(fold_name(text or ""))]
        with _as_default_database(con, "__sqlanon_dst"):
            return [(schema, view) for schema, view in named if _binds(con, ident(["__sqlanon_dst", schema, view]))]

    def _refuse_broken_views(self, con: duckdb.DuckDBPyConnection, views: list[tuple[str, str]]) -> None:
        """Refuse, in the publishing transaction (rolled back: the old table
        stays), to publish a table that ``views`` (schema, name), which
        worked, no longer read (a column they name is gone)."""
        for schema, view in views:
            try:
                with _as_default_database(con, "__sqlanon_dst"):
                    con.execute(f"DESCRIBE SELECT * FROM {ident(['__sqlanon_dst', schema, view])}")
            except duckdb.Error as exc:
                shown = table_text((schema, view))
                raise InputError(f"cannot replace {self.describe()!r}: view {shown!r} reads it and would no longer "
                                 f"work ({first_line(exc)}); redefine or drop the view, or publish to another "
                                 "table") from None

    def _comments(self, con: duckdb.DuckDBPyConnection, staging: Staging) -> tuple[list[tuple[str, str]], list]:
        """The comments of the table being replaced and of its columns, as
        ``(COMMENT ON target, text)``, to keep on the new table (columns it
        has again), and the warnings to give once it is replaced: its
        indexes, constraints and the columns the output lacks go with the old
        table (they vanished silently: helper-17, helper-100)."""
        key = duckdb_table_key(self.table)
        where = f"database_name = '__sqlanon_dst' AND {_NAMED}"
        kept = [(f"TABLE {ident(['__sqlanon_dst', *self.table])}", c) for (c,) in con.execute(
            f"SELECT comment FROM duckdb_tables() WHERE {where} AND comment IS NOT NULL", key).fetchall()]
        new = {fold_name(n) for (n,) in con.execute(
            f"SELECT column_name FROM duckdb_columns() WHERE {where}",
            duckdb_table_key([key[0], self.staging_table(staging)[-1]])).fetchall()}
        said = lost_columns(self.describe(), [n for (n,) in con.execute(
            f"SELECT column_name FROM duckdb_columns() WHERE {where} ORDER BY column_index", key).fetchall()],
            list(new), fold_name)
        kept += [(f"COLUMN {ident(['__sqlanon_dst', *self.table, name])}", c) for name, c in con.execute(
            f"SELECT column_name, comment FROM duckdb_columns() WHERE {where} AND comment IS NOT NULL",
            key).fetchall() if fold_name(name) in new]
        lost = [f"index {n}" for (n,) in con.execute(f"SELECT index_name FROM duckdb_indexes() WHERE {where}",
                                                     key).fetchall()]
        lost += sorted({t for (t,) in con.execute(
            f"SELECT constraint_type FROM duckdb_constraints() WHERE {where}", key).fetchall()})
        if lost:
            said.append(("%s: the replaced table's %s %s not carried over to the new one", self.describe(),
                         ", ".join(lost), "was" if len(lost) == 1 else "were"))
        return kept, said

    def rollback(self, con: duckdb.DuckDBPyConnection, staging: Staging | None = None) -> None:
        """Roll the open transaction back; a database file the run created goes too."""
        self.unassemble(con, staging)
        for path in staging.created if staging is not None else ():
            _remove(path)

    def unassemble(self, con: duckdb.DuckDBPyConnection, staging: Staging | None) -> None:
        """Undo :meth:`assemble` (its transaction, the attached file)."""
        for stmt in ("ROLLBACK", 'DETACH DATABASE IF EXISTS "__sqlanon_dst"'):
            try:
                con.execute(stmt)
            except duckdb.Error:
                pass  # no transaction was open / nothing attached

    def unwritable(self, exc: duckdb.Error) -> InputError:
        """The error of a write into the file that failed, said plainly when
        another process holds it."""
        held = re.search(r"Conflicting lock is held in .*?(\(PID \d+\))", str(exc))
        if held is None:
            return InputError(f"cannot write {self.describe()!r}: {first_line(exc)}{no_room_hint(exc)}")
        return InputError(f"cannot write {self.describe()!r}: another process {held[1]} has its file open, and "
                          "DuckDB writes no file another process reads (a dashboard's or a notebook's connection, "
                          "even a read-only one); close that connection, or publish to another file")

    def _catalog(self, sql: str, params: Sequence) -> list[tuple]:
        """The rows of ``sql`` over the file attached as ``__sqlanon_chk``:
        the checks before a run's work. Attached for writing, as the run will
        write it, so that a file another process holds open (a dashboard's
        or a notebook's read-only connection too) is refused here, not after
        all the work (helper-67); it changes nothing in the file. Read-only
        beside a writer's log left behind, which a write attach would replay
        into the file (under --explain too: helper-69)."""
        mode = " (READ_ONLY)" if os.path.exists(self.path + ".wal") else ""
        con = connect()
        try:
            con.execute(f"ATTACH {render('attach.sql', path=os.path.abspath(self.path)).sql} AS \"__sqlanon_chk\""
                        + mode)
            return con.execute(sql, params).fetchall()
        except duckdb.Error as exc:
            if "Conflicting lock" in str(exc):
                raise self.unwritable(exc) from None
            raise InputError(f"cannot open DuckDB file {self.path!r}: {first_line(exc)}") from exc
        finally:
            con.close()

    def exists(self, replacing: bool = False) -> bool:
        """Whether the table exists.

        Raises:
            ConfigError: its schema does not exist (a run would find out only
                when it publishes, after all its work); ``replacing`` it, another
                table's foreign key references it.
        """
        schema = self.table[0] if len(self.table) == 2 else "main"
        if not os.path.exists(self.path) or os.path.getsize(self.path) == 0:
            if fold_name(schema) != "main":
                raise ConfigError(f"schema {schema!r} does not exist in the new DuckDB file {self.path!r}, which "
                                  "will have only 'main': name the table without a schema, or create the schema first")
            return False
        q = render("table_exists.sql", catalog="__sqlanon_chk", schema=schema, table=self.table[-1],
                   upper=ASCII_UPPER, lower=ASCII_LOWER)
        ((schemas, tables, views, referenced_by, columns),) = self._catalog(q.sql, q.params)
        if tables and referenced_by is not None and replacing:  # DROP TABLE failed at publish (helper-17)
            raise ConfigError(f"table {table_text(self.table)!r} in {self.path!r} is referenced by a foreign key of "
                              f"table {referenced_by!r}, so it cannot be replaced: drop that constraint, or name "
                              "another table")
        if not schemas:
            raise ConfigError(f"schema {schema!r} does not exist in {self.path!r}: create it (CREATE SCHEMA), "
                              "or name the table in another schema")
        if views:  # found only when publishing, after all the work
            raise ConfigError(f"{table_text(self.table)!r} in {self.path!r} is a view: sqlanon writes tables; "
                              "name another")
        if tables and replacing:
            refuse_metrics_as_output({fold_name(c) for c in columns},
                                     f"table {table_text(self.table)!r} in {self.path!r}")
        return tables > 0


Target = FileTarget | DirectoryTarget | DuckDBTarget


def default_metrics_path(output: str) -> str:
    """``out.parquet`` → ``out__metrics.parquet``; ``out/`` → ``out__metrics.parquet``."""
    p = Path(output.rstrip("/"))
    suffix = format_suffix(p.name)
    stem = p.name[: -len(suffix)] if suffix else p.name
    return str(p.with_name(f"{stem}__metrics.parquet"))


METRICS_KEY = ("run_id", "kind", "fragment_id")
"""Columns every sqlanon metrics table has had: a file or table without them
is someone else's, never appended to or altered."""


METRICS_SIGNATURE = (*METRICS_KEY, "where_clause", "parameters")
"""Columns that together tell a metrics table from data: an output holding
them all is a run history, never replaced by anonymized rows."""


def refuse_metrics_as_output(columns, where: str) -> None:
    """Refuse to publish over ``where``, an existing output whose
    ``columns`` are a metrics table's:
    ``-o a__metrics.parquet --overwrite`` replaced a.parquet's run history
    with anonymized rows, and a.parquet's next run failed (helper-62)."""
    if all(c in columns for c in METRICS_SIGNATURE):
        raise ConfigError(f"{where} holds sqlanon's metrics (run_id, kind, fragment_id, …): publishing over it "
                          "would replace that record of runs with anonymized rows; name another output")


def not_metrics(columns, where: str) -> str | None:
    """Why an existing file or table with ``columns`` is not a metrics table (or None)."""
    missing = [c for c in METRICS_KEY if c not in columns]
    if not missing:
        return None
    return f"{where} exists and is not a sqlanon metrics table (it has no {missing[0]!r} column)"


_SQL_KINDS = {"varchar": "text", "text": "text", "character varying": "text", "string": "text",
              "integer": "int32", "int4": "int32", "int": "int32", "bigint": "int64", "int8": "int64",
              "hugeint": "int128", "numeric": "numeric", "double": "float64", "double precision": "float64",
              "float8": "float64", "boolean": "bool", "bool": "bool", "timestamp with time zone": "timestamptz",
              "timestamptz": "timestamptz"}
"""A DuckDB or PostgreSQL type name (``DESCRIBE``, ``format_type`` of a
domain's base type) as a kind of :data:`_HOLDS`; see :func:`_sql_kind` for
the names with a length, precision or scale."""

_HOLDS = {"text": {"text"}, "int32": {"int32", "int64", "int128", "numeric", "float64", "text"},
          "int64": {"int64", "int128", "numeric", "text"}, "float64": {"float64", "text"}, "bool": {"bool", "text"},
          "timestamptz": {"timestamptz", "text"}}
"""The kinds of column that hold each kind of metrics value exactly (a
timestamp without time zone holds the session's wall time, not the instant)."""

_KIND_SHOWN = {"text": "text", "int32": "32-bit integers", "int64": "64-bit integers",
               "float64": "double precision numbers", "bool": "booleans", "timestamptz": "timestamps with time zone"}


def _arrow_kind(t: pa.DataType) -> str:
    if pa.types.is_timestamp(t):
        return "timestamptz" if t.tz else "timestamp"
    return {pa.string(): "text", pa.int32(): "int32", pa.int64(): "int64", pa.float64(): "float64",
            pa.bool_(): "bool"}[t]


def _sql_kind(typ: str) -> str:
    """:data:`_SQL_KINDS` of ``typ``, and of names with their modifiers:
    ``character varying(50)`` is text (a longer value fails the INSERT,
    loudly); a microsecond ``timestamp(6) with time zone`` is a timestamptz
    (fewer digits round); ``numeric(p, s)`` holds 32-bit integers with 10
    digits before the point, 64-bit ones with 19."""
    t = re.sub(r"\s+", " ", typ.strip().lower())
    if re.fullmatch(r"(varchar|character varying)\(\d+\)", t):
        return "text"
    t = re.sub(r"^timestamp\(6\)", "timestamp", t)
    number = re.fullmatch(r"(?:numeric|decimal)\((\d+), ?(\d+)\)", t)
    if number:
        whole = int(number.group(1)) - int(number.group(2))
        return "int64" if whole >= 19 else "int32" if whole >= 10 else t
    return _SQL_KINDS.get(t, t)


def refuse_unfit_metrics(schema: pa.Schema, columns: Sequence[tuple[str, str]], where: str,
                         fold: Callable[[str], str] = str, publishing: bool = False) -> None:
    """Refuse an existing table (its columns: ``(name, SQL type)``) as the
    place of a run's metrics rows (``schema``): one that is not sqlanon's
    (:func:`not_metrics`), or whose columns would not hold the rows
    exactly: appended into a hand-made table's INTEGER ``ncp`` or
    DECIMAL(4,2) ``gcp``, 626.157 was kept as 626 and 0.0096 as 0.01,
    silently (helper-41). ``fold``: the database's matching of names
    (DuckDB's ignores ASCII case: :func:`fold_name`)."""
    done = "; nothing was published" if publishing else ""
    why = not_metrics({fold(n) for n, _ in columns}, where)
    if why:
        raise ConfigError(f"{why}: name another table with --metrics{done}")
    ours = {fold(f.name): f for f in schema}
    for name, typ in columns:
        metric = ours.get(fold(name))
        if metric is None:
            continue
        kind = _arrow_kind(metric.type)
        if _sql_kind(typ) not in _HOLDS[kind]:
            raise ConfigError(f"{where}: its column {name!r} is {typ}, which does not hold sqlanon's {metric.name} "
                              f"({_KIND_SHOWN[kind]}) exactly: change the column's type, or name another table with "
                              f"--metrics{done}")


def check_replaceable(path: str, what: str, renamed: bool = True) -> None:
    """Before any work: ``path`` (an output, a metrics file) can be written
    aside and renamed into place, or the run would fail (or publish its
    output and lose its metrics) only at the end.

    * Names: the staging name next to it adds ~27 bytes and the process id
      to its name; past the filesystem's limit on a name, a run failed or
      not depending on its process id. Checked with room for any pid.
    * ``renamed`` (not a DuckDB file, written in place): in a directory with
      the sticky bit (``/tmp``, a team's shared directory) only the owner of
      a file may replace it (or the directory's owner, or root).
    """
    p = Path(os.path.abspath(path.rstrip("/") or "/"))
    try:
        room = os.pathconf(p.parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        room = 255
    longest = len(os.fsencode(f".{p.name}{STAGING_MARK}")) + 10 + 1 + 8  # pid (up to 10 digits), uuid
    if longest > room:
        raise ConfigError(f"{what} name {p.name!r} is too long: sqlanon stages it under a name "
                          f"{longest - len(os.fsencode(p.name))} bytes longer, past this filesystem's {room}; "
                          "shorten it")
    try:
        st, parent = os.lstat(p), os.stat(p.parent)
    except OSError:
        return  # new (or its directory is checked elsewhere)
    if not renamed:
        return
    euid = os.geteuid()
    if parent.st_mode & stat.S_ISVTX and euid not in (0, st.st_uid, parent.st_uid):
        raise ConfigError(f"{what} {str(p)!r} belongs to another user, in a directory with the sticky bit: "
                          "only its owner may replace it; name another")


# A value of each type a metrics column has, to try its cast into an
# existing file's column (a NULL casts to anything).
_METRICS_SAMPLES = {"VARCHAR": "'{}'", "INTEGER": "1", "BIGINT": "1", "DOUBLE": "1.5", "BOOLEAN": "true",
                    "TIMESTAMP WITH TIME ZONE": "TIMESTAMPTZ '2026-01-01 00:00:00+00'"}


def check_metrics_file(path: str, schema: pa.Schema | None = None, con: duckdb.DuckDBPyConnection | None = None
                       ) -> None:
    """Before any work: the metrics file must be new, or an earlier run's
    metrics (whose columns take rows of ``schema``, the run's), and
    replaceable (:func:`check_replaceable`). Read on ``con`` where given
    (the run's own, as it publishes: a new connection costs ~10 ms), else
    on a connection of its own."""
    if os.path.isdir(path):
        raise ConfigError(f"metrics file {path!r} is a directory")
    check_replaceable(path, "metrics file")
    fmt = _format_of(path)
    if fmt is None or not os.path.exists(path):
        return
    own = con is None
    con = connect() if own else con
    try:
        relation = _earlier_metrics(path, fmt)
        try:
            names = relation_columns(con, relation)
        except duckdb.Error as exc:
            raise ConfigError(f"metrics file {path!r} exists and cannot be read: {first_line(exc)}") from exc
        why = not_metrics(names, f"metrics file {path!r}")
        if why:
            raise ConfigError(why + ": name another file with --metrics")
        if schema is not None:
            _check_metrics_types(con, relation, schema, f"metrics file {path!r}")
    finally:
        if own:
            con.close()


def earlier_run_in_file(con: duckdb.DuckDBPyConnection, path: str, target: str) -> tuple[str, str] | None:
    """The parameters (JSON) and start of the last run that the metrics file
    ``path`` records as publishing ``target``, read on ``con``; ``None`` when
    there is none, or it cannot be read (the run's own check of the file says why)."""
    fmt = _format_of(path)
    if fmt is None or not os.path.exists(path):
        return None
    stmt = render("earlier_run.sql", relation=_earlier_metrics(path, fmt), target=target)
    try:
        return con.execute(stmt.sql, stmt.params).fetchone()
    except duckdb.Error:
        return None


def _earlier_metrics(path: str, fmt: str) -> str:
    """An existing metrics file as a relation; a CSV file as the text it
    holds, to which a run's rows are appended as text (DuckDB writes a
    value into CSV as its text). Read with guessed types, a column's type
    came from its first 20,480 rows: after a year of one-fragment runs
    ``where_clause`` (``TRUE``) read as BOOLEAN, and every later run failed
    on the first clause past them, after all its work (helper-41)."""
    source = exact_file(path, fmt)
    return replace(source, as_text=True, ours=True).relation if fmt == "csv" else source.relation


def _check_metrics_types(con: duckdb.DuckDBPyConnection, relation: str, schema: pa.Schema, where: str) -> None:
    """The run's rows, appended by name, must fit the columns ``relation``
    already has: a column of another kind (a struct where the run writes a
    count) failed the run when publishing, after all its work, naming the
    hidden staging file."""
    con.register("__sqlanon_metrics", schema.empty_table())
    try:
        ours = dict(r[:2] for r in con.execute('DESCRIBE SELECT * FROM "__sqlanon_metrics"').fetchall())
        both = dict(r[:2] for r in con.execute(
            f'DESCRIBE SELECT * FROM {relation} UNION ALL BY NAME SELECT * FROM "__sqlanon_metrics"').fetchall())
        for col, typ in ours.items():
            if both.get(col, typ) == typ:
                continue
            try:
                con.execute(f"SELECT CAST(CAST({_METRICS_SAMPLES.get(typ, 'NULL')} AS {typ}) AS {both[col]})")
            except duckdb.Error:
                raise ConfigError(f"{where}: its column {col!r} is {both[col]}, where sqlanon writes {typ}; "
                                  "name another file with --metrics") from None
    except duckdb.Error as exc:
        raise ConfigError(f"{where} has columns that do not take sqlanon's metrics ({first_line(exc)}); "
                          "name another file with --metrics") from None
    finally:
        con.unregister("__sqlanon_metrics")


class StagedMetrics:
    """A metrics file written aside: call it to swap it in, or :meth:`discard`
    it; either releases the file's lock.

    It is written in a private directory beside its destination (0700: it
    holds the plan's values of the input; written under the umask beside it,
    it was readable by all until the swap, and so swapped in by the next run
    after a crash: helper-22)."""

    def __init__(self, folder: str, path: str, lock: PathLock, made: tuple[int, int] | None = None) -> None:
        self.folder, self.path, self._lock = folder, path, lock
        self.aside = os.path.join(folder, os.path.basename(path))
        self.claim = self.folder + CLAIM_SUFFIX
        self.made = made
        """The folder's device and inode as made: it sits where others may
        write (the output's folder), who could put another in its place."""
        self.like: str | None = None
        """Whose access a new metrics file takes (the output it describes,
        a local file or directory); none: the owner's alone. It holds the
        plan's values of the input: as private as the output."""

    def __call__(self) -> None:
        try:
            st = os.lstat(self.aside)
            if (not _same_directory(self.folder, self.made) or not stat.S_ISREG(st.st_mode)
                    or not owned(st.st_uid, st.st_dev)):
                # Put a link or another's file in place, its access set (helper-116): said, not done.
                raise OSError(errno.EPERM, "its staging folder was replaced while the run wrote it")
            if os.path.exists(self.path) or self.like:
                _keep_access(self.aside, self.path if os.path.exists(self.path) else self.like)
            else:  # the output is a table on a server: nothing local to match
                with contextlib.suppress(OSError):
                    _set_access(self.aside, -1, 0o600)
            os.replace(self.aside, self.path)
            _remove(self.folder)
            _remove(self.claim)
        finally:
            self._lock.release()

    def discard(self) -> None:
        if _same_directory(self.folder, self.made):  # never another's put in its place (helper-116)
            _remove(self.folder)
        _remove(self.claim)
        self._lock.release()

    def belongs_to(self, output: str, staged_output: str) -> None:
        """Record, beside the staged file, that it holds the metrics of
        ``output`` once ``staged_output`` (a file or directory, renamed into
        place) is there: the same inode (:func:`_finish_metrics`). Without
        the record (a write that failed) a dead run's metrics are dropped."""
        try:
            st = os.stat(staged_output)
            # A new file, never through a link: the folder others may write could hold one to any file,
            # which the run overwrote (helper-116).
            fd = os.open(self.claim, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"output": os.path.abspath(output), "dev": st.st_dev, "ino": st.st_ino}, fh)
        except OSError as exc:
            log.debug("cannot record which output %s describes: %s", self.aside, exc)

    def after_publishing(self, output: str) -> bool:
        """Swap it in once ``output`` is published; whether it was: the run
        has succeeded then, whatever happens here (exit 0 means published),
        so a failure (a file made immutable meanwhile) is a warning, and
        ``--json``'s ``metrics_table`` is null (a scheduler reading stdout
        only could not tell: helper-120)."""
        try:
            self()
        except OSError as exc:
            self.discard()
            log.warning("published %s, but its metrics were not written: cannot put %r in place (%s)",
                        output, self.path, exc.strerror)
            return False
        return True


METRICS_LOCK_WAIT = 60.0
"""Seconds a run waits for another to finish appending to a metrics file it
shares (that takes a moment: outputs share one, ``out.csv`` and
``out.parquet``, or jobs one ``--metrics``)."""


def stage_metrics_file(con, metrics: pa.Table, path: str) -> StagedMetrics:
    """Write the metrics file aside, next to its destination (same filesystem,
    so the swap is a rename), with earlier runs' rows kept; return the swap.
    The file is locked from reading its earlier rows until the swap, so that
    a run appending meanwhile cannot lose this one's rows, or this its."""
    fmt = _format_of(path)
    if fmt is None:
        raise ConfigError(f"cannot tell the format of metrics file {path!r}: name a .parquet or .csv file")
    lock = PathLock(path, f"the metrics file {path!r}").acquire(wait=METRICS_LOCK_WAIT)
    folder = str(_staging_name(Path(path)))
    with contextlib.ExitStack() as on_failure:  # undone unless the file is written whole
        on_failure.callback(lock.release)
        check_metrics_file(path, metrics.schema, con)
        remove_stale_staging(path, locked=lock.held)
        on_failure.callback(_remove, folder)  # a half-written file must not linger
        try:
            os.mkdir(folder, 0o700)
        except OSError as exc:
            raise InputError(f"cannot write the metrics file {path!r}: {exc.strerror}") from exc
        # Written by a name that stays the folder made, beside the output where others may write (helper-116)
        with held_private(folder) as held:
            st = os.stat(held)
            aside = os.path.join(held, os.path.basename(path))
            if os.path.exists(path):
                old = _earlier_metrics(path, fmt)
                con.register("__sqlanon_metrics", metrics)
                try:
                    relation = f'(SELECT * FROM {old} UNION ALL BY NAME SELECT * FROM "__sqlanon_metrics")'
                    copy_relation(con, relation, aside, fmt, like=path)
                finally:
                    con.unregister("__sqlanon_metrics")
            else:
                copy_relation(con, metrics, aside, fmt, like=path)
        on_failure.pop_all()
    return StagedMetrics(folder, path, lock, (st.st_dev, st.st_ino))


_PART_NAME = re.compile(r"part-\d{5,}(-[0-9a-f]{12})?\.parquet")  # without the run's mark: earlier versions


def _check_replaceable_directory(path: str) -> None:
    """``--overwrite`` replaces a directory only if it holds an earlier
    output's part files and nothing else: never a directory of other things."""
    try:
        other = sorted(e.name for e in os.scandir(path) if not (e.is_file() and _PART_NAME.fullmatch(e.name)))
    except OSError as exc:
        raise ConfigError(f"cannot read output directory {path!r}: {exc.strerror}") from exc
    if other:
        raise ConfigError(
            f"output directory {path!r} holds more than an earlier output's part files ({other[0]!r}"
            f"{f' and {len(other) - 1} more' if len(other) > 1 else ''}); --overwrite replaces only a directory "
            "sqlanon wrote: name a new directory"
        )


def check_duckdb_output(spec: str) -> None:
    """The output of a ``--target-table`` must be a DuckDB file, or a new file named as one,
    whose path holds no ``?``: DuckDB reads what follows it as options, and put
    the database's WAL at ``x.wal?.duckdb``, another file (replaced, then
    deleted), or failed to publish after all the work (helper-190)."""
    if "?" in os.path.abspath(spec):  # (a relative one's working directory too: helper-192)
        raise ConfigError(f"cannot write the DuckDB file {os.path.abspath(spec)!r}: DuckDB reads a '?' in a "
                          "database's path as the start of options; name a path without one")
    if os.path.isfile(spec):
        _check_duckdb_file(spec, "--target-table", output=True)
    elif not spec.lower().endswith(DUCKDB_SUFFIXES):
        raise ConfigError(
            f"--target-table writes into a DuckDB file: name a .duckdb, .ddb or .db output "
            f"(or a database URL), not {spec!r}"
        )


def open_target(path: str | os.PathLike, *, overwrite: bool, table: str | None = None, plan: bool = False) -> Target:
    """Resolve an output argument; refuses to replace an existing output without ``overwrite``.
    ``plan``: for a plan (``--explain``), whose lock a run waits for."""
    spec = utf8_path(os.fspath(path), "output")
    if spec == "-":  # it used to become a directory named '-'
        raise ConfigError("the output '-' (standard output) cannot be written: name a .parquet or .csv file, a "
                          "directory/, a .duckdb file or a database URL")  # the CLI's -o and the library's output=
    if table is not None or spec.lower().endswith(DUCKDB_SUFFIXES):
        if table is None:
            if os.path.isfile(spec) and os.path.getsize(spec):
                _check_duckdb_file(spec, "--target-table", output=True)  # a SQLite hr.db: not written (helper-25)
            what = "is a DuckDB database" if os.path.exists(spec) else "names a DuckDB database (by its suffix)"
            raise ConfigError(f"{spec!r} {what}: name the output table with --target-table")
        _check_output_directory(Path(spec).parent)  # the database file, its WAL and the run's staging go there
        check_replaceable(spec, "DuckDB file", renamed=False)
        if os.path.isfile(spec) and os.path.getsize(spec) == 0:  # DuckDB refuses it, after every fragment (helper-17)
            raise ConfigError(f"{spec!r} is an empty file, which DuckDB does not open as a database: remove it "
                              "(a new database is made in its place), or name another file")
        check_duckdb_output(spec)

        def check(lock: PathLock) -> DuckDBTarget:
            target = DuckDBTarget(spec, tuple(split_table_name(table)), overwrite=overwrite, lock=lock)
            if target.exists(replacing=overwrite) and not overwrite:  # its schema checked either way
                raise ConfigError(
                    f"table {table_text(target.table)!r} already exists in {spec!r}; pass --overwrite to replace it")
            return target

        # Written in place, through a symlink too: locked as the file it is
        # (two runs through a link and its file both published: helper-9).
        return _locked(spec, check, os.path.realpath(spec), plan)
    # As written: pathlib drops a last '.' ('out/.' is Path('out')), and 'out/.' cannot be swapped in (EBUSY).
    if os.path.basename(spec.rstrip("/")) in ("", ".", ".."):
        raise ConfigError(f"output {spec!r}: name the output file or directory itself (e.g. anon/ or anon.parquet)")
    fmt = _format_of(spec)
    is_dir = spec.endswith("/") or (fmt is None and (os.path.isdir(spec) or not Path(spec).suffix))
    if fmt is None and not is_dir:
        raise ConfigError(f"cannot tell the output format of {spec!r}: name a .parquet, .csv or .tsv file or a directory/")
    if is_dir and fmt == "csv":  # a directory of Parquet parts named as a CSV file (helper-62); x.parquet/ is Spark's
        raise ConfigError(f"output {spec!r} names a CSV file and a directory of Parquet parts ('/'): drop the '/' "
                          "for the file, or the extension for the directory")
    _check_output_directory(Path(spec.rstrip("/")).parent)
    check_replaceable(spec, "output")
    if is_dir:
        if os.path.isfile(spec.rstrip("/")):
            raise ConfigError(f"output {spec!r} is a file, not a directory")
        if os.path.ismount(spec.rstrip("/")):
            raise ConfigError(
                f"output {spec!r} is a mount point: an output directory is swapped in whole (renamed), which a "
                "mount point cannot be; name a directory inside it"
            )

        def check_directory(lock: PathLock) -> DirectoryTarget:
            if os.path.exists(spec) and not overwrite:
                raise ConfigError(f"output {spec!r} already exists; pass --overwrite to replace it")
            if os.path.isdir(spec):
                _check_replaceable_directory(spec)
                if not os.access(spec, os.W_OK):  # moved aside to swap: its '..' changes (helper-22)
                    raise ConfigError(f"output {spec!r} is a directory this user cannot write (it is replaced by "
                                      "moving it aside): make it writable, or write elsewhere")
            return DirectoryTarget(spec.rstrip("/"), lock=lock)

        return _locked(spec.rstrip("/"), check_directory, plan=plan)
    if os.path.isdir(spec):
        raise ConfigError(f"output {spec!r} is a directory, not a {fmt} file")

    def check_file(lock: PathLock) -> FileTarget:
        if os.path.exists(spec) and not overwrite:
            raise ConfigError(f"output {spec!r} already exists; pass --overwrite to replace it")
        if os.path.isfile(spec):
            refuse_metrics_as_output(_file_columns(spec, fmt), f"output {spec!r}")
        return FileTarget(spec, fmt, lock=lock)

    return _locked(spec, check_file, plan=plan)


def _check_output_directory(parent: Path) -> None:
    """The output's directory must be a writable directory: sqlanon does not create directories."""
    if not parent.is_dir():
        raise ConfigError(f"output directory {str(parent)!r} " + ("is a file" if parent.exists() else "does not exist"))
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"output directory {str(parent)!r} is not writable")


def _file_columns(path: str, fmt: str) -> list[str]:
    """The columns of an existing file, as DuckDB reads them (none when it
    cannot be read). Parquet's from its footer: a DuckDB connection's start
    cost every overwriting run ~30 ms."""
    import pyarrow.parquet as pq

    if fmt == "parquet":
        try:
            return pq.read_schema(path).names
        except (OSError, pa.ArrowException):
            return []
    con = connect()
    try:
        return relation_columns(con, exact_file(path, fmt).relation)
    except duckdb.Error:
        return []
    finally:
        con.close()


def relation_columns(con: duckdb.DuckDBPyConnection, relation: str) -> list[str]:
    """The column names of ``relation`` (no row read)."""
    return [d[0] for d in con.execute(f"SELECT * FROM {relation} LIMIT 0").description]


def _locked(path: str, check, lock_path: str | None = None, plan: bool = False):
    """``check(lock)`` → the target, with the output's lock (on ``lock_path``,
    by default ``path``) taken first (so that what it checks, whether the
    output exists, holds until the swap) and the dead runs' staging removed
    before it looks: an output a dead run had moved aside is back in place
    (it was put back after the check, which found no output, and replaced
    without --overwrite: helper-9). The lock is released if anything fails
    on the way. ``plan``: taken for a plan (:meth:`PathLock.acquire`)."""
    lock = PathLock(lock_path or path, repr(path)).acquire(plan=plan)
    with contextlib.ExitStack() as on_failure:
        on_failure.callback(lock.release)
        remove_stale_staging(path, locked=lock.held)
        target = check(lock)
        on_failure.pop_all()
    return target
