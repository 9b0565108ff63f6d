"""A throwaway PostgreSQL server for the test suite.

``PgServer.start()`` builds a fresh cluster with the machine's PostgreSQL
binaries (``initdb`` into a temporary directory, ``pg_ctl start`` on a free
loopback port) and ``stop()`` shuts it down and deletes the directory.

* Connections: TCP on 127.0.0.1 only, plus a unix socket inside the temporary
  directory. The superuser role ``sqlanon`` has a password and must use it
  over TCP (``scram-sha-256``); every other role is trusted locally.
* Database ``sqlanon_test`` (owner ``sqlanon``).
* ``log_statement = 'all'`` to ``<data dir>/log/postgresql.log``, so tests can
  prove which SQL reached the server (``wait_for_log``).
* ``pg_stat_statements`` preloaded (``track = all``) and created in
  ``sqlanon_test`` when the extension is installed.
* Durability is off (``fsync``, ``synchronous_commit``, ``full_page_writes``):
  the cluster is thrown away anyway.

As root, ``initdb`` and ``postgres`` refuse to run, so the directory is owned
by the ``postgres`` system user (created if missing) and the server commands
run through ``runuser -u postgres --`` (or ``su``).

``PgServer.from_url(url)`` wraps an external server (``SQLANON_TEST_PG_URL``):
nothing is started or stopped, and the log file and data directory are unknown.
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import secrets
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

ENV_URL = "SQLANON_TEST_PG_URL"
USER = "sqlanon"
DBNAME = "sqlanon_test"
HOST = "127.0.0.1"
LOG_DIRECTORY = "log"
LOG_FILENAME = "postgresql.log"

INSTALL_HINT = "apt-get install -y postgresql-15 (Debian) or set SQLANON_TEST_PG_URL"


class PgUnavailable(RuntimeError):
    """No PostgreSQL server binaries on this machine."""


class PgStartError(RuntimeError):
    """The binaries exist but the throwaway server could not be brought up."""


# --------------------------------------------------------------------------- binaries


def _has_server_binaries(bindir: Path) -> bool:
    return all((bindir / name).is_file() for name in ("initdb", "pg_ctl", "postgres"))


def find_pg_bindir() -> Path | None:
    """The directory holding ``initdb``, ``pg_ctl`` and ``postgres``.

    ``pg_config --bindir`` first (on Debian it may point at /usr/bin, which
    has only the client wrappers), then /usr/lib/postgresql/<newest>/bin, then
    ``initdb`` on PATH (resolving symlinks).
    """
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True
            ).stdout.strip()
            if out:
                candidates.append(Path(out))
        except (OSError, subprocess.SubprocessError):
            pass

    def _version_key(p: str) -> tuple[int, str]:
        name = Path(p).parent.name
        return (int(name) if name.isdigit() else -1, name)

    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True)]
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(os.path.realpath(initdb)).parent)
    for bindir in candidates:
        if _has_server_binaries(bindir):
            return bindir
    return None


def _sharedir(bindir: Path) -> Path | None:
    """The server's share directory (where extension/*.control live)."""
    pg_config = bindir / "pg_config"
    exe = str(pg_config) if pg_config.is_file() else shutil.which("pg_config")
    if exe:
        try:
            out = subprocess.run([exe, "--sharedir"], capture_output=True, text=True, timeout=10, check=True)
            if out.stdout.strip():
                return Path(out.stdout.strip())
        except (OSError, subprocess.SubprocessError):
            pass
    # Debian: /usr/lib/postgresql/15/bin -> /usr/share/postgresql/15
    guess = Path("/usr/share/postgresql") / bindir.parent.name
    return guess if guess.is_dir() else None


def has_extension(bindir: Path, name: str) -> bool:
    share = _sharedir(bindir)
    return share is not None and (share / "extension" / f"{name}.control").is_file()


def free_port(host: str = HOST) -> int:
    """A port that was free a moment ago (bind to port 0 and let the OS choose)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- running as another user


def _ensure_postgres_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        pass
    subprocess.run(
        ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
         "--shell", "/usr/sbin/nologin", "postgres"],
        check=True, capture_output=True, text=True,
    )
    return pwd.getpwnam("postgres")


def _as_user_prefix(user: str | None) -> list[str]:
    """argv prefix that runs a command as ``user`` (None: as ourselves)."""
    if user is None:
        return []
    if shutil.which("runuser"):
        return ["runuser", "-u", user, "--"]
    # su needs a single shell string: the caller's argv is joined by _run.
    return ["su", user, "-s", "/bin/sh", "-c"]


# --------------------------------------------------------------------------- the server


@dataclass
class PgServer:
    """A PostgreSQL server for tests: ``url`` is what a test connects to."""

    url: str
    password: str
    host: str = HOST
    port: int = 5432
    user: str = USER
    dbname: str = DBNAME
    log_file: Path | None = None
    data_dir: Path | None = None
    base_dir: Path | None = None
    socket_dir: Path | None = None
    bindir: Path | None = None
    has_pg_stat_statements: bool = False
    external: bool = False
    _run_as: str | None = field(default=None, repr=False)
    _stopped: bool = field(default=False, repr=False)

    # ---- derived forms of the URL

    @property
    def sqlalchemy_url(self) -> str:
        """The URL with the psycopg 3 driver spelled out (SQLAlchemy 2.0 would
        otherwise pick psycopg2 for ``postgresql://``)."""
        scheme, rest = self.url.split("://", 1)
        return f"postgresql+psycopg://{rest}" if scheme in ("postgresql", "postgres") else self.url

    def libpq_dsn(self, password: str | None = None) -> str:
        """``key=value`` connection string (libpq), e.g. for DuckDB's ATTACH.

        Values are quoted only when libpq needs it (empty, blanks, quotes or
        backslashes); inside a SQL string literal the caller still doubles
        single quotes."""
        pw = self.password if password is None else password

        def q(v: object) -> str:
            s = str(v)
            if s and not any(c.isspace() or c in "'\\" for c in s):
                return s
            return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"

        return f"host={q(self.host)} port={self.port} dbname={q(self.dbname)} user={q(self.user)} password={q(pw)}"

    def url_with_password(self, password: str) -> str:
        return f"postgresql://{quote(self.user, safe='')}:{quote(password, safe='')}@{self.host}:{self.port}/{self.dbname}"

    # ---- the server log

    def read_log(self) -> str:
        if self.log_file is None:
            raise RuntimeError("the log of an external server (SQLANON_TEST_PG_URL) is not available")
        try:
            return self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_for_log(self, needle: str, timeout: float = 5.0) -> bool:
        """True once ``needle`` appears in the server log (the logging
        collector writes asynchronously, so poll briefly)."""
        deadline = time.monotonic() + timeout
        while True:
            if needle in self.read_log():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    # ---- lifecycle

    @classmethod
    def from_url(cls, url: str) -> "PgServer":
        parts = urlsplit(url)
        return cls(
            url=url,
            password=unquote(parts.password or ""),
            host=parts.hostname or HOST,
            port=parts.port or 5432,
            user=unquote(parts.username or ""),
            dbname=(parts.path or "/").lstrip("/") or DBNAME,
            external=True,
        )

    @classmethod
    def start(cls, *, password: str | None = None, start_timeout: float = 60.0, attempts: int = 3) -> "PgServer":
        """Create and start a throwaway cluster. Raises ``PgUnavailable`` when
        there are no server binaries, ``PgStartError`` when it fails to come up."""
        bindir = find_pg_bindir()
        if bindir is None:
            raise PgUnavailable(f"no PostgreSQL server binaries (initdb/pg_ctl/postgres) found; {INSTALL_HINT}")
        password = password or secrets.token_hex(16)
        run_as = None
        owner = None
        if os.geteuid() == 0:
            owner = _ensure_postgres_user()
            run_as = owner.pw_name
        # Under /tmp (not pytest's 0700 /tmp/pytest-of-root) so that the
        # postgres user can reach it; short, for the unix socket path limit.
        base = Path(tempfile.mkdtemp(prefix="sqlanon-pg-", dir="/tmp" if run_as else None))
        server = cls(
            url="", password=password, base_dir=base, data_dir=base / "data", socket_dir=base / "sock",
            bindir=bindir, has_pg_stat_statements=has_extension(bindir, "pg_stat_statements"), _run_as=run_as,
        )
        server.log_file = server.data_dir / LOG_DIRECTORY / LOG_FILENAME
        atexit.register(server.stop)  # safety net if the fixture's teardown never runs
        try:
            server.socket_dir.mkdir()
            if owner is not None:
                for p in (base, server.socket_dir):
                    os.chown(p, owner.pw_uid, owner.pw_gid)
            os.chmod(base, 0o700)
            server._initdb()
            last_error: Exception | None = None
            for _ in range(attempts):  # the free port may be taken between probe and bind
                server.port = free_port()
                try:
                    server._configure()
                    server._pg_ctl_start(start_timeout)
                    break
                except PgStartError as exc:
                    last_error = exc
            else:
                raise PgStartError(f"PostgreSQL did not start after {attempts} attempts: {last_error}")
            server._wait_ready(start_timeout)
            server._bootstrap()
            server.url = server.url_with_password(password)
            return server
        except BaseException:
            server.stop()
            raise

    def start_standby(self, start_timeout: float = 60.0) -> "PgServer":
        """A streaming hot standby of this (throwaway) server on another port:
        a copy by ``pg_basebackup -R`` (the same system identifier, roles and
        databases), started in recovery, reading the WAL this one streams.
        Stop it before this one."""
        if self.external:
            raise PgUnavailable("a standby needs a server the tests started (not SQLANON_TEST_PG_URL)")
        base = Path(tempfile.mkdtemp(prefix="sqlanon-pgs-", dir="/tmp" if self._run_as else None))
        standby = PgServer(url="", password=self.password, base_dir=base, data_dir=base / "data",
                           socket_dir=base / "sock", bindir=self.bindir,
                           has_pg_stat_statements=self.has_pg_stat_statements, _run_as=self._run_as)
        standby.log_file = standby.data_dir / LOG_DIRECTORY / LOG_FILENAME
        atexit.register(standby.stop)
        try:
            standby.socket_dir.mkdir()
            if self._run_as is not None:
                owner = pwd.getpwnam(self._run_as)
                for p in (base, standby.socket_dir):
                    os.chown(p, owner.pw_uid, owner.pw_gid)
            os.chmod(base, 0o700)
            standby._run([self._bin("pg_basebackup"), "-h", str(self.socket_dir), "-p", str(self.port), "-U",
                          "postgres", "-D", str(standby.data_dir), "-R", "-X", "stream", "-c", "fast", "--no-sync"])
            standby.port = free_port()
            standby._configure()
            standby._pg_ctl_start(start_timeout)
            standby._wait_ready(start_timeout)
            standby.url = standby.url_with_password(self.password)
            return standby
        except BaseException:
            standby.stop()
            raise

    def stop(self) -> None:
        """``pg_ctl stop -m fast`` and delete the directory (idempotent)."""
        if self.external or self._stopped:
            return
        self._stopped = True
        try:
            if self.data_dir is not None and (self.data_dir / "postmaster.pid").exists():
                self._run([self._bin("pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "60", "stop"],
                          check=False, timeout=90)
        finally:
            if self.base_dir is not None:
                shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> "PgServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- internals

    def _bin(self, name: str) -> str:
        assert self.bindir is not None
        return str(self.bindir / name)

    def _run(self, argv: list[str], *, check: bool = True, timeout: float = 120,
             as_server_user: bool = True) -> subprocess.CompletedProcess:
        prefix = _as_user_prefix(self._run_as) if as_server_user else []
        cmd = prefix + ([shlex.join(argv)] if prefix[:1] == ["su"] else argv)
        env = dict(os.environ, LC_ALL="C", LANG="C")
        env.pop("PGDATA", None)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=self.base_dir, env=env)
        if check and proc.returncode != 0:
            raise PgStartError(f"{shlex.join(argv)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc

    def _initdb(self) -> None:
        self._run([self._bin("initdb"), "-D", str(self.data_dir), "-U", "postgres", "-A", "trust",
                   "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"])

    def _configure(self) -> None:
        conf = {
            "listen_addresses": f"'{HOST}'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.socket_dir}'",
            "max_connections": "100",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "log_destination": "'stderr'",
            "logging_collector": "on",
            "log_directory": f"'{LOG_DIRECTORY}'",
            "log_filename": f"'{LOG_FILENAME}'",
            "log_rotation_age": "0",
            "log_rotation_size": "0",
            "log_file_mode": "0644",
            "log_statement": "'all'",
            "log_line_prefix": "'%m [%p] %u@%d '",
        }
        if self.has_pg_stat_statements:
            conf["shared_preload_libraries"] = "'pg_stat_statements'"
            conf["pg_stat_statements.track"] = "all"
        # postgresql.auto.conf is read last and wins over postgresql.conf;
        # rewritten on every attempt (the port changes), but for a standby's
        # primary_conninfo (pg_basebackup -R writes it there).
        auto = self.data_dir / "postgresql.auto.conf"
        kept = [line for line in (auto.read_text().splitlines() if auto.exists() else [])
                if line.startswith("primary_conninfo")]
        text = "# written by tests/pg_server.py\n" + "".join(f"{k} = {v}\n" for k, v in conf.items()) + "".join(
            f"{line}\n" for line in kept)
        # pg_hba: first matching line wins, so the password line for the
        # sqlanon role comes before the trust lines.
        hba = (
            "# written by tests/pg_server.py\n"
            f"host    all {USER} 127.0.0.1/32 scram-sha-256\n"
            "local   all all              trust\n"
            "host    all all 127.0.0.1/32 trust\n"
            "local   replication all      trust\n"  # start_standby's pg_basebackup and its streaming
            "host    replication all 127.0.0.1/32 trust\n"
        )
        self._write_as_owner(self.data_dir / "postgresql.auto.conf", text)
        self._write_as_owner(self.data_dir / "pg_hba.conf", hba)

    def _write_as_owner(self, path: Path, text: str) -> None:
        # root may write into the postgres-owned dir; keep the owner the same.
        st = os.stat(path) if path.exists() else os.stat(path.parent)
        path.write_text(text)
        if os.geteuid() == 0:
            os.chown(path, st.st_uid, st.st_gid)
        os.chmod(path, 0o600)

    def _pg_ctl_start(self, timeout: float) -> None:
        startup_log = self.base_dir / "startup.log"
        proc = self._run([self._bin("pg_ctl"), "-D", str(self.data_dir), "-l", str(startup_log),
                          "-w", "-t", str(int(timeout)), "start"], check=False, timeout=timeout + 30)
        if proc.returncode != 0:
            details = ""
            for f in (startup_log, self.log_file):
                if f is not None and f.exists():
                    details += f"\n--- {f.name}:\n" + f.read_text(errors="replace")[-4000:]
            # a half-started postmaster would hold the data dir
            self._run([self._bin("pg_ctl"), "-D", str(self.data_dir), "-m", "immediate", "stop"],
                      check=False, timeout=60)
            raise PgStartError(f"pg_ctl start failed ({proc.returncode}): {proc.stdout}{proc.stderr}{details}")

    def _wait_ready(self, timeout: float) -> None:
        pg_isready = self._bin("pg_isready")
        if not Path(pg_isready).is_file():
            pg_isready = shutil.which("pg_isready") or pg_isready
        deadline = time.monotonic() + timeout
        while True:
            proc = subprocess.run([pg_isready, "-h", HOST, "-p", str(self.port), "-d", "postgres", "-t", "2"],
                                  capture_output=True, text=True)
            if proc.returncode == 0:
                return
            if time.monotonic() >= deadline:
                raise PgStartError(f"pg_isready never succeeded: {proc.stdout}{proc.stderr}")
            time.sleep(0.1)

    def _psql(self, sql: str, dbname: str = "postgres") -> str:
        psql = self._bin("psql")
        if not Path(psql).is_file():
            psql = shutil.which("psql") or psql
        # over the unix socket as the trusted bootstrap superuser
        proc = self._run([psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(self.socket_dir),
                          "-p", str(self.port), "-U", "postgres", "-d", dbname, "-Atc", sql])
        return proc.stdout

    def _bootstrap(self) -> None:
        pw = self.password.replace("'", "''")
        self._psql(f"SET password_encryption = 'scram-sha-256'; "
                   f"CREATE ROLE {USER} LOGIN SUPERUSER PASSWORD '{pw}'")
        self._psql(f"CREATE DATABASE {DBNAME} OWNER {USER}")
        if self.has_pg_stat_statements:
            self._psql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements", dbname=DBNAME)


def server_from_env_or_start() -> PgServer:
    """``SQLANON_TEST_PG_URL`` if set, else a fresh throwaway server."""
    url = os.environ.get(ENV_URL)
    if url:
        return PgServer.from_url(url)
    return PgServer.start()


if __name__ == "__main__":  # manual check: python tests/pg_server.py
    t0 = time.perf_counter()
    with PgServer.start() as srv:
        print(f"started in {time.perf_counter() - t0:.2f}s")
        print(srv)
        print(srv.url)
        print(srv.libpq_dsn())
