"""Settings are validated at start-up, and the complaint never echoes a secret."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from job_service.settings import JobServiceSettings
from shared.settings_errors import describe
from worker_service.settings import WorkerSettings

SECRET_URL = "postgresql://jobs:hunter2@db/jobs"


def test_a_heartbeat_slower_than_half_the_lease_is_refused() -> None:
    with pytest.raises(ValidationError) as raised:
        JobServiceSettings(database_url=SECRET_URL, lease_ttl_s=1.0, heartbeat_interval_s=0.8)

    assert "JOBS_HEARTBEAT_INTERVAL_S" in describe(raised.value)
    assert "hunter2" not in describe(raised.value)


def test_a_reconnect_grace_is_on_by_default_and_refused_at_the_lease(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JOBS_DATABASE_URL", SECRET_URL)
    # issue 43: a killed worker's jobs run again within about a second at the defaults
    assert JobServiceSettings().worker_reconnect_grace_s == 1.0  # type: ignore[call-arg]
    monkeypatch.setenv("JOBS_WORKER_RECONNECT_GRACE_S", "1.5")
    assert JobServiceSettings().worker_reconnect_grace_s == 1.5  # type: ignore[call-arg]
    monkeypatch.setenv("JOBS_WORKER_RECONNECT_GRACE_S", "0")  # off: the lease decides
    assert JobServiceSettings().worker_reconnect_grace_s == 0  # type: ignore[call-arg]

    monkeypatch.setenv("JOBS_WORKER_RECONNECT_GRACE_S", "5")
    with pytest.raises(ValidationError) as raised:
        JobServiceSettings()  # type: ignore[call-arg]
    assert "JOBS_WORKER_RECONNECT_GRACE_S must be under JOBS_LEASE_TTL_S" in describe(raised.value)


def test_the_default_reconnect_grace_yields_to_a_shorter_lease() -> None:
    settings = JobServiceSettings(
        database_url=SECRET_URL, lease_ttl_s=1.0, heartbeat_interval_s=0.5
    )
    assert settings.worker_reconnect_grace_s == 0


def test_bad_values_are_named_by_their_environment_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JOBS_DATABASE_URL", SECRET_URL)
    monkeypatch.setenv("JOBS_GRPC_PORT", "70000")

    with pytest.raises(ValidationError) as raised:
        JobServiceSettings()  # type: ignore[call-arg]

    message = describe(raised.value)
    assert "JOBS_GRPC_PORT" in message
    assert "hunter2" not in message


def test_the_worker_refuses_an_empty_fetch_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBS_WORKER_FETCH_BATCH", "0")

    with pytest.raises(ValidationError) as raised:
        WorkerSettings()

    assert describe(raised.value).startswith("  JOBS_WORKER_FETCH_BATCH:")
