"""PostgreSQL sources and targets, with the heavy lifting pushed to the server.

Addressing: a SQLAlchemy-style URL plus a table name, e.g.
``postgresql://user@host:5432/db --table hr.people``. Credentials come from
the URL, the ``PG*`` environment variables or ``~/.pgpass`` (libpq reads the
last two itself). The password never appears in a log line, an error, the
``--json`` document, ``--explain`` or a metrics table: everything user-facing
goes through :meth:`Conn.safe` / :meth:`Conn.redact`.

Two planes, each with the tool that is best at it:

* **Data** moves through DuckDB's postgres extension (``duckdb-ext-postgres``,
  the extension binary for the pinned DuckDB, loaded from the wheel: nothing is
  downloaded). Statistics, the sample (``TABLESAMPLE BERNOULLI … REPEATABLE``)
  and every fragment's ``SELECT … WHERE <clause>`` are sent as text through
  ``postgres_query()``, so the server's planner and indexes run them and only
  their results travel; loading the anonymized rows uses the extension's
  binary ``COPY``. (Filters on an attached table are pushed down only partly,
  e.g. not ``IS NULL``, hence ``postgres_query``; measured in BENCHMARKS.md.)
* **Control** statements run on a plain psycopg connection: the advisory lock
  that refuses a second concurrent run on the same target, the k/l
  verification on the server, and the swap of the staging table into the
  target together with the metrics rows, in one transaction.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import itertools
import logging
import os
import re
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, quote, quote_plus, unquote

import duckdb
import pyarrow as pa

from . import interrupts
from .config import listed, missing_table, sqlite_url_from, table_text
from .errors import ConfigError, InputError, SqlanonError, install_extra, redact_urls
from .io import Staging, refuse_metrics_as_output, refuse_unfit_metrics, relation_columns
from .io import first_line as _io_first_line
from .io import lost_columns, safe_path_hint
from .sql import ident, literal, render

if TYPE_CHECKING:
    from . import sqla

log = logging.getLogger("sqlanon")

SRC = "__sqlanon_src"
DST = "__sqlanon_dst"
EXTRA_HINT = install_extra("postgres")


TEXT_STYLE = ("-c DateStyle=ISO,MDY -c IntervalStyle=postgres -c extra_float_digits=3 -c xmloption=content "
              "-c lc_monetary=C -c standard_conforming_strings=on")
"""How every session of a run prints and reads dates, intervals, floats,
xml and money. Values travel as text between sessions (an array, a range
or a composite pulled by a worker, typed again on the target's server): a
database set to DateStyle 'SQL, DMY' printed '03/02/2020', which the
target read as another day, an interval in the sql_standard style lost its
signs, and extra_float_digits 0 printed a float8 to 15 digits (3: the
shortest text that reads back exactly since PostgreSQL 12, 17 digits
before it); an xml column of content, not one document, failed where a
role's xmloption was 'document' (helper-110; pg_dump's sessions read xml
as content too); money prints in lc_monetary's form, which another
session's would read otherwise."""

SAFE_PATH = "-c search_path=pg_catalog,pg_temp"
"""The search_path of every session of a run once its names are resolved
(:func:`_table`, on the user's own path): its statements name functions and
operators unqualified (count, sum, hashtextextended, to_regclass, <= in a
fragment's clause...), and a schema on the user's path holding one of a
better-matching signature (``public.hashtextextended(text, integer)``, an
``=`` of two varchars), or any placed before pg_catalog, had the run's role
run another role's code, tens of thousands of times a run. Every relation a
run reads or writes is schema-qualified by then."""


def _first_line(exc: BaseException) -> str:
    """A server error as one line (:func:`sqlanon.io.first_line`), saying why
    a name user code left unqualified was not found (:data:`SAFE_PATH`)."""
    line = _io_first_line(exc)
    return line + safe_path_hint(line)


def _conninfo_value(v) -> str:
    return "'" + str(v).replace("\\", "\\\\").replace("'", "\\'") + "'"


def _conninfo(parts: dict) -> str:
    """A libpq ``key='value'`` string of the set ``parts``."""
    return " ".join(f"{k}={_conninfo_value(v)}" for k, v in parts.items() if v not in (None, ""))


_BAD_OPTION = re.compile(r'invalid connection option|invalid \w+ value: |bad value for \w+: |invalid integer value '
                         r'.* for connection option|invalid port number: |Servname not supported')
"""libpq's refusals of a connection string's option (an unknown key, a value;
a port past 65535, which every retry meets: helper-188)."""


def is_url(spec: str) -> bool:
    return "://" in spec


# SQLAlchemy's URL grammar (sqlalchemy.engine.url._parse_url), so that a
# postgresql:// URL is read without importing SQLAlchemy (0.2-0.4 s of every
# PostgreSQL run's start); other databases' URLs go through SQLAlchemy itself,
# which reads them. tests/test_safety.py holds the two readings equal.
_URL = re.compile(
    r"""(?P<name>[\w\+]+)://
        (?:(?P<username>[^:/]*)(?::(?P<password>[^@]*))?@)?
        (?:(?:\[(?P<ipv6host>[^/\?]+)\]|(?P<ipv4host>[^/:\?]+))?(?::(?P<port>[^/\?]*))?)?
        (?:/(?P<database>[^\?]*))?
        (?:\?(?P<query>.*))?""",
    re.X,
)


class UrlError(ValueError):
    """A database URL that cannot be read."""


@dataclass(frozen=True)
class Url:
    """A database URL's parts, as SQLAlchemy reads them (``postgres://`` as
    ``postgresql://``); :meth:`shown` renders it as SQLAlchemy does."""

    drivername: str
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    host: str | None = None
    port: int | None = None
    database: str | None = None
    query: tuple[tuple[str, str | tuple[str, ...]], ...] = ()

    @classmethod
    def parse(cls, url: str) -> "Url":
        m = _URL.match(url)
        if m is None:
            raise UrlError("Could not parse SQLAlchemy URL from given URL string")
        name = m.group("name")
        if name.split("+")[0] == "postgres":  # libpq's and psql's short scheme
            name = name.replace("postgres", "postgresql", 1)
        if name.split("+")[0] != "postgresql":
            return cls._from_sqlalchemy(url, name)
        query: dict[str, str | tuple[str, ...]] = {}
        for key, value in parse_qsl(m.group("query") or ""):
            query[key] = (*((query[key],) if isinstance(query[key], str) else query[key]), value) \
                if key in query else value
        username, password, database = (None if v is None else unquote(v) for v in m.group(
            "username", "password", "database"))
        port = m.group("port")
        return cls(name, username, password, m.group("ipv4host") or m.group("ipv6host"),
                   None if port is None else int(port), database, tuple(query.items()))  # ':' alone fails

    @classmethod
    def _from_sqlalchemy(cls, url: str, name: str) -> "Url":
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            u = make_url(url)
        except ArgumentError as exc:
            raise UrlError(str(exc)) from None
        return cls(name, u.username, u.password, u.host, u.port, u.database, tuple(u.query.items()))

    @property
    def backend(self) -> str:
        """``postgresql``, ``sqlite``, ``mysql``… (SQLAlchemy's backend name)."""
        return self.drivername.split("+")[0]

    def shown(self, hide_password: bool = True) -> str:
        """The URL as SQLAlchemy renders it (``render_as_string``), with the
        password, and the value of any query key naming one (libpq's
        ``sslpassword`` too), as ``***``."""
        s = self.drivername + "://"
        if self.username is not None:
            s += quote(self.username, safe=" +")
            if self.password is not None:
                s += ":" + ("***" if hide_password else quote(self.password, safe=" +"))
            s += "@"
        if self.host is not None:
            s += f"[{self.host}]" if ":" in self.host else self.host
        if self.port is not None:
            s += f":{self.port}"
        if self.database is not None:
            s += "/" + quote(self.database, safe=" +/")
        if self.query:
            s += "?" + "&".join(
                f"{quote_plus(k)}={'***' if hide_password and 'password' in k.lower() else quote_plus(v)}"
                for k, values in sorted(self.query) for v in ((values,) if isinstance(values, str) else values))
        return s


@dataclass(frozen=True)
class Conn:
    """A parsed database URL; :meth:`safe` is the only form shown to people."""

    url: str = field(repr=False)
    _libpq: str = field(init=False, repr=False, compare=False, default="")
    """:meth:`libpq`, worked out once: the Conn travels to the workers in
    their tasks, and parsing there would import SQLAlchemy (~0.2 s) in each."""
    _parts: tuple = field(init=False, repr=False, compare=False, default=())
    """The parts of :meth:`libpq` (``(key, value)``)."""

    def __post_init__(self) -> None:
        try:
            u = self._u
        except ValueError as exc:  # UrlError, or a port ':abc'
            hosts = self.url.partition("://")[2].partition("/")[0].rpartition("@")[2]
            # libpq's list of hosts with ports read as "invalid literal for int()" (helper-87)
            why = ("several hosts with their ports: give them as ?host=h1,h2&port=5432,5433" if "," in hosts
                   else redact_urls(str(exc)))
            raise ConfigError(f"not a database URL: {redact_urls(self.url)!r} ({why})") from None
        if u.port is not None and not 0 < u.port < 65536:  # ':-1' read as "failed to resolve host"
            raise ConfigError(f"not a database URL: {redact_urls(self.url)!r} (port {u.port} is not 1-65535)")
        after_scheme = self.url.partition("://")[2].partition("?")[0]
        if (u.host and "@" in u.host) or (u.host and after_scheme.count("@") > 1):  # not a file path's (SQLite)
            # 'user:Sup@Secret9@host', 'user:Sup@Sec/ret9@host': the rest of the
            # password would show as the host (and the database)
            raise ConfigError(f"the user or password of {redact_urls(self.url)!r} holds an '@': percent-encode it "
                              "(%40), as in postgresql://user:p%40ss@host/db")
        # A socket directory as the host, percent-encoded as libpq takes it
        # (postgresql://user@%2Fvar%2Frun%2Fpostgresql/db).
        host = unquote(u.host) if u.host and "%" in u.host else u.host
        parts = {"host": host, "port": u.port, "dbname": u.database, "user": u.username, "password": u.password}
        parts.update({k: v for k, v in u.query if isinstance(v, str)})
        # Text as str in psycopg, whatever the database's encoding (SQL_ASCII
        # returned bytes, EUC_TW has no Python codec).
        parts["client_encoding"] = "UTF8"
        # After the URL's own options, or else PGOPTIONS's (which libpq reads only when none are given).
        own = parts.pop("options", None) or os.environ.get("PGOPTIONS", "")
        parts["options"] = f"{own} {TEXT_STYLE} {SAFE_PATH}".strip()

        object.__setattr__(self, "_parts", tuple(parts.items()))
        object.__setattr__(self, "_libpq", _conninfo(parts))

    @property
    def backend(self) -> str:
        """``postgresql``, ``sqlite``, ``mysql``… (SQLAlchemy's backend name)."""
        return self._u.backend

    @property
    def database(self) -> str | None:
        """The URL's database part (a file path for SQLite)."""
        return self._u.database

    @property
    def query(self) -> tuple:
        """The URL's query parameters, ``(key, value)`` (a repeated key's values as a tuple)."""
        return self._u.query

    @property
    def drivername(self) -> str:
        """``postgresql+psycopg``, ``sqlite``… (backend and driver)."""
        return self._u.drivername

    def require_postgres(self, what: str) -> "Conn":
        """Refuse a non-PostgreSQL URL where only PostgreSQL is supported."""
        if self.backend != "postgresql":
            files = ("; write to a Parquet or CSV file or a DuckDB file, or PostgreSQL" if what == "the output"
                     else "; copy it into a file or DuckDB to verify it there")
            raise ConfigError(
                f"{what} must be a postgresql:// URL, not {self.backend!r} ({self.safe()}): other SQLAlchemy "
                f"databases can be read (as the input), not written or verified in place{files}"
            )
        need_psycopg()
        return self

    @property
    def _u(self) -> Url:
        return Url.parse(self.url)

    @property
    def password(self) -> str | None:
        """The password, from the URL's user part or its ``?password=`` parameter."""
        u = self._u
        given = dict(u.query).get("password")
        return u.password or (given if isinstance(given, str) or given is None else given[0])

    def safe(self) -> str:
        """The URL with its password masked (the user part's and a ``?password=``)."""
        try:
            return self._u.shown()
        except Exception:  # noqa: BLE001 - an unparsable URL: show none of it
            return "<database URL>"

    def redact(self, text: str) -> str:
        """``text`` with the password (and any libpq ``password=…``) masked.
        The URL's own first: the rest of a word after it is kept (a URL's
        ``?password=…`` before a colon lost the colon: helper-180)."""
        pw = self.password
        if pw and len(pw) >= 4:  # a 1-3 character password would garble every word
            text = text.replace(pw, "***")
        text = re.sub(r"password=(?!\*\*\*(?![^\s&:;,)]))('(?:[^'\\]|\\.)*'|\S+)", "password=***", text)
        return re.sub(r"(://[^:/@\s]*:)(?!\*\*\*@)[^@\s]*@", r"\1***@", text)

    def libpq(self, options: str = "", name: str | None = None, own_path: bool = False) -> str:
        """A libpq connection string (for DuckDB's ATTACH); unset parts come
        from the ``PG*`` environment and ``.pgpass``, as libpq does.
        ``options`` (``-c name=value``) are added after the URL's own and
        :data:`TEXT_STYLE`; ``name`` is the sessions' application_name
        unless the URL or PGAPPNAME gives one; ``own_path``: without
        :data:`SAFE_PATH` (the user's own search_path)."""
        if not options and not name and not own_path:
            return self._libpq
        parts = dict(self._parts)
        if own_path:
            parts["options"] = parts["options"].removesuffix(f" {SAFE_PATH}")
        if options:
            parts["options"] = f"{parts['options']} {options}"
        if name:
            parts["fallback_application_name"] = name
        return _conninfo(parts)

    def unreachable(self, exc: Exception) -> InputError | ConfigError:
        """The error of a failed connection: a URL's connection option libpq
        does not know or whose value it refuses (``?sslmode=bogus``) is the
        URL's fault, exit 2, as a retry fails the same way (it was 1); a
        server down or a database not there is the run's (1)."""
        why = self.redact(_first_line(exc))
        error = ConfigError if _BAD_OPTION.search(why) else InputError
        return error(f"cannot connect to {self.safe()}: {why}")

    def connect(self, own_path: bool = False):
        """A psycopg connection for control statements (locks, DDL, checks);
        ``own_path``: on the user's search_path, not :data:`SAFE_PATH` (to
        resolve an unqualified name, with pg_catalog's names qualified).

        Statements without parameters go to the server as they are (psycopg
        interprets no placeholders then), so a ``%`` or ``:name`` inside a
        quoted identifier stays inert; values use ``%s`` parameters.
        """
        psycopg = need_psycopg()
        try:
            c = psycopg.connect(self.libpq(name=interrupts.session_name(), own_path=own_path))
        except psycopg.Error as exc:
            raise self.unreachable(exc) from None
        interrupts.on_stop(cancel_queries, self, interrupts.session_name())  # as attach()'s
        return c


def same_server(a: Conn, b: Conn) -> bool:
    """Whether two URLs reach the same database, as the servers see it
    (``localhost`` vs ``127.0.0.1``, a password in the URL or in PGPASSWORD…).
    The server's start time tells two servers apart where address and port
    cannot (both NULL over a unix socket), and is the server's own: its
    address is the URL's (a unix socket and TCP, a host's two addresses), so
    one server by two of them was two, and its table replaced under the run
    that read it. One URL is one server, asked
    nothing: a run into its source's database opened four connections to
    ask (two checks, two servers each), each a TLS handshake and a login on
    a remote warehouse."""
    if a.url == b.url:
        return True

    def who(conn: Conn):
        with conn.connect() as c:
            # The start time as a number: psycopg parses a timestamptz only in an ISO DateStyle.
            return c.execute("SELECT current_database(), extract(epoch FROM pg_postmaster_start_time())::text"
                             ).fetchone()

    return who(a) == who(b)


def replica_pair(a: Conn, b: Conn) -> str | None:
    """Whether two servers hold one database's data by physical replication:
    a streaming (hot) standby and its primary, or two standbys of one primary,
    reached by other URLs (other hosts and ports, so :func:`same_server` tells
    them apart). Their tables are the same rows, so a run reading a standby's
    table and replacing the primary's table of that name replaced its own
    input. Told by the cluster's system identifier and the database's OID,
    which a physical copy keeps, and one of the two being in recovery (a
    promoted clone, no longer in recovery, is a database of its own). Returns
    the URL (masked) of the one in recovery, or None; a server that does not
    say (``pg_control_system()`` revoked) is taken as unrelated."""
    import psycopg

    def who(conn: Conn):
        try:
            with conn.connect() as c:
                return c.execute("SELECT (SELECT system_identifier FROM pg_control_system())::text, "
                                 "(SELECT oid FROM pg_database WHERE datname = current_database()), "
                                 "pg_is_in_recovery()").fetchone()
        except (psycopg.Error, SqlanonError):
            return None

    wa = who(a)
    wb = who(b) if wa is not None else None
    if wa is None or wb is None or wa[:2] != wb[:2] or not (wa[2] or wb[2]):
        return None
    return (a if wa[2] else b).safe()


def recovery_hint(msg: str) -> str:
    """What a standby's failure means: its replay of the primary's changes
    cancels (or ends) a query whose snapshot or locks hold it up longer than
    ``max_standby_streaming_delay``, the run's long-lived snapshot first; the
    readers that import it then find it gone ('invalid snapshot identifier')."""
    if "conflict with recovery" in msg:
        return ("; the input's server is a standby, whose replay of the primary's changes cancelled the run's read: "
                "raise its max_standby_streaming_delay (max_standby_archive_delay), set hot_standby_feedback = on "
                "there, or read the primary")
    if "invalid snapshot identifier" in msg:
        return ("; the session holding the run's snapshot ended (ended by an administrator or a restart, or on a "
                "standby by a conflict with recovery: see max_standby_streaming_delay and hot_standby_feedback)")
    return ""


def reads_table(source: "PostgresSource", table: tuple[str, str]) -> tuple[bool, list[str]]:
    """Whether replacing ``table`` of the same database replaces rows that
    reading ``source`` reads: ``table`` is read by it (a view over it at any
    depth, a parent or partitioned table of it, a function a view calls
    whose body the server follows), or is a parent of a table it reads (a
    TRUNCATE of the parent empties its partitions and children). Replacing
    it would wait for the run's own snapshot (holding the source) and
    publish over the rows the run reads.

    Also the functions it calls whose reads the server does not record
    (PL/pgSQL, a SQL body written as a string): a view over such a function
    read the target unseen, and the run replaced it (helper-5)."""
    with source.conn.connect() as c:
        stmt = render("reads_table.sql", dialect="postgres", inline=True, relation=source.relation,
                      table=list(table), sql_bodies=c.info.server_version >= 140000, past_stored=True)
        hit, opaque = c.execute(stmt.sql).fetchone()
    return bool(hit), list(opaque)


def need_psycopg():
    """psycopg, or the error saying how to install it (a PostgreSQL input
    without the extra was an internal error, ModuleNotFoundError: helper-101)."""
    try:
        import psycopg
    except ImportError as exc:
        raise ConfigError(f"PostgreSQL needs psycopg: {EXTRA_HINT}") from exc
    return psycopg


def _extension_path() -> str:
    try:
        files = importlib.metadata.files("duckdb-ext-postgres") or []
    except importlib.metadata.PackageNotFoundError as exc:
        raise ConfigError(f"PostgreSQL needs DuckDB's postgres extension: {EXTRA_HINT}") from exc
    for f in files:
        if f.name.endswith(".duckdb_extension"):
            return str(f.locate())
    raise ConfigError(f"the duckdb-ext-postgres package has no extension binary; reinstall it: {EXTRA_HINT}")


def _no_idle_timeout(server_version: int) -> str:
    """The session option that exempts a session of sqlanon's from a role's
    ``idle_session_timeout`` (PostgreSQL 14 and later; an older server
    refuses the unknown setting, and has no such timeout)."""
    return "-c idle_session_timeout=0" if server_version >= 140000 else ""


def attach(con: duckdb.DuckDBPyConnection, conn: Conn, alias: str, read_only: bool, options: str = "") -> None:
    """Load the postgres extension (from its wheel) and attach the database
    (its sessions started with ``options``, ``-c name=value``, and named
    after the run: :func:`cancel_queries`)."""
    try:
        con.execute(f"LOAD {literal(_extension_path())}")
        mode = ", READ_ONLY" if read_only else ""
        dsn = conn.libpq(options, interrupts.session_name())
        con.execute(f"ATTACH {literal(dsn)} AS {ident(alias)} (TYPE postgres{mode})")
    except duckdb.Error as exc:
        raise conn.unreachable(exc) from None
    # A stop (Ctrl-C, SIGTERM, a host's timeout) interrupts DuckDB, which
    # does not reach a query waiting on the server (on a lock another session
    # holds, or a long aggregate): the run could not be stopped (helper-38).
    interrupts.on_stop(cancel_queries, conn, interrupts.session_name())


def cancel_queries(conn: Conn, name: str) -> None:
    """Cancel the running queries of the sessions named ``name`` (the run's
    DuckDB attachments and psycopg sessions; none if the URL or PGAPPNAME
    named them otherwise) from a session of its own."""
    import psycopg

    with psycopg.connect(conn.libpq(), connect_timeout=10, autocommit=True) as c:  # not named: not cancelled
        c.execute("SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
                  "WHERE application_name = %s AND pid <> pg_backend_pid()", [name])


NAME_BYTES = 63
"""PostgreSQL cuts longer names (NAMEDATALEN - 1) without an error."""


def equal_apart(typ: str) -> bool:
    """Whether a column of server type ``typ`` (as :meth:`PostgresSource.server_columns`
    writes it) may hold values the server holds equal that are written
    apart: a citext ('Flu' = 'flu'), a column with a collation of its own (a
    nondeterministic one), or an array of either."""
    return " COLLATE " in typ or typ.removesuffix("[]").split(".")[-1] == "citext"


def fits_postgres(name: str, what: str, hint: str = "") -> None:
    """Refuse a name PostgreSQL would cut: the table made would not be the one named."""
    size = len(name.encode())
    if size > NAME_BYTES:
        raise ConfigError(f"{what} {name!r} is {size} bytes long; PostgreSQL keeps {NAME_BYTES} bytes of a name{hint}")


def fits_server(c, names: list[str], what: str, hint: str = "") -> None:
    """:func:`fits_postgres` in the database's own encoding, on connection
    ``c``: a character UTF-8 writes in 3 bytes takes 4 in EUC_TW, where a
    name of 63 UTF-8 bytes was cut to the name of another table, which the
    run replaced (helper-5). A name the encoding cannot write is refused too."""
    import psycopg

    encoding = c.info.parameter_status("server_encoding")
    if encoding in ("UTF8", "SQL_ASCII") or not names:  # the bytes fits_postgres counted
        return
    for name in names:
        try:
            size = c.execute("SELECT octet_length(%s::text)", (name,)).fetchone()[0]
        except psycopg.Error as exc:
            raise ConfigError(f"{what} {name!r} cannot be written in the database's encoding ({encoding}): "
                              f"{_first_line(exc)}") from None
        finally:
            c.rollback()  # no transaction left open (the run's lock session idles for the whole run)
        if size > NAME_BYTES:
            raise ConfigError(f"{what} {name!r} is {size} bytes long in the database's encoding ({encoding}); "
                              f"PostgreSQL keeps {NAME_BYTES} bytes of a name{hint}")


def _table(name: str, option: str, conn: Conn) -> tuple[str, str]:
    """``schema.table`` as given, or an unqualified name resolved as the
    server would in a session of ``conn`` (its ``search_path``): the schema
    of the first table of that name on the path, else the schema a ``CREATE
    TABLE`` would use (``current_schema()``)."""
    from .io import split_table_name

    if not name:
        raise ConfigError(f"a database URL needs {option} (schema.table)")
    parts = split_table_name(name)
    for part in parts:
        fits_postgres(part, option)
    if len(parts) == 2:
        return parts[0], parts[1]
    import psycopg

    with conn.connect(own_path=True) as c:  # every name of pg_catalog's qualified: this path may be anyone's
        try:
            found = c.execute(
                "SELECT n.nspname FROM pg_catalog.pg_class r JOIN pg_catalog.pg_namespace n "
                "ON n.oid OPERATOR(pg_catalog.=) r.relnamespace "
                "WHERE r.oid OPERATOR(pg_catalog.=) pg_catalog.to_regclass(%s::pg_catalog.text)",
                (ident(parts[0]),),
            ).fetchone()
            schema = found[0] if found else c.execute("SELECT pg_catalog.current_schema()").fetchone()[0]
        except psycopg.Error as exc:  # a statement_timeout in the URL's options: an internal error (helper-11)
            raise InputError(f"cannot look up {option} {name!r} in {conn.safe()}: {conn.redact(_first_line(exc))}") \
                from None
    if schema is None:
        raise ConfigError(
            f"{option} {name!r}: no schema on the search_path of {conn.safe()} exists; name it as schema.table"
        )
    return schema, parts[0]


# --------------------------------------------------------------------------- source


@dataclass(frozen=True)
class PostgresSource:
    """A table on a PostgreSQL server; every query over it runs on the server.

    Attributes:
        text_columns: columns pulled as ``::text`` (set by the coordinator for
            pass-through ``numeric`` columns: DuckDB would read an unconstrained
            ``numeric`` as DOUBLE and a ``NaN`` as 0, the text is exact).
        columns: the columns to pull, in order (set with the casts, or to
            leave ``--drop`` columns out); empty: all of them.
    """

    conn: Conn
    table: tuple[str, str]
    text_columns: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    arrays: tuple[str, ...] = ()
    """The array columns pulled as arrays, named when DuckDB cannot read one."""
    snapshot: str | None = None
    """An exported snapshot (``pg_export_snapshot()``) every reader imports, so
    statistics, sample and all fragments see the same data on a live table."""
    server_version: int = 0
    """The server's version (``server_version_num``), read with the snapshot; 0: not known."""
    dialect = "postgres"

    @property
    def relation(self) -> str:
        """The table as the *server* names it (schema-qualified, quoted)."""
        return ident(list(self.table))

    @property
    def path(self) -> str:
        return f"{self.conn.safe()} {table_text(self.table)}"

    def describe(self) -> str:
        return f"{self.conn.safe()} table {table_text(self.table)}"

    def same_path(self, other: str) -> bool:
        return False

    def attach(self, con: duckdb.DuckDBPyConnection) -> None:
        # Its session idles from the ATTACH to the snapshot's import (a worker
        # process loading on a busy machine): a role's idle_session_timeout ended it.
        attach(con, self.conn, SRC, read_only=True, options=_no_idle_timeout(self.server_version))
        if self.snapshot:
            # DuckDB keeps one PostgreSQL transaction for its own transaction:
            # import the coordinator's snapshot into it. It idles between
            # statements (a loaded machine, a worker between fragments): a
            # role's idle_in_transaction_session_timeout ended it.
            stmt = (
                "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ; "
                f"SET TRANSACTION SNAPSHOT {literal(self.snapshot, 'postgres')}; "
                "SET LOCAL idle_in_transaction_session_timeout = 0"
            )
            try:
                con.execute("BEGIN TRANSACTION")
                con.execute(f"CALL postgres_execute({literal(SRC)}, ?)", [stmt])
            except duckdb.Error as exc:
                msg = _first_line(exc)
                raise InputError(f"cannot read {self.describe()}: {self.conn.redact(msg + recovery_hint(msg))}"
                                 ) from None

    def detach(self, con: duckdb.DuckDBPyConnection) -> None:
        if self.snapshot:
            try:
                con.execute("COMMIT")
            except duckdb.Error:
                pass  # no transaction was open
        con.execute(f"DETACH DATABASE IF EXISTS {ident(SRC)}")

    def export_snapshot(self):
        """Open a repeatable-read transaction and export its snapshot.

        Returns ``(source with the snapshot, connection)``; keep the connection
        open until every reader is done (closing it ends the snapshot).
        """
        import psycopg

        c = self.conn.connect()
        try:
            # psycopg opens the transaction itself at the first statement: an explicit
            # BEGIN came second, a server WARNING ('there is already a transaction in
            # progress') in its log every run (helper-61).
            c.isolation_level, c.read_only = psycopg.IsolationLevel.REPEATABLE_READ, True
            # The transaction idles while the workers read: a role's (or a managed
            # service's) idle_in_transaction_session_timeout would end it, and the
            # readers' snapshot with it ('invalid snapshot identifier').
            c.execute("SET LOCAL idle_in_transaction_session_timeout = 0")
            self._lock_before_snapshot(c)
            snap = c.execute("SELECT pg_export_snapshot()").fetchone()[0]
        except psycopg.Error as exc:
            c.close()
            raise InputError(f"cannot read {self.describe()}: {self.conn.redact(_first_line(exc))}") from None
        return replace(self, snapshot=snap, server_version=c.info.server_version), c

    def _lock_before_snapshot(self, c) -> None:
        """Take the input's shared lock before the snapshot is (LOCK and SAVEPOINT take none).

        A TRUNCATE + INSERT or a swap of the input (another run's --overwrite, a
        nightly reload) committing between the snapshot and the run's first read
        of the table left that read an empty table, which is not MVCC-safe
        (helper-170): "the input has no rows". With the lock first, the snapshot
        follows such a reload's commit, and later ones queue behind the run, as
        they did behind its first read. Best effort: a relation LOCK cannot take
        (a materialized view, a foreign table), a role with column grants only,
        or a lock not had within the wait, leaves the snapshot as it was."""
        import psycopg

        # Utility statements only (SHOW, SET, LOCK): a SELECT would take the snapshot.
        prior = c.execute("SHOW lock_timeout").fetchone()[0]
        c.execute("SAVEPOINT sqlanon_lock")
        try:
            c.execute(f"SET LOCAL lock_timeout = {int(PUBLISH_LOCK_SECONDS * 1000)}")
            c.execute(f"LOCK TABLE {self.relation} IN ACCESS SHARE MODE")
            c.execute(f"SET LOCAL lock_timeout = {literal(prior)}")  # the role's own, for the rest
            c.execute("RELEASE SAVEPOINT sqlanon_lock")
        except psycopg.errors.QueryCanceled:
            raise  # the run is being stopped (its sessions' queries cancelled)
        except psycopg.Error:
            c.execute("ROLLBACK TO SAVEPOINT sqlanon_lock")
            c.execute("RELEASE SAVEPOINT sqlanon_lock")

    def arrow_schema(self, con: duckdb.DuckDBPyConnection) -> pa.Schema:
        """Column names and types as DuckDB reads them, from a query that reads no rows
        (of :attr:`columns` only when set: a role may lack the privilege on a
        column the run leaves out)."""
        relation = self.relation
        if self.columns:
            relation = f'(SELECT {", ".join(ident(c) for c in self.columns)} FROM {self.relation}) AS "__sqlanon_cols"'
        return self.fetch(con, render("schema.sql", dialect="postgres", inline=True, relation=relation)).schema

    def fetch(self, con: duckdb.DuckDBPyConnection, stmt, types=None) -> pa.Table:
        """Run a rendered (inline) statement on the server; only its result
        travels (in the types DuckDB's extension gives: ``types`` is for other databases)."""
        if stmt.params:
            raise ValueError("statements for the server must be rendered with inline literals")
        try:
            return con.execute(f"SELECT * FROM postgres_query({literal(SRC)}, ?)", [stmt.sql]).fetch_arrow_table()
        except duckdb.Error as exc:
            msg = self.conn.redact(_first_line(exc))
            msg += recovery_hint(msg)
            if self.arrays and "dimensions" in msg:
                msg += (f" (in an array column: {', '.join(map(repr, self.arrays))}; PostgreSQL does not hold an "
                        "array column to its declared dimensions, DuckDB does: drop it (--drop), or cast it to text "
                        "in a view)")
            raise InputError(f"cannot read {self.describe()}: {msg}") from None

    def _pull_sql(self, where: str | None = None) -> str:
        """The server's query of a fragment's rows (every row without ``where``)."""
        cols = "*"
        if self.columns:  # exact text for some columns, or some left out (--drop)
            cols = ", ".join(
                f"{ident(c)}::text AS {ident(c)}" if c in self.text_columns else ident(c) for c in self.columns
            )
        return f"SELECT {cols} FROM {self.relation}" + (f" WHERE {where}" if where else "")

    def rows_sql(self) -> str:
        """DuckDB's query of every row a fragment's pull may take, as it
        takes them (run by the server: :meth:`give_way` first)."""
        return f"SELECT * FROM postgres_query({literal(SRC)}, {literal(self._pull_sql())})"

    def redact(self, text: str) -> str:
        """``text`` without the URL's password, as it may be logged."""
        return self.conn.redact(text)

    def give_way(self, con: duckdb.DuckDBPyConnection) -> None:
        """Bound how long ``con``'s reads of the table wait for a lock, in the run's snapshot.

        The run's snapshot holds the source (its lock, for shared use): a session's ALTER TABLE,
        TRUNCATE or VACUUM FULL queues behind it, and a read behind that, for good (no deadlock
        the server sees: helper-43). A read that waits can only be in that queue: give way."""
        if self.snapshot:
            con.execute(f"CALL postgres_execute({literal(SRC)}, ?)",
                        [f"SET LOCAL lock_timeout = {int(FRAGMENT_LOCK_SECONDS * 1000)}"])

    def select(self, con: duckdb.DuckDBPyConnection, where: str | None = None, params=()) -> pa.Table:
        """The fragment's rows: ``SELECT * … WHERE <clause>`` executed by the server."""
        from .sql import Rendered

        if params:
            raise ValueError("a PostgreSQL fragment clause carries inline literals, not parameters")
        self.give_way(con)
        try:
            return self.fetch(con, Rendered(self._pull_sql(where)))
        except InputError as exc:
            if "55P03" not in str(exc) and "lock timeout" not in str(exc):  # lock_not_available; in English
                raise
            raise InputError(f"cannot read {self.describe()}: another session waits for it exclusively (ALTER "
                             "TABLE, TRUNCATE, VACUUM FULL, REFRESH MATERIALIZED VIEW...) behind this run, whose "
                             "workers would wait behind that session for good; the run gave way: rerun once it is "
                             "done") from None

    def samplable(self) -> bool:
        """Whether ``TABLESAMPLE`` applies: a table, materialized view or partitioned table (not a view)."""
        import psycopg

        with self.conn.connect() as c:
            try:
                kind = c.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", (self.relation,)).fetchone()
            except psycopg.Error as exc:
                raise InputError(f"cannot read {self.describe()}: {self.conn.redact(_first_line(exc))}") from None
        return kind is not None and kind[0] in ("r", "m", "p")

    def server_columns(self, declared: bool = False) -> list[tuple[str, ...]]:
        """``(name, server type)`` of every column, in order
        (``postgres/server_columns.sql``: a domain over numeric, timetz or
        interval, or an array of one, at any depth, as that base type; a
        collation other than the type's own as ``COLLATE <name>``).
        ``declared``: ``(name, server type, declared type, base type,
        readable)``: the column's own type (the domain's name), to create the
        output's column with in the source's database, every domain as its
        base type, for another database, and whether the role may read it."""
        import psycopg

        stmt = render("server_columns.sql", dialect="postgres", inline=True, relation=self.relation)
        with self.conn.connect() as c:
            fits_server(c, list(self.table), "--table")  # before reading a table of the name the server cut
            try:
                # Type names qualified by their schema unless built in: format_type
                # leaves out a schema on the session's search_path, and the
                # target's session (another path, role or server) would resolve
                # 'mood' to another type, or to none.
                c.execute("SET search_path = pg_catalog")
                rows = c.execute(stmt.sql).fetchall()
                if not rows and c.execute("SELECT to_regclass(%s)", (self.relation,)).fetchone()[0] is None:
                    # A typo failed as the server's 'relation does not exist' through DuckDB's words, exit 1,
                    # where a DuckDB file's names its close match, exit 2 (helper-51).
                    raise ConfigError(missing_table(table_text(self.table), self.conn.safe(), [
                        table_text([n, r]) for n, r in c.execute(_RELATIONS, (self.table[0],)).fetchall()]))
            except psycopg.Error as exc:
                raise InputError(f"cannot read {self.describe()}: {self.conn.redact(_first_line(exc))}") from None
        return [tuple(r) if declared else (r[0], r[1]) for r in rows]


_RELATIONS = ("SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
              "WHERE c.relkind IN ('r', 'v', 'm', 'p', 'f') AND has_schema_privilege(n.oid, 'USAGE') "
              "AND n.nspname <> 'information_schema' AND n.nspname !~ '^pg_' ORDER BY n.nspname <> %s, 1, 2")
"""The tables and views a session may name, those of one schema first."""


def open_source(url: str, table: str | None) -> "PostgresSource | sqla.SqlAlchemySource":
    """A :class:`PostgresSource`, or for any other SQLAlchemy URL a
    :class:`sqlanon.sqla.SqlAlchemySource` (a SQLite file's relative path
    taken from the working directory, as a lake's: helper-188)."""
    conn = Conn(sqlite_url_from(url, os.getcwd()))
    if conn.backend != "postgresql":
        from . import sqla

        return sqla.open_source(conn, table)
    need_psycopg()
    return PostgresSource(conn, _table(table, "--table", conn))


# --------------------------------------------------------------------------- target


@dataclass
class PgStaging(Staging):
    """Local part files of one run (in a temporary directory), plus the run id
    that names its staging tables on the server."""

    run: str = ""
    grants: list[str] = field(default_factory=list)
    """What the schema's default privileges gave the staging table, taken
    from it while it holds unverified rows (:meth:`PostgresTarget._private`),
    and given back when it is published as a new table."""
    unlogged: bool = False
    """Whether the staging tables are UNLOGGED: a publication of all tables,
    or of the target's schema, would publish them (:meth:`PostgresTarget._unpublished`)."""


STAGING_SUFFIX = "__sqlanon_staging"
FRAGMENT_LOCK_SECONDS = 10.0
"""How long a worker's read of its fragment waits for a lock on the source (:meth:`PostgresSource.select`)."""

PUBLISH_LOCK_SECONDS = 120.0
"""How long publishing waits for other sessions' locks on the target table."""

LOCK_TRIES_MS = (200, 400, 800, 1600, 3200, 5000)
"""How long each try for the target's lock waits, the last one repeated
(see :meth:`PostgresTarget._lock_target`)."""


def _column_change(old: list[str], new: list[str]) -> str:
    """A table's change of column names, as its messages say it ("without
    'disease'; with 'age_lo', 'age_hi'"); '' when the names are the same."""
    gone, added = [c for c in old if c not in new], [c for c in new if c not in old]
    return "; ".join(x for x in (gone and f"without {', '.join(map(repr, gone[:5]))}",
                                 added and f"with {', '.join(map(repr, added[:5]))}") if x)


def _ragged_hint(con: duckdb.DuckDBPyConnection, parts: str) -> str:
    """Which list columns of ``parts`` a PostgreSQL array cannot hold: one is
    rectangular, so a list of lists of unequal lengths, or with an empty or
    NULL inner list, failed the load in the server's words only (helper-27).
    Lists of lists are checked; deeper ones are named only when none of those
    is at fault (helper-30: every nested column was named)."""
    nested = [(name, typ) for name, typ, *_ in con.execute(f"DESCRIBE SELECT * FROM {parts}").fetchall()
              if re.search(r"\[\d*\]\[\d*\]$", typ)]
    ragged = []
    for name, typ in nested:
        if re.search(r"\[\d*\]\[\d*\]\[\d*\]$", typ):
            continue
        c = ident(name)
        lengths = f"list_transform({c}, x -> coalesce(len(x), 0))"
        if con.execute(f"SELECT count(*) FROM {parts} WHERE len(list_distinct({lengths})) > 1 "
                       f"OR list_contains({lengths}, 0)").fetchone()[0]:
            ragged.append(name)
    ragged = ragged or [name for name, _ in nested]
    column = "column" if len(ragged) == 1 else "columns"
    return (f" (list {column} {', '.join(map(repr, ragged)) or '?'}: lists of unequal lengths, or empty or NULL inner "
            "lists, which a PostgreSQL array cannot hold (it is rectangular); cast it to text or JSON in a view, or "
            "drop it with --drop)")


_COLUMNS = ("WITH RECURSIVE c AS (SELECT attnum, attname, atttypid AS typ, atttypmod AS mod FROM pg_attribute "
            "WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped "
            "UNION ALL SELECT c.attnum, c.attname, t.typbasetype, t.typtypmod FROM c JOIN pg_type t ON t.oid = c.typ "
            "WHERE t.typtype = 'd') "
            "SELECT attname, format_type(typ, mod) FROM c JOIN pg_type t ON t.oid = c.typ WHERE t.typtype <> 'd' "
            "ORDER BY attnum")
"""A table's columns and their types (a domain's base type), by its quoted
name (none: no such table)."""

_METRICS_PG_TYPES = {"text": "text", "int32": "integer", "int64": "bigint", "float64": "double precision",
                     "bool": "boolean", "timestamptz": "timestamp with time zone"}
"""The PostgreSQL type of each kind of metrics column (``io._arrow_kind``), as the run adds it."""

TYPE_DEFINITIONS = (
    "SELECT n, t.typtype, CASE t.typtype "
    "WHEN 'c' THEN (SELECT string_agg(quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod), ', ' "
    "ORDER BY a.attnum) FROM pg_attribute a WHERE a.attrelid = t.typrelid AND a.attnum > 0 AND NOT a.attisdropped) "
    "WHEN 'e' THEN (SELECT string_agg(quote_literal(e.enumlabel), ', ' ORDER BY e.enumsortorder) FROM pg_enum e "
    "WHERE e.enumtypid = t.oid) "
    "WHEN 'r' THEN (SELECT format_type(r.rngsubtype, NULL) FROM pg_range r WHERE r.rngtypid = t.oid) END "
    "FROM unnest(%s::text[]) AS n JOIN pg_type t ON t.oid = to_regtype(n) WHERE t.typtype IN ('c', 'e', 'r')")
"""``(type name, kind, definition)`` of the composite, enum and range types
among the names (a composite's fields, an enum's labels, a range's
subtype), to compare one database's with another's."""

_DECLARED_COLUMNS = ("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                     "WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped ORDER BY attnum")
"""A table's columns, in order, and their own types (a domain's name), by its quoted name."""


@dataclass
class PostgresTarget:
    """A table on a PostgreSQL server, replaced in one server transaction.

    Attributes:
        column_types: server types to create the table with (``name → type``);
            set by the coordinator from a PostgreSQL source so that columns
            that pass through keep their exact types. Missing columns get
            DuckDB's mapping of their Arrow type.
    """

    conn: Conn
    table: tuple[str, str]
    column_types: dict[str, str] = field(default_factory=dict)
    base_types: dict[str, str] = field(default_factory=dict)
    """A domain's base type, by column, where ``column_types`` holds the domain's name."""
    text_columns: tuple[str, ...] = ()
    """Columns that arrive as exact text and get their server type back on the server."""
    overwrite: bool = True
    """Whether an existing table may be replaced; checked again when publishing
    (the table may have been created, by hand or another run, meanwhile)."""
    dialect = "postgres"
    exact_parts = True
    parts_are_output = False
    part_compression = "lz4"
    _lock = None
    _owns: bool | None = None
    """Whether the role owns the existing target (None: no target, or not asked)."""
    _owner_cannot_create: str | None = None
    """The existing target's owner, a role the run's is a member of, when it
    may not create tables in the target's schema (a swap gives it the new table)."""
    _old_types: dict[str, str] = field(default_factory=dict, repr=False)
    """The existing target's columns and their own types (a domain's name), when it is to be replaced."""
    _held: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    """What depends on the existing target and what else is attached to it
    (replace_plan.sql's ``views`` and ``attached``), which no swap keeps."""
    _said: list = field(default_factory=list, repr=False)
    """Warnings of what replacing the target left behind (``log.warning``'s
    arguments), given once it is committed: a failure after them replaced nothing."""
    _server_version = 0
    """The server's version number (150004), known once the run's lock is taken."""
    _plan_only = False
    """Whether the session in ``_lock`` was opened for a plan, without the run's lock (:meth:`lock`)."""

    def describe(self) -> str:
        return f"{self.conn.safe()} table {table_text(self.table)}"

    def part_compression_for(self, rows_per_part: float) -> str:
        """The codec of parts of about ``rows_per_part`` rows: the target's (:attr:`part_compression`)."""
        return self.part_compression

    @property
    def path(self) -> str:
        return self.describe()

    @property
    def _staging_prefix(self) -> str:
        # Short and fixed-length (PostgreSQL truncates names at 63 bytes), and
        # still particular to this target, for the stale-staging clean-up: with
        # a crc32, a run on another target of the same hash ('people_gnyijstj',
        # 'people_etislvlf') dropped this run's live staging tables (helper-5).
        return f"{STAGING_SUFFIX}_{hashlib.sha256(self.table[1].encode()).hexdigest()[:16]}_"

    @property
    def local_staging_prefix(self) -> str:
        """The name of the run's local staging directory (its parts) starts so: particular to the target."""
        key = hashlib.sha256(f"{self.conn.safe()}\0{self.table[0]}\0{self.table[1]}".encode()).hexdigest()[:16]
        return f"sqlanon-staging-{key}-"

    def _staging_name(self, run: str) -> tuple[str, str]:
        return (self.table[0], f"{self._staging_prefix}{run}")

    def _metrics_staging_name(self, run: str) -> tuple[str, str]:
        # In the target's schema and under the target's staging prefix, so the
        # stale-staging clean-up finds it whatever --metrics names.
        return (self.table[0], f"{self._staging_prefix}{run}_m")

    def fits(self, names: list[str], what: str, hint: str = "") -> None:
        """Refuse a name the server would cut, counted in UTF-8 and (once
        the run's lock is taken) in the database's encoding."""
        for name in names:
            fits_postgres(name, what, hint)
        if self._lock is not None:
            fits_server(self._lock, names, what, hint)

    def check_swappable(self, names: list[str]) -> None:
        """Refuse before any work to replace a table the role does not own
        (it may refill it: :meth:`_check_replaceable`) with other columns
        (``names``, the output's): only a swap can, which needs the owner,
        and the run failed after all its work with the server's 'must be
        member of role …' (helper-61); nor one that views depend on or that
        has what a swap drops (:meth:`_refuse_held`). By name: columns of
        another type or order are found when publishing (the run fails
        then, the old table kept)."""
        if self._owns is None or not self._old_types or set(names) == set(self._old_types):
            return
        if any(self._held):  # was found when publishing, after the work (helper-100)
            self._refuse_held(*self._held, _column_change(list(self._old_types), names))
        if self._owns and self._owner_cannot_create is None:
            return
        change = _column_change(list(self._old_types), names)
        if self._owns:  # a group role's table: ALTER ... OWNER TO needs the owner's CREATE (helper-91)
            raise InputError(
                f"cannot replace {self.describe()}: its columns change ({change}), so the new table must take its "
                f"place and be given to its owner {self._owner_cannot_create!r}, which may not create tables in "
                f"schema {self.table[0]!r}; GRANT CREATE ON SCHEMA {ident(self.table[0])} TO "
                f"{ident(self._owner_cannot_create)}, publish the same columns, or to another table")
        raise InputError(f"cannot replace {self.describe()}: its columns change ({change}), so the new table must "
                         "take its place, which only its owner may do, and the role does not own it; publish the "
                         "same columns, or to another table")

    def _refuse_held(self, views: list[str], attached: list[str], changed: str) -> None:
        """Refuse to replace the target whose columns change (``changed``)
        while ``views`` depend on it or ``attached`` hangs on it: only a swap
        gives a table other columns, and it would drop them."""
        what = (f"{', '.join(views)} depend(s) on it" if views else "") + (
            "; " if views and attached else "") + (f"it has {', '.join(attached)}" if attached else "")
        raise InputError(f"cannot replace {self.describe()}: {what}, and its columns change ({changed}); drop or "
                         "redefine them, or publish to another table")

    def _metrics_name(self, where: str | None) -> tuple[str, str]:
        if where:
            return _table(where, "--metrics", self.conn)
        return (self.table[0], f"{self.table[1]}__metrics")

    def check_types(self, source=None) -> None:
        """Refuse, before any work, a column whose server type the target's
        database lacks (an enum or a domain of another database): the run
        failed after all its work, creating the staging table, without
        naming the column. ``source``, a session in the source's database
        when the target is in another one (the run's snapshot): a composite,
        enum or range type there must be defined alike here. Only the type's
        existence was checked: a composite of the same fields in another
        order took each row's values in the wrong fields, exit 0; an enum
        without a label failed at publish, after all the work."""
        import psycopg

        # An existing target whose column has the domain's base type keeps
        # it: before, such a column was published with the base type, and
        # the domain would change its columns (a view over the target then
        # stops a nightly replace; without one, the swap drops its indexes).
        for name, base in self.base_types.items():
            if name in self.column_types and self._old_types.get(name) == base.split(" COLLATE ", 1)[0]:
                self.column_types[name] = base
        types = {name: typ.split(" COLLATE ", 1)[0] for name, typ in self.column_types.items()}
        # A collation of the source's (pg_collation is per database) failed
        # the staging table after all the work, naming no column (helper-135).
        collations = {name: typ.split(" COLLATE ", 1)[1] for name, typ in self.column_types.items()
                      if " COLLATE " in typ}
        names = sorted({t.removesuffix("[]") for t in types.values()})
        try:
            in_source = {} if source is None else {
                n: (kind, d) for n, kind, d in source.execute(TYPE_DEFINITIONS, (names,)).fetchall()}
        except psycopg.Error as exc:
            raise InputError(f"cannot read the column types of the input: {self.conn.redact(_first_line(exc))}"
                             ) from None
        with self._connect() as c:
            try:
                found = dict(c.execute("SELECT t, to_regtype(t) IS NOT NULL FROM unnest(%s::text[]) AS t",
                                       (sorted(set(types.values())),)).fetchall())
                collated = dict(c.execute("SELECT t, to_regcollation(t) IS NOT NULL FROM unnest(%s::text[]) AS t",
                                          (sorted(set(collations.values())),)).fetchall())
                in_target = {n: (kind, d) for n, kind, d in c.execute(
                    TYPE_DEFINITIONS, (sorted(in_source),)).fetchall()} if in_source else {}
            except psycopg.Error as exc:
                raise InputError(f"cannot check the column types in {self.describe()}: "
                                 f"{self.conn.redact(_first_line(exc))}") from None
        for name, typ in types.items():
            if not found.get(typ):
                raise ConfigError(
                    f"column {name!r} has type {typ}, which {self.conn.safe()} does not have: create it there, "
                    "or cast the column to a built-in type in a view"
                )
        for name, collation in collations.items():
            if not collated.get(collation):
                raise ConfigError(
                    f"column {name!r} has collation {collation}, which {self.conn.safe()} does not have: create it "
                    "there, or give the column another collation in a view"
                )
        for name, (kind, wanted) in sorted(in_source.items()):
            have = in_target.get(name, (kind, None))[1]
            if kind == "e":  # more labels here are fine; one missing fails the load
                differs = bool(set(_labels(wanted)) - set(_labels(have)))
            else:
                differs = have != wanted
            if differs:
                column = next(c for c, t in types.items() if t.removesuffix("[]") == name)
                raise ConfigError(
                    f"column {column!r} has type {name}, which {self.conn.safe()} defines otherwise ({have} there, "
                    f"{wanted} in the source): align the two, or cast the column to text in a view"
                )
        self._refuse_held_retyped()

    def _refuse_held_retyped(self) -> None:
        """Refuse, before any work, to replace a target that views depend on
        (or that has what a swap drops) when the new table's columns have
        other types than the old one's under the same names (a source column
        widened upstream): only a swap can, and publishing refused it after
        all the work (helper-158). The server types the planned columns in a
        temporary table, and compares them as :meth:`_replace` does, here
        by name: columns that only move are left to it."""
        import psycopg

        if not any(self._held) or not self.column_types or set(self.column_types) != set(self._old_types):
            return
        planned = ident(["pg_temp", "__sqlanon_planned"])
        ddl = ", ".join(f"{ident(c)} {t}" for c, t in self.column_types.items())
        plan = render("replace_plan.sql", dialect="postgres", inline=True, old=ident(list(self.table)), new=planned)
        with self._connect() as c:
            try:
                with c.transaction(force_rollback=True):
                    c.execute(f"CREATE TEMPORARY TABLE {planned} ({ddl})")
                    old, new, old_names, new_names = c.execute(
                        f"SELECT old_columns, new_columns, old_names, new_names FROM ({plan.sql}) plan").fetchone()
            except psycopg.Error as exc:  # no TEMPORARY privilege, say: publishing compares them
                log.debug("cannot compare the target's column types before the work: %s",
                          self.conn.redact(_first_line(exc)))
                return
        if sorted(old) == sorted(new):
            return
        by_name = dict(zip(new_names, new))
        pairs = [f"{a} -> {by_name[name]}" for name, a in zip(old_names, old) if a != by_name[name]]
        self._refuse_held(*self._held, listed(pairs, 5, show=str))

    def exists(self) -> bool:
        """Whether the target table exists.

        Raises:
            ConfigError: a view or other relation is there, or the schema
                does not exist (a run would find out only when it publishes,
                after all its work).
            InputError: the role may not create tables in the schema (the
                staging table goes there).
        """
        schema, can_create, kind = self._probe(self.table)
        if not schema:
            raise ConfigError(f"schema {self.table[0]!r} does not exist in {self.conn.safe()}: create it, or name "
                              "the table in another schema with --target-table")
        if not can_create:
            raise InputError(f"cannot write {self.describe()}: the role may not create tables in schema "
                             f"{self.table[0]!r} (the new table is staged there); GRANT CREATE ON SCHEMA first")
        if kind is not None and kind not in ("r", "p"):
            raise ConfigError(f"{self.describe()} is not a table (a view?); name a table as --target-table")
        self._check_replaceable(kind is not None)
        return kind is not None

    def _check_replaceable(self, exists: bool) -> None:
        """Refuse before any work what would fail the publishing after all of
        it: a read-only session (``default_transaction_read_only``), an
        existing table another table's foreign key references (no TRUNCATE
        or DROP can replace it), or one the role neither owns (to swap it)
        nor may ``TRUNCATE`` and ``INSERT`` into (to refill it)."""
        import psycopg

        with self._connect() as c:
            try:
                read_only, owns, refills, referenced, group_owner, denied = c.execute(
                    "SELECT current_setting('transaction_read_only') = 'on', "
                    "pg_has_role(c.relowner, 'USAGE'), "
                    "has_table_privilege(c.oid, 'INSERT') AND has_table_privilege(c.oid, 'TRUNCATE'), "
                    "ARRAY(SELECT format('the foreign key %%I of %%s', con.conname, con.conrelid::regclass::text) "
                    "      FROM pg_constraint con WHERE con.confrelid = c.oid AND con.conrelid <> c.oid "
                    "      AND con.conparentid = 0 ORDER BY 1), "  # not a partition's copy of the table's own
                    # a superuser may give the table to any role
                    "CASE WHEN c.relowner <> (SELECT oid FROM pg_roles WHERE rolname = current_user) "
                    "     AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) "
                    "     AND NOT has_schema_privilege(c.relowner, c.relnamespace, 'CREATE') "
                    "THEN pg_get_userbyid(c.relowner) END, "
                    # Row-level security that lets the role insert no row (no permissive INSERT policy of its):
                    # the refill failed after all the work (helper-91).
                    "c.relrowsecurity AND (c.relforcerowsecurity OR NOT pg_has_role(c.relowner, 'USAGE')) "
                    "AND NOT (SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user) "
                    "AND NOT EXISTS (SELECT 1 FROM pg_policy p WHERE p.polrelid = c.oid AND p.polpermissive "
                    "                AND p.polcmd IN ('a', '*') AND (0 = ANY (p.polroles) OR EXISTS ("
                    "                    SELECT 1 FROM unnest(p.polroles) r WHERE pg_has_role(r, 'USAGE')))) "
                    "FROM (SELECT 1) one LEFT JOIN pg_class c ON c.oid = to_regclass(%s)",
                    (ident(list(self.table)),),
                ).fetchone()
                if read_only:
                    raise InputError(f"cannot write {self.describe()}: the session is read-only there "
                                     "(default_transaction_read_only, or a standby server)")
                if not exists or not self.overwrite:  # not to be replaced: the run says so
                    return
                if referenced:
                    raise InputError(f"cannot replace {self.describe()}: {', '.join(referenced)} reference(s) it, so "
                                     "no TRUNCATE or DROP can; drop the constraint, or publish to another table")
                if not owns and not refills:
                    raise InputError(f"cannot replace {self.describe()}: the role neither owns it (to replace it) "
                                     "nor may TRUNCATE and INSERT into it (to refill it); GRANT TRUNCATE, INSERT ON "
                                     "it first")
                if denied:
                    raise InputError(f"cannot replace {self.describe()}: its row-level security lets the role insert "
                                     "no row (no INSERT policy applies to it), and the table is refilled in place; "
                                     "create one for the role, or publish to another table")
                self._owns = owns
                self._owner_cannot_create = group_owner if owns else None
                self._old_types = dict(c.execute(_DECLARED_COLUMNS, (ident(list(self.table)),)).fetchall())
                held = render("replace_plan.sql", dialect="postgres", inline=True, old=ident(list(self.table)),
                              new=ident(list(self.table)))
                self._held = tuple(map(tuple, c.execute(f"SELECT views, attached FROM ({held.sql}) plan").fetchone()))
                refuse_metrics_as_output(self._old_types, self.describe())
                self._refuse_rewriters(c, ident(list(self.table)))
            except psycopg.Error as exc:
                raise InputError(f"cannot look up {self.describe()}: {self.conn.redact(_first_line(exc))}") from None

    _FIRING = "CASE current_setting('session_replication_role') WHEN 'replica' THEN 'R' ELSE 'O' END"
    """The ``tgenabled``/``ev_enabled`` mark, beside 'A' (always), of the
    triggers and rules that fire in this session."""

    def _refuse_rewriters(self, c, target: str) -> None:
        """Refuse an existing target whose refill (``TRUNCATE`` + ``INSERT``,
        :meth:`_replace`) would publish other rows than the checked ones: a
        BEFORE INSERT row trigger (on it or a partition) rewrote them (exit 0,
        every class below l), an INSERT ... DO INSTEAD rule put them elsewhere (the target
        left empty), and TRUNCATE emptied an inheritance child's own rows,
        which SELECT from the target reads with the published ones (helper-43).
        Those that fire in the session's ``session_replication_role``: in
        replica mode (the URL's options, a role's or a database's setting)
        the ones enabled REPLICA, not the ordinary ones (helper-143)."""
        found = c.execute(
            "SELECT ARRAY("
            " SELECT format('trigger %%I on %%s', t.tgname, t.tgrelid::regclass::text) FROM pg_trigger t"
            " WHERE (t.tgrelid = %s::regclass OR t.tgrelid IN (SELECT relid FROM pg_partition_tree(%s::regclass)))"
            " AND NOT t.tgisinternal"
            " AND t.tgenabled IN ('A', " + self._FIRING + ") AND t.tgtype & 7 = 7"  # row, before, insert
            " UNION ALL SELECT format('rule %%I', r.rulename) FROM pg_rewrite r"  # DO INSTEAD: DO ALSO adds its own
            " WHERE r.ev_class = %s::regclass AND r.ev_type = '3' AND r.ev_enabled IN ('A', " + self._FIRING + ")"
            " AND r.is_instead"
            " UNION ALL SELECT format('inheritance child %%s', i.inhrelid::regclass::text)"
            " FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent"
            " WHERE i.inhparent = %s::regclass AND p.relkind = 'r')",
            (target, target, target, target),
        ).fetchone()[0]
        if found:
            raise InputError(f"cannot replace {self.describe()}: its {', '.join(found)} would change, move or "
                             "hide the published rows after they were checked; drop or disable it, or publish "
                             "to another table")

    def _same_as_checked(self, c, target: str, stage: str, staged: int) -> None:
        """After a refill, before its commit: where triggers or rules act on
        the target (an AFTER trigger, a DO ALSO rule, a deferred constraint
        trigger, fired now), the target must hold the checked rows, no other.
        An AFTER INSERT trigger that updated the published rows broke k, a
        DO ALSO rule rewrote sensitive values, an AFTER TRUNCATE trigger added
        a row, each published as verified, exit 0 (helper-200). Compared by
        each row's text (every type has one), as many times each."""
        acting = c.execute(
            "SELECT ARRAY("
            " SELECT format('trigger %%I', t.tgname) FROM pg_trigger t"
            " WHERE (t.tgrelid = %s::regclass OR t.tgrelid IN (SELECT relid FROM pg_partition_tree(%s::regclass)))"
            " AND NOT t.tgisinternal AND t.tgenabled IN ('A', " + self._FIRING + ")"
            " UNION ALL SELECT format('rule %%I', r.rulename) FROM pg_rewrite r"
            " WHERE r.ev_class = %s::regclass AND r.rulename <> '_RETURN'"
            " AND r.ev_enabled IN ('A', " + self._FIRING + "))",
            (target, target, target),
        ).fetchone()[0]
        if not acting:
            return
        c.execute("SET CONSTRAINTS ALL IMMEDIATE")  # deferred triggers fire now, not after this check
        rows, other = c.execute(
            # ROW(t.*): a bare t would be a column named t
            f"SELECT (SELECT count(*) FROM {target}), (SELECT count(*) FROM (SELECT ROW(t.*)::text FROM {target} "
            f"AS t EXCEPT ALL SELECT ROW(s.*)::text FROM {stage} AS s) AS d)").fetchone()
        if rows != staged or other:
            found = f"{rows} rows where {staged} were checked" if rows != staged else f"{other} rows changed"
            raise InputError(f"cannot replace {self.describe()}: the published rows changed after they were "
                             f"checked ({found}) under its {', '.join(acting)}; the old table is kept; drop or "
                             "disable what changes them, or publish to another table")

    @contextlib.contextmanager
    def _connect(self):
        """A session for checks and control statements: the run's lock
        session while it holds the lock (each check opened a session of its
        own: a PostgreSQL -> PostgreSQL run of poker logged 21 connections,
        now 13; each a login, and a TLS handshake on a remote warehouse),
        else a new one, closed after.
        A lock session the server ended is not used (:meth:`check_lock`
        says so); the clean-up after it runs in a new session."""
        held = self._lock
        if held is not None and not held.closed and not held.broken:
            yield held  # autocommit: each statement, or c.transaction(), its own transaction
            return
        with self.conn.connect() as c:
            yield c

    def _probe(self, table: tuple[str, str]) -> tuple[bool, bool, str | None]:
        """Whether ``table``'s schema exists, whether the role may create
        tables in it, and the relkind of ``table`` (None: nothing there)."""
        import psycopg

        with self._connect() as c:
            try:
                return c.execute(
                    "SELECT s.oid IS NOT NULL, s.oid IS NOT NULL AND has_schema_privilege(s.oid, 'CREATE'), "
                    "(SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)) "
                    "FROM (SELECT to_regnamespace(%s) AS oid) s",
                    (ident(list(table)), ident(table[0])),
                ).fetchone()
            except psycopg.Error as exc:  # e.g. no USAGE on its schema
                raise InputError(f"cannot look up {table_text(table)} in {self.conn.safe()}: "
                                 f"{self.conn.redact(_first_line(exc))}") from None

    def check_metrics_target(self, where: str | None, schema: pa.Schema) -> None:
        """Before any work: an existing metrics table (``--metrics``'s, or
        the default next to the target) is sqlanon's and holds the run's
        rows (``schema``) exactly (found when publishing, after all the work)."""
        import psycopg

        from .io import _arrow_kind, file_format

        if where and file_format(where):
            return
        table = self._metrics_name(where)
        with self._connect() as c:
            try:
                have = c.execute(_COLUMNS, (ident(list(table)),)).fetchall()
                # The run appends to it: a role that may not failed when publishing,
                # after all the work ('permission denied', helper-57).
                may_insert = not have or c.execute("SELECT has_table_privilege(%s, 'INSERT')",
                                                   (ident(list(table)),)).fetchone()[0]
                # An older sqlanon's table lacks columns (achieved_l, worker_pid, …) that the run
                # adds when publishing, which only its owner may: a role that may only INSERT
                # failed each night after all the work ('permission denied for table …').
                names = {n for n, _ in have}
                lacks = [f for f in schema if f.name not in names] if have else []
                owner = c.execute("SELECT pg_has_role(relowner, 'USAGE'), pg_get_userbyid(relowner) FROM "
                                  "pg_catalog.pg_class WHERE oid = to_regclass(%s)",
                                  (ident(list(table)),)).fetchone() if lacks else None
            except psycopg.Error as exc:  # e.g. no USAGE on its schema
                raise InputError(f"cannot look up {table_text(table)} in {self.conn.safe()}: "
                                 f"{self.conn.redact(_first_line(exc))}") from None
        if have:
            refuse_unfit_metrics(schema, have, f"table {table_text(table)!r}")
        if not may_insert:
            raise InputError(f"cannot write the metrics table {table_text(table)!r} of {self.conn.safe()}: the role "
                             "may not INSERT into it; GRANT INSERT ON it first, or name another with --metrics")
        if owner is not None and not owner[0]:
            add = ", ".join(f"ADD COLUMN {ident(f.name)} {_METRICS_PG_TYPES[_arrow_kind(f.type)]}" for f in lacks)
            raise InputError(f"cannot write the metrics table {table_text(table)!r} of {self.conn.safe()}: an older "
                             f"sqlanon's, it lacks {', '.join(repr(f.name) for f in lacks)}, which only its owner "
                             f"{owner[1]!r} may add; have it run ALTER TABLE {ident(list(table))} {add}, or name "
                             "another with --metrics")

    def earlier_run(self, con: duckdb.DuckDBPyConnection, where: str | None, target: str) -> tuple[str, str] | None:
        """The parameters and start of the last run that published this
        table (``target``, as recorded) in its metrics file (read on ``con``)
        or table."""
        import psycopg

        from .io import earlier_run_in_file, file_format

        if where and file_format(where):
            return earlier_run_in_file(con, where, target)
        stmt = render("earlier_run.sql", dialect="postgres", inline=True,
                      relation=ident(list(self._metrics_name(where))), target=target)
        with self._connect() as c:
            try:
                return c.execute(stmt.sql).fetchone()
            except psycopg.Error:  # no such table yet, or one that is not sqlanon's (its own check says so)
                return None

    def check_metrics_table(self, where: str) -> None:
        """``--metrics`` as a table of the output database: its schema must
        exist, and the role create the table there unless it exists (found
        when publishing, after all the work, before)."""
        from .io import file_format

        if file_format(where):
            return
        schema, name = self._metrics_name(where)
        has_schema, can_create, found = self._probe((schema, name))
        if not has_schema:
            raise ConfigError(f"--metrics={where!r}: schema {schema!r} does not exist in {self.conn.safe()}: create "
                              "it, or name a table in another schema")
        if not found and not can_create:
            raise InputError(f"cannot write the metrics table {table_text((schema, name))} of {self.conn.safe()}: the "
                             f"role may not create tables in schema {schema!r}")

    def _lock_target(self, c, target: str, mode: str = "ACCESS EXCLUSIVE", what: str = "") -> None:
        """Take the old table's ACCESS EXCLUSIVE lock (or ``mode``'s: of the
        metrics table, ``what``) in the publishing transaction ``c``, in short
        tries.

        A request that waits queues every new reader of the table behind it:
        one long report query held up all readers for up to
        :data:`PUBLISH_LOCK_SECONDS`; and a Ctrl-C or SIGTERM, deferred while
        publishing, waited as long. Between tries readers go on, and a stop
        signal ends the run before anything is published. The tries grow
        (:data:`LOCK_TRIES_MS`): while a try waits, new readers queue behind
        it, so one that outlasts the reads under way gets the table even when
        reads overlap without a gap (fixed short tries never did).
        """
        import psycopg

        from . import interrupts

        deadline = time.monotonic() + PUBLISH_LOCK_SECONDS
        # A role's statement_timeout below a try cancelled it as a statement, which ended the run after ~8 s
        # with 'canceling statement due to statement timeout' (helper-61): each try stays within it.
        limit = c.execute("SELECT setting::bigint FROM pg_settings WHERE name = 'statement_timeout'").fetchone()[0]
        for attempt in itertools.count():
            wait = LOCK_TRIES_MS[min(attempt, len(LOCK_TRIES_MS) - 1)]
            if limit:
                wait = max(min(wait, limit // 2), 1)
            try:
                with c.transaction():  # a savepoint: a failed try leaves the transaction usable
                    c.execute(f"SET LOCAL lock_timeout = {wait}")
                    c.execute(f"LOCK TABLE {target} IN {mode} MODE")
                break
            except psycopg.errors.LockNotAvailable:
                if interrupts.received():
                    raise KeyboardInterrupt from None  # nothing is published: the transaction rolls back
                if time.monotonic() > deadline:
                    raise InputError(
                        f"cannot {f'write {what} of' if what else 'replace'} {self.describe()}: other sessions held "
                        f"it for {PUBLISH_LOCK_SECONDS:g} s (lock timeout); the old table is kept"
                    ) from None
                time.sleep(0.05)
        c.execute(f"SET LOCAL lock_timeout = {int(PUBLISH_LOCK_SECONDS * 1000)}")

    @contextlib.contextmanager
    def _transaction(self, what: str):
        """A connection in one transaction; a server error is one redacted line."""
        import psycopg

        with self._connect() as c:
            try:
                with c.transaction():
                    yield c
            except psycopg.Error as exc:
                raise InputError(f"cannot {what} {self.describe()}: {self.conn.redact(_first_line(exc))}") from None

    def _run(self, sql: str | list[str], what: str) -> None:
        """Run control statements in one transaction."""
        with self._transaction(what) as c:
            for stmt in sql if isinstance(sql, list) else [sql]:
                c.execute(stmt)

    def _replace(self, c, stage: str, grants: list[str], unlogged: bool = False) -> None:
        """Put the staging table in the target's place, inside the publishing
        transaction ``c``, keeping what users attached to the old table.

        * Anything attached to the old table that a rename would lose (views
          and other dependents, indexes, row-level security and policies,
          triggers, rules, constraints, partitions or inheritance,
          publications, NOT NULL, defaults, its tablespace, storage options,
          replica identity, statistics objects and targets, an owner other
          than the publishing role; see ``replace_plan.sql``), and the same columns (names
          and types, in order) in the new one: the old table is refilled in
          place (``TRUNCATE`` + ``INSERT``), so all of it stays as it is.
        * A new target is the staging table renamed, with the privileges
          the schema's default privileges give (``grants``: those that
          :meth:`_private` took from it); logged again if it was made
          ``unlogged`` (:meth:`_unpublished`).
        * Otherwise the staging table is renamed into the target's place and
          gets the old table's owner, grants to other roles (table and
          column; those default privileges add are revoked) and comments;
          indexes, NOT NULL, defaults and the table's settings go with the
          old table (a warning names them). A foreign key of another table
          that references the old one fails the run either way. What else is attached to a table whose columns
          change cannot be kept: the run fails, naming it, and the old
          table stays.
        """
        target = ident(list(self.table))
        # An unlogged target would be emptied by a crash, and never published.
        rename = [f"ALTER TABLE {stage} SET LOGGED"] * unlogged
        rename.append(f"ALTER TABLE {stage} RENAME TO {ident(self.table[1])}")
        # Publishing waits for sessions that hold the old table, not for ever
        # (then the run fails and the old table stays), the metrics table too.
        c.execute(f"SET LOCAL lock_timeout = {int(PUBLISH_LOCK_SECONDS * 1000)}")
        kind = c.execute("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", (target,)).fetchone()
        if kind is None:
            for stmt in [*grants, *rename]:
                c.execute(stmt)
            return
        if kind[0] not in ("r", "p"):
            raise ConfigError(f"{self.describe()} is not a table (a view?); name a table as --target-table")
        if not self.overwrite:
            raise ConfigError(
                f"{self.describe()} was created while this run was working; pass --overwrite to replace it"
            )
        self._lock_target(c, target)
        plan = render("replace_plan.sql", dialect="postgres", inline=True, old=target, new=stage)
        (views, indexes, attached, owner, unkept, referenced, old_columns, new_columns, old_names,
         new_names) = c.execute(plan.sql).fetchone()
        if referenced:
            raise InputError(f"cannot replace {self.describe()}: {', '.join(referenced)} reference(s) it, so no "
                             "TRUNCATE or DROP can; drop the constraint, or publish to another table")
        same = old_columns == new_columns
        # Another owner, same columns: refilled, as a swap's ALTER OWNER needs
        # the owner's CREATE on the schema (and on PostgreSQL 16 SET on it).
        kept = views + indexes + attached + unkept + ([owner] if owner else [])
        if kept and same:
            self._refuse_rewriters(c, target)  # again, under the lock: added during the run
            log.info("refilling %s in place: %s", self.describe(), ", ".join(kept))
            staged = c.execute(f"SELECT count(*) FROM {stage}").fetchone()[0]
            c.execute(f"TRUNCATE {target}")
            # OVERRIDING SYSTEM VALUE: an identity column (GENERATED ALWAYS) takes the pass-through values
            inserted = c.execute(f"INSERT INTO {target} OVERRIDING SYSTEM VALUE SELECT * FROM {stage}").rowcount
            if inserted != staged:  # e.g. a trigger on the table that skips rows
                raise InputError(f"cannot replace {self.describe()}: {inserted} of {staged} rows went in "
                                 "(a trigger on the table?); the old table is kept")
            self._same_as_checked(c, target, stage, staged)
            c.execute(f"DROP TABLE {stage}")
            return
        if views or attached:
            # By name where names differ ('without native_country'), else each column whose type or
            # place does: by place alone, a dropped column read as renamed to the next (helper-91).
            pairs = [f"{a or '(none)'} -> {b or '(none)'}"
                     for a, b in itertools.zip_longest(old_columns, new_columns) if a != b]
            changed = _column_change(old_names, new_names) or listed(pairs, 5, show=str)
            self._refuse_held(views, attached, changed)
        self._said += lost_columns(self.describe(), old_names, new_names)
        if indexes or unkept:
            self._said.append(("%s: %s not carried over (the table's columns change)",
                               self.describe(), ", ".join([*indexes, *unkept])))
        keep = c.execute(render("carry_over.sql", dialect="postgres", inline=True, old=target, new=stage).sql
                         ).fetchall()
        self._carry_over(c, keep)
        for stmt in [f"DROP TABLE {target}", *rename]:
            c.execute(stmt)

    def _carry_over(self, c, steps: list[tuple[int, str, str | None, str | None]]) -> None:
        """Give the new table what the old one had (``carry_over.sql``'s
        statements). A grant another role made with its grant option
        (``bi=r/analyst``) is made by the table's owner: a REVOKE ... CASCADE
        from that role no longer reaches it, which is said (helper-91).
        Made as the grantor instead (SET ROLE), it failed the publish where
        the grantor had lost a privilege since, or the ACL's order was not
        the chain's, and silently granted nothing where the grantor held
        another privilege (helper-93)."""
        chains: dict[str, set[str]] = {}
        for step, stmt, role, grantee in steps:
            if step == 2:
                self._give_to_owner(c, stmt, role)
                continue
            c.execute(stmt)
            if step == 3 and role is not None:
                chains.setdefault(role, set()).add(grantee)
        if chains:
            self._said.append((
                "%s: the grants %s are made by the table's owner on the new table (its columns change): a REVOKE ... "
                "CASCADE from their grantor no longer reaches them", self.describe(),
                "; ".join(f"{', '.join(sorted(to))} had from {who!r}" for who, to in chains.items())))

    def _give_to_owner(self, c, stmt: str, owner: str) -> None:
        """The swap's ``ALTER TABLE ... OWNER TO owner``, which needs the
        owner's CREATE on the schema: :meth:`check_swappable` refuses before
        any work a change of column names, not of their types only, which
        failed here with the server's bare 'permission denied for schema'
        (helper-93)."""
        import psycopg

        try:
            c.execute(stmt)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise InputError(
                f"cannot publish {self.describe()}: its columns change, so the new table must take its place and be "
                f"given to its owner {ident(owner)}, which may not create tables in schema {self.table[0]!r} "
                f"({self.conn.redact(_first_line(exc))}); GRANT CREATE ON SCHEMA {ident(self.table[0])} TO "
                f"{ident(owner)}, publish the same columns, or to another table") from None

    # -- the run's lock: a second concurrent run on the same target is refused
    def lock(self, take: bool = True) -> None:
        """Take the run's lock on the target, in the session its checks then
        use. Not ``take``: the session only, for a plan's checks (``--explain``),
        which took the lock too, for a moment, and a run starting then failed
        with 'another sqlanon run is writing' (helper-180)."""
        c = self.conn.connect()
        # No transaction left open between its checks (check_lock, fits): it
        # sat idle in one for the whole run, and a role's
        # idle_in_transaction_session_timeout ended it, and the lock with it.
        c.autocommit = True
        self._server_version = c.info.server_version
        if c.info.server_version >= 140000:
            # The session sits idle for the whole run: a role's timeout for
            # idle sessions would end it, and the lock with it.
            c.execute("SET idle_session_timeout = 0")
        # The key is computed by the server from the database and the table, so
        # every spelling of the URL (password or PGPASSWORD, driver names) takes
        # the same lock.
        got = not take or c.execute(
            "SELECT pg_try_advisory_lock(hashtextextended(current_database() || '/' || %s, 0))",
            ("sqlanon:" + ident(list(self.table)),),
        ).fetchone()[0]
        if not got:
            c.close()
            raise InputError(f"another sqlanon run is writing {self.describe()}; try again when it has finished")
        self._lock, self._plan_only = c, not take

    def check_lock(self) -> None:
        """Fail the run if the lock's session was ended (a DBA's idle-killer,
        a pooler, a server restart): another run may be at work on the target
        now, and may have dropped this one's staging as a dead run's."""
        import psycopg

        if self._lock is None:
            return
        if self._plan_only:  # a plan's session holds no lock to lose, and a plan writes nothing
            raise RuntimeError(f"{self.describe()} was opened for a plan (--explain): it is not written")
        try:
            held = self._lock.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                                      "AND pid = pg_backend_pid()").fetchone()[0]
        except psycopg.Error:
            held = 0
        if not held:
            raise InputError(
                f"this run lost its lock on {self.describe()}: its session was ended (a server restart, or a "
                "timeout or administrator ending idle sessions), so another run may be at work on it; nothing "
                "was published"
            )

    def unlock(self) -> None:
        if self._lock is not None:
            self._lock.close()  # a session-level advisory lock ends with its session
            self._lock = None

    def new_staging(self, shared: bool = False) -> PgStaging:
        if self._lock is None:
            self.lock()
        self.check_lock()  # what it drops would otherwise be another live run's
        self._drop_stale_staging()
        # The parts wait in a local directory named after this target: a run
        # killed outright left its directory (the whole anonymized table) in
        # the temporary directory for good; the next run on the target,
        # holding the lock (so no live run's), removes such directories.
        for stale in Path(tempfile.gettempdir()).glob(self.local_staging_prefix + "*"):
            shutil.rmtree(stale, ignore_errors=True)
        s = PgStaging(Path(tempfile.mkdtemp(prefix=self.local_staging_prefix)), run=uuid.uuid4().hex[:12])
        s.parts_dir.mkdir()
        return s

    def _drop_stale_staging(self) -> None:
        """Drop staging tables of dead runs (we hold the lock: no live run has one)."""
        prefix = self._staging_prefix
        like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        with self._connect() as c:
            names = [
                r[0]
                for r in c.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = %s AND tablename LIKE %s", (self.table[0], like)
                ).fetchall()
            ]
        if names:
            self._run([f"DROP TABLE IF EXISTS {ident([self.table[0], n])}" for n in names], "clean up")

    def assemble(self, con: duckdb.DuckDBPyConnection, staging: PgStaging, empty: pa.Schema | None) -> str:
        """Bulk-load the parts into a staging table on the server (binary COPY)."""
        self.check_lock()
        self._attach(con)
        parts = staging.parts_relation() if staging.has_parts() else None
        if parts is None:
            con.register("__sqlanon_empty", empty.empty_table())
            parts = '"__sqlanon_empty"'
        cols = relation_columns(con, parts)
        name = self._staging_name(staging.run)
        local = ident([DST, *name])
        try:
            con.execute("CALL pg_clear_cache()")  # duckdb-postgres#160: stale catalog → silent empty writes
            duck = {row[0]: row[1] for row in con.execute(f"DESCRIBE SELECT * FROM {parts}").fetchall()}
            decimals = [c for c in cols if _miswritten_decimal(duck[c])]
            select = ", ".join(f"CAST({ident(c)} AS VARCHAR) AS {ident(c)}" if c in decimals else ident(c)
                               for c in cols)
            if self.column_types:
                # (a PostgreSQL source's numeric QI: its _lo/_hi bounds are DECIMAL here)
                as_text = {*self.text_columns, *decimals}

                def server_type(c: str) -> str:
                    if c in as_text:
                        return "text"  # retyped on the server below
                    return self.column_types.get(c) or _pg_type(duck[c])

                ddl = ", ".join(f"{ident(c)} {server_type(c)}" for c in cols)
                with self._transaction("stage") as c:
                    c.execute(f"CREATE TABLE {ident(list(name))} ({ddl})")
                    staging.grants = self._private(c, name)
                    staging.unlogged = self._unpublished(c, name)
                con.execute("CALL pg_clear_cache()")
                collist = ", ".join(ident(c) for c in cols)
                con.execute(f"INSERT INTO {local} ({collist}) SELECT {select} FROM {parts}")
                types = {c: self.column_types.get(c) or _pg_type(duck[c]) for c in cols
                         if c in decimals or (c in self.text_columns and c in self.column_types)}
            else:
                con.execute(f"CREATE TABLE {local} AS SELECT {select} FROM {parts} LIMIT 0")
                with self._transaction("stage") as c:
                    staging.grants = self._private(c, name)
                    staging.unlogged = self._unpublished(c, name)
                con.execute(f"INSERT INTO {local} SELECT {select} FROM {parts}")
                types = {c: _pg_type(duck[c]) for c in decimals}
            if types:  # one statement: the table is rewritten once
                self._run(f"ALTER TABLE {ident(list(name))} " + ", ".join(
                    f"ALTER COLUMN {ident(c)} TYPE {t} USING {ident(c)}::{t}" for c, t in types.items()), "stage")
                con.execute("CALL pg_clear_cache()")  # read back through DuckDB: as numeric, not text
        except duckdb.Error as exc:
            hint = ""
            if "malformed array literal" in str(exc):
                with contextlib.suppress(duckdb.Error):  # a hint only: the load's own error is the message
                    hint = _ragged_hint(con, parts)
            raise InputError(f"cannot write {self.describe()}: {self.conn.redact(_first_line(exc))}{hint}") from None
        return ident(list(name))

    @staticmethod
    def _private(c, name: tuple[str, str]) -> list[str]:
        """Make the table ``name``, just created (and still empty), the
        publishing role's alone, in transaction ``c``: in the target's schema
        it got what the schema's default privileges give, so roles kept from
        the target read its unverified rows (and after a crash, until the
        next run). Returns the GRANTs that give those back."""
        steps = c.execute(render("private.sql", dialect="postgres", inline=True, t=ident(list(name))).sql).fetchall()
        for kind, stmt in steps:
            if kind == "revoke":
                c.execute(stmt)
        return [stmt for kind, stmt in steps if kind == "grant"]

    @staticmethod
    def _unpublished(c, name: tuple[str, str]) -> bool:
        """Make the table ``name``, just created (and still empty), UNLOGGED
        if a publication of all tables or of its schema would publish it
        (an unlogged table is never published), in transaction ``c``:
        subscribers received the staging tables' rows (the plan's values of
        the input among them) and stalled on tables they lack, every night
        (helper-61). Returns whether it did."""
        covered = bool(_schema_publications(c, name[0]))
        if covered:
            c.execute(f"ALTER TABLE {ident(list(name))} SET UNLOGGED")
        return covered

    def _attach(self, con: duckdb.DuckDBPyConnection) -> None:
        """Attach the target database once per run (loading the extension and
        connecting cost a few tenths of a second)."""
        if not any(row[0] == DST for row in con.execute("SELECT database_name FROM duckdb_databases()").fetchall()):
            # It sits idle while the output is verified: a role's timeout for
            # idle sessions ended it, and the run failed writing its metrics.
            attach(con, self.conn, DST, read_only=False, options=_no_idle_timeout(self._server_version))

    def _detach(self, con: duckdb.DuckDBPyConnection) -> None:
        try:
            con.execute(f"DETACH DATABASE IF EXISTS {ident(DST)}")
        except duckdb.Error:
            pass  # the connection is already closed or the database gone

    def typed_relation(self, staging: PgStaging, relation: str) -> str:
        """What the output's values are compared on: the staging table."""
        return relation

    def attached_relation(self, staging: PgStaging) -> str:
        """The staging table as the run's DuckDB connection sees it (attached
        by :meth:`assemble`), to compare a lake's values with in DuckDB."""
        return ident([DST, *self._staging_name(staging.run)])

    def bounds_relation(self, con: duckdb.DuckDBPyConnection, staging: PgStaging, types: dict[str, str]) -> str:
        """The staging table's columns ``types`` (name → the parts' DuckDB
        type), read back through DuckDB at those types. DuckDB's postgres
        extension reads a column of a domain (a PostgreSQL source's QI's
        bounds keep its type) as the server's text, which DuckDB's casts
        misread: '0044-03-15 BC' as a date 44 AD (the bounds refused as
        changed), '0100-01-01 00:00:00 BC' not at all (the run failed). Such
        columns are cast to their base type on the server (postgres_query)."""
        rel = self.attached_relation(staging)
        seen = dict(con.execute(f"SELECT column_name, column_type FROM (DESCRIBE SELECT * FROM {rel})").fetchall())
        back = ", ".join(f"CAST({ident(c)} AS {t}) AS {ident(c)}" for c, t in types.items())
        as_text = {c for c, t in types.items() if seen.get(c) == "VARCHAR" != t}
        if not as_text:
            return f"(SELECT {back} FROM {rel})"
        cols = ", ".join(f"{ident(c)}::{_pg_type(t)} AS {ident(c)}" if c in as_text else ident(c)
                         for c, t in types.items())
        query = f"SELECT {cols} FROM {ident(list(self._staging_name(staging.run)))}"
        return f"(SELECT {back} FROM postgres_query({literal(DST)}, {literal(query)}))"

    def verifier(self):
        """Where the k/l check runs: a connection to the server.

        The check is one GROUP BY over the whole table; enough ``work_mem``
        for this session keeps its hash aggregate in memory.
        """
        c = self.conn.connect()  # its caller closes it
        c.execute("SET work_mem = '256MB'")
        return c, "postgres"

    def publish_with_metrics(self, con, staging: PgStaging, metrics: pa.Table, where: str | None) -> str | None:
        """Swap the staging table in and append the metrics rows, in one transaction
        (or, when ``where`` is a .parquet/.csv path, swap in the metrics file,
        written aside before the transaction, right after it)."""
        from .io import file_format, stage_metrics_file

        self.check_lock()
        self._said = []
        if where and file_format(where):
            # Written first: a metrics file that cannot be written fails the
            # run before the table is replaced, not after.
            swap_metrics = stage_metrics_file(con, metrics, where)
            with contextlib.ExitStack() as on_failure:
                on_failure.callback(swap_metrics.discard)
                with self._transaction("publish") as c:
                    self._replace(c, ident(list(self._staging_name(staging.run))), staging.grants)
                on_failure.pop_all()
            self._say_what_was_left()
            written = swap_metrics.after_publishing(self.describe())
            self._detach(con)
            staging.discard()
            self.unlock()
            return where if written else None
        mname = self._metrics_name(where)
        mstage = self._metrics_staging_name(staging.run)
        self._attach(con)
        try:
            con.execute("CALL pg_clear_cache()")
            con.register("__sqlanon_metrics", metrics)
            con.execute(f'CREATE TABLE {ident([DST, *mstage])} AS SELECT * FROM "__sqlanon_metrics" LIMIT 0')
            with self._transaction("stage the metrics of") as c:
                self._private(c, mstage)  # it holds the plan's values of the input
                self._unpublished(c, mstage)
            con.execute(f'INSERT INTO {ident([DST, *mstage])} SELECT * FROM "__sqlanon_metrics"')
        except duckdb.Error as exc:
            raise InputError(f"cannot write the metrics table: {self.conn.redact(_first_line(exc))}") from None
        finally:
            self._detach(con)
        stage = ident(list(self._staging_name(staging.run)))
        metrics_table, metrics_stage = ident(list(mname)), ident(list(mstage))
        try:
            with self._transaction("publish") as c:
                new = c.execute(_COLUMNS, (metrics_stage,)).fetchall()
                # The metrics table's lock first, in tries as the target's: a session holding it (CREATE INDEX,
                # VACUUM FULL, a reader while columns are added) kept the target locked, and Ctrl-C unheard,
                # for 2 minutes (helper-22, helper-25). The rows' lock, or the table's to add columns.
                if c.execute("SELECT to_regclass(%s)", (metrics_table,)).fetchone()[0] is not None:
                    older = {n for n, _ in new} - {r[0] for r in c.execute(_COLUMNS, (metrics_table,)).fetchall()}
                    self._lock_target(c, metrics_table, "ACCESS EXCLUSIVE" if older else "ROW EXCLUSIVE",
                                      f"the metrics table {table_text(mname)!r}")
                self._replace(c, stage, staging.grants, staging.unlogged)
                published = _schema_publications(c, mname[0])
                if published:
                    log.warning("%s: the metrics table %s is published by %s (all tables, or its schema's): its rows, "
                                "the plan's values of the input, reach the subscribers; name a table elsewhere with "
                                "--metrics", self.describe(), table_text(mname), ", ".join(published))
                self._create_like(c, metrics_table, metrics_stage)
                # By name, adding the columns an older sqlanon's table lacks.
                described = c.execute(_COLUMNS, (metrics_table,)).fetchall()
                refuse_unfit_metrics(metrics.schema, described, f"table {table_text(mname)!r}", publishing=True)
                have = {n for n, _ in described}
                for name, typ in new:
                    if name not in have:
                        c.execute(f"ALTER TABLE {metrics_table} ADD COLUMN {ident(name)} {typ}")
                names = ", ".join(ident(name) for name, _ in new)
                c.execute(f"INSERT INTO {metrics_table} ({names}) SELECT {names} FROM {metrics_stage}")
                c.execute(f"DROP TABLE {metrics_stage}")
        except InputError:
            self.rollback(con, staging)
            raise
        self._say_what_was_left()
        staging.discard()
        self.unlock()
        return f"{self.conn.safe()} table {table_text(mname)}"

    def _say_what_was_left(self) -> None:
        """The warnings :meth:`_replace` held until the replacing committed."""
        for args in self._said:
            log.warning(*args)
        self._said = []

    @staticmethod
    def _create_like(c, table: str, like: str) -> None:
        """``CREATE TABLE IF NOT EXISTS table (LIKE like)``, when another run
        may be creating it too: the second of two failed at publish ('duplicate
        key value violates unique constraint "pg_type_typname_nsp_index"',
        helper-22), once the first committed; it finds the table then. A table
        already there is not created again: PostgreSQL checks the schema's
        CREATE privilege first, and a metrics table another role made in a
        schema the run may only write into failed each night after all the
        work (helper-91)."""
        import psycopg

        for attempt in range(2):
            if c.execute("SELECT to_regclass(%s) IS NOT NULL", [table]).fetchone()[0]:
                return
            try:
                with c.transaction():  # a savepoint
                    c.execute(f"CREATE TABLE IF NOT EXISTS {table} (LIKE {like})")
                return
            except (psycopg.errors.UniqueViolation, psycopg.errors.DuplicateTable):
                if attempt:
                    raise

    def unassemble(self, con, staging: PgStaging) -> None:
        """Undo :meth:`assemble`: drop the staging table."""
        self._run(f"DROP TABLE IF EXISTS {ident(list(self._staging_name(staging.run)))}", "stage")

    def rollback(self, con, staging: PgStaging | None = None) -> None:
        """Drop this run's staging tables (best effort) and release the lock."""
        self._detach(con)
        if staging is not None:
            names = (self._staging_name(staging.run), self._metrics_staging_name(staging.run))
            try:
                self._run([f"DROP TABLE IF EXISTS {ident(list(n))}" for n in names], "clean up")
            except InputError:
                pass  # the server is gone; the next run drops what is left
        self.unlock()


def _labels(definition: str | None) -> list[str]:
    """An enum's labels from :data:`TYPE_DEFINITIONS`' quoted list (``'a', 'b''c'``)."""
    return re.findall(r"'((?:[^']|'')*)'", definition or "")


def _schema_publications(c, schema: str) -> list[str]:
    """The publications that publish every new table of ``schema``: those of
    all tables, and (PostgreSQL 15) those of the schema's tables."""
    found = [r[0] for r in c.execute("SELECT pubname FROM pg_catalog.pg_publication WHERE puballtables")]
    if c.info.server_version >= 150000:
        found += [r[0] for r in c.execute(
            "SELECT p.pubname FROM pg_catalog.pg_publication_namespace pn JOIN pg_catalog.pg_publication p "
            "ON p.oid = pn.pnpubid WHERE pn.pnnspid = to_regnamespace(%s)", (ident(schema),))]
    return sorted(set(found))


def _miswritten_decimal(duck: str) -> bool:
    """Whether DuckDB's postgres extension writes the values of a DuckDB
    column type ``duck`` wrongly in its binary COPY, so that they must travel
    as their text (and get their type back on the server).

    It writes a decimal's fraction as base-10000 digits after multiplying it,
    in the decimal's own integer type, up to a multiple of 4 digits; past the
    type's digits (int32: 9, int64: 18, int128: 38) that overflows: DECIMAL(18,17)
    1.25 arrived as 1.0655…, 1.5 was refused ('invalid digit in external
    "numeric" value'), DECIMAL(9,9) 0.25 as 0.000891896. So a scale of 9 in
    DECIMAL(9,9), 17-18 of an int64 decimal, 37-38 of an int128 one (a sweep
    of every precision and scale found exactly these: helper-131, helper-133).
    A list of decimals is written exactly; its DuckDB text (``[1.5, 2.5]``)
    would be no array literal."""
    m = re.fullmatch(r"DECIMAL\((\d+),(\d+)\)", duck)
    if m is None:
        return False
    precision, scale = int(m[1]), int(m[2])
    digits = 4 if precision <= 4 else 9 if precision <= 9 else 18 if precision <= 18 else 38
    return -(-scale // 4) * 4 > digits


def _pg_type(duck: str) -> str:
    """The PostgreSQL type for a DuckDB column type (generalized QIs are text;
    a second's fraction and integers past bigint as PostgreSQL holds them)."""
    if duck.startswith("TIMESTAMP_"):  # _S, _MS, _NS
        return "timestamp"
    return {
        "VARCHAR": "text", "BIGINT": "bigint", "INTEGER": "integer", "SMALLINT": "smallint", "DOUBLE": "double precision",
        "FLOAT": "real", "BOOLEAN": "boolean", "DATE": "date", "TIMESTAMP": "timestamp",
        "TIMESTAMP WITH TIME ZONE": "timestamptz", "UBIGINT": "numeric(20,0)", "HUGEINT": "numeric(38,0)",
    }.get(duck, "text" if duck.startswith("VARCHAR") else duck.lower().replace("decimal", "numeric"))


def open_target(url: str, table: str | None, *, overwrite: bool, metrics: str | None = None,
                plan: bool = False) -> PostgresTarget:
    """The output table, locked for the run and checked; for a ``plan``
    (``--explain``) checked in a session that takes no lock (which the
    caller closes with :meth:`PostgresTarget.unlock` either way)."""
    conn = Conn(url).require_postgres("the output")
    target = PostgresTarget(conn, _table(table, "--target-table", conn), overwrite=overwrite)
    # Locked from the start, as a file output is: a second run on the same
    # table is refused before it does any work, not only if both publish at once.
    if metrics is None:
        fits_postgres(target._metrics_name(None)[1], "the metrics table", ": name one with --metrics")
    from .io import file_format

    target.lock(take=not plan)
    with contextlib.ExitStack() as on_failure:
        on_failure.callback(target.unlock)
        if metrics is not None:
            target.check_metrics_table(metrics)  # in the lock's session, as the checks below
        target.fits(list(target.table), "--target-table")
        if metrics is None or not file_format(metrics):
            target.fits(list(target._metrics_name(metrics)), "--metrics" if metrics else "the metrics table",
                        "" if metrics else ": name one with --metrics")
        if target.exists() and not overwrite:
            raise ConfigError(f"{target.describe()} already exists; pass --overwrite to replace it")
        on_failure.pop_all()
    return target


__all__ = ["Conn", "PostgresSource", "PostgresTarget", "attach", "is_url", "open_source", "open_target"]
