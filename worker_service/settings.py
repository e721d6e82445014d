"""worker_service configuration, from JOBS_* environment variables, validated at start-up."""

from __future__ import annotations

import os
import socket

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.grpc_client import ChannelConfig, token_setting
from shared.logs import LogFormat
from shared.metrics import port_or_disabled
from shared.registry import Registry
from shared.startup import NATS_MAX_OUTSTANDING_PINGS, NATS_PING_INTERVAL_S, NatsSecurity


def _default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class WorkerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="JOBS_", extra="ignore")

    # One URL, or several comma-separated (the servers of a NATS cluster).
    nats_url: str = "nats://127.0.0.1:4222"
    # The client pings NATS this often, and reconnects after this many go unanswered: a
    # cut-off server is left within seconds (docs/architecture.md, "Frozen and cut-off
    # replicas").
    nats_ping_interval_s: float = Field(default=NATS_PING_INTERVAL_S, gt=0, le=600)
    nats_max_outstanding_pings: int = Field(default=NATS_MAX_OUTSTANDING_PINGS, ge=1, le=100)
    # NATS with TLS and a user (docs/configuration.md, "NATS security"): the server's
    # certificate checked against this CA bundle (PEM); the user and the file holding its
    # password (a mounted Secret; never the password itself in a variable), both or neither.
    nats_tls_ca_file: str = ""
    nats_user: str = ""
    nats_password_file: str = ""
    # host:port of the job service's gRPC server (ExecutorService).
    job_service_target: str = "127.0.0.1:50051"
    # Bearer token with the `worker` role, and TLS towards the job service (CA set → TLS;
    # client certificate and key set → mutual TLS). See shared.grpc_client.
    auth_token: str = ""
    # Or the file that holds it (a mounted Secret): never both.
    auth_token_file: str = ""
    tls_ca_file: str = ""
    tls_client_cert_file: str = ""
    tls_client_key_file: str = ""
    # Shown as the job's `locked_by`; unique per live process. A process restarted under it
    # (a container in its pod) ends its predecessor's leases at once (ADR 0003).
    worker_id: str = Field(default_factory=_default_worker_id, min_length=1)
    # Comma-separated queue names; empty means every queue the registry's job types use.
    worker_queues: str = ""
    # Jobs run at once per queue, overriding the job types' concurrency: "ai-batch=4,...".
    worker_slots: str = ""
    # On SIGTERM, in-flight jobs get this long to finish before they are handed back.
    worker_shutdown_grace_s: float = Field(default=20.0, ge=0)
    # At most this many dispatch messages per fetch (never more than the free slots).
    worker_fetch_batch: int = Field(default=32, ge=1, le=1024)
    # Report free slots on the session (the job service pushes grants for them): ADR 0009.
    # Off: every job comes from a dispatch message and a LockJobs call.
    worker_grants_ahead: bool = True
    # With grants ahead, also ask for the next jobs with each batch of results while the
    # queue is backed up (lock on submit). Off by default: a backlog drains faster with it,
    # but the dispatch messages of the jobs it takes are left over, and until they are
    # fetched and dropped they slow the jobs that follow (ADR 0009, measured).
    worker_lock_on_submit: bool = False
    # How long one fetch waits for messages; also bounds how long stopping intake takes.
    worker_fetch_timeout_s: float = Field(default=1.0, gt=0, le=30)
    log_level: str = "INFO"
    # Streamed model text reaches the job's watchers at most this often (the first piece at
    # once). 0 relays every delta as it comes.
    partial_output_interval_ms: int = Field(default=50, ge=0, le=10_000)
    # false: provider calls do not stream and no partial output is relayed.
    partial_output_enabled: bool = True

    # Operability (issue 6): see the configuration reference, docs/configuration.md.
    # /metrics on this port; empty or "off" disables it, 0 binds an ephemeral port.
    worker_metrics_port: int | None = Field(default=9465, ge=0, le=65535)
    worker_metrics_host: str = "0.0.0.0"
    # NATS and job_service must be reachable within this at start-up, or the process exits.
    startup_timeout_s: float = Field(default=30.0, gt=0)
    log_format: LogFormat = "json"

    _port = field_validator("worker_metrics_port", mode="before")(port_or_disabled)

    def nats_security(self) -> NatsSecurity:
        return NatsSecurity(self.nats_tls_ca_file, self.nats_user, self.nats_password_file)

    @model_validator(mode="after")
    def _nats_security_is_complete(self) -> WorkerSettings:
        self.nats_security().check()
        return self

    def channel_config(self) -> ChannelConfig:
        return ChannelConfig(
            target=self.job_service_target,
            token=token_setting(self.auth_token, self.auth_token_file),
            ca_file=self.tls_ca_file,
            client_cert_file=self.tls_client_cert_file,
            client_key_file=self.tls_client_key_file,
        )

    def queue_slots(self, registry: Registry) -> dict[str, int]:
        """The queues to consume and the concurrent jobs each may run; ValueError when a
        configured queue has no job type here."""
        slots = registry.queue_concurrency()
        for pair in filter(None, (p.strip() for p in self.worker_slots.split(","))):
            queue, _, count = pair.partition("=")
            if queue.strip() not in slots or not count.strip().isdigit() or int(count) < 1:
                raise ValueError(
                    f"JOBS_WORKER_SLOTS: expected queue=count for a known queue, got {pair!r}"
                )
            slots[queue.strip()] = int(count)
        wanted = [q.strip() for q in self.worker_queues.split(",") if q.strip()]
        if not wanted:
            return slots
        unknown = sorted(set(wanted) - slots.keys())
        if unknown:
            raise ValueError(
                f"JOBS_WORKER_QUEUES names queues no registered job type uses: {unknown}"
            )
        return {queue: slots[queue] for queue in dict.fromkeys(wanted)}
