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

import threading
from typing import TypeVar
from wsgiref.simple_server import WSGIServer

from prometheus_client import Counter, Histogram, start_http_server
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


class MetricsServer:
    """``/metrics`` over HTTP on a daemon thread (prometheus-client's WSGI server).

    ``port`` None means disabled (nothing listens); 0 binds an ephemeral port, readable as
    ``.port`` after ``start()``. ``stop()`` is idempotent."""

    def __init__(self, host: str, port: int | None) -> None:
        self._host = host
        self._requested = port
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    def start(self) -> int | None:
        if self._requested is None or self._server is not None:
            return self.port
        try:
            self._server, self._thread = start_http_server(self._requested, addr=self._host)
        except OSError as error:
            where = f"{self._host}:{self._requested}"
            raise StartupError(f"cannot serve metrics on {where}: {error.strerror}") from None
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
