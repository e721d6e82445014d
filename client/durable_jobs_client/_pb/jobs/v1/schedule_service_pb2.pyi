from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from durable_jobs_client._pb.jobs.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OverlapPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OVERLAP_POLICY_UNSPECIFIED: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_SKIP: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_ALLOW: _ClassVar[OverlapPolicy]
    OVERLAP_POLICY_CANCEL_PREVIOUS: _ClassVar[OverlapPolicy]

class CatchUpMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CATCH_UP_MODE_UNSPECIFIED: _ClassVar[CatchUpMode]
    CATCH_UP_MODE_ALL: _ClassVar[CatchUpMode]
    CATCH_UP_MODE_LATEST: _ClassVar[CatchUpMode]
OVERLAP_POLICY_UNSPECIFIED: OverlapPolicy
OVERLAP_POLICY_SKIP: OverlapPolicy
OVERLAP_POLICY_ALLOW: OverlapPolicy
OVERLAP_POLICY_CANCEL_PREVIOUS: OverlapPolicy
CATCH_UP_MODE_UNSPECIFIED: CatchUpMode
CATCH_UP_MODE_ALL: CatchUpMode
CATCH_UP_MODE_LATEST: CatchUpMode

class JobTemplate(_message.Message):
    __slots__ = ("job_type", "input", "priority", "credential_mode", "credential_id", "target_type", "target_id")
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_MODE_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_TYPE_FIELD_NUMBER: _ClassVar[int]
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    input: _struct_pb2.Struct
    priority: int
    credential_mode: _job_pb2.CredentialMode
    credential_id: str
    target_type: str
    target_id: str
    def __init__(self, job_type: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., priority: _Optional[int] = ..., credential_mode: _Optional[_Union[_job_pb2.CredentialMode, str]] = ..., credential_id: _Optional[str] = ..., target_type: _Optional[str] = ..., target_id: _Optional[str] = ...) -> None: ...

class ScheduleSpec(_message.Message):
    __slots__ = ("cron", "time_zone", "job_template", "overlap_policy", "catch_up_window", "catch_up_mode", "start_at", "end_at")
    CRON_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    JOB_TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_POLICY_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_WINDOW_FIELD_NUMBER: _ClassVar[int]
    CATCH_UP_MODE_FIELD_NUMBER: _ClassVar[int]
    START_AT_FIELD_NUMBER: _ClassVar[int]
    END_AT_FIELD_NUMBER: _ClassVar[int]
    cron: str
    time_zone: str
    job_template: JobTemplate
    overlap_policy: OverlapPolicy
    catch_up_window: _duration_pb2.Duration
    catch_up_mode: CatchUpMode
    start_at: _timestamp_pb2.Timestamp
    end_at: _timestamp_pb2.Timestamp
    def __init__(self, cron: _Optional[str] = ..., time_zone: _Optional[str] = ..., job_template: _Optional[_Union[JobTemplate, _Mapping]] = ..., overlap_policy: _Optional[_Union[OverlapPolicy, str]] = ..., catch_up_window: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., catch_up_mode: _Optional[_Union[CatchUpMode, str]] = ..., start_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., end_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Schedule(_message.Message):
    __slots__ = ("id", "user_id", "spec", "paused", "idempotency_key", "next_fire_at", "created_at", "updated_at", "updated_by")
    ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_BY_FIELD_NUMBER: _ClassVar[int]
    id: str
    user_id: str
    spec: ScheduleSpec
    paused: bool
    idempotency_key: str
    next_fire_at: _timestamp_pb2.Timestamp
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    updated_by: str
    def __init__(self, id: _Optional[str] = ..., user_id: _Optional[str] = ..., spec: _Optional[_Union[ScheduleSpec, _Mapping]] = ..., paused: bool = ..., idempotency_key: _Optional[str] = ..., next_fire_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_by: _Optional[str] = ...) -> None: ...

class ScheduleRun(_message.Message):
    __slots__ = ("slot", "outcome", "job_id", "recorded_at", "detail")
    class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        OUTCOME_UNSPECIFIED: _ClassVar[ScheduleRun.Outcome]
        OUTCOME_FIRED: _ClassVar[ScheduleRun.Outcome]
        OUTCOME_SKIPPED_MISSED: _ClassVar[ScheduleRun.Outcome]
        OUTCOME_SKIPPED_OVERLAP: _ClassVar[ScheduleRun.Outcome]
        OUTCOME_REFUSED: _ClassVar[ScheduleRun.Outcome]
        OUTCOME_TRIGGERED: _ClassVar[ScheduleRun.Outcome]
    OUTCOME_UNSPECIFIED: ScheduleRun.Outcome
    OUTCOME_FIRED: ScheduleRun.Outcome
    OUTCOME_SKIPPED_MISSED: ScheduleRun.Outcome
    OUTCOME_SKIPPED_OVERLAP: ScheduleRun.Outcome
    OUTCOME_REFUSED: ScheduleRun.Outcome
    OUTCOME_TRIGGERED: ScheduleRun.Outcome
    SLOT_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    slot: _timestamp_pb2.Timestamp
    outcome: ScheduleRun.Outcome
    job_id: str
    recorded_at: _timestamp_pb2.Timestamp
    detail: str
    def __init__(self, slot: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., outcome: _Optional[_Union[ScheduleRun.Outcome, str]] = ..., job_id: _Optional[str] = ..., recorded_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., detail: _Optional[str] = ...) -> None: ...

class CreateScheduleRequest(_message.Message):
    __slots__ = ("user_id", "spec", "idempotency_key", "paused")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    spec: ScheduleSpec
    idempotency_key: str
    paused: bool
    def __init__(self, user_id: _Optional[str] = ..., spec: _Optional[_Union[ScheduleSpec, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., paused: bool = ...) -> None: ...

class CreateScheduleResponse(_message.Message):
    __slots__ = ("schedule", "created")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    created: bool
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ..., created: bool = ...) -> None: ...

class GetScheduleRequest(_message.Message):
    __slots__ = ("schedule_id", "user_id")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    user_id: str
    def __init__(self, schedule_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class GetScheduleResponse(_message.Message):
    __slots__ = ("schedule", "next_fire_times", "recent_runs")
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_TIMES_FIELD_NUMBER: _ClassVar[int]
    RECENT_RUNS_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    next_fire_times: _containers.RepeatedCompositeFieldContainer[_timestamp_pb2.Timestamp]
    recent_runs: _containers.RepeatedCompositeFieldContainer[ScheduleRun]
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ..., next_fire_times: _Optional[_Iterable[_Union[_timestamp_pb2.Timestamp, _Mapping]]] = ..., recent_runs: _Optional[_Iterable[_Union[ScheduleRun, _Mapping]]] = ...) -> None: ...

class ListSchedulesRequest(_message.Message):
    __slots__ = ("user_id", "page_size", "page_token")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    page_size: int
    page_token: str
    def __init__(self, user_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSchedulesResponse(_message.Message):
    __slots__ = ("schedules", "next_page_token")
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    schedules: _containers.RepeatedCompositeFieldContainer[Schedule]
    next_page_token: str
    def __init__(self, schedules: _Optional[_Iterable[_Union[Schedule, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateScheduleRequest(_message.Message):
    __slots__ = ("schedule_id", "user_id", "spec", "update_mask")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    user_id: str
    spec: ScheduleSpec
    update_mask: _field_mask_pb2.FieldMask
    def __init__(self, schedule_id: _Optional[str] = ..., user_id: _Optional[str] = ..., spec: _Optional[_Union[ScheduleSpec, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class UpdateScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class PauseScheduleRequest(_message.Message):
    __slots__ = ("schedule_id", "user_id")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    user_id: str
    def __init__(self, schedule_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class PauseScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class ResumeScheduleRequest(_message.Message):
    __slots__ = ("schedule_id", "user_id")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    user_id: str
    def __init__(self, schedule_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class ResumeScheduleResponse(_message.Message):
    __slots__ = ("schedule",)
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    schedule: Schedule
    def __init__(self, schedule: _Optional[_Union[Schedule, _Mapping]] = ...) -> None: ...

class DeleteScheduleRequest(_message.Message):
    __slots__ = ("schedule_id", "user_id")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    user_id: str
    def __init__(self, schedule_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class DeleteScheduleResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class TriggerScheduleRequest(_message.Message):
    __slots__ = ("schedule_id", "user_id")
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    schedule_id: str
    user_id: str
    def __init__(self, schedule_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class TriggerScheduleResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...
