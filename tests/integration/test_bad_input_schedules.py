"""Bad input to ScheduleService changes nothing: every RPC, sent malformed, is refused with
its documented code and reason (one ErrorInfo, the fields named), and every table keeps its
row count. The same contract as tests/integration/test_bad_input.py, which runs it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from shared.pb.jobs.v1 import job_pb2
from shared.pb.jobs.v1 import schedule_service_pb2 as spb
from shared.pbconv import struct_from_dict
from tests.support.bad_input import (
    CONTROL,
    INVALID,
    LONG,
    NOT_FOUND,
    SQL,
    UNKNOWN_ID,
    Case,
    call,
    infos,
    reasons,
    violated_fields,
)
from tests.support.shared_stack import SharedStack, shared_stack
from tests.support.stack import CLIENT_TOKEN, WORKER_TOKEN, count_rows

__all__ = ["shared_stack"]

SCHED = "/jobs.v1.ScheduleService/"


def _at(delta: timedelta) -> Timestamp:
    stamp = Timestamp()
    stamp.FromDatetime(datetime.now(UTC) + delta)
    return stamp


def spec(**fields: Any) -> spb.ScheduleSpec:
    template = fields.pop("template", {})
    template.setdefault("job_type", "synthetic")
    template["input"] = struct_from_dict(template.get("input", {}))
    fields.setdefault("cron", "0 2 * * *")
    return spb.ScheduleSpec(job_template=spb.JobTemplate(**template), **fields)


def create(user_id: str = "alice", key: str = "", **fields: Any) -> Any:
    return lambda s: spb.CreateScheduleRequest(
        user_id=user_id, spec=spec(**fields), idempotency_key=key
    )


def ids(message: type[Message], schedule_id: str = UNKNOWN_ID, user_id: str = "alice") -> Any:
    return lambda s: message(schedule_id=schedule_id, user_id=user_id)


CASES: dict[str, Case] = {
    # --- CreateSchedule
    "create: no user": Case(SCHED + "CreateSchedule", create(user_id=""), INVALID, "INVALID_INPUT"),
    "create: user with control characters": Case(
        SCHED + "CreateSchedule", create(user_id=CONTROL), INVALID, "INVALID_INPUT"
    ),
    "create: user too long": Case(
        SCHED + "CreateSchedule", create(user_id=LONG), INVALID, "INVALID_INPUT"
    ),
    "create: no cron": Case(SCHED + "CreateSchedule", create(cron=""), INVALID, "INVALID_INPUT"),
    "create: SQL as cron": Case(
        SCHED + "CreateSchedule", create(cron=SQL), INVALID, "INVALID_INPUT"
    ),
    "create: cron with seven fields": Case(
        SCHED + "CreateSchedule", create(cron="* * * * * * *"), INVALID, "INVALID_INPUT"
    ),
    "create: minute 61": Case(
        SCHED + "CreateSchedule", create(cron="61 * * * *"), INVALID, "INVALID_INPUT"
    ),
    "create: a cron that never fires": Case(
        SCHED + "CreateSchedule", create(cron="0 0 30 2 *"), INVALID, "INVALID_INPUT"
    ),
    "create: unknown time zone": Case(
        SCHED + "CreateSchedule", create(time_zone="Mars/Olympus"), INVALID, "INVALID_INPUT"
    ),
    "create: a path as time zone": Case(
        SCHED + "CreateSchedule", create(time_zone="../../etc/passwd"), INVALID, "INVALID_INPUT"
    ),
    "create: unknown job type": Case(
        SCHED + "CreateSchedule",
        create(template={"job_type": "nope"}),
        NOT_FOUND,
        "UNKNOWN_JOB_TYPE",
    ),
    "create: no job template": Case(
        SCHED + "CreateSchedule",
        lambda s: spb.CreateScheduleRequest(
            user_id="alice", spec=spb.ScheduleSpec(cron="* * * * *")
        ),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: template input fails the schema": Case(
        SCHED + "CreateSchedule",
        create(template={"input": {"sleep_ms": -1}}),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: template priority too high": Case(
        SCHED + "CreateSchedule",
        create(template={"priority": 2**31 - 1}),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: user key without a credential id": Case(
        SCHED + "CreateSchedule",
        create(template={"credential_mode": job_pb2.CREDENTIAL_MODE_USER}),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: unknown credential mode": Case(
        SCHED + "CreateSchedule",
        create(template={"credential_mode": 99}),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: unknown overlap policy": Case(
        SCHED + "CreateSchedule", create(overlap_policy=99), INVALID, "INVALID_INPUT"
    ),
    "create: unknown catch-up mode": Case(
        SCHED + "CreateSchedule", create(catch_up_mode=99), INVALID, "INVALID_INPUT"
    ),
    "create: negative catch-up window": Case(
        SCHED + "CreateSchedule",
        create(catch_up_window=Duration(seconds=-1)),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: catch-up window over 7 days": Case(
        SCHED + "CreateSchedule",
        create(catch_up_window=Duration(seconds=8 * 86400)),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: end in the past": Case(
        SCHED + "CreateSchedule",
        create(end_at=_at(-timedelta(hours=1))),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: end before start": Case(
        SCHED + "CreateSchedule",
        create(start_at=_at(timedelta(days=2)), end_at=_at(timedelta(days=1))),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: ends before its first slot": Case(
        SCHED + "CreateSchedule",
        create(cron="0 0 1 1 *", end_at=_at(timedelta(seconds=5))),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: start out of range": Case(
        SCHED + "CreateSchedule",
        create(start_at=Timestamp(seconds=-(2**62))),
        INVALID,
        "INVALID_INPUT",
    ),
    "create: idempotency key with control characters": Case(
        SCHED + "CreateSchedule", create(key=CONTROL), INVALID, "INVALID_INPUT"
    ),
    "create: worker role": Case(
        SCHED + "CreateSchedule",
        create(),
        grpc.StatusCode.PERMISSION_DENIED,
        "PERMISSION_DENIED",
        token=WORKER_TOKEN,
    ),
    "create: no token": Case(
        SCHED + "CreateSchedule",
        create(),
        grpc.StatusCode.UNAUTHENTICATED,
        "UNAUTHENTICATED",
        token="",
    ),
    # --- ListSchedules
    "list: no user": Case(
        SCHED + "ListSchedules", lambda s: spb.ListSchedulesRequest(), INVALID, "INVALID_INPUT"
    ),
    "list: negative page size": Case(
        SCHED + "ListSchedules",
        lambda s: spb.ListSchedulesRequest(user_id="alice", page_size=-1),
        INVALID,
        "INVALID_INPUT",
    ),
    "list: a made-up page token": Case(
        SCHED + "ListSchedules",
        lambda s: spb.ListSchedulesRequest(user_id="alice", page_token="eyJ9.AAAA"),
        INVALID,
        "INVALID_INPUT",
    ),
    # --- UpdateSchedule
    "update: SQL id": Case(
        SCHED + "UpdateSchedule",
        lambda s: spb.UpdateScheduleRequest(schedule_id=SQL, user_id="alice", spec=spec()),
        INVALID,
        "INVALID_INPUT",
    ),
    "update: unknown schedule": Case(
        SCHED + "UpdateSchedule",
        lambda s: spb.UpdateScheduleRequest(schedule_id=UNKNOWN_ID, user_id="alice", spec=spec()),
        NOT_FOUND,
        "SCHEDULE_NOT_FOUND",
        token=CLIENT_TOKEN,
    ),
}
# Get, Pause, Resume, Delete and Trigger take the same two ids.
for _name, _message in {
    "get": spb.GetScheduleRequest,
    "pause": spb.PauseScheduleRequest,
    "resume": spb.ResumeScheduleRequest,
    "delete": spb.DeleteScheduleRequest,
    "trigger": spb.TriggerScheduleRequest,
}.items():
    _method = SCHED + _message.DESCRIPTOR.name.removesuffix("Request")
    CASES[f"{_name}: SQL id"] = Case(_method, ids(_message, SQL), INVALID, "INVALID_INPUT")
    CASES[f"{_name}: no id"] = Case(_method, ids(_message, ""), INVALID, "INVALID_INPUT")
    CASES[f"{_name}: no user"] = Case(_method, ids(_message, user_id=""), INVALID, "INVALID_INPUT")
    CASES[f"{_name}: unknown schedule"] = Case(
        _method, ids(_message), NOT_FOUND, "SCHEDULE_NOT_FOUND"
    )


@pytest.mark.parametrize("name", list(CASES))
async def test_bad_schedule_input_is_refused_and_changes_nothing(
    shared_stack: SharedStack, name: str
) -> None:
    case = CASES[name]
    before = await count_rows(shared_stack.database_url)

    error = await call(shared_stack, case)

    assert (error.code(), reasons(error, case.method)) == (case.code, [case.reason])
    [info] = infos(error, case.method)
    assert info.metadata.get("field") == violated_fields(error)
    assert "Traceback" not in (error.details() or "")
    assert await count_rows(shared_stack.database_url) == before
