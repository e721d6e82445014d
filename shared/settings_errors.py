"""A readable, secret-free account of invalid JOBS_* settings.

pydantic's own message quotes the input values, which may hold a database password; this
names the variables and the problems only.
"""

from __future__ import annotations

from pydantic import ValidationError


def describe(error: ValidationError, prefix: str = "JOBS_") -> str:
    lines = []
    for item in error.errors(include_input=False, include_url=False):
        name = "_".join(str(part) for part in item["loc"]).upper()
        lines.append(f"  {prefix}{name}: {item['msg']}" if name else f"  {item['msg']}")
    return "\n".join(lines)
