"""Optional OpenTelemetry tracing: one trace per job, across both services and NATS.

Off unless configured: ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``..._TRACES_ENDPOINT``) set,
or ``JOBS_TRACING=true`` (then the exporter's own defaults and ``OTEL_*`` variables
apply). While off, every helper here returns at its first line: no span objects, no
context propagation, nothing on the hot path but a module-global check.

The path of one job's trace::

    the caller's span (a product service)         its `traceparent` gRPC metadata
    └ CreateJob (job_service)                     span context stored in the outbox row
      └ outbox publish (job_service dispatcher)   context sent in the NATS headers
          └ job (worker)                          from the dispatch message's headers
              ├ LockJob
              ├ execute  └ provider calls (any span opened inside nests here)
              └ SubmitResult | SubmitFailure

A caller that sends W3C ``traceparent`` (and ``tracestate``) metadata with CreateJob gets
the job's spans in its own trace (``incoming``); without it, CreateJob starts a new trace.
Contexts travel as W3C trace-context carriers (``{"traceparent": ...}``). This module
keeps its own tracer provider rather than the global one, so tests can install an
in-memory exporter and remove it again.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

if TYPE_CHECKING:  # the SDK is imported only when tracing is turned on
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

Carrier = dict[str, str]

_provider: TracerProvider | None = None
_tracer: trace.Tracer | None = None
_propagator = TraceContextTextMapPropagator()

SERVER, CLIENT, PRODUCER, CONSUMER, INTERNAL = (
    SpanKind.SERVER,
    SpanKind.CLIENT,
    SpanKind.PRODUCER,
    SpanKind.CONSUMER,
    SpanKind.INTERNAL,
)
TRUE = frozenset({"1", "true", "yes", "on"})


def wanted(env: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for tracing."""
    return bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or env.get("JOBS_TRACING", "").strip().lower() in TRUE
    )


def configure(service_name: str, exporter: SpanExporter | None = None) -> bool:
    """Turn tracing on when ``exporter`` is given (tests) or the environment asks for it
    (OTLP over gRPC). Returns whether tracing is on."""
    global _provider, _tracer
    if exporter is None and not wanted():
        return False
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    shutdown()
    provider = TracerProvider(resource=_resource(service_name))
    if exporter is None:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    else:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    _provider, _tracer = provider, provider.get_tracer("durable-jobs")
    return True


def _resource(service_name: str) -> Resource:
    """The process's resource: the standard variables' (OTEL_SERVICE_NAME,
    OTEL_RESOURCE_ATTRIBUTES), with ``service_name`` only where they name no service."""
    from opentelemetry.sdk.resources import Resource

    detected = Resource.create({})
    if str(detected.attributes.get("service.name", "")).startswith("unknown_service"):
        return Resource.create({"service.name": service_name})
    return detected


def shutdown() -> None:
    """Flush and turn tracing off. Idempotent."""
    global _provider, _tracer
    provider, _provider, _tracer = _provider, None, None
    if provider is not None:
        provider.shutdown()


def enabled() -> bool:
    return _tracer is not None


_OFF: contextlib.nullcontext[None] = contextlib.nullcontext()


def span(
    name: str,
    *,
    parent: Mapping[str, str] | None = None,
    kind: SpanKind = INTERNAL,
    attributes: Mapping[str, Any] | None = None,
) -> contextlib.AbstractContextManager[Span | None]:
    """A span around the block, current inside it; its parent is ``parent`` (a carrier
    from another process) or else the current span. Yields None while tracing is off (a
    shared no-op context: nothing is allocated per call)."""
    if _tracer is None:
        return _OFF
    return _span(name, parent, kind, attributes)


@contextlib.contextmanager
def _span(
    name: str,
    parent: Mapping[str, str] | None,
    kind: SpanKind,
    attributes: Mapping[str, Any] | None,
) -> Iterator[Span | None]:
    assert _tracer is not None
    context = _propagator.extract(dict(parent)) if parent else None
    with _tracer.start_as_current_span(
        name, context=context, kind=kind, attributes=dict(attributes or {})
    ) as current:
        yield current


def start_span(
    name: str,
    *,
    parent: Mapping[str, str] | None = None,
    kind: SpanKind = INTERNAL,
    attributes: Mapping[str, Any] | None = None,
) -> Span | None:
    """A span to end with ``end_span`` (for work that is not one block, e.g. a batch of
    concurrent publishes); not made current. None while tracing is off."""
    if _tracer is None:
        return None
    context = _propagator.extract(dict(parent)) if parent else None
    return _tracer.start_span(name, context=context, kind=kind, attributes=dict(attributes or {}))


def end_span(current: Span | None, error: BaseException | str | None = None) -> None:
    if current is None:
        return
    if error is not None:
        current.set_status(Status(StatusCode.ERROR, str(error)))
    current.end()


def carrier(of: Span | None = None) -> Carrier | None:
    """The W3C carrier of ``of`` (or of the current span) to send to another process;
    None while tracing is off or when there is no span."""
    if _tracer is None:
        return None
    ctx = trace.set_span_in_context(of) if of is not None else otel_context.get_current()
    found: Carrier = {}
    _propagator.inject(found, context=ctx)
    return found or None


_INCOMING = frozenset({"traceparent", "tracestate"})


def incoming(metadata: Iterable[tuple[str, str | bytes]] | None) -> Carrier | None:
    """The W3C carrier a caller sent as gRPC metadata (``traceparent``, ``tracestate``),
    to continue its trace; None while tracing is off or when it sent none."""
    if _tracer is None:
        return None
    found = {k: v for k, v in metadata or () if k in _INCOMING and isinstance(v, str)}
    return found if "traceparent" in found else None


def set_attribute(key: str, value: Any) -> None:
    """On the current span, if any."""
    if _tracer is not None:
        trace.get_current_span().set_attribute(key, value)


def current_ids() -> tuple[str, str] | None:
    """(trace id, span id) in hex of the current span, for log records."""
    if _tracer is None:
        return None
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"
