"""The session guards every job_service connection starts with, and what a session ended
by one answers (docs/architecture.md, "Frozen and cut-off replicas")."""

from __future__ import annotations

import socket

import asyncpg
import pytest

from job_service.adapters.grpc.errors import _translate
from job_service.adapters.postgres.pool import SessionGuards
from job_service.databases import session_guards
from job_service.settings import JobServiceSettings
from shared.errors import PlatformUnavailable
from shared.tcp_keepalive import TcpKeepalive

KEEPALIVE = TcpKeepalive(idle_s=5, interval_s=2, count=3)


def test_the_server_is_told_every_timeout_in_milliseconds_and_the_keepalives() -> None:
    guards = SessionGuards(3.0, 10.0, 0.25, KEEPALIVE)

    assert guards.server_settings() == {
        "idle_in_transaction_session_timeout": "3000",
        "lock_timeout": "10000",
        "statement_timeout": "250",
        "tcp_keepalives_idle": "5",
        "tcp_keepalives_interval": "2",
        "tcp_keepalives_count": "3",
        "tcp_user_timeout": "11000",
    }


def test_a_migration_may_wait_for_its_locks_but_not_hold_them_idle() -> None:
    guarded = SessionGuards(3.0, 10.0, 5.0, KEEPALIVE).for_migrations()

    assert "lock_timeout" not in guarded and "statement_timeout" not in guarded
    assert guarded["idle_in_transaction_session_timeout"] == "3000"


def test_the_defaults_release_a_frozen_replicas_rows_within_seconds() -> None:
    settings = JobServiceSettings(database_url="postgresql://unused")
    hot, rest = session_guards(settings), session_guards(settings, hot=False)

    assert hot.idle_in_transaction_s == rest.idle_in_transaction_s == 3.0
    assert (hot.statement_timeout_s, rest.statement_timeout_s) == (5.0, 0.0)
    # under the default lease minus a heartbeat: a live worker's heartbeat gets through
    assert hot.idle_in_transaction_s < settings.lease_ttl_s - settings.heartbeat_interval_s
    assert hot.keepalive.dead_after_s == 11


def test_keepalives_are_set_on_a_tcp_socket() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        KEEPALIVE.apply(sock)

        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 5
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL) == 2
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT) == 3
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 11_000


def test_a_unix_socket_is_left_alone() -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        KEEPALIVE.apply(sock)

        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 0


@pytest.mark.parametrize(
    "error",
    [
        asyncpg.exceptions.IdleInTransactionSessionTimeoutError,
        asyncpg.exceptions.LockNotAvailableError,
        asyncpg.exceptions.QueryCanceledError,
    ],
)
def test_a_call_cut_short_by_a_guard_is_platform_unavailable(error: type[Exception]) -> None:
    assert isinstance(_translate(error("guarded"), "/jobs.v1.X/Y"), PlatformUnavailable)
