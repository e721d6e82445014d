"""job_service configuration, from JOBS_* environment variables, validated at start-up."""

from __future__ import annotations

from decimal import Decimal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from job_service.domain.attempts import DEFAULT_TIMEOUT_GRACE_S
from job_service.domain.claims import DEFAULT_FAIR_QUANTUM_S, DEFAULT_PRIORITY_STEP_S
from job_service.domain.credentials import Keyring, parse_master_key
from job_service.domain.queues import parse_limits
from job_service.domain.rate_limits import (
    DEFAULT_CALL_SLACK_S,
    DEFAULT_RATE_RECOVERY_S,
    RateLimit,
    parse_rate_limits,
)
from shared.logs import LogFormat
from shared.metrics import port_or_disabled
from shared.startup import (
    NATS_MAX_OUTSTANDING_PINGS,
    NATS_PING_INTERVAL_S,
    NatsPings,
    NatsSecurity,
)
from shared.tcp_keepalive import TcpKeepalive

# A session its process does not reopen within this is taken for a crash (issue 43): the
# workers' channels retry a replica within about a second, and their fetch wait is 1 s.
DEFAULT_RECONNECT_GRACE_S = 1.0


class JobServiceSettings(BaseSettings):
    # hide_input_in_errors: a complaint about a URL or a master key never quotes it
    model_config = SettingsConfigDict(env_prefix="JOBS_", extra="ignore", hide_input_in_errors=True)

    # libpq-style URL: postgresql://user:pass@host:port/db (or ?host=/socket/dir).
    database_url: str
    # One URL, or several comma-separated (the servers of a NATS cluster).
    nats_url: str = "nats://127.0.0.1:4222"
    # Servers each JetStream stream is stored on: 1 for a single server, 3 for a cluster
    # (R3 survives the loss of one server; the consumers inherit it).
    nats_stream_replicas: int = Field(default=1, ge=1, le=5)
    grpc_host: str = "127.0.0.1"
    grpc_port: int = Field(default=50051, ge=0, le=65535)
    # Identifies this replica in outbox claims and logs.
    instance_id: str = ""
    # Replica processes on this host, all serving grpc_port (SO_REUSEPORT): this one and
    # N-1 children it starts (job_service/processes.py; metrics on metrics_port + index).
    service_processes: int = Field(default=1, ge=1, le=64)
    db_pool_size: int = Field(default=8, ge=1, le=200)
    # A replica that stops talking (SIGSTOP, a long pause, a network cut) lets go of what
    # it holds within seconds (docs/architecture.md, "Frozen and cut-off replicas"):
    # PostgreSQL ends a session left idle inside a transaction this long, rolling it back
    # (0: never). No transaction of the engine awaits anything but its own statements.
    db_idle_in_transaction_timeout_s: float = Field(default=3.0, ge=0)
    # A statement waiting longer than this for a lock fails (0: it waits as long as it takes).
    db_lock_timeout_s: float = Field(default=10.0, ge=0)
    # A statement of the hot path (creates, claims, results, leases, the outbox) or of a
    # schedule firing round running (or waiting for a lock) longer than this is cancelled,
    # and its locks released: these take milliseconds (0: no limit).
    db_statement_timeout_s: float = Field(default=5.0, ge=0)
    # The same for every other statement (reads, reports, admin walks; 0: no limit).
    db_rest_statement_timeout_s: float = Field(default=0.0, ge=0)
    # TCP keepalives on both ends of every PostgreSQL connection: a silent peer is dropped
    # after idle + interval x count seconds (11 s by default), unacknowledged data as well.
    db_tcp_keepalives_idle_s: int = Field(default=5, ge=1, le=3600)
    db_tcp_keepalives_interval_s: int = Field(default=2, ge=1, le=600)
    db_tcp_keepalives_count: int = Field(default=3, ge=1, le=100)
    # NATS: the client pings this often, and reconnects after this many go unanswered.
    nats_ping_interval_s: float = Field(default=NATS_PING_INTERVAL_S, gt=0, le=600)
    nats_max_outstanding_pings: int = Field(default=NATS_MAX_OUTSTANDING_PINGS, ge=1, le=100)
    # NATS with TLS and a user (docs/configuration.md, "NATS security"): the server's
    # certificate checked against this CA bundle (PEM); the user and the file holding its
    # password (a mounted Secret; never the password itself in a variable), both or neither.
    nats_tls_ca_file: str = ""
    nats_user: str = ""
    nats_password_file: str = ""

    # Leases: a dead worker's job is running again within lease_ttl + reaper_interval
    # + the first retry backoff (well under 10 s with these defaults).
    lease_ttl_s: float = Field(default=5.0, gt=0)
    heartbeat_interval_s: float = Field(default=1.0, gt=0)
    reaper_interval_s: float = Field(default=1.0, gt=0)
    # How often a replica ends the jobs whose deadline passed (CreateJob's deadline): a job
    # ends within about this long of its deadline.
    deadline_interval_s: float = Field(default=0.25, gt=0)
    # How often a replica reads the job types declared at other replicas (a request naming
    # a type it does not know reads them at once).
    job_types_refresh_interval_s: float = Field(default=1.0, gt=0)
    # An attempt still running a quarter of its definition's timeout past it, but at most
    # this long, is ended by the reaper as a TIMEOUT, whatever its heartbeats say (the
    # worker times out by itself first; this bounds a hung one; issue 43).
    attempt_timeout_grace_s: float = Field(default=DEFAULT_TIMEOUT_GRACE_S, ge=0, le=3600)
    # Worker sessions (docs/adr/0003-worker-sessions.md): an older worker (its session names
    # no incarnation) whose session stream ends without a goodbye and that opens no new one
    # (on any replica) within this grace has its leases ended at once (WORKER_DISCONNECTED),
    # not after the lease. A current worker is judged by its process: only a new process
    # under its worker id ends its leases early.
    worker_disconnect_grace_s: float = Field(default=0.5, gt=0, le=60)
    # For a current worker: a session that ends without a goodbye and that its process
    # does not reopen (on any replica) within this grace has its leases ended
    # (WORKER_DISCONNECTED), so a killed worker's jobs run again within about this instead
    # of the lease (issue 43: on by default, for direct connections). The price: a live
    # worker cut off from every replica for longer loses its jobs (they run again; it stops
    # them when it reconnects). 0: an interruption ends nothing, the lease decides (ADR
    # 0003; for workers behind a proxy that restarts). Left at its default with a lease
    # not longer than it, the lease decides.
    worker_reconnect_grace_s: float = Field(default=DEFAULT_RECONNECT_GRACE_S, ge=0, le=60)
    # How often a worker pings on its session (told to it when the session opens).
    worker_session_ping_interval_s: float = Field(default=10.0, gt=0, le=3600)
    # Grant jobs to workers that report free slots down their sessions as the jobs become
    # due (ADR 0009); off: every grant goes through a dispatch message and LockJobs.
    push_grants: bool = True

    # Outbox dispatcher.
    outbox_batch_size: int = Field(default=256, ge=1, le=10_000)
    # Fallback poll; new rows written by this replica wake the dispatcher at once.
    outbox_poll_interval_s: float = Field(default=0.5, gt=0)
    # A claim older than this (its dispatcher crashed) is taken over.
    outbox_claim_ttl_s: float = Field(default=30.0, gt=0)
    # Publish failures before a row is dead-lettered.
    outbox_max_attempts: int = Field(default=10, ge=1)
    # Published rows are kept this long (for diagnosis), then deleted.
    outbox_retention_s: float = Field(default=24 * 3600.0, gt=0)
    outbox_prune_interval_s: float = Field(default=60.0, gt=0)
    # How often snapshots past their expiry (finished jobs only) are deleted.
    snapshot_clean_interval_s: float = Field(default=300.0, gt=0)

    # Retention (seed 003 §6): finished jobs are deleted this long after they finished,
    # unless their definition sets its own retention_s; 0 keeps them forever. Their usage
    # survives as daily aggregates per user and model, kept usage_retention_s (0: forever).
    job_retention_s: float = Field(default=7_776_000, ge=0)  # 90 days
    usage_retention_s: float = Field(default=0.0, ge=0)
    retention_interval_s: float = Field(default=60.0, gt=0)
    # Jobs one retention statement deletes at most (one short transaction each).
    retention_batch: int = Field(default=500, ge=1, le=10_000)

    # Dispatch reconciler: a waiting job (queued, or retrying and due) whose dispatch left
    # the outbox this long ago and that no worker has locked since gets a new dispatch
    # message, checked every reconcile_interval_s. A lost message is re-sent within
    # reconcile_after_s + reconcile_interval_s; a job waiting longer than reconcile_after_s
    # behind a backlog gets a harmless duplicate (LockJobs grants a job once).
    reconcile_after_s: float = Field(default=30.0, gt=0)
    reconcile_interval_s: float = Field(default=5.0, gt=0)

    # Auth: bearer tokens → principal and roles, as JSON
    # {"<token>": {"principal": "...", "roles": ["client"|"admin"|"worker", ...]}},
    # inline or in a file. A server without any token refuses to start.
    auth_tokens: str = ""
    auth_tokens_file: str = ""
    # TLS: cert + key → TLS; a client CA as well → mutual TLS (client certificates required).
    tls_cert_file: str = ""
    tls_key_file: str = ""
    tls_client_ca_file: str = ""

    # Per-user limits on CreateJob (0 turns a limit off): unfinished jobs at once, and jobs
    # created per UTC day. Soft under concurrency: creates racing each other may pass a
    # limit by the number in flight.
    max_active_jobs_per_user: int = Field(default=100, ge=0)
    daily_job_quota_per_user: int = Field(default=10_000, ge=0)
    # What a user's provider calls may cost per UTC day (US dollars, the usage rows' cost)
    # before CreateJob refuses (QUOTA_EXCEEDED, quota "daily_cost_budget"); 0 is off. Soft
    # as well: jobs already created may spend past it.
    daily_cost_budget_usd_per_user: Decimal = Field(default=Decimal(0), ge=0)
    # Signals one job may hold (SendSignal past it: RESOURCE_EXHAUSTED, reason
    # SIGNAL_LIMIT_REACHED). Exact under concurrency: checked by the statement that stores.
    max_signals_per_job: int = Field(default=1000, ge=1, le=1_000_000)
    # Signs ListJobs page tokens; unset: the secret stored in the database by migration
    # 0004, shared by every replica.
    page_token_secret: str = ""
    # WatchJob: how often the jobs being watched are looked at (one query per replica).
    watch_poll_interval_s: float = Field(default=0.25, gt=0, le=10)
    # Users' own provider keys are sealed under this (32 bytes, URL-safe base64). Unset:
    # CredentialService refuses to store keys, and start-up refuses if keys are stored.
    credentials_master_key: SecretStr | None = None
    # Comma-separated former master keys: they still open what they sealed (rotation).
    credentials_retired_master_keys: SecretStr = SecretStr("")
    # The key-encryption key that wraps users' data keys (issue 44's payload encryption;
    # job_service.adapters.local_kek): 32 bytes, URL-safe base64, or a file holding it
    # (the variable wins); former KEKs comma-separated, still unwrapping (rotation).
    data_kek: SecretStr | None = None
    data_kek_file: str = ""
    data_retired_keks: SecretStr = SecretStr("")

    # Scheduling (docs/architecture.md, "Scheduling"). One priority level is worth this
    # much waiting: a job is overtaken only by work created less than (priority difference
    # x step) after it.
    sched_priority_step_s: float = Field(default=DEFAULT_PRIORITY_STEP_S, ge=0)
    # A fairness key (user) with a backlog takes one place in line per quantum.
    sched_fair_quantum_s: float = Field(default=DEFAULT_FAIR_QUANTUM_S, ge=0)
    # Fleet-wide running limits per queue: "ai-batch=20,ai-interactive=50" (none by default).
    queue_concurrency: str = ""
    # Fleet-wide provider rate limits per model tier, as JSON:
    # {"primary": {"requests_per_minute": 600, "tokens_per_minute": 200000,
    #              "burst_requests": 10, "burst_tokens": 20000}}  (bursts optional)
    rate_limits: str = ""
    # After a 429 halves a tier's rate, the rate is back in full after this long.
    rate_limit_recovery_s: float = Field(default=DEFAULT_RATE_RECOVERY_S, gt=0)
    # A provider call must start within this long of asking for its permit (a later one
    # asks again); a tier's burst is smaller by rate x this, at least one call.
    rate_limit_call_slack_s: float = Field(default=DEFAULT_CALL_SLACK_S, gt=0, le=5)

    # Seconds to let in-flight RPCs finish on SIGTERM.
    shutdown_grace_s: float = Field(default=10.0, ge=0)
    log_level: str = "INFO"

    # Operability (issue 6): see docs/configuration.md.
    # /metrics on this port; empty or "off" disables it, 0 binds an ephemeral port.
    metrics_port: int | None = Field(default=9464, ge=0, le=65535)
    metrics_host: str = "0.0.0.0"
    # How often queue depth and the outbox backlog are read from the database.
    metrics_collect_interval_s: float = Field(default=5.0, gt=0)
    # On SIGTERM: health says NOT_SERVING at once; new RPCs are refused after this delay,
    # so that load balancers and clients see the change first.
    shutdown_delay_s: float = Field(default=1.0, ge=0)
    # PostgreSQL and NATS must be reachable within this at start-up, or the process exits.
    startup_timeout_s: float = Field(default=30.0, gt=0)
    log_format: LogFormat = "json"

    _port = field_validator("metrics_port", mode="before")(port_or_disabled)

    @field_validator("queue_concurrency")
    @classmethod
    def _queue_limits_parse(cls, value: str) -> str:
        parse_limits(value)
        return value

    @field_validator("rate_limits")
    @classmethod
    def _rate_limits_parse(cls, value: str) -> str:
        parse_rate_limits(value)
        return value

    def db_keepalive(self) -> TcpKeepalive:
        return TcpKeepalive(
            self.db_tcp_keepalives_idle_s,
            self.db_tcp_keepalives_interval_s,
            self.db_tcp_keepalives_count,
        )

    def nats_pings(self) -> NatsPings:
        return {
            "ping_interval_s": self.nats_ping_interval_s,
            "max_outstanding_pings": self.nats_max_outstanding_pings,
        }

    def nats_security(self) -> NatsSecurity:
        return NatsSecurity(self.nats_tls_ca_file, self.nats_user, self.nats_password_file)

    @model_validator(mode="after")
    def _nats_security_is_complete(self) -> JobServiceSettings:
        self.nats_security().check()
        return self

    def queue_limits(self) -> dict[str, int]:
        return parse_limits(self.queue_concurrency)

    def tier_rate_limits(self) -> dict[str, RateLimit]:
        return parse_rate_limits(self.rate_limits)

    def session_settings(self) -> dict[str, str]:
        """What every database session of this replica is told (the scheduling SQL reads
        them with current_setting)."""
        return {
            "jobs.priority_step_s": repr(self.sched_priority_step_s),
            "jobs.fair_quantum_s": repr(self.sched_fair_quantum_s),
            "jobs.limited_queues": ",".join(sorted(self.queue_limits())),
            "jobs.attempt_timeout_grace_s": repr(self.attempt_timeout_grace_s),
        }

    # MasterKeyError is a ValueError: the variable is named, the value never quoted.
    @field_validator("credentials_master_key")
    @classmethod
    def _master_key_parses(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and value.get_secret_value():
            parse_master_key(value.get_secret_value())
        return value

    @field_validator("data_kek", "data_retired_keks")
    @classmethod
    def _keks_parse(cls, value: SecretStr | None) -> SecretStr | None:
        for key in (value.get_secret_value() if value is not None else "").split(","):
            if key.strip():
                parse_master_key(key)
        return value

    @field_validator("credentials_retired_master_keys")
    @classmethod
    def _retired_keys_parse(cls, value: SecretStr) -> SecretStr:
        for key in value.get_secret_value().split(","):
            if key.strip():
                parse_master_key(key)
        return value

    def keyring(self) -> Keyring | None:
        """The master keys, or None when user credentials are not configured."""
        if (
            self.credentials_master_key is None
            or not self.credentials_master_key.get_secret_value()
        ):
            return None
        return Keyring.from_text(
            self.credentials_master_key.get_secret_value(),
            self.credentials_retired_master_keys.get_secret_value(),
        )

    @model_validator(mode="after")
    def _heartbeats_fit_in_a_lease(self) -> JobServiceSettings:
        # A lease must survive one lost heartbeat, or a healthy worker loses its job.
        if self.heartbeat_interval_s * 2 > self.lease_ttl_s:
            raise ValueError("JOBS_HEARTBEAT_INTERVAL_S must be at most half of JOBS_LEASE_TTL_S")
        return self

    @model_validator(mode="after")
    def _reconnect_grace_is_under_the_lease(self) -> JobServiceSettings:
        # past the lease, the reaper ends a vanished worker's jobs first: the setting would
        # only cost live workers their jobs
        if 0 < self.lease_ttl_s <= self.worker_reconnect_grace_s:
            if "worker_reconnect_grace_s" not in self.model_fields_set:
                self.worker_reconnect_grace_s = 0.0  # the default under a short lease: off
                return self
            raise ValueError(
                "JOBS_WORKER_RECONNECT_GRACE_S must be under JOBS_LEASE_TTL_S (the lease "
                "already ends a vanished worker's jobs by then)"
            )
        return self

    @model_validator(mode="after")
    def _processes_share_one_port(self) -> JobServiceSettings:
        # an ephemeral port would be a different one per process: no client finds them all
        if self.service_processes > 1 and self.grpc_port == 0:
            raise ValueError("JOBS_SERVICE_PROCESSES above 1 needs a fixed JOBS_GRPC_PORT")
        last = (self.metrics_port or 0) + self.service_processes - 1
        if self.metrics_port and last > 65535:
            raise ValueError(
                f"JOBS_METRICS_PORT + JOBS_SERVICE_PROCESSES - 1 = {last}: above 65535"
            )
        return self

    @model_validator(mode="after")
    def _tls_files_come_in_pairs(self) -> JobServiceSettings:
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ValueError("JOBS_TLS_CERT_FILE and JOBS_TLS_KEY_FILE must be set together")
        if self.tls_client_ca_file and not self.tls_cert_file:
            raise ValueError("JOBS_TLS_CLIENT_CA_FILE needs JOBS_TLS_CERT_FILE and _KEY_FILE")
        return self
