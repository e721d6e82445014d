"""Prometheus metrics: the HTTP endpoint both services serve, and what they share.

Conventions (all metrics of this product): the prefix ``jobs_``, base units in the name
(``_seconds``, ``_tokens``, ``_usd``), counters end in ``_total``, and labels are bounded
sets only (job type, queue, status, outcome, provider, model) — never a job or user id.

Recording is a counter increment or a histogram observation (a lock and a few additions):
nothing on a request path queries anything. Gauges that need the database (queue depth,
outbox backlog) are refreshed by a background loop in job_service
(``job_service.metrics``); gauges of in-process state read it only when scraped.

The metric objects live on the process-wide default registry, so that any module records
with a plain import; the service metric modules are ``job_service.metrics`` and
``worker_service.metrics``. Providers record their calls with ``record_provider_call``.
"""

from __future__ import annotations

import platform
import threading
from collections.abc import Callable, Iterable
from importlib import metadata
from typing import Any, TypeVar
from wsgiref.simple_server import WSGIServer, make_server

from prometheus_client import Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer, _SilentHandler
from prometheus_client.metrics import MetricWrapperBase

from shared.startup import StartupError

# Seconds: from a few milliseconds (a lock) up to the longest job timeout (600 s).
DURATION_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
)

M = TypeVar("M", bound=MetricWrapperBase)
_children: dict[tuple[int, tuple[str, ...]], MetricWrapperBase] = {}


def child(metric: M, *values: str) -> M:
    """``metric.labels(*values)``, remembered: the client library validates and locks on
    every ``labels`` call, which the hot path should not pay per job. Label sets are small
    and fixed, so the cache stays small."""
    key = (id(metric), values)
    found = _children.get(key)
    if found is None:
        found = _children[key] = metric.labels(*values)
    return found  # type: ignore[return-value]


PROVIDER_REQUEST_SECONDS = Histogram(
    "jobs_provider_request_duration_seconds",
    "Model provider requests by provider, model and outcome (ok or an error code).",
    ["provider", "model", "outcome"],
    buckets=DURATION_BUCKETS,
)
PROVIDER_TOKENS = Counter(
    "jobs_provider_tokens_total",
    "Tokens used by model provider requests; kind is input or output.",
    ["provider", "model", "kind"],
)
PROVIDER_COST = Counter(
    "jobs_provider_cost_usd_total",
    "Cost of model provider requests in US dollars, as the provider's price table says.",
    ["provider", "model"],
)


BUILD_INFO = Gauge(
    "jobs_build_info",
    "Always 1: the service, the package version and the Python version of this process.",
    ["service", "version", "python"],
)


def publish_build_info(service: str) -> None:
    """Sets ``jobs_build_info`` for ``service`` (one series per process and service)."""
    try:
        version = metadata.version("durable-jobs")
    except metadata.PackageNotFoundError:
        version = "unknown"
    child(BUILD_INFO, service, version, platform.python_version()).set(1)


def record_provider_call(
    *,
    provider: str,
    model: str,
    duration_s: float,
    input_tokens: int = 0,
    output_tokens: int = 0,
    cost_usd: float = 0.0,
    error_code: str | None = None,
) -> None:
    """Records one provider request (call it once per HTTP request, retries included).
    ``error_code`` is the product's code for a failed request (``PROVIDER_TIMEOUT`` ...),
    None for a successful one."""
    outcome = error_code or "ok"
    child(PROVIDER_REQUEST_SECONDS, provider, model, outcome).observe(max(0.0, duration_s))
    if input_tokens > 0:
        child(PROVIDER_TOKENS, provider, model, "input").inc(input_tokens)
    if output_tokens > 0:
        child(PROVIDER_TOKENS, provider, model, "output").inc(output_tokens)
    if cost_usd > 0:
        child(PROVIDER_COST, provider, model).inc(cost_usd)


# A health check: True when healthy. Called on the HTTP server's thread, so it must only
# read state (a flag, a timestamp), never touch the event loop.
HealthCheck = Callable[[], bool]
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _with_health(metrics_app: WsgiApp, checks: dict[str, HealthCheck]) -> WsgiApp:
    """``metrics_app`` plus one plain-text endpoint per check: 200 ``ok`` or 503."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        check = checks.get(environ.get("PATH_INFO", ""))
        if check is None:
            return metrics_app(environ, start_response)
        try:
            healthy = check()
        except Exception:
            healthy = False
        status = "200 OK" if healthy else "503 Service Unavailable"
        start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
        return [b"ok\n" if healthy else b"unhealthy\n"]

    return app


class MetricsServer:
    """``/metrics`` over HTTP on a daemon thread (prometheus-client's WSGI server), plus
    the health endpoints in ``health`` (path → check), e.g. the worker's ``/livez``.

    ``port`` None means disabled (nothing listens); 0 binds an ephemeral port, readable as
    ``.port`` after ``start()``. ``stop()`` is idempotent."""

    def __init__(
        self, host: str, port: int | None, health: dict[str, HealthCheck] | None = None
    ) -> None:
        self._host = host
        self._requested = port
        self._health = dict(health or {})
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    def start(self) -> int | None:
        if self._requested is None or self._server is not None:
            return self.port
        try:
            self._server = make_server(
                self._host,
                self._requested,
                _with_health(make_wsgi_app(), self._health),
                ThreadingWSGIServer,
                handler_class=_SilentHandler,
            )
        except OSError as error:
            where = f"{self._host}:{self._requested}"
            raise StartupError(f"cannot serve metrics on {where}: {error.strerror}") from None
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics-http", daemon=True
        )
        self._thread.start()
        self.port = int(self._server.server_port)
        return self.port

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None


DISABLED = frozenset({"", "off", "none", "disabled", "false"})


def port_or_disabled(value: object) -> object:
    """A settings validator (mode "before") for metrics ports: empty or ``off`` means
    no endpoint (None); anything else is validated as a port number."""
    if value is None or (isinstance(value, str) and value.strip().lower() in DISABLED):
        return None
    return value
