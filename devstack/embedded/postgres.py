"""A private PostgreSQL server from the ``pgserver`` wheel (see ``devstack.embedded``).

PostgreSQL is driven through the bundled ``initdb``/``pg_ctl`` rather than
``pgserver.get_server``: that helper keeps a per-directory singleton, a global file lock
and a reference-counted ``atexit`` hook, which make an explicit stop-then-start on the same
directory unreliable. Its one essential trick is kept: PostgreSQL refuses to run as root, so
under root the server runs as a ``pgserver`` system user (created on first use).

It listens on a Unix socket only (no TCP port to collide on); ``EmbeddedPostgres.url()``
returns a libpq-style URL such as ``postgresql://postgres@/jobs?host=/data/postgres``,
accepted by asyncpg and by SQLAlchemy as ``postgresql+asyncpg://…?host=…``.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.util
import logging
import os
import shlex
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import quote, urlsplit, urlunsplit

import asyncpg

from devstack.embedded.ports import log_tail

logger = logging.getLogger(__name__)

PG_SYSTEM_USER = "pgserver"  # the same name pgserver.get_server uses, so either can share it
PG_SUPERUSER = "postgres"
# sun_path is 108 bytes with the terminating NUL; keep a margin for the ".lock" sibling.
_MAX_SOCKET_PATH = 100
_SOCKET_NAME = ".s.PGSQL.5432"
# pg_ctl shutdown modes: wait for clients, disconnect them, or crash-like (recovery on start).
StopMode = Literal["smart", "fast", "immediate"]


def as_user(argv: list[str], run_as: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """``argv`` and the subprocess kwargs that run it as ``run_as``'s user (empty: as we
    are). Through setpriv, not subprocess's user and group: with those Python fork()s where
    it would vfork(), and a fork() in a process where gRPC threads run calls gRPC's fork
    handlers in the child, which crashed about every other one before its exec (issue 43:
    the "Fatal Python error: Segmentation fault" of the chaos runs, a pg_ctl that never
    ran)."""
    if not run_as:
        return argv, {}
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return argv, dict(run_as)
    uid, gid = run_as["user"], run_as["group"]
    return [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", *argv], {}


def _pg_bin_dir() -> Path:
    # find_spec locates the wheel without importing it (its import creates lock objects).
    spec = importlib.util.find_spec("pgserver")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the pgserver wheel is not installed (pip install pgserver)")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


class EmbeddedPostgres:
    """A PostgreSQL cluster in ``data_dir``, created on first start and kept across restarts.

    ``settings`` are extra server parameters (``-c name=value``); tests pass
    ``{"fsync": "off"}`` and friends for speed, the dev stack keeps the durable defaults.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        settings: Mapping[str, str] | None = None,
        timeout: float = 60.0,
    ) -> None:
        self.data_dir = Path(data_dir).expanduser().absolute()
        self.settings = {"max_connections": "200", **(settings or {})}
        self.timeout = timeout
        self._bin = _pg_bin_dir()
        self._socket_dir: Path | None = None
        self._running = False

    # -- lifecycle

    def start(self) -> None:
        if self._running:
            return
        run_as = self._prepare_filesystem()
        if not (self.data_dir / "PG_VERSION").exists():
            self._run(
                "initdb",
                "--auth=trust",
                f"--username={PG_SUPERUSER}",
                "--encoding=UTF8",
                "--locale=C",
                run_as=run_as,
            )
        if self._pg_ctl_status(run_as) == 0:
            # A server left behind by a process that died without stopping it: it would
            # hold the data directory, so restart it under our control.
            logger.warning("stopping a leftover PostgreSQL server on %s", self.data_dir)
            self._stop_server(run_as)
        socket_dir = self._choose_socket_dir(run_as)
        options = {
            "listen_addresses": "",
            "unix_socket_directories": str(socket_dir),
            **self.settings,
        }
        opts = " ".join(f"-c {shlex.quote(f'{k}={v}')}" for k, v in options.items())
        try:
            self._run(
                "pg_ctl",
                "start",
                "--wait",
                f"--timeout={int(self.timeout)}",
                f"--log={self._log_path}",
                f"--options={opts}",
                run_as=run_as,
            )
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(
                f"PostgreSQL did not start on {self.data_dir}:\n{log_tail(self._log_path)}"
            ) from exc
        self._socket_dir = socket_dir
        self._running = True
        # A safety net for a test run or dev stack that exits without calling stop():
        # pg_ctl detaches the server, so nothing else would ever stop it.
        atexit.register(self.stop)

    def stop(self, *, mode: StopMode = "fast") -> None:
        """Stop the server (``mode`` is pg_ctl's: smart, fast or immediate). Idempotent."""
        if not self._running:
            return
        atexit.unregister(self.stop)
        self._stop_server(self._run_as(), mode=mode)
        self._running = False

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- what clients need

    @property
    def running(self) -> bool:
        return self._running

    @property
    def pid(self) -> int | None:
        """The postmaster's pid while running (first line of postmaster.pid)."""
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    @property
    def socket_dir(self) -> Path:
        if self._socket_dir is None:
            raise RuntimeError("EmbeddedPostgres is not started")
        return self._socket_dir

    def url(self, database: str = "jobs") -> str:
        """libpq-style URL for asyncpg (prefix with ``postgresql+asyncpg`` for SQLAlchemy)."""
        host = quote(str(self.socket_dir), safe="/")
        return f"postgresql://{PG_SUPERUSER}@/{quote(database, safe='')}?host={host}"

    # -- internals

    @property
    def _log_path(self) -> Path:
        return self.data_dir / "postgresql.log"

    def _run_as(self) -> dict[str, Any]:
        """subprocess kwargs that drop root to the PostgreSQL system user."""
        if os.geteuid() != 0:
            return {}
        import pwd

        try:
            entry = pwd.getpwnam(PG_SYSTEM_USER)
        except KeyError:
            subprocess.run(
                ["useradd", "--system", "--no-create-home", "-s", "/bin/false", PG_SYSTEM_USER],
                check=True,
                capture_output=True,
            )
            entry = pwd.getpwnam(PG_SYSTEM_USER)
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def _prepare_filesystem(self) -> dict[str, Any]:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        run_as = self._run_as()
        if run_as:
            os.chown(self.data_dir, run_as["user"], run_as["group"])
            # The server user must be able to reach its directory and run the binaries;
            # grant only traversal on the ancestors (no listing), as little as works.
            for parent in self.data_dir.parents:
                mode = parent.stat().st_mode
                if not mode & stat.S_IXOTH:
                    parent.chmod(mode | stat.S_IXOTH)
            for path in (self._bin, self._bin / "postgres", self._bin.parent / "lib"):
                mode = path.stat().st_mode
                if not mode & stat.S_IXOTH:
                    path.chmod(mode | stat.S_IROTH | stat.S_IXOTH)
        self.data_dir.chmod(0o700)  # initdb and postgres insist on it
        return run_as

    def _choose_socket_dir(self, run_as: Mapping[str, Any]) -> Path:
        if len(os.fsencode(self.data_dir / _SOCKET_NAME)) <= _MAX_SOCKET_PATH:
            return self.data_dir
        # Too long for a Unix socket path: a short directory named after the data dir.
        digest = hashlib.sha256(os.fsencode(self.data_dir)).hexdigest()[:12]
        short = Path(tempfile.gettempdir()) / f"jobs-pg-{digest}"
        short.mkdir(mode=0o700, exist_ok=True)
        if run_as:
            os.chown(short, run_as["user"], run_as["group"])
        return short

    def _pg_ctl_status(self, run_as: Mapping[str, Any]) -> int:
        argv, as_them = as_user(
            [str(self._bin / "pg_ctl"), "status", "-D", str(self.data_dir)], run_as
        )
        return subprocess.run(argv, capture_output=True, cwd=self.data_dir, **as_them).returncode

    def _stop_server(self, run_as: Mapping[str, Any], mode: StopMode = "fast") -> None:
        try:
            self._run(
                "pg_ctl",
                "stop",
                "--wait",
                f"--timeout={int(self.timeout)}",
                f"--mode={mode}",
                run_as=run_as,
            )
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            if self._pg_ctl_status(run_as) == 0:
                logger.warning("PostgreSQL did not stop in time; stopping it immediately")
                self._run("pg_ctl", "stop", "--wait", "--mode=immediate", run_as=run_as)

    def _run(self, program: str, *args: str, run_as: Mapping[str, Any]) -> None:
        # Output goes to a file, not a pipe: pg_ctl's detached server inherits the
        # descriptors and a pipe would never reach EOF.
        argv, as_them = as_user([str(self._bin / program), "-D", str(self.data_dir), *args], run_as)
        with tempfile.TemporaryFile() as output:
            try:
                subprocess.run(
                    argv,
                    check=True,
                    stdin=subprocess.DEVNULL,
                    stdout=output,
                    stderr=subprocess.STDOUT,
                    cwd=self.data_dir,  # the server user may not be allowed into ours
                    timeout=self.timeout + 10,
                    **as_them,
                )
            except subprocess.CalledProcessError:
                output.seek(0)
                logger.error("%s failed:\n%s", program, output.read().decode(errors="replace"))
                raise


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def with_database(url: str, database: str) -> str:
    """The same server URL pointing at another database (query such as ?host= is kept)."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + quote(database, safe="")))


async def create_database(admin_url: str, name: str, *, template: str | None = None) -> None:
    conn = await asyncpg.connect(admin_url)
    try:
        sql = f"CREATE DATABASE {_quote_ident(name)}"
        if template is not None:
            sql += f" TEMPLATE {_quote_ident(template)}"
        await conn.execute(sql)
    finally:
        await conn.close()


async def ensure_database(admin_url: str, name: str) -> None:
    """CREATE DATABASE ``name`` unless it exists (safe against a concurrent creator)."""
    conn = await asyncpg.connect(admin_url)
    try:
        if await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            return
        with contextlib.suppress(asyncpg.DuplicateDatabaseError):
            await conn.execute(f"CREATE DATABASE {_quote_ident(name)}")
    finally:
        await conn.close()


async def drop_database(admin_url: str, name: str) -> None:
    """DROP DATABASE IF EXISTS … WITH (FORCE): open connections are terminated first."""
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {_quote_ident(name)} WITH (FORCE)")
    finally:
        await conn.close()
