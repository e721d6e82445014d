"""Where jobctl connects and as whom: the same JOBS_* variables as every client of the
engine (target, bearer token, TLS files), overridable by options, and the user jobctl acts
for.

The channel, the token on every call, TLS, deadlines, retries and the errors are the
client library's (``durable_jobs_client``): jobctl is one of its callers.
"""

from __future__ import annotations

import getpass
from pathlib import Path

from durable_jobs_client import AsyncJobsClient, RetryPolicy
from durable_jobs_client.config import read_token_file
from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def _login() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "jobctl"


class ClientSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="JOBS_", extra="ignore")

    # host:port of job_service.
    job_service_target: str = "127.0.0.1:50051"
    # Sent as `authorization: Bearer <token>` on every call.
    auth_token: SecretStr | None = None
    # Or the file that holds it: kept out of `ps` and the shell's history.
    auth_token_file: Path | None = None
    # Set: TLS, verifying the server with this CA bundle (PEM).
    tls_ca_file: Path | None = None
    # Both set: mutual TLS with this client certificate and key (PEM).
    tls_client_cert_file: Path | None = None
    tls_client_key_file: Path | None = None
    # The user jobs are created for and read as (JobService calls name one).
    user_id: str = Field(default_factory=_login, min_length=1)

    @model_validator(mode="after")
    def _one_token_source(self) -> ClientSettings:
        if self.auth_token and self.auth_token_file:
            raise ValueError("set JOBS_AUTH_TOKEN or JOBS_AUTH_TOKEN_FILE, not both")
        return self

    def token(self) -> str:
        """The bearer token, read from its file when one is named (ConfigError when the
        file cannot be read or holds none)."""
        if self.auth_token_file:
            return read_token_file("JOBS_AUTH_TOKEN_FILE", str(self.auth_token_file))
        return self.auth_token.get_secret_value() if self.auth_token else ""


def open_client(
    settings: ClientSettings, timeout: float, retry: RetryPolicy | None = None
) -> AsyncJobsClient:
    """The client library's asyncio client for these settings, ``timeout`` seconds the
    deadline of each call. ConfigError (a ValueError) names an incomplete or unreadable
    TLS setting."""
    return AsyncJobsClient(
        settings.job_service_target,
        user_id=settings.user_id,
        token=settings.token(),
        ca_file=str(settings.tls_ca_file or ""),
        client_cert_file=str(settings.tls_client_cert_file or ""),
        client_key_file=str(settings.tls_client_key_file or ""),
        timeout=timeout,
        retry=retry,
    )
