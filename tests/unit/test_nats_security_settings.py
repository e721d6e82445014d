"""JOBS_NATS_TLS_CA_FILE, JOBS_NATS_USER and JOBS_NATS_PASSWORD_FILE: both services read
them alike, refuse incomplete or unreadable ones at start-up by the variable's name, and
never hold the password where a repr or a log line would show it."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError
from pydantic_settings import BaseSettings

from job_service.settings import JobServiceSettings
from shared.settings_errors import describe
from shared.startup import NatsSecurity
from tests.support.certs import make_certs
from worker_service.settings import WorkerSettings

PASSWORD = "correct-horse-battery"


def job_service_settings() -> BaseSettings:
    return JobServiceSettings(database_url="postgresql://jobs@db/jobs")


SERVICES: dict[str, Callable[[], BaseSettings]] = {
    "job_service": job_service_settings,
    "worker": WorkerSettings,
}


def security_of(settings: BaseSettings) -> NatsSecurity:
    assert isinstance(settings, JobServiceSettings | WorkerSettings)
    return settings.nats_security()


def refusal(make: Callable[[], BaseSettings]) -> str:
    with pytest.raises(ValidationError) as raised:
        make()
    return describe(raised.value)


@pytest.fixture(params=sorted(SERVICES))
def make(request: pytest.FixtureRequest) -> Callable[[], BaseSettings]:
    return SERVICES[request.param]


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "password"
    path.write_text(PASSWORD + "\n")  # a Secret's file often ends in a newline
    return path


def test_no_nats_security_by_default(make: Callable[[], BaseSettings]) -> None:
    assert security_of(make()).connect_options() == {}


def test_a_user_without_a_password_file_is_refused(
    make: Callable[[], BaseSettings], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JOBS_NATS_USER", "jobs-worker")

    assert "JOBS_NATS_USER and JOBS_NATS_PASSWORD_FILE must be set together" in refusal(make)


def test_a_password_file_without_a_user_is_refused(
    make: Callable[[], BaseSettings], monkeypatch: pytest.MonkeyPatch, password_file: Path
) -> None:
    monkeypatch.setenv("JOBS_NATS_PASSWORD_FILE", str(password_file))

    assert "JOBS_NATS_USER and JOBS_NATS_PASSWORD_FILE must be set together" in refusal(make)


def test_a_missing_password_file_is_named(
    make: Callable[[], BaseSettings], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("JOBS_NATS_USER", "jobs-worker")
    monkeypatch.setenv("JOBS_NATS_PASSWORD_FILE", str(tmp_path / "absent"))

    message = refusal(make)

    assert f"JOBS_NATS_PASSWORD_FILE: cannot read {tmp_path / 'absent'}" in message


def test_an_empty_password_file_is_refused(
    make: Callable[[], BaseSettings], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "password").write_text("\n")
    monkeypatch.setenv("JOBS_NATS_USER", "jobs-worker")
    monkeypatch.setenv("JOBS_NATS_PASSWORD_FILE", str(tmp_path / "password"))

    assert "JOBS_NATS_PASSWORD_FILE" in refusal(make)
    assert "is empty" in refusal(make)


def test_a_ca_file_that_holds_no_certificate_is_refused(
    make: Callable[[], BaseSettings], monkeypatch: pytest.MonkeyPatch, password_file: Path
) -> None:
    monkeypatch.setenv("JOBS_NATS_TLS_CA_FILE", str(password_file))

    assert "JOBS_NATS_TLS_CA_FILE: cannot load" in refusal(make)


def test_tls_and_credentials_become_the_clients_options(
    make: Callable[[], BaseSettings],
    monkeypatch: pytest.MonkeyPatch,
    password_file: Path,
    tmp_path: Path,
) -> None:
    certs = make_certs(tmp_path / "certs")
    monkeypatch.setenv("JOBS_NATS_TLS_CA_FILE", str(certs.ca))
    monkeypatch.setenv("JOBS_NATS_USER", "jobs-worker")
    monkeypatch.setenv("JOBS_NATS_PASSWORD_FILE", str(password_file))

    options = security_of(make()).connect_options()

    assert options["user"] == "jobs-worker"
    assert options["password"] == PASSWORD
    context = options["tls"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname


def test_the_password_is_in_no_repr(
    make: Callable[[], BaseSettings], monkeypatch: pytest.MonkeyPatch, password_file: Path
) -> None:
    monkeypatch.setenv("JOBS_NATS_USER", "jobs-worker")
    monkeypatch.setenv("JOBS_NATS_PASSWORD_FILE", str(password_file))

    settings = make()

    assert PASSWORD not in repr(settings)
    assert PASSWORD not in repr(security_of(settings))


def test_a_refusal_never_quotes_the_password(
    make: Callable[[], BaseSettings], monkeypatch: pytest.MonkeyPatch, password_file: Path
) -> None:
    """The password file given as the CA: the complaint names the file, not its contents."""
    monkeypatch.setenv("JOBS_NATS_TLS_CA_FILE", str(password_file))

    assert PASSWORD not in refusal(make)
