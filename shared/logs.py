"""Logging for both services: one JSON object per line, with the job, attempt, worker and
trace it concerns.

The ids come from context variables, so a log call anywhere under ``job_context(...)``
(including tasks started there: asyncio copies the context) carries them without passing
them along. What is logged is ids, codes and outcomes only: job input, output and keys are
never passed to a logger (a test runs a job whose input and output carry a marker and
checks that no log line does).

``JOBS_LOG_FORMAT=text`` gives the classic one-line format for a terminal.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, Literal

from shared import tracing

LogFormat = Literal["json", "text"]

_job_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("job_id", default=None)
_attempt: contextvars.ContextVar[int | None] = contextvars.ContextVar("attempt", default=None)
_worker_id: str | None = None

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# Libraries' loggers held above INFO: alembic announces each of its plugins at INFO
# whenever it is imported (seven lines per process, nothing an operator acts on).
QUIET_LOGGERS = {"alembic.runtime.plugins": logging.WARNING}


class job_context:  # a context manager named like the function it stands for
    """Log records made inside (and in tasks started inside) name this job and attempt."""

    __slots__ = ("_attempt", "_job_id", "_tokens")

    def __init__(self, job_id: str, attempt: int | None = None) -> None:
        self._job_id = job_id
        self._attempt = attempt

    def __enter__(self) -> None:
        self._tokens = (_job_id.set(self._job_id), _attempt.set(self._attempt))

    def __exit__(self, *exc: object) -> None:
        job_token, attempt_token = self._tokens
        _attempt.reset(attempt_token)
        _job_id.reset(job_token)


def set_worker_id(worker_id: str | None) -> None:
    """This process's worker id, on every record it logs."""
    global _worker_id
    _worker_id = worker_id


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", "job_id", "attempt", "worker_id", "trace_id",
    "span_id", "exc"}``; absent ids are left out."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        job_id = _job_id.get()
        if job_id is not None:
            entry["job_id"] = job_id
            attempt = _attempt.get()
            if attempt is not None:
                entry["attempt"] = attempt
        if _worker_id is not None:
            entry["worker_id"] = _worker_id
        ids = tracing.current_ids()
        if ids is not None:
            entry["trace_id"], entry["span_id"] = ids
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def configure(level: str, fmt: LogFormat = "json", stream: Any = None) -> None:
    """Replace the root logger's handlers with one that writes ``fmt`` to stderr."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for name, quiet in QUIET_LOGGERS.items():
        logging.getLogger(name).setLevel(quiet)
