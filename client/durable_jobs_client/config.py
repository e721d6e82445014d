"""Where the job service listens and how to prove who we are: from arguments, else the same
``JOBS_*`` variables every client of the engine reads (JOBS_JOB_SERVICE_TARGET,
JOBS_AUTH_TOKEN or JOBS_AUTH_TOKEN_FILE, JOBS_TLS_CA_FILE, JOBS_TLS_CLIENT_CERT_FILE,
JOBS_TLS_CLIENT_KEY_FILE)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from durable_jobs_client.errors import ConfigError

DEFAULT_TARGET = "localhost:50051"
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
CHANNEL_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.lb_policy_name", "round_robin"),
)
Options = Sequence[tuple[str, Any]]


@dataclass(frozen=True)
class ClientConfig:
    target: str = DEFAULT_TARGET
    token: str = ""
    ca_file: str = ""
    client_cert_file: str = ""
    client_key_file: str = ""

    @classmethod
    def resolve(
        cls,
        target: str | None = None,
        token: str | None = None,
        ca_file: str | None = None,
        client_cert_file: str | None = None,
        client_key_file: str | None = None,
        env: Mapping[str, str] = os.environ,
    ) -> ClientConfig:
        """Each argument given wins over its variable."""
        return cls(
            target=target or env.get("JOBS_JOB_SERVICE_TARGET", "") or DEFAULT_TARGET,
            token=(token if token is not None else token_from_env(env)).strip(),
            ca_file=ca_file if ca_file is not None else env.get("JOBS_TLS_CA_FILE", ""),
            client_cert_file=client_cert_file
            if client_cert_file is not None
            else env.get("JOBS_TLS_CLIENT_CERT_FILE", ""),
            client_key_file=client_key_file
            if client_key_file is not None
            else env.get("JOBS_TLS_CLIENT_KEY_FILE", ""),
        )

    def credentials(self) -> grpc.ChannelCredentials | None:
        """TLS (mutual when a client certificate is given), or None for plaintext."""
        if bool(self.client_cert_file) != bool(self.client_key_file):
            raise ConfigError(
                "JOBS_TLS_CLIENT_CERT_FILE and JOBS_TLS_CLIENT_KEY_FILE must be set together"
            )
        if not self.ca_file:
            if self.client_cert_file:
                raise ConfigError("mutual TLS needs JOBS_TLS_CA_FILE as well")
            return None
        return grpc.ssl_channel_credentials(
            root_certificates=_read("JOBS_TLS_CA_FILE", self.ca_file),
            private_key=_read("JOBS_TLS_CLIENT_KEY_FILE", self.client_key_file)
            if self.client_key_file
            else None,
            certificate_chain=_read("JOBS_TLS_CLIENT_CERT_FILE", self.client_cert_file)
            if self.client_cert_file
            else None,
        )

    def metadata(self) -> tuple[tuple[str, str], ...]:
        """Sent with every call: the token travels as metadata, so it works on plaintext
        channels too (gRPC's call credentials refuse those)."""
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()

    def sync_channel(self, options: Options = ()) -> grpc.Channel:
        """A blocking channel; ``options`` (gRPC channel arguments) on top of the
        client's own (``CHANNEL_OPTIONS``)."""
        credentials = self.credentials()
        if credentials is None:
            return grpc.insecure_channel(self.target, options=_merged(options))
        return grpc.secure_channel(self.target, credentials, options=_merged(options))

    def aio_channel(self, options: Options = ()) -> grpc.aio.Channel:
        """An asyncio channel; ``options`` as for ``sync_channel``."""
        credentials = self.credentials()
        if credentials is None:
            return grpc.aio.insecure_channel(self.target, options=_merged(options))
        return grpc.aio.secure_channel(self.target, credentials, options=_merged(options))


def _merged(options: Options) -> list[tuple[str, Any]]:
    return list({**dict(CHANNEL_OPTIONS), **dict(options)}.items())


def token_from_env(env: Mapping[str, str] = os.environ) -> str:
    """JOBS_AUTH_TOKEN, or the token in the file JOBS_AUTH_TOKEN_FILE names (a file keeps
    it out of ``ps`` and the shell's history). ConfigError when both are set, or the file
    cannot be read or holds no token."""
    token, path = env.get("JOBS_AUTH_TOKEN", ""), env.get("JOBS_AUTH_TOKEN_FILE", "")
    if token and path:
        raise ConfigError("set JOBS_AUTH_TOKEN or JOBS_AUTH_TOKEN_FILE, not both")
    return read_token_file("JOBS_AUTH_TOKEN_FILE", path) if path else token


def read_token_file(source: str, path: str) -> str:
    """The bearer token in ``path`` (surrounding whitespace and the final newline dropped);
    ``source`` names the setting in the ConfigError."""
    token = _read(source, path).decode(errors="replace").strip()
    if not token:
        raise ConfigError(f"{source}: {path} holds no token")
    return token


def _read(variable: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise ConfigError(f"{variable}: cannot read {path}: {error.strerror}") from None
