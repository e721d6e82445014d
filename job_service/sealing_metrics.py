"""Metrics of payload encryption (issue 44; conventions in ``shared.metrics``): keys made,
payloads that did not open, and what a KEK rotation and the backfill of plaintext rows
have left to do. Beside ``job_service.metrics``, which is near its length ceiling."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

DATA_KEYS_CREATED = Counter(
    "jobs_data_keys_created_total", "Users' data keys made (a user's first sealed payload)."
)
PAYLOADS_UNREADABLE = Counter(
    "jobs_payloads_unreadable_total",
    "Sealed payloads that did not open (their user's key destroyed, their KEK not "
    "configured, or moved or tampered with).",
)
DATA_KEYS_TO_REWRAP = Gauge(
    "jobs_data_keys_to_rewrap",
    "Users' data keys still wrapped under a KEK other than the current one (a rotation's "
    "backlog; 0 once the old KEK may be retired).",
)
DATA_KEYS_REWRAPPED = Counter(
    "jobs_data_keys_rewrapped_total", "Users' data keys re-wrapped under the current KEK."
)
PLAINTEXT_PAYLOADS_LEFT = Gauge(
    "jobs_plaintext_payloads_left",
    "Rows written before encryption whose payload is still plaintext, by table (the "
    "backfill's backlog).",
    ["table"],
)
PAYLOADS_BACKFILLED = Counter(
    "jobs_payloads_backfilled_total", "Plaintext rows sealed by the backfill, by table.", ["table"]
)


def data_key_created() -> None:
    DATA_KEYS_CREATED.inc()


def payload_unreadable() -> None:
    PAYLOADS_UNREADABLE.inc()
