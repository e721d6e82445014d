"""The one way the engine's own processes open a channel to job_service: the worker's
executor client, the benchmark and the tests (jobctl, the console and outside callers use
the client library, ``durable_jobs_client``, which reads the same variables).

``ChannelConfig.from_env(target)`` reads the client side of the auth/TLS contract:

* ``JOBS_AUTH_TOKEN`` — sent on every call as ``authorization: Bearer <token>``; or
  ``JOBS_AUTH_TOKEN_FILE``, the file that holds it (kept out of ``ps`` and manifests);
* ``JOBS_TLS_CA_FILE`` — set: TLS, the server's certificate checked against this CA;
* ``JOBS_TLS_CLIENT_CERT_FILE`` / ``JOBS_TLS_CLIENT_KEY_FILE`` — both set: mutual TLS.

``aio_channel(config)`` / ``sync_channel(config)`` open the channel. The token travels as
call metadata, so it works on plaintext channels too (gRPC's
own call credentials refuse to leave a channel that is not encrypted): by a thin channel
wrapper for asyncio, by an interceptor for blocking channels.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from shared.lifetime import Lifetime

# Inputs and outputs travel as Structs; allow more than gRPC's default 4 MiB both ways.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
DEFAULT_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    # One connection per address the target resolves to, calls spread over them: with
    # `dns:///job-service-headless:50051` (one A record per job_service pod) a worker's calls
    # spread over every replica; a target with one address behaves as before.
    ("grpc.lb_policy_name", "round_robin"),
    # Each channel its own connections: a new channel to a restarted job_service connects
    # at once, instead of inheriting the process-wide subchannel of the old one, still in
    # its reconnect backoff (round_robin fails calls fast while every subchannel is down).
    ("grpc.use_local_subchannel_pool", 1),
)

Options = Sequence[tuple[str, Any]]


class ClientConfigError(ValueError):
    """The client-side auth/TLS settings are incomplete or unreadable; the message names the
    variable."""


def token_setting(token: str, token_file: str) -> str:
    """The bearer token: ``token`` (JOBS_AUTH_TOKEN), or the contents of ``token_file``
    (JOBS_AUTH_TOKEN_FILE) without surrounding whitespace. ClientConfigError when both are
    set, or the file cannot be read or holds no token."""
    if token and token_file:
        raise ClientConfigError("set JOBS_AUTH_TOKEN or JOBS_AUTH_TOKEN_FILE, not both")
    if not token_file:
        return token.strip()
    try:
        from_file = Path(token_file).read_text(errors="replace").strip()
    except OSError as error:
        raise ClientConfigError(
            f"JOBS_AUTH_TOKEN_FILE: cannot read {token_file}: {error.strerror}"
        ) from None
    if not from_file:
        raise ClientConfigError(f"JOBS_AUTH_TOKEN_FILE: {token_file} holds no token")
    return from_file


@dataclass(frozen=True)
class ChannelConfig:
    """Where job_service listens and how to prove who we are to it."""

    target: str
    token: str = ""
    ca_file: str = ""
    client_cert_file: str = ""
    client_key_file: str = ""

    @classmethod
    def from_env(cls, target: str, env: Mapping[str, str] = os.environ) -> ChannelConfig:
        return cls(
            target=target,
            token=token_setting(
                env.get("JOBS_AUTH_TOKEN", ""), env.get("JOBS_AUTH_TOKEN_FILE", "")
            ),
            ca_file=env.get("JOBS_TLS_CA_FILE", ""),
            client_cert_file=env.get("JOBS_TLS_CLIENT_CERT_FILE", ""),
            client_key_file=env.get("JOBS_TLS_CLIENT_KEY_FILE", ""),
        )

    @property
    def tls(self) -> bool:
        return bool(self.ca_file)

    def credentials(self) -> grpc.ChannelCredentials | None:
        """TLS credentials, or None for a plaintext channel."""
        if bool(self.client_cert_file) != bool(self.client_key_file):
            raise ClientConfigError(
                "JOBS_TLS_CLIENT_CERT_FILE and JOBS_TLS_CLIENT_KEY_FILE must be set together"
            )
        if not self.ca_file:
            if self.client_cert_file:
                raise ClientConfigError("mutual TLS needs JOBS_TLS_CA_FILE as well")
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
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()


def _read(variable: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise ClientConfigError(f"{variable}: cannot read {path}: {error.strerror}") from None


def _merged(options: Options) -> list[tuple[str, Any]]:
    chosen = dict(DEFAULT_OPTIONS)
    chosen.update(dict(options))
    return list(chosen.items())


def aio_channel(config: ChannelConfig, options: Options = ()) -> grpc.aio.Channel:
    """An asyncio channel; every call on it carries the token (when there is one)."""
    credentials = config.credentials()
    if credentials is None:
        channel = grpc.aio.insecure_channel(config.target, options=_merged(options))
    else:
        channel = grpc.aio.secure_channel(config.target, credentials, options=_merged(options))
    return _TokenChannel(channel, config.metadata()) if config.token else channel


def sync_channel(config: ChannelConfig, options: Options = ()) -> grpc.Channel:
    """A blocking channel (for command-line tools); every call carries the token."""
    credentials = config.credentials()
    if credentials is None:
        channel = grpc.insecure_channel(config.target, options=_merged(options))
    else:
        channel = grpc.secure_channel(config.target, credentials, options=_merged(options))
    if not config.token:
        return channel
    return grpc.intercept_channel(channel, _SyncBearer(config.metadata()))


def _with_metadata(existing: Any, extra: tuple[tuple[str, str], ...]) -> list[tuple[str, Any]]:
    return [*(existing or ()), *extra]


class _TokenCall:
    """A multicallable that adds the token to each call's metadata: one Python call of
    overhead, where a grpc.aio interceptor costs a task and ~60 µs of CPU per call."""

    def __init__(self, call: Any, metadata: tuple[tuple[str, str], ...]) -> None:
        self._call = call
        self._metadata = metadata

    # ``request`` is optional for calls that stream requests (written with ``call.write``)
    def __call__(self, request: Any = None, *, metadata: Any = None, **kwargs: Any) -> Any:
        return self._call(request, metadata=_with_metadata(metadata, self._metadata), **kwargs)


class _TokenChannel(Lifetime, grpc.aio.Channel):  # type: ignore[misc]
    """An asyncio channel whose every call carries the bearer token."""

    def __init__(self, channel: grpc.aio.Channel, metadata: tuple[tuple[str, str], ...]) -> None:
        self._channel = channel
        self._metadata = metadata

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _TokenCall(self._channel.unary_unary(method, *args, **kwargs), self._metadata)

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _TokenCall(self._channel.unary_stream(method, *args, **kwargs), self._metadata)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _TokenCall(self._channel.stream_unary(method, *args, **kwargs), self._metadata)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _TokenCall(self._channel.stream_stream(method, *args, **kwargs), self._metadata)

    async def stop(self) -> None:
        await self._channel.close()

    async def close(self, grace: float | None = None) -> None:
        await self._channel.close(grace)

    def get_state(self, try_to_connect: bool = False) -> grpc.ChannelConnectivity:
        return self._channel.get_state(try_to_connect)

    async def wait_for_state_change(self, last_observed_state: grpc.ChannelConnectivity) -> None:
        await self._channel.wait_for_state_change(last_observed_state)

    async def channel_ready(self) -> None:
        await self._channel.channel_ready()


@dataclass(frozen=True)
class _SyncDetails(grpc.ClientCallDetails):  # type: ignore[misc]
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: bool | None
    compression: Any


class _SyncBearer(
    grpc.UnaryUnaryClientInterceptor,  # type: ignore[misc]
    grpc.UnaryStreamClientInterceptor,  # type: ignore[misc]
    grpc.StreamUnaryClientInterceptor,  # type: ignore[misc]
    grpc.StreamStreamClientInterceptor,  # type: ignore[misc]
):
    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self._metadata = metadata

    def _details(self, details: grpc.ClientCallDetails) -> _SyncDetails:
        return _SyncDetails(
            method=details.method,
            timeout=details.timeout,
            metadata=_with_metadata(details.metadata, self._metadata),
            credentials=details.credentials,
            wait_for_ready=getattr(details, "wait_for_ready", None),
            compression=getattr(details, "compression", None),
        )

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: grpc.ClientCallDetails, request: Any
    ) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: grpc.ClientCallDetails, request: Any
    ) -> Any:
        return continuation(self._details(details), request)

    def intercept_stream_unary(
        self,
        continuation: Callable[..., Any],
        details: grpc.ClientCallDetails,
        requests: Iterator[Any],
    ) -> Any:
        return continuation(self._details(details), requests)

    def intercept_stream_stream(
        self,
        continuation: Callable[..., Any],
        details: grpc.ClientCallDetails,
        requests: Iterator[Any],
    ) -> Any:
        return continuation(self._details(details), requests)
