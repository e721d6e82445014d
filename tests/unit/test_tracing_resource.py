"""The traces' service name: the process's own (job_service, worker_service) unless the
standard OpenTelemetry variables name one (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES),
as a deployment that runs several engines side by side sets it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from shared import tracing


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    spans = InMemorySpanExporter()
    yield spans
    tracing.shutdown()


def service_of(exporter: InMemorySpanExporter) -> str:
    tracing.configure("worker_service", exporter)
    with tracing.span("probe"):
        pass
    [span] = exporter.get_finished_spans()
    return str(span.resource.attributes["service.name"])


def test_the_process_names_itself_by_default(
    monkeypatch: pytest.MonkeyPatch, exporter: InMemorySpanExporter
) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    assert service_of(exporter) == "worker_service"


def test_otel_service_name_wins(
    monkeypatch: pytest.MonkeyPatch, exporter: InMemorySpanExporter
) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "jobs-workers-eu")
    assert service_of(exporter) == "jobs-workers-eu"


def test_otel_resource_attributes_name_the_service_too(
    monkeypatch: pytest.MonkeyPatch, exporter: InMemorySpanExporter
) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=jobs-b,deployment.environment=x")
    assert service_of(exporter) == "jobs-b"
