"""Cron slots, daylight saving and catch-up after an outage (job_service.domain.schedules):
pure, with zoneinfo's real rules."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from job_service.domain.schedules import (
    MAX_RECORDED_MISSES,
    CatchUpMode,
    Cron,
    JobTemplate,
    ScheduleSpec,
    plan,
    slot_key,
)
from shared.errors import InvalidInput

BERLIN = ZoneInfo("Europe/Berlin")
T0 = datetime(2026, 6, 1, 12, 0, 0, tzinfo=UTC)


def spec(cron: str = "* * * * * *", zone: str = "UTC", **fields: object) -> ScheduleSpec:
    return ScheduleSpec(cron=Cron.parse(cron, zone), template=JobTemplate("synthetic"), **fields)  # type: ignore[arg-type]


def local(slots: list[datetime]) -> list[str]:
    return [s.astimezone(BERLIN).isoformat() for s in slots]


def test_five_fields_are_minutes_and_six_start_with_seconds() -> None:
    assert spec("*/15 * * * *").upcoming(T0, 3) == [
        T0 + timedelta(minutes=15),
        T0 + timedelta(minutes=30),
        T0 + timedelta(minutes=45),
    ]
    assert spec("*/20 * * * * *").upcoming(T0, 3) == [
        T0 + timedelta(seconds=20),
        T0 + timedelta(seconds=40),
        T0 + timedelta(seconds=60),
    ]


@pytest.mark.parametrize(
    ("cron", "zone", "field"),
    [
        ("", "UTC", "cron"),
        ("* * *", "UTC", "cron"),
        ("* * * * * * *", "UTC", "cron"),
        ("61 * * * *", "UTC", "cron"),
        ("x'; DROP TABLE schedules; --", "UTC", "cron"),
        ("0 0 30 2 *", "UTC", "cron"),  # 30 February: never
        ("* * * * *", "Mars/Olympus", "time_zone"),
        ("* * * * *", "../../etc/passwd", "time_zone"),
    ],
)
def test_bad_expressions_and_zones_name_their_field(cron: str, zone: str, field: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        Cron.parse(cron, zone)
    assert [v.field for v in raised.value.violations] == [field]


def test_a_slot_in_the_spring_forward_gap_fires_once_after_the_gap() -> None:
    # 2026-03-29: Berlin jumps from 02:00 to 03:00; 02:30 does not exist that day
    s = spec("30 2 * * *", "Europe/Berlin")
    slots = s.upcoming(datetime(2026, 3, 27, 12, tzinfo=BERLIN), 4)
    assert local(slots) == [
        "2026-03-28T02:30:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
        "2026-03-31T02:30:00+02:00",
    ]


def test_a_fixed_time_repeated_by_fall_back_fires_once() -> None:
    # 2026-10-25: Berlin falls back from 03:00 to 02:00; 02:30 happens twice
    s = spec("30 2 * * *", "Europe/Berlin")
    slots = s.upcoming(datetime(2026, 10, 24, 12, tzinfo=BERLIN), 3)
    assert local(slots) == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-26T02:30:00+01:00",
        "2026-10-27T02:30:00+01:00",
    ]


def test_a_wildcard_hour_fires_in_both_repeated_hours() -> None:
    s = spec("30 * * * *", "Europe/Berlin")
    slots = s.upcoming(datetime(2026, 10, 25, 1, 45, tzinfo=BERLIN), 3)
    assert local(slots) == [
        "2026-10-25T02:30:00+02:00",
        "2026-10-25T02:30:00+01:00",
        "2026-10-25T03:30:00+01:00",
    ]
    # one hour of real time apart each
    assert slots[1] - slots[0] == timedelta(hours=1) == slots[2] - slots[1]


def test_start_and_end_bound_the_slots() -> None:
    s = spec("0 * * * *", start_at=T0 + timedelta(hours=2), end_at=T0 + timedelta(hours=4))
    assert s.upcoming(T0, 5) == [T0 + timedelta(hours=h) for h in (2, 3, 4)]


def test_slots_inside_the_catch_up_window_fire_once_each_older_ones_are_missed() -> None:
    s = spec(catch_up_window_s=10.0)
    # every replica was down from T0 to T0 + 30 s
    p = plan(s, T0 + timedelta(seconds=1), T0 + timedelta(seconds=30))
    assert p.missed == [T0 + timedelta(seconds=n) for n in range(1, 20)]
    assert p.fire == [T0 + timedelta(seconds=n) for n in range(20, 31)]
    assert p.next_fire_at == T0 + timedelta(seconds=31)


def test_catch_up_latest_fires_only_the_newest_missed_slot() -> None:
    s = spec(catch_up_window_s=10.0, catch_up=CatchUpMode.LATEST)
    p = plan(s, T0 + timedelta(seconds=1), T0 + timedelta(seconds=30))
    assert p.fire == [T0 + timedelta(seconds=30)]
    assert len(p.missed) == 29 and T0 + timedelta(seconds=30) not in p.missed


def test_a_slot_on_time_just_fires() -> None:
    p = plan(spec(), T0, T0 + timedelta(milliseconds=3))
    assert (p.fire, p.missed, p.next_fire_at) == ([T0], [], T0 + timedelta(seconds=1))


def test_a_long_outage_records_a_bounded_number_of_misses_and_jumps_to_the_window() -> None:
    s = spec(catch_up_window_s=5.0)
    now = T0 + timedelta(days=1)
    p = plan(s, T0, now)
    assert len(p.missed) == MAX_RECORDED_MISSES and p.unrecorded_misses
    assert p.fire == [now - timedelta(seconds=n) for n in range(5, -1, -1)]


def test_a_schedule_past_its_end_has_no_next_slot() -> None:
    s = spec(end_at=T0 + timedelta(seconds=2))
    p = plan(s, T0 + timedelta(seconds=1), T0 + timedelta(seconds=5))
    assert p.fire == [T0 + timedelta(seconds=1), T0 + timedelta(seconds=2)]
    assert p.next_fire_at is None


def test_the_slot_key_names_the_schedule_and_the_instant_in_utc() -> None:
    slot = datetime(2026, 3, 29, 3, 0, tzinfo=BERLIN)
    assert slot_key("abc", slot) == "schedule:abc:2026-03-29T01:00:00+00:00"
