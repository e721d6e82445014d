"""What the console reads from its environment: ``JOBS_CONSOLE_*`` for itself, and the same
``JOBS_JOB_SERVICE_TARGET`` / ``JOBS_TLS_*`` variables as every other client of job_service.

The console has no token of its own: each request carries the admin token its user signed
in with (``console.sessions``).
"""

from __future__ import annotations

from pathlib import Path

from durable_jobs_client import ClientConfig
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class ConsoleSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="JOBS_", extra="ignore")

    # host:port of job_service.
    job_service_target: str = "127.0.0.1:50051"
    # Set: TLS to job_service, verifying it with this CA bundle (PEM).
    tls_ca_file: Path | None = None
    # Both set: mutual TLS to job_service with this client certificate and key (PEM).
    tls_client_cert_file: Path | None = None
    tls_client_key_file: Path | None = None

    # Where the console's HTTP server listens.
    console_host: str = "127.0.0.1"
    console_port: int = Field(default=8080, ge=0, le=65535)
    # Encrypts the session cookie. Unset: a random key per process (sessions end with it);
    # set it, the same on every replica, when more than one serves.
    console_secret_key: SecretStr | None = None
    # A session ends this long after sign-in, however active (job_service allows 24 h).
    console_session_ttl_s: float = Field(default=8 * 3600, ge=60, le=24 * 3600)
    # ... and this long after its last request (job_service allows 1 minute to 8 hours).
    console_idle_timeout_s: float = Field(default=30 * 60, ge=60, le=8 * 3600)
    # Both set: the console serves HTTPS itself (and its cookie is Secure).
    console_tls_cert_file: Path | None = None
    console_tls_key_file: Path | None = None
    # Mark the cookie Secure although the console serves plain HTTP (behind a TLS proxy).
    console_secure_cookies: bool = False
    # job_service's Prometheus endpoint: the overview's queue depths and outbox backlog.
    console_metrics_url: str = ""
    # Workers' Prometheus endpoints, comma-separated: the overview's slots in use.
    console_worker_metrics_urls: str = ""
    # How often live parts of a page are refreshed, in seconds.
    console_live_interval_s: float = Field(default=1.0, gt=0)

    def channel_config(self) -> ClientConfig:
        """The channel to job_service; no token: every call carries its session's."""
        return ClientConfig(
            target=self.job_service_target,
            ca_file=str(self.tls_ca_file or ""),
            client_cert_file=str(self.tls_client_cert_file or ""),
            client_key_file=str(self.tls_client_key_file or ""),
        )

    @property
    def serves_tls(self) -> bool:
        return bool(self.console_tls_cert_file and self.console_tls_key_file)

    @property
    def secure_cookies(self) -> bool:
        return self.serves_tls or self.console_secure_cookies

    def worker_metrics_urls(self) -> list[str]:
        """The overview's executor slots in use (workers themselves are named by
        AdminService.ListWorkers)."""
        return [u.strip() for u in self.console_worker_metrics_urls.split(",") if u.strip()]
