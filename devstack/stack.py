"""``make run``: the whole product on one machine, from pip-installed parts only.

Starts a private PostgreSQL and NATS JetStream (see ``devstack.embedded``) unless
``JOBS_DATABASE_URL`` / ``JOBS_NATS_URL`` point at running ones, applies migrations, then
runs ``python -m job_service serve`` and one ``python -m worker_service`` as child processes
— by module name, as separate processes, the way they run deployed.

Environment: ``JOBS_DATA_DIR`` (default ``./.jobs-data``; data survives restarts),
``JOBS_GRPC_PORT`` (default 50051), ``JOBS_DATABASE_URL``, ``JOBS_NATS_URL``,
``JOBS_CREDENTIALS_MASTER_KEY`` (default: one generated on first start and kept in the data
directory, so that stored user keys open again after a restart), ``JOBS_DATA_KEK`` (default:
the file ``data-kek`` there, generated likewise, passed as ``JOBS_DATA_KEK_FILE``),
``JOBS_METRICS_PORT`` / ``JOBS_WORKER_METRICS_PORT`` (default 9464 / 9465, or a free port
when that one is taken), ``JOBS_CONSOLE_PORT`` (the web console, ``python -m console``;
default 8080, or a free port when taken). Logs are plain text unless ``JOBS_LOG_FORMAT``
says otherwise.

Auth: unless ``JOBS_AUTH_TOKENS`` / ``JOBS_AUTH_TOKENS_FILE`` say otherwise, one token per
role is generated on the first start and kept in the data directory (``auth-tokens.json``
for job_service, and ``client.token``, ``admin.token``, ``worker.token`` for people and
scripts; readable by the owner only); the worker gets the worker token.

Ctrl-C or SIGTERM stops the worker, then job_service (each given a bounded grace period),
then NATS, then PostgreSQL, and exits 0. If a child dies on its own, everything is stopped
and the exit status is 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from devstack.banner import banner
from devstack.config import DevstackConfig
from devstack.dev_credentials import TOKENS_FILE, dev_data_kek, dev_master_key, dev_tokens
from devstack.embedded import (
    EmbeddedNats,
    EmbeddedPostgres,
    ensure_database,
    free_port,
    port_is_free,
)
from devstack.readiness import (
    DevstackError,
    Interrupted,
    wait_until_answering,
    wait_until_serving,
)

DATABASE = "jobs"
DEFAULT_NATS_PORT = 4222
DEFAULT_METRICS_PORT = 9464
DEFAULT_WORKER_METRICS_PORT = 9465
DEFAULT_CONSOLE_PORT = 8080
MIGRATE_TIMEOUT_S = 120.0
# Per child: the worker may be finishing a job, job_service draining RPCs.
STOP_GRACE_S = 20.0


def metrics_port(configured: int | None, default: int) -> int:
    """The configured port, else the default when free, else any free port (so that two
    stacks on one machine do not collide)."""
    if configured is not None:
        return configured
    return default if port_is_free(default) else free_port()


def configured_worker_token(env: Mapping[str, str]) -> str | None:
    """With tokens of one's own (JOBS_AUTH_TOKENS or _FILE): JOBS_AUTH_TOKEN, or the first
    token with the worker role; None when tokens are not configured at all."""
    try:
        text = env.get("JOBS_AUTH_TOKENS", "").strip()
        if not text and env.get("JOBS_AUTH_TOKENS_FILE"):
            text = Path(env["JOBS_AUTH_TOKENS_FILE"]).read_text()
        if not text:
            return None
        if env.get("JOBS_AUTH_TOKEN"):
            return env["JOBS_AUTH_TOKEN"]
        table = json.loads(text)
        workers = [t for t, entry in table.items() if "worker" in entry.get("roles", [])]
    except (OSError, ValueError, AttributeError) as error:
        raise DevstackError(f"cannot use the configured auth tokens: {error}") from None
    if not workers:
        raise DevstackError("the configured auth tokens have none with the worker role")
    return str(workers[0])


def say(message: str) -> None:
    print(f"devstack: {message}", flush=True)


@contextlib.contextmanager
def exclusive(data_dir: Path) -> Iterator[None]:
    """One dev stack per data directory: a second one would fight over the servers."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with (data_dir / ".devstack.lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise DevstackError(f"another devstack is already using {data_dir}") from None
        yield


class Children:
    """The child processes, stopped in reverse start order."""

    def __init__(self, stop: asyncio.Event) -> None:
        self._stop = stop
        self._running: list[tuple[str, asyncio.subprocess.Process, asyncio.Task[int]]] = []

    async def spawn(self, name: str, args: list[str], env: Mapping[str, str]) -> asyncio.Task[int]:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            *args,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
            stdin=asyncio.subprocess.DEVNULL,
            # Own session: a terminal Ctrl-C reaches only us, and we stop them in order.
            start_new_session=True,
        )
        exited = asyncio.create_task(process.wait(), name=f"wait-{name}")
        self._running.append((name, process, exited))
        return exited

    async def run_to_completion(self, name: str, args: list[str], env: Mapping[str, str]) -> int:
        """Run a one-shot child; its exit status, or Interrupted if a stop comes first."""
        exited = await self.spawn(name, args, env)
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({exited, stop}, return_when="FIRST_COMPLETED")
        finally:
            stop.cancel()
        if not exited.done():
            raise Interrupted  # still listed: stop_all() terminates it
        self._running = [child for child in self._running if child[2] is not exited]
        return exited.result()

    async def first_exit_or_stop(self) -> tuple[str, int] | None:
        """Block until a child exits (its name and status) or a stop is requested (None)."""
        stop = asyncio.ensure_future(self._stop.wait())
        by_task = {exited: name for name, _, exited in self._running}
        try:
            done, _ = await asyncio.wait({stop, *by_task}, return_when="FIRST_COMPLETED")
        finally:
            stop.cancel()
        for task in done:
            if task in by_task:
                return by_task[task], task.result()
        return None

    def exited(self, name: str) -> bool:
        return any(n == name and exited.done() for n, _, exited in self._running)

    async def stop_all(self) -> None:
        while self._running:
            name, process, exited = self._running.pop()
            if exited.done():
                continue
            say(f"stopping {name} (pid {process.pid})")
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.shield(exited), STOP_GRACE_S)
            except TimeoutError:
                say(f"{name} did not stop within {STOP_GRACE_S:.0f}s; killing it")
                process.kill()
                await exited


async def start_server(name: str, start: Callable[[], None]) -> None:
    # In a thread so that a Ctrl-C meanwhile is still noticed by the event loop.
    try:
        await asyncio.to_thread(start)
    except (RuntimeError, TimeoutError, OSError, subprocess.SubprocessError) as exc:
        raise DevstackError(f"{name} did not start: {exc}") from exc


async def run(config: DevstackConfig) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    children = Children(stop)
    target = f"127.0.0.1:{config.grpc_port}"
    try:
        with exclusive(config.data_dir), contextlib.ExitStack() as servers:
            try:
                if not port_is_free(config.grpc_port):
                    raise DevstackError(
                        f"port {config.grpc_port} is in use; set JOBS_GRPC_PORT to another"
                    )
                database_url = config.database_url
                if database_url is None:
                    postgres = EmbeddedPostgres(config.data_dir / "postgres")
                    servers.callback(say, "PostgreSQL stopped")
                    servers.callback(postgres.stop)
                    await start_server("PostgreSQL", postgres.start)
                    await ensure_database(postgres.url("postgres"), DATABASE)
                    database_url = postgres.url(DATABASE)
                    say(f"PostgreSQL ready (pid {postgres.pid})")
                nats_url = config.nats_url
                if nats_url is None:
                    port = DEFAULT_NATS_PORT if port_is_free(DEFAULT_NATS_PORT) else free_port()
                    nats = EmbeddedNats(config.data_dir / "nats", port)
                    servers.callback(say, "NATS stopped")
                    servers.callback(nats.stop)
                    await start_server("NATS", nats.start)
                    nats_url = nats.url
                    say(f"NATS JetStream ready on {nats_url} (pid {nats.pid})")
                if stop.is_set():
                    raise Interrupted

                say("applying migrations")
                try:
                    async with asyncio.timeout(MIGRATE_TIMEOUT_S):
                        # one line per migration is for the migrate Job's log; here a
                        # failure speaks (ERROR), a success is the line below
                        status = await children.run_to_completion(
                            "migrate",
                            ["-m", "job_service", "migrate"],
                            {"JOBS_DATABASE_URL": database_url, "JOBS_LOG_LEVEL": "WARNING"},
                        )
                except TimeoutError:
                    raise DevstackError(
                        f"migrations still running after {MIGRATE_TIMEOUT_S:.0f}s"
                    ) from None
                if status != 0:
                    raise DevstackError(f"migrations failed (status {status})")
                say("database schema up to date")

                auth_env: dict[str, str] = {}
                worker_token = configured_worker_token(os.environ)
                generated = worker_token is None
                if worker_token is None:
                    tokens = dev_tokens(config.data_dir)
                    worker_token = tokens["worker"]
                    auth_env["JOBS_AUTH_TOKENS_FILE"] = str(config.data_dir / TOKENS_FILE)
                    say(f"auth tokens (one per role) in {config.data_dir}/<role>.token")
                ports = (
                    metrics_port(config.metrics_port, DEFAULT_METRICS_PORT),
                    metrics_port(config.worker_metrics_port, DEFAULT_WORKER_METRICS_PORT),
                )
                log_format = {"JOBS_LOG_FORMAT": os.environ.get("JOBS_LOG_FORMAT", "text")}
                job_service = await children.spawn(
                    "job_service",
                    ["-m", "job_service", "serve"],
                    {
                        "JOBS_DATABASE_URL": database_url,
                        "JOBS_NATS_URL": nats_url,
                        "JOBS_GRPC_HOST": "127.0.0.1",
                        "JOBS_GRPC_PORT": str(config.grpc_port),
                        **auth_env,
                        "JOBS_CREDENTIALS_MASTER_KEY": config.credentials_master_key
                        or dev_master_key(config.data_dir),
                        # a JOBS_DATA_KEK of one's own wins over the file
                        "JOBS_DATA_KEK_FILE": str(dev_data_kek(config.data_dir)),
                        "JOBS_METRICS_HOST": "127.0.0.1",
                        "JOBS_METRICS_PORT": str(ports[0]),
                        **log_format,
                    },
                )
                await wait_until_serving(target, job_service, stop)
                await children.spawn(
                    "worker_service",
                    ["-m", "worker_service"],
                    {
                        "JOBS_NATS_URL": nats_url,
                        "JOBS_JOB_SERVICE_TARGET": target,
                        "JOBS_AUTH_TOKEN": worker_token,
                        "JOBS_WORKER_METRICS_HOST": "127.0.0.1",
                        "JOBS_WORKER_METRICS_PORT": str(ports[1]),
                        **log_format,
                    },
                )
                console_port = metrics_port(config.console_port, DEFAULT_CONSOLE_PORT)
                await children.spawn(
                    "console",
                    ["-m", "console"],
                    {
                        "JOBS_JOB_SERVICE_TARGET": target,
                        "JOBS_CONSOLE_HOST": "127.0.0.1",
                        "JOBS_CONSOLE_PORT": str(console_port),
                        "JOBS_CONSOLE_METRICS_URL": f"http://127.0.0.1:{ports[0]}/metrics",
                        "JOBS_CONSOLE_WORKER_METRICS_URLS": f"http://127.0.0.1:{ports[1]}/metrics",
                    },
                )
                console = f"http://127.0.0.1:{console_port}/healthz"
                await wait_until_answering(
                    "console", console, "serving", lambda: children.exited("console"), stop
                )
                # ready once consuming, which is after its job types were declared: a job
                # created once the banner is up finds its type
                worker = f"http://127.0.0.1:{ports[1]}/readyz"
                await wait_until_answering(
                    "worker_service",
                    worker,
                    "ready",
                    lambda: children.exited("worker_service"),
                    stop,
                )
                print(
                    banner(config, target, database_url, nats_url, ports, generated, console_port),
                    flush=True,
                )

                died = await children.first_exit_or_stop()
                if died is not None:
                    name, status = died
                    raise DevstackError(f"{name} exited unexpectedly with status {status}")
                say("stopping")
                return 0
            except Interrupted:
                say("interrupted during start-up; stopping")
                return 0
            except DevstackError as exc:
                say(f"error: {exc}; stopping everything")
                return 1
            finally:
                await children.stop_all()
    except DevstackError as exc:  # raised before anything was started
        say(f"error: {exc}")
        return 1


def main() -> None:
    sys.exit(asyncio.run(run(DevstackConfig.from_env())))


if __name__ == "__main__":
    main()
