"""A readable, secret-free account of invalid JOBS_* settings.

pydantic's own message quotes the input values, which may hold a database password; this
names the variables and the problems only.
"""

from __future__ import annotations

from pydantic import ValidationError

from shared.validation import validation_problems


def describe(error: ValidationError, prefix: str = "JOBS_") -> str:
    lines = []
    for problem in validation_problems(error):
        name = "_".join(problem.loc).upper()
        lines.append(f"  {prefix}{name}: {problem.message}" if name else f"  {problem.message}")
    return "\n".join(lines)
