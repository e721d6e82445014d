"""Where jobctl connects and as whom: the same JOBS_* variables as the worker's client
side (target, bearer token, TLS files), overridable by options.

``open_channel`` is the one seam to the transport. It is private to jobctl until the
shared client channel factory (``shared/grpc_client.py``, issue 4) lands; then this
function should delegate to it.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
)


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
    """An aio channel to job_service: TLS when a CA file is set, the bearer token on
    every call when one is set."""
    interceptors: list[Any] = []
    if settings.auth_token is not None:
        interceptors.append(_BearerToken(settings.auth_token.get_secret_value()))
    if settings.tls_ca_file is None:
        return grpc.aio.insecure_channel(
            settings.job_service_target, options=CHANNEL_OPTIONS, interceptors=interceptors
        )
    cert = settings.tls_client_cert_file
    key = settings.tls_client_key_file
    credentials = grpc.ssl_channel_credentials(
        root_certificates=settings.tls_ca_file.read_bytes(),
        private_key=key.read_bytes() if key else None,
        certificate_chain=cert.read_bytes() if cert else None,
    )
    return grpc.aio.secure_channel(
        settings.job_service_target,
        credentials,
        options=CHANNEL_OPTIONS,
        interceptors=interceptors,
    )


class _BearerToken(grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor):  # type: ignore[misc]
    """Adds the token to every call (plain metadata, so it also works without TLS, e.g.
    against a local dev stack)."""

    def __init__(self, token: str) -> None:
        self._header = ("authorization", f"Bearer {token}")

    def _with_token(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        metadata = list(details.metadata or ())
        metadata.append(self._header)
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(self._with_token(details), request)

    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(self._with_token(details), request)
