"""Lake sources and targets read and written through DuckDB.

A source is named on the command line as

* a Parquet or CSV file: ``people.parquet``, ``people.csv``;
* a glob or a directory of them (hive-partitioned directories too):
  ``lake/people/*.parquet``, ``lake/people/``;

and a target as a Parquet or CSV file path. Every output is written aside (a
hidden staging file next to the target), verified, and only then renamed into
place, so a crash or Ctrl-C leaves an existing target untouched.
"""

from __future__ import annotations

import glob
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from .errors import ConfigError, InputError
from .sql import render

FILE_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}
STAGING_MARK = ".sqlanon-staging-"


def connect(memory_limit: str | None = None, threads: int | None = None) -> duckdb.DuckDBPyConnection:
    """A fresh in-memory DuckDB connection (one per process or worker)."""
    config = {}
    if memory_limit:
        config["memory_limit"] = memory_limit
    if threads:
        config["threads"] = threads
    return duckdb.connect(":memory:", config=config)


def _format_of(path: str) -> str | None:
    return FILE_FORMATS.get(Path(path.rstrip("/*")).suffix.lower())


@dataclass(frozen=True)
class FileSource:
    """Parquet or CSV files: one file, a glob, or a directory of part files."""

    path: str
    fmt: str
    hive: bool = False

    @property
    def relation(self) -> str:
        """The source as an SQL relation (a DuckDB table function call)."""
        return render("read_file.sql", path=self.path, fmt=self.fmt, hive=self.hive).sql

    def describe(self) -> str:
        return self.path

    def same_file(self, other: str) -> bool:
        try:
            return os.path.exists(other) and any(os.path.samefile(other, p) for p in glob.glob(self.path))
        except OSError:
            return False


def open_source(path: str | os.PathLike) -> FileSource:
    """Resolve a source argument; the error names the path when nothing is there."""
    spec = os.fspath(path)
    if os.path.isdir(spec):
        files = [f for f in glob.glob(os.path.join(spec, "**", "*"), recursive=True) if _format_of(f)]
        if not files:
            raise InputError(f"directory {spec!r} holds no .parquet or .csv files")
        fmts = {_format_of(f) for f in files}
        if len(fmts) > 1:
            raise InputError(f"directory {spec!r} mixes Parquet and CSV files")
        fmt = fmts.pop()
        ext = "parquet" if fmt == "parquet" else "csv"
        hive = any("=" in part for f in files for part in Path(os.path.relpath(f, spec)).parts[:-1])
        return FileSource(os.path.join(spec, "**", f"*.{ext}"), fmt, hive)
    fmt = _format_of(spec)
    if fmt is None:
        raise ConfigError(f"cannot tell the format of {spec!r}: name a .parquet or .csv file, a glob or a directory")
    if any(ch in spec for ch in "*?["):
        if not glob.glob(spec, recursive=True):
            raise InputError(f"no file matches {spec!r}")
        return FileSource(spec, fmt)
    if not os.path.isfile(spec):
        raise InputError(f"input file {spec!r} does not exist")
    if not os.access(spec, os.R_OK):
        raise InputError(f"input file {spec!r} is not readable")
    return FileSource(spec, fmt)


def read_arrow(con: duckdb.DuckDBPyConnection, source: FileSource, where: str | None = None, params=None) -> pa.Table:
    """Read ``source`` (optionally filtered by an SQL predicate) into Arrow."""
    sql = f"SELECT * FROM {source.relation}"
    if where:
        sql += f" WHERE {where}"
    try:
        return con.execute(sql, params or []).fetch_arrow_table()
    except duckdb.Error as exc:
        raise InputError(f"cannot read {source.describe()!r}: {first_line(exc)}") from exc


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass(frozen=True)
class FileTarget:
    """A Parquet or CSV output file."""

    path: str
    fmt: str

    def describe(self) -> str:
        return self.path

    def staging_path(self) -> str:
        p = Path(self.path)
        return str(p.with_name(f".{p.name}{STAGING_MARK}{os.getpid()}-{uuid.uuid4().hex[:8]}"))


def open_target(path: str | os.PathLike, *, overwrite: bool) -> FileTarget:
    """Resolve an output argument; refuses to replace a file without ``overwrite``."""
    spec = os.fspath(path)
    fmt = _format_of(spec)
    if fmt is None:
        raise ConfigError(f"cannot tell the output format of {spec!r}: name a .parquet or .csv file")
    parent = Path(spec).parent
    if not parent.is_dir():
        raise ConfigError(f"output directory {str(parent)!r} does not exist")
    if os.path.isdir(spec):
        raise ConfigError(f"output {spec!r} is a directory")
    if os.path.exists(spec) and not overwrite:
        raise ConfigError(f"output {spec!r} already exists; pass --overwrite to replace it")
    remove_stale_staging(spec)
    return FileTarget(spec, fmt)


def remove_stale_staging(path: str) -> None:
    """Delete staging files of earlier runs on ``path`` whose process is gone."""
    p = Path(path)
    for stale in p.parent.glob(f".{glob.escape(p.name)}{STAGING_MARK}*"):
        m = re.search(re.escape(STAGING_MARK) + r"(\d+)-", stale.name)
        if m and _alive(int(m.group(1))) and int(m.group(1)) != os.getpid():
            continue
        try:
            stale.unlink()
        except OSError:
            pass  # another run removed it first


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_staging(con: duckdb.DuckDBPyConnection, table: pa.Table, target: FileTarget) -> str:
    """Write ``table`` to a fresh staging file next to the target; return its path."""
    staging = target.staging_path()
    con.register("__sqlanon_out", table)
    try:
        stmt = render("copy_to.sql", relation='"__sqlanon_out"', path=staging, fmt=target.fmt)
        con.execute(stmt.sql, stmt.params)
    except (duckdb.Error, OSError) as exc:
        discard(staging)
        raise InputError(f"cannot write {target.describe()!r}: {first_line(exc)}") from exc
    finally:
        con.unregister("__sqlanon_out")
    return staging


def staged_relation(target: FileTarget, staging: str) -> str:
    """The staging file as a relation, for verification before publishing."""
    return FileSource(staging, target.fmt).relation


def publish(staging: str, target: FileTarget) -> None:
    """Atomically move the verified staging file onto the target path."""
    os.replace(staging, target.path)


def discard(staging: str | None) -> None:
    if staging and os.path.exists(staging):
        os.unlink(staging)
