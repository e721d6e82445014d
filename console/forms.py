"""What a request says: its urlencoded form, and the query parameters the pages read, each
checked (a ``next`` that leaves the site, an oversized body, a page size over the cap)."""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import parse_qs

from starlette.requests import Request

MAX_FORM_BYTES = 64 * 1024
MAX_PAGE_SIZE = 500
DEFAULT_PAGE_SIZE = 50


def safe_next(target: str | None) -> str:
    """Only a path on this site (no scheme, no ``//host``): no open redirect."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return "/"


def parse_time(value: str) -> datetime | None:
    """A ``datetime-local`` field (or ISO 8601), read as UTC when it names no zone."""
    if not value:
        return None
    at = datetime.fromisoformat(value)
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def page_size_of(request: Request) -> int:
    size = request.query_params.get("page_size", "")
    return min(int(size), MAX_PAGE_SIZE) if size.isdigit() and int(size) else DEFAULT_PAGE_SIZE


def first(form: dict[str, list[str]], name: str) -> str | None:
    values = form.get(name)
    return values[0] if values else None


async def read_form(request: Request) -> dict[str, list[str]]:
    """An urlencoded form body (the only kind the console's forms send)."""
    if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        return {}
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return {}
    return parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
