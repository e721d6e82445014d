"""The usage page's chart: cost per UTC day as bars, drawn here as SVG markup (no script,
no library; the page's CSP allows neither inline styles nor remote code, so the drawing
uses presentation attributes and the stylesheet's classes).

``bars(...)`` lays the chart out; the template writes the SVG. Every day of the range has a
slot, a day without usage an empty one, so the x axis is time at an even pace. The y axis
runs from 0 to a round figure (``nice_ceiling``) with four gridlines, labelled with
``money``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import ROUND_HALF_UP, Decimal

WIDTH, HEIGHT = 860, 240
LEFT, RIGHT, TOP, BOTTOM = 70, 10, 12, 36
GRIDLINES = 4
# At most this many x labels, whatever the range (a label every n days).
MAX_X_LABELS = 12


def money(usd: Decimal) -> str:
    """Dollars as an operator reads them: cents from a dollar up (``$1,234.57``), four
    significant digits below (``$0.001234``, ``$0.5000`` → ``$0.50``), ``$0`` for nothing."""
    if not usd:
        return "$0"
    sign = "-" if usd < 0 else ""
    usd = abs(usd)
    if usd >= 1:
        return f"{sign}${usd.quantize(Decimal('0.01'), ROUND_HALF_UP):,}"
    exponent = usd.adjusted()  # -1 for 0.5, -3 for 0.001234
    places = max(2, 3 - exponent)
    shown = usd.quantize(Decimal(1).scaleb(-places), ROUND_HALF_UP)
    text = f"{shown:f}".rstrip("0")
    whole, _, cents = text.partition(".")
    return f"{sign}${whole}.{cents.ljust(2, '0')}"


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times 10^n that is >= ``value`` (1 for nothing)."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value * (1 - 1e-12):
            return float(step * power)
    return 10.0 * power  # pragma: no cover - the loop always returns


@dataclass(frozen=True)
class Bar:
    day: date
    x: float
    y: float
    width: float
    height: float
    cost: Decimal
    calls: int


@dataclass(frozen=True)
class Tick:
    y: float
    label: str


@dataclass(frozen=True)
class Label:
    x: float
    text: str


@dataclass(frozen=True)
class Chart:
    width: int
    height: int
    left: int
    baseline: float
    right_edge: float
    bars: list[Bar]
    ticks: list[Tick]
    labels: list[Label]


def bars(per_day: dict[date, tuple[Decimal, int]], start: date, end: date) -> Chart:
    """The chart of cost per day over [start, end): ``per_day`` day -> (cost, calls)."""
    days = [start + timedelta(days=i) for i in range((end - start).days)]
    plot_w = WIDTH - LEFT - RIGHT
    plot_h = HEIGHT - TOP - BOTTOM
    baseline = TOP + plot_h
    top = nice_ceiling(max((float(c) for c, _ in per_day.values()), default=0.0))
    slot = plot_w / max(len(days), 1)
    gap = min(2.0, slot * 0.2)
    drawn = []
    for i, day in enumerate(days):
        cost, calls = per_day.get(day, (Decimal(0), 0))
        h = plot_h * float(cost) / top
        drawn.append(Bar(day, LEFT + i * slot + gap / 2, baseline - h, slot - gap, h, cost, calls))
    ticks = [
        Tick(baseline - plot_h * k / GRIDLINES, money(Decimal(str(top * k / GRIDLINES))))
        for k in range(GRIDLINES + 1)
    ]
    every = max(1, math.ceil(len(days) / MAX_X_LABELS))
    labels = [
        Label(LEFT + (i + 0.5) * slot, day.strftime("%m-%d"))
        for i, day in enumerate(days)
        if i % every == 0
    ]
    return Chart(WIDTH, HEIGHT, LEFT, baseline, WIDTH - RIGHT, drawn, ticks, labels)
