"""Where jobctl connects and as whom: the same JOBS_* variables as the worker's client
side (target, bearer token, TLS files), overridable by options.

The channel itself comes from the shared client channel factory (``shared.grpc_client``),
so jobctl authenticates exactly as the worker does.
"""

from __future__ import annotations

import getpass
from pathlib import Path

import grpc
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.grpc_client import ChannelConfig, aio_channel


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
    # Set: TLS, verifying the server with this CA bundle (PEM).
    tls_ca_file: Path | None = None
    # Both set: mutual TLS with this client certificate and key (PEM).
    tls_client_cert_file: Path | None = None
    tls_client_key_file: Path | None = None
    # The user jobs are created for and read as (JobService calls name one).
    user_id: str = Field(default_factory=_login, min_length=1)


def open_channel(settings: ClientSettings) -> grpc.aio.Channel:
    """An aio channel to job_service through the shared channel factory: TLS when a CA
    file is set, the bearer token on every call when one is set. ClientConfigError (a
    ValueError) names an incomplete or unreadable TLS setting."""
    return aio_channel(
        ChannelConfig(
            target=settings.job_service_target,
            token=settings.auth_token.get_secret_value() if settings.auth_token else "",
            ca_file=str(settings.tls_ca_file or ""),
            client_cert_file=str(settings.tls_client_cert_file or ""),
            client_key_file=str(settings.tls_client_key_file or ""),
        )
    )
