from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    JOB_STATUS_UNSPECIFIED: _ClassVar[JobStatus]
    JOB_STATUS_CREATED: _ClassVar[JobStatus]
    JOB_STATUS_QUEUED: _ClassVar[JobStatus]
    JOB_STATUS_RUNNING: _ClassVar[JobStatus]
    JOB_STATUS_RETRYING: _ClassVar[JobStatus]
    JOB_STATUS_CANCEL_REQUESTED: _ClassVar[JobStatus]
    JOB_STATUS_SUCCEEDED: _ClassVar[JobStatus]
    JOB_STATUS_FAILED: _ClassVar[JobStatus]
    JOB_STATUS_CANCELLED: _ClassVar[JobStatus]

class CredentialMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CREDENTIAL_MODE_UNSPECIFIED: _ClassVar[CredentialMode]
    CREDENTIAL_MODE_PLATFORM: _ClassVar[CredentialMode]
    CREDENTIAL_MODE_USER: _ClassVar[CredentialMode]

class InputState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INPUT_STATE_UNSPECIFIED: _ClassVar[InputState]
    INPUT_STATE_SHOWN: _ClassVar[InputState]
    INPUT_STATE_TOO_LARGE: _ClassVar[InputState]
    INPUT_STATE_REMOVED: _ClassVar[InputState]

class DependencyPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEPENDENCY_POLICY_UNSPECIFIED: _ClassVar[DependencyPolicy]
    DEPENDENCY_POLICY_RUN: _ClassVar[DependencyPolicy]
    DEPENDENCY_POLICY_FAIL: _ClassVar[DependencyPolicy]
    DEPENDENCY_POLICY_CANCEL: _ClassVar[DependencyPolicy]
JOB_STATUS_UNSPECIFIED: JobStatus
JOB_STATUS_CREATED: JobStatus
JOB_STATUS_QUEUED: JobStatus
JOB_STATUS_RUNNING: JobStatus
JOB_STATUS_RETRYING: JobStatus
JOB_STATUS_CANCEL_REQUESTED: JobStatus
JOB_STATUS_SUCCEEDED: JobStatus
JOB_STATUS_FAILED: JobStatus
JOB_STATUS_CANCELLED: JobStatus
CREDENTIAL_MODE_UNSPECIFIED: CredentialMode
CREDENTIAL_MODE_PLATFORM: CredentialMode
CREDENTIAL_MODE_USER: CredentialMode
INPUT_STATE_UNSPECIFIED: InputState
INPUT_STATE_SHOWN: InputState
INPUT_STATE_TOO_LARGE: InputState
INPUT_STATE_REMOVED: InputState
DEPENDENCY_POLICY_UNSPECIFIED: DependencyPolicy
DEPENDENCY_POLICY_RUN: DependencyPolicy
DEPENDENCY_POLICY_FAIL: DependencyPolicy
DEPENDENCY_POLICY_CANCEL: DependencyPolicy

class Job(_message.Message):
    __slots__ = ("id", "user_id", "job_type", "status", "queue", "priority", "attempt_count", "max_attempts", "idempotency_key", "progress", "output", "output_hash", "error_code", "error_message", "created_at", "updated_at", "started_at", "finished_at", "next_run_at", "artifacts", "events", "parent_job_id", "child_job_ids", "total_input_tokens", "total_output_tokens", "total_cost_usd", "prompt_key", "prompt_version", "model_tier", "credential_mode", "credential_id", "retried_from_job_id", "trigger", "internal_error_message", "hold", "definition_version", "concurrency_key", "target_type", "target_id", "model_provider", "model_name", "output_schema_version", "usage_unknown_attempts", "total_cost_usd_decimal", "created_by", "schedule_id", "scheduled_for", "signals", "signals_total", "events_total", "artifacts_total", "child_jobs_total", "depends_on", "dependencies_total", "dependencies_pending", "dependency_policy", "dependent_job_ids", "dependents_total", "input", "input_state", "input_bytes", "input_withheld_fields", "retried_as_job_ids", "error_attempt", "worker_id", "deadline", "steps", "steps_total")
    ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_HASH_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    ARTIFACTS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    PARENT_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    CHILD_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COST_USD_FIELD_NUMBER: _ClassVar[int]
    PROMPT_KEY_FIELD_NUMBER: _ClassVar[int]
    PROMPT_VERSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_TIER_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_MODE_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_ID_FIELD_NUMBER: _ClassVar[int]
    RETRIED_FROM_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    INTERNAL_ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    HOLD_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_VERSION_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    TARGET_TYPE_FIELD_NUMBER: _ClassVar[int]
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    MODEL_PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_NAME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    USAGE_UNKNOWN_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_COST_USD_DECIMAL_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_ID_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_FOR_FIELD_NUMBER: _ClassVar[int]
    SIGNALS_FIELD_NUMBER: _ClassVar[int]
    SIGNALS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    EVENTS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    ARTIFACTS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    CHILD_JOBS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    DEPENDS_ON_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCIES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCIES_PENDING_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCY_POLICY_FIELD_NUMBER: _ClassVar[int]
    DEPENDENT_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    DEPENDENTS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    INPUT_STATE_FIELD_NUMBER: _ClassVar[int]
    INPUT_BYTES_FIELD_NUMBER: _ClassVar[int]
    INPUT_WITHHELD_FIELDS_FIELD_NUMBER: _ClassVar[int]
    RETRIED_AS_JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    ERROR_ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    STEPS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    id: str
    user_id: str
    job_type: str
    status: JobStatus
    queue: str
    priority: int
    attempt_count: int
    max_attempts: int
    idempotency_key: str
    progress: float
    output: _struct_pb2.Struct
    output_hash: str
    error_code: str
    error_message: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    started_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    next_run_at: _timestamp_pb2.Timestamp
    artifacts: _containers.RepeatedCompositeFieldContainer[Artifact]
    events: _containers.RepeatedCompositeFieldContainer[JobEvent]
    parent_job_id: str
    child_job_ids: _containers.RepeatedScalarFieldContainer[str]
    total_input_tokens: int
    total_output_tokens: int
    total_cost_usd: float
    prompt_key: str
    prompt_version: str
    model_tier: str
    credential_mode: CredentialMode
    credential_id: str
    retried_from_job_id: str
    trigger: str
    internal_error_message: str
    hold: JobHold
    definition_version: str
    concurrency_key: str
    target_type: str
    target_id: str
    model_provider: str
    model_name: str
    output_schema_version: str
    usage_unknown_attempts: int
    total_cost_usd_decimal: str
    created_by: str
    schedule_id: str
    scheduled_for: _timestamp_pb2.Timestamp
    signals: _containers.RepeatedCompositeFieldContainer[ReceivedSignal]
    signals_total: int
    events_total: int
    artifacts_total: int
    child_jobs_total: int
    depends_on: _containers.RepeatedScalarFieldContainer[str]
    dependencies_total: int
    dependencies_pending: int
    dependency_policy: DependencyPolicy
    dependent_job_ids: _containers.RepeatedScalarFieldContainer[str]
    dependents_total: int
    input: _struct_pb2.Struct
    input_state: InputState
    input_bytes: int
    input_withheld_fields: _containers.RepeatedScalarFieldContainer[str]
    retried_as_job_ids: _containers.RepeatedScalarFieldContainer[str]
    error_attempt: int
    worker_id: str
    deadline: _timestamp_pb2.Timestamp
    steps: _containers.RepeatedCompositeFieldContainer[DurableStep]
    steps_total: int
    def __init__(self, id: _Optional[str] = ..., user_id: _Optional[str] = ..., job_type: _Optional[str] = ..., status: _Optional[_Union[JobStatus, str]] = ..., queue: _Optional[str] = ..., priority: _Optional[int] = ..., attempt_count: _Optional[int] = ..., max_attempts: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., progress: _Optional[float] = ..., output: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., output_hash: _Optional[str] = ..., error_code: _Optional[str] = ..., error_message: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., next_run_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., artifacts: _Optional[_Iterable[_Union[Artifact, _Mapping]]] = ..., events: _Optional[_Iterable[_Union[JobEvent, _Mapping]]] = ..., parent_job_id: _Optional[str] = ..., child_job_ids: _Optional[_Iterable[str]] = ..., total_input_tokens: _Optional[int] = ..., total_output_tokens: _Optional[int] = ..., total_cost_usd: _Optional[float] = ..., prompt_key: _Optional[str] = ..., prompt_version: _Optional[str] = ..., model_tier: _Optional[str] = ..., credential_mode: _Optional[_Union[CredentialMode, str]] = ..., credential_id: _Optional[str] = ..., retried_from_job_id: _Optional[str] = ..., trigger: _Optional[str] = ..., internal_error_message: _Optional[str] = ..., hold: _Optional[_Union[JobHold, _Mapping]] = ..., definition_version: _Optional[str] = ..., concurrency_key: _Optional[str] = ..., target_type: _Optional[str] = ..., target_id: _Optional[str] = ..., model_provider: _Optional[str] = ..., model_name: _Optional[str] = ..., output_schema_version: _Optional[str] = ..., usage_unknown_attempts: _Optional[int] = ..., total_cost_usd_decimal: _Optional[str] = ..., created_by: _Optional[str] = ..., schedule_id: _Optional[str] = ..., scheduled_for: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., signals: _Optional[_Iterable[_Union[ReceivedSignal, _Mapping]]] = ..., signals_total: _Optional[int] = ..., events_total: _Optional[int] = ..., artifacts_total: _Optional[int] = ..., child_jobs_total: _Optional[int] = ..., depends_on: _Optional[_Iterable[str]] = ..., dependencies_total: _Optional[int] = ..., dependencies_pending: _Optional[int] = ..., dependency_policy: _Optional[_Union[DependencyPolicy, str]] = ..., dependent_job_ids: _Optional[_Iterable[str]] = ..., dependents_total: _Optional[int] = ..., input: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., input_state: _Optional[_Union[InputState, str]] = ..., input_bytes: _Optional[int] = ..., input_withheld_fields: _Optional[_Iterable[str]] = ..., retried_as_job_ids: _Optional[_Iterable[str]] = ..., error_attempt: _Optional[int] = ..., worker_id: _Optional[str] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., steps: _Optional[_Iterable[_Union[DurableStep, _Mapping]]] = ..., steps_total: _Optional[int] = ...) -> None: ...

class DurableStep(_message.Message):
    __slots__ = ("ordinal", "name", "attempt", "recorded_at", "error_code")
    ORDINAL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ordinal: int
    name: str
    attempt: int
    recorded_at: _timestamp_pb2.Timestamp
    error_code: str
    def __init__(self, ordinal: _Optional[int] = ..., name: _Optional[str] = ..., attempt: _Optional[int] = ..., recorded_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., error_code: _Optional[str] = ...) -> None: ...

class JobHold(_message.Message):
    __slots__ = ("reason", "key", "until", "detail")
    class Reason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        REASON_UNSPECIFIED: _ClassVar[JobHold.Reason]
        REASON_READY: _ClassVar[JobHold.Reason]
        REASON_NOT_DUE: _ClassVar[JobHold.Reason]
        REASON_QUEUE_PAUSED: _ClassVar[JobHold.Reason]
        REASON_CONCURRENCY_KEY_FULL: _ClassVar[JobHold.Reason]
        REASON_QUEUE_FULL: _ClassVar[JobHold.Reason]
        REASON_RATE_LIMITED: _ClassVar[JobHold.Reason]
        REASON_NO_WORKER_FOR_VERSION: _ClassVar[JobHold.Reason]
        REASON_WAITING_FOR_DEPENDENCIES: _ClassVar[JobHold.Reason]
        REASON_SLEEPING: _ClassVar[JobHold.Reason]
        REASON_WAITING_FOR_SIGNAL: _ClassVar[JobHold.Reason]
    REASON_UNSPECIFIED: JobHold.Reason
    REASON_READY: JobHold.Reason
    REASON_NOT_DUE: JobHold.Reason
    REASON_QUEUE_PAUSED: JobHold.Reason
    REASON_CONCURRENCY_KEY_FULL: JobHold.Reason
    REASON_QUEUE_FULL: JobHold.Reason
    REASON_RATE_LIMITED: JobHold.Reason
    REASON_NO_WORKER_FOR_VERSION: JobHold.Reason
    REASON_WAITING_FOR_DEPENDENCIES: JobHold.Reason
    REASON_SLEEPING: JobHold.Reason
    REASON_WAITING_FOR_SIGNAL: JobHold.Reason
    REASON_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    reason: JobHold.Reason
    key: str
    until: _timestamp_pb2.Timestamp
    detail: str
    def __init__(self, reason: _Optional[_Union[JobHold.Reason, str]] = ..., key: _Optional[str] = ..., until: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., detail: _Optional[str] = ...) -> None: ...

class Artifact(_message.Message):
    __slots__ = ("artifact_type", "artifact_id", "ordinal", "payload")
    ARTIFACT_TYPE_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_ID_FIELD_NUMBER: _ClassVar[int]
    ORDINAL_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    artifact_type: str
    artifact_id: str
    ordinal: int
    payload: _struct_pb2.Struct
    def __init__(self, artifact_type: _Optional[str] = ..., artifact_id: _Optional[str] = ..., ordinal: _Optional[int] = ..., payload: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class JobEvent(_message.Message):
    __slots__ = ("from_status", "to_status", "attempt", "reason", "at", "worker_id")
    FROM_STATUS_FIELD_NUMBER: _ClassVar[int]
    TO_STATUS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    from_status: JobStatus
    to_status: JobStatus
    attempt: int
    reason: str
    at: _timestamp_pb2.Timestamp
    worker_id: str
    def __init__(self, from_status: _Optional[_Union[JobStatus, str]] = ..., to_status: _Optional[_Union[JobStatus, str]] = ..., attempt: _Optional[int] = ..., reason: _Optional[str] = ..., at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., worker_id: _Optional[str] = ...) -> None: ...

class ReceivedSignal(_message.Message):
    __slots__ = ("seq", "name", "sent_at")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    seq: int
    name: str
    sent_at: _timestamp_pb2.Timestamp
    def __init__(self, seq: _Optional[int] = ..., name: _Optional[str] = ..., sent_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
