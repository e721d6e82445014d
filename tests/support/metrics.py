"""Scraping a ``/metrics`` endpoint the way Prometheus does, for assertions on figures."""

from __future__ import annotations

import asyncio
import re
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]

_METRICS_PORT = re.compile(r"metrics on port (\d+)")


def _get(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body: bytes = response.read()
    return body.decode()


async def scrape(port: int) -> Samples:
    """Every sample of the endpoint, keyed by (name, labels)."""
    text = await asyncio.to_thread(_get, port)
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    """The sample's value, 0 when absent (a labelled series appears on first use)."""
    return samples.get((name, frozenset(labels.items())), 0.0)


def metrics_port_in(log: str) -> int | None:
    """The port a service announced in its start-up log line."""
    found = _METRICS_PORT.search(log)
    return int(found.group(1)) if found else None
