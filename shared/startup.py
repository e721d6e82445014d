"""Start-up against dependencies that may not be up yet (containers start in any order):
retry until a deadline, then fail with one clear sentence instead of a traceback or an
endless wait. After start-up, each client reconnects on its own (NATS forever; the database
pool per checkout). Also how the NATS client proves itself and checks the server
(``NatsSecurity``)."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, TypeVar

import nats
from nats.aio.client import Client as NATS

log = logging.getLogger(__name__)

T = TypeVar("T")

RETRY_INTERVAL_S = 0.5
# A NATS connection pings this often and is given up after this many unanswered pings
# (then reconnected): a server cut off without a FIN is left within about 15 s, not the
# client's default 2 minutes x 2.
NATS_PING_INTERVAL_S = 5.0
NATS_MAX_OUTSTANDING_PINGS = 3


class NatsPings(TypedDict):
    """``connect_nats``'s liveness options, as the settings give them."""

    ping_interval_s: float
    max_outstanding_pings: int


class StartupError(Exception):
    """The process cannot start; the message says why in one sentence."""


class DependencyUnavailable(StartupError):
    """A dependency stayed unreachable for the whole start-up timeout."""


async def within_startup(
    name: str,
    timeout_s: float,
    attempt: Callable[[], Awaitable[T]],
    *,
    retry_interval_s: float = RETRY_INTERVAL_S,
) -> T:
    """``attempt()`` until it succeeds, for at most ``timeout_s`` in all."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    last: BaseException | None = None
    announced = False
    while True:
        task = asyncio.ensure_future(attempt())
        await asyncio.wait({task}, timeout=max(0.0, deadline - loop.time()))
        if task.done():
            if task.cancelled():
                raise asyncio.CancelledError
            last = task.exception()
            if last is None:
                return task.result()
        else:
            await _cancel(task)
        if loop.time() + retry_interval_s >= deadline:
            reason = f": {type(last).__name__}: {last}" if last is not None else ""
            raise DependencyUnavailable(f"{name} unreachable for {timeout_s:g}s{reason}")
        if not announced:
            log.warning("%s not reachable yet; retrying for up to %gs", name, timeout_s)
            announced = True
        await asyncio.sleep(retry_interval_s)


async def _cancel(task: asyncio.Future[Any]) -> None:
    # nats-py can swallow a cancellation while it tidies up a failed attempt: insist.
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=0.1)


@dataclass(frozen=True)
class NatsSecurity:
    """TLS and credentials towards NATS, as the settings give them (JOBS_NATS_TLS_CA_FILE,
    JOBS_NATS_USER, JOBS_NATS_PASSWORD_FILE). Only the password's file is held here: the
    password is read when connecting and never shows in a repr or a log line."""

    # Set: TLS, the server's certificate checked against this CA bundle (PEM) and the
    # host name of the URL it is reached by. Empty: TLS only for a tls:// URL (system CAs).
    tls_ca_file: str = ""
    # Both set or neither (the settings check it).
    user: str = ""
    password_file: str = ""

    def check(self) -> None:
        """ValueError naming the variable when the settings are incomplete or a file cannot
        be read or holds nothing, so that a wrong mount fails at start-up with the
        variable's name, not as NATS refusing connections for the whole start-up timeout."""
        if bool(self.user) != bool(self.password_file):
            raise ValueError("JOBS_NATS_USER and JOBS_NATS_PASSWORD_FILE must be set together")
        if self.tls_ca_file:
            try:
                ssl.create_default_context(cafile=self.tls_ca_file)
            except (OSError, ssl.SSLError) as error:
                raise ValueError(
                    f"JOBS_NATS_TLS_CA_FILE: cannot load {self.tls_ca_file}: {error}"
                ) from None
        if self.password_file:
            self.password()

    def password(self) -> str:
        """The password file's contents without surrounding whitespace (a Secret's file
        often ends in a newline)."""
        try:
            password = Path(self.password_file).read_text().strip()
        except OSError as error:
            raise ValueError(
                f"JOBS_NATS_PASSWORD_FILE: cannot read {self.password_file}: {error.strerror}"
            ) from None
        if not password:
            raise ValueError(f"JOBS_NATS_PASSWORD_FILE: {self.password_file} is empty")
        return password

    def connect_options(self) -> dict[str, Any]:
        """nats.connect's keyword arguments for this security."""
        options: dict[str, Any] = {}
        if self.tls_ca_file:
            options["tls"] = ssl.create_default_context(cafile=self.tls_ca_file)
        if self.user:
            options["user"] = self.user
            options["password"] = self.password()
        return options


NO_NATS_SECURITY = NatsSecurity()


async def connect_nats(
    url: str,
    name: str,
    *,
    security: NatsSecurity = NO_NATS_SECURITY,
    ping_interval_s: float = NATS_PING_INTERVAL_S,
    max_outstanding_pings: int = NATS_MAX_OUTSTANDING_PINGS,
    **options: Any,
) -> NATS:
    """A client that, once connected, reconnects forever (while NATS is away the outbox
    holds the rows and workers wait), and that notices a server gone silent after
    ``ping_interval_s`` x ``max_outstanding_pings``, with ``security``'s TLS and
    credentials (kept for every reconnection). The first connection is bounded by the
    caller."""
    options.setdefault("error_cb", _quiet_error)
    options |= security.connect_options()
    return await nats.connect(
        nats_servers(url),
        name=name,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.5,
        ping_interval=ping_interval_s,  # nats-py sleeps this long: a float will do
        max_outstanding_pings=max_outstanding_pings,
        **options,
    )


def nats_servers(url: str) -> list[str]:
    """``JOBS_NATS_URL`` as the client's server list: one URL, or a cluster's servers
    comma-separated (the client also learns the others from the cluster itself)."""
    return [u.strip() for u in url.split(",") if u.strip()]


async def _quiet_error(exc: Exception) -> None:
    log.warning("nats: %s: %s", type(exc).__name__, exc)
