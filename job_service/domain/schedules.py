"""Cron schedules as values, and the pure decisions about their slots: which instants a
cron expression names in a time zone (daylight saving included), which slots a firing round
creates jobs for after an outage and which it records as missed. No I/O.

DST, decided once here (docs/adr/0005-schedules.md): croniter walks wall-clock time in the
schedule's zone. A wall-clock time a spring-forward day skips fires once, at the first
instant after the gap (02:30 -> 03:00). A wall-clock time a fall-back day repeats fires
once, at its first occurrence, when the hour field is fixed ("30 2 * * *"); with a wildcard
or step hour ("*/15 * * * *") both hours fire, as they are both real elapsed time (Vixie
cron's rule).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from shared.canonical import content_hash
from shared.credentials import CredentialMode
from shared.errors import FieldViolation, InvalidInput

DEFAULT_CATCH_UP_WINDOW_S = 60.0
MAX_CATCH_UP_WINDOW_S = 7 * 24 * 3600.0
# A firing round creates at most this many jobs per schedule (the rest wait for the next
# round, which follows at once), records at most this many missed slots individually (a
# longer outage jumps to the window; the log and the skip counter say so) and looks at most
# at this many slots, so that a 1-second schedule after a week's outage cannot stall it.
MAX_FIRES_PER_ROUND = 100
MAX_RECORDED_MISSES = 100
MAX_SLOTS_SCANNED = 10_000
# GetSchedule's look ahead.
UPCOMING = 5
_TICK = timedelta(microseconds=1)


class OverlapPolicy(StrEnum):
    SKIP = "skip"
    ALLOW = "allow"
    CANCEL_PREVIOUS = "cancel_previous"


class CatchUpMode(StrEnum):
    ALL = "all"
    LATEST = "latest"


class RunOutcome(StrEnum):
    FIRED = "fired"
    SKIPPED_MISSED = "skipped_missed"
    SKIPPED_OVERLAP = "skipped_overlap"
    REFUSED = "refused"
    TRIGGERED = "triggered"


@dataclass(frozen=True)
class Cron:
    """A validated cron expression in an IANA zone: five fields, or six with seconds
    first."""

    expression: str
    zone: str = "UTC"

    @classmethod
    def parse(cls, expression: str, zone: str) -> Cron:
        """The Cron, or InvalidInput naming ``cron`` or ``time_zone``."""
        zone = zone or "UTC"
        fields = expression.split()
        if len(fields) not in (5, 6) or len(expression) > 255 or not expression.isprintable():
            raise _bad("cron", "5 fields, or 6 with seconds first")
        try:
            tz = ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise _bad("time_zone", "an IANA time zone, e.g. Europe/Berlin") from None
        cron = cls(" ".join(fields), zone)
        if not croniter.is_valid(cron.expression, second_at_beginning=cron.has_seconds):
            raise _bad("cron", "5 fields, or 6 with seconds first")
        try:
            cron.next_after(datetime.now(tz))
        except (CroniterBadDateError, CroniterBadCronError):
            raise _bad("cron", "an expression that names at least one instant") from None
        return cron

    @property
    def has_seconds(self) -> bool:
        return len(self.expression.split()) == 6

    @property
    def _fixed_hour(self) -> bool:
        hour = self.expression.split()[2 if self.has_seconds else 1]
        return "*" not in hour and "/" not in hour

    def next_after(self, moment: datetime) -> datetime:
        """The first slot strictly after ``moment`` (aware), in UTC."""
        return next(self._slots(moment))

    def _slots(self, moment: datetime) -> Iterator[datetime]:
        tz = ZoneInfo(self.zone)
        it = croniter(
            self.expression,
            moment.astimezone(tz),
            second_at_beginning=self.has_seconds,
            max_years_between_matches=5,
        )
        while True:
            slot: datetime = it.get_next(datetime)
            if self._fixed_hour and _second_occurrence(slot, tz):
                continue
            yield slot.astimezone(UTC)


def _second_occurrence(slot: datetime, tz: ZoneInfo) -> bool:
    """The slot is the later of two instants with its wall-clock time (a fall-back day)."""
    first = slot.replace(tzinfo=None).replace(tzinfo=tz, fold=0)
    return first.astimezone(UTC) != slot.astimezone(UTC)


def _bad(name: str, rule: str) -> InvalidInput:
    return InvalidInput(f"{name} is not valid", [FieldViolation(name, rule)])


@dataclass(frozen=True)
class JobTemplate:
    """The job each slot creates: CreateJob's fields."""

    job_type: str
    input: dict[str, Any] = field(default_factory=dict)
    priority: int | None = None
    credential_mode: CredentialMode = CredentialMode.PLATFORM
    credential_id: str = ""
    target_type: str = ""
    target_id: str = ""


@dataclass(frozen=True)
class ScheduleSpec:
    """When a schedule fires and what it creates."""

    cron: Cron
    template: JobTemplate
    overlap: OverlapPolicy = OverlapPolicy.SKIP
    catch_up_window_s: float = DEFAULT_CATCH_UP_WINDOW_S
    catch_up: CatchUpMode = CatchUpMode.ALL
    start_at: datetime | None = None
    end_at: datetime | None = None

    def first_slot(self, now: datetime) -> datetime | None:
        """The first slot after ``now`` (and not before start_at); None past end_at."""
        after = now if self.start_at is None else max(now, self.start_at - _TICK)
        return self.next_slot(after)

    def next_slot(self, after: datetime) -> datetime | None:
        """The first slot strictly after ``after``; None when it is past end_at."""
        slot = self.cron.next_after(after)
        return None if self.end_at is not None and slot > self.end_at else slot

    def upcoming(self, after: datetime, count: int = UPCOMING) -> list[datetime]:
        slots: list[datetime] = []
        slot = self.first_slot(after)
        while slot is not None and len(slots) < count:
            slots.append(slot)
            slot = self.next_slot(slot)
        return slots


@dataclass(frozen=True)
class Schedule:
    """A schedule as stored."""

    id: str
    user_id: str
    spec: ScheduleSpec
    paused: bool
    idempotency_key: str | None
    request_hash: str
    next_fire_at: datetime | None
    created_at: datetime
    updated_at: datetime
    last_job_id: str | None = None
    # the principal whose call last changed it (its creator until then)
    updated_by: str | None = None


@dataclass(frozen=True)
class ScheduleRun:
    """One slot of a schedule and what became of it."""

    slot: datetime
    outcome: RunOutcome
    job_id: str | None
    recorded_at: datetime
    detail: str | None = None


@dataclass(frozen=True)
class FirePlan:
    """A firing round's decision for one schedule: the slots to create jobs for (oldest
    first), the ones to record as missed, and the next slot (None: the schedule ended)."""

    fire: list[datetime]
    missed: list[datetime]
    next_fire_at: datetime | None
    # more missed slots passed than are recorded one by one
    unrecorded_misses: bool = False


def plan(spec: ScheduleSpec, next_fire_at: datetime, now: datetime) -> FirePlan:
    """What to do with a schedule whose next slot ``next_fire_at`` is due at ``now``:
    slots older than the catch-up window are missed; those inside it fire (ALL) or only the
    latest does (LATEST)."""
    window_start = now - timedelta(seconds=spec.catch_up_window_s)
    fire: list[datetime] = []
    missed: list[datetime] = []
    unrecorded = False
    scanned = 0
    slot: datetime | None = next_fire_at
    while slot is not None and slot <= now and scanned < MAX_SLOTS_SCANNED:
        scanned += 1
        if slot < window_start:
            if len(missed) >= MAX_RECORDED_MISSES:
                unrecorded = True
                slot = spec.next_slot(window_start - _TICK)  # jump to the window
                continue
            missed.append(slot)
        else:
            fire.append(slot)
            if spec.catch_up is CatchUpMode.ALL and len(fire) >= MAX_FIRES_PER_ROUND:
                slot = spec.next_slot(slot)
                break
        slot = spec.next_slot(slot)
    if spec.catch_up is CatchUpMode.LATEST:
        complete = slot is None or slot > now
        # the latest is known only once every due slot was seen; else a later round fires it
        keep = fire[-1:] if complete else []
        missed += fire[: len(fire) - len(keep)]
        fire = keep
    return FirePlan(fire=fire, missed=missed, next_fire_at=slot, unrecorded_misses=unrecorded)


def slot_key(schedule_id: str, slot: datetime) -> str:
    """The idempotency key of a slot's job: one job per (schedule, slot), whichever replica
    fires it and however often."""
    return f"schedule:{schedule_id}:{slot.astimezone(UTC).isoformat()}"


def spec_hash(spec: ScheduleSpec) -> str:
    """What "the same schedule" means for an idempotency key."""
    t = spec.template
    described: dict[str, Any] = {
        "cron": spec.cron.expression,
        "time_zone": spec.cron.zone,
        "job_type": t.job_type,
        "input": t.input,
        "priority": t.priority,
        "credential_mode": t.credential_mode.value,
        "credential_id": t.credential_id,
        "target": [t.target_type, t.target_id],
        "overlap": spec.overlap.value,
        "catch_up_window_s": spec.catch_up_window_s,
        "catch_up": spec.catch_up.value,
        "start_at": spec.start_at.isoformat() if spec.start_at else None,
        "end_at": spec.end_at.isoformat() if spec.end_at else None,
    }
    return content_hash(described)
