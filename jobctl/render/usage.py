"""What provider calls cost: a row per group and a total row."""

from __future__ import annotations

from typing import Any

from jobctl.render.text import table


def usage_table(usage: Any) -> str:
    """DAY USER JOB_TYPE PROVIDER MODEL CALLS FAILED IN OUT COST, a row per group and a
    TOTAL row; a column not grouped by shows ``*`` (all of them)."""

    def cell(value: str | None) -> str:
        return "*" if value is None else (value or "-")

    def counts(t: Any) -> list[str]:
        return [
            str(t.calls),
            str(t.failed_calls),
            str(t.input_tokens),
            str(t.output_tokens),
            f"{t.cost_usd:.6f}",
        ]

    rows = [
        [
            cell(g.day.isoformat() if g.day else None),
            cell(g.user_id),
            cell(g.job_type),
            cell(g.provider),
            cell(g.model),
            *counts(g.totals),
        ]
        for g in usage.groups
    ]
    rows.append(["TOTAL", "", "", "", "", *counts(usage.totals)])
    return table(
        ["DAY", "USER", "JOB_TYPE", "PROVIDER", "MODEL", "CALLS", "FAILED", "IN", "OUT", "COST"],
        rows,
    )
