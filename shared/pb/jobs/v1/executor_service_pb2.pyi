import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.rpc import status_pb2 as _status_pb2
from shared.pb.jobs.v1 import job_pb2 as _job_pb2
from shared.pb.jobs.v1 import job_type_pb2 as _job_type_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LockOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LOCK_OUTCOME_UNSPECIFIED: _ClassVar[LockOutcome]
    LOCK_OUTCOME_LOCKED: _ClassVar[LockOutcome]
    LOCK_OUTCOME_NOT_DUE: _ClassVar[LockOutcome]
    LOCK_OUTCOME_UNAVAILABLE: _ClassVar[LockOutcome]
LOCK_OUTCOME_UNSPECIFIED: LockOutcome
LOCK_OUTCOME_LOCKED: LockOutcome
LOCK_OUTCOME_NOT_DUE: LockOutcome
LOCK_OUTCOME_UNAVAILABLE: LockOutcome

class LockJobRequest(_message.Message):
    __slots__ = ("job_id", "worker_id", "runnable_definitions")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    RUNNABLE_DEFINITIONS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    worker_id: str
    runnable_definitions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, job_id: _Optional[str] = ..., worker_id: _Optional[str] = ..., runnable_definitions: _Optional[_Iterable[str]] = ...) -> None: ...

class LockJobResponse(_message.Message):
    __slots__ = ("outcome", "job", "retry_after")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_FIELD_NUMBER: _ClassVar[int]
    outcome: LockOutcome
    job: LockedJob
    retry_after: _timestamp_pb2.Timestamp
    def __init__(self, outcome: _Optional[_Union[LockOutcome, str]] = ..., job: _Optional[_Union[LockedJob, _Mapping]] = ..., retry_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class LockedJob(_message.Message):
    __slots__ = ("job_id", "job_type", "lease_token", "attempt", "input", "lease_expires_at", "lease_ttl_ms", "heartbeat_interval_ms", "user_id", "prompt_key", "prompt_version", "credential_mode", "credential_id", "recorded_steps", "step_results", "dependency_count")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    LEASE_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_KEY_FIELD_NUMBER: _ClassVar[int]
    PROMPT_VERSION_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_MODE_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_ID_FIELD_NUMBER: _ClassVar[int]
    RECORDED_STEPS_FIELD_NUMBER: _ClassVar[int]
    STEP_RESULTS_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCY_COUNT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_type: str
    lease_token: str
    attempt: int
    input: _struct_pb2.Struct
    lease_expires_at: _timestamp_pb2.Timestamp
    lease_ttl_ms: int
    heartbeat_interval_ms: int
    user_id: str
    prompt_key: str
    prompt_version: str
    credential_mode: _job_pb2.CredentialMode
    credential_id: str
    recorded_steps: _containers.RepeatedCompositeFieldContainer[RecordedStep]
    step_results: _containers.RepeatedCompositeFieldContainer[StepResult]
    dependency_count: int
    def __init__(self, job_id: _Optional[str] = ..., job_type: _Optional[str] = ..., lease_token: _Optional[str] = ..., attempt: _Optional[int] = ..., input: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., lease_ttl_ms: _Optional[int] = ..., heartbeat_interval_ms: _Optional[int] = ..., user_id: _Optional[str] = ..., prompt_key: _Optional[str] = ..., prompt_version: _Optional[str] = ..., credential_mode: _Optional[_Union[_job_pb2.CredentialMode, str]] = ..., credential_id: _Optional[str] = ..., recorded_steps: _Optional[_Iterable[_Union[RecordedStep, _Mapping]]] = ..., step_results: _Optional[_Iterable[_Union[StepResult, _Mapping]]] = ..., dependency_count: _Optional[int] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("job_id", "lease_token", "progress")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    progress: float
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., progress: _Optional[float] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("lease_expires_at", "cancel_requested", "latest_signal_seq")
    LEASE_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    LATEST_SIGNAL_SEQ_FIELD_NUMBER: _ClassVar[int]
    lease_expires_at: _timestamp_pb2.Timestamp
    cancel_requested: bool
    latest_signal_seq: int
    def __init__(self, lease_expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cancel_requested: _Optional[bool] = ..., latest_signal_seq: _Optional[int] = ...) -> None: ...

class SubmitResultRequest(_message.Message):
    __slots__ = ("job_id", "lease_token", "output", "output_hash", "artifacts", "child_jobs", "usage")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_HASH_FIELD_NUMBER: _ClassVar[int]
    ARTIFACTS_FIELD_NUMBER: _ClassVar[int]
    CHILD_JOBS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    output: _struct_pb2.Struct
    output_hash: str
    artifacts: _containers.RepeatedCompositeFieldContainer[_job_pb2.Artifact]
    child_jobs: _containers.RepeatedCompositeFieldContainer[ChildJob]
    usage: _containers.RepeatedCompositeFieldContainer[ProviderUsage]
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., output: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., output_hash: _Optional[str] = ..., artifacts: _Optional[_Iterable[_Union[_job_pb2.Artifact, _Mapping]]] = ..., child_jobs: _Optional[_Iterable[_Union[ChildJob, _Mapping]]] = ..., usage: _Optional[_Iterable[_Union[ProviderUsage, _Mapping]]] = ...) -> None: ...

class ChildJob(_message.Message):
    __slots__ = ("job_type", "input", "idempotency_key", "priority", "depends_on_keys", "dependency_policy")
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    DEPENDS_ON_KEYS_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCY_POLICY_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    input: _struct_pb2.Struct
    idempotency_key: str
    priority: int
    depends_on_keys: _containers.RepeatedScalarFieldContainer[str]
    dependency_policy: _job_pb2.DependencyPolicy
    def __init__(self, job_type: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., priority: _Optional[int] = ..., depends_on_keys: _Optional[_Iterable[str]] = ..., dependency_policy: _Optional[_Union[_job_pb2.DependencyPolicy, str]] = ...) -> None: ...

class ProviderUsage(_message.Message):
    __slots__ = ("provider", "model", "credential_mode", "input_tokens", "output_tokens", "cost_usd", "latency_ms", "error_code", "call_id", "reused", "cost_usd_decimal")
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_MODE_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    REUSED_FIELD_NUMBER: _ClassVar[int]
    COST_USD_DECIMAL_FIELD_NUMBER: _ClassVar[int]
    provider: str
    model: str
    credential_mode: str
    input_tokens: int
    output_tokens: int
    cost_usd: float
    latency_ms: int
    error_code: str
    call_id: str
    reused: bool
    cost_usd_decimal: str
    def __init__(self, provider: _Optional[str] = ..., model: _Optional[str] = ..., credential_mode: _Optional[str] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cost_usd: _Optional[float] = ..., latency_ms: _Optional[int] = ..., error_code: _Optional[str] = ..., call_id: _Optional[str] = ..., reused: _Optional[bool] = ..., cost_usd_decimal: _Optional[str] = ...) -> None: ...

class SubmitResultResponse(_message.Message):
    __slots__ = ("status",)
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: _job_pb2.JobStatus
    def __init__(self, status: _Optional[_Union[_job_pb2.JobStatus, str]] = ...) -> None: ...

class SubmitFailureRequest(_message.Message):
    __slots__ = ("job_id", "lease_token", "error_code", "error_message", "usage", "retry_after_ms", "signals_seen")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    SIGNALS_SEEN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    error_code: str
    error_message: str
    usage: _containers.RepeatedCompositeFieldContainer[ProviderUsage]
    retry_after_ms: int
    signals_seen: int
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., error_code: _Optional[str] = ..., error_message: _Optional[str] = ..., usage: _Optional[_Iterable[_Union[ProviderUsage, _Mapping]]] = ..., retry_after_ms: _Optional[int] = ..., signals_seen: _Optional[int] = ...) -> None: ...

class SubmitFailureResponse(_message.Message):
    __slots__ = ("status", "next_run_at")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    NEXT_RUN_AT_FIELD_NUMBER: _ClassVar[int]
    status: _job_pb2.JobStatus
    next_run_at: _timestamp_pb2.Timestamp
    def __init__(self, status: _Optional[_Union[_job_pb2.JobStatus, str]] = ..., next_run_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class LockJobsRequest(_message.Message):
    __slots__ = ("requests", "queue", "runnable_definitions")
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    RUNNABLE_DEFINITIONS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[LockJobRequest]
    queue: str
    runnable_definitions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, requests: _Optional[_Iterable[_Union[LockJobRequest, _Mapping]]] = ..., queue: _Optional[str] = ..., runnable_definitions: _Optional[_Iterable[str]] = ...) -> None: ...

class LockJobsResponse(_message.Message):
    __slots__ = ("responses",)
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    responses: _containers.RepeatedCompositeFieldContainer[LockJobResponse]
    def __init__(self, responses: _Optional[_Iterable[_Union[LockJobResponse, _Mapping]]] = ...) -> None: ...

class SubmitResultsRequest(_message.Message):
    __slots__ = ("requests", "next_grants", "worker_id", "runnable_definitions")
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_GRANTS_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    RUNNABLE_DEFINITIONS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[SubmitResultRequest]
    next_grants: _containers.RepeatedCompositeFieldContainer[QueueSlots]
    worker_id: str
    runnable_definitions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, requests: _Optional[_Iterable[_Union[SubmitResultRequest, _Mapping]]] = ..., next_grants: _Optional[_Iterable[_Union[QueueSlots, _Mapping]]] = ..., worker_id: _Optional[str] = ..., runnable_definitions: _Optional[_Iterable[str]] = ...) -> None: ...

class SubmitResultsResponse(_message.Message):
    __slots__ = ("outcomes", "grants")
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    outcomes: _containers.RepeatedCompositeFieldContainer[SubmitResultOutcome]
    grants: _containers.RepeatedCompositeFieldContainer[LockedJob]
    def __init__(self, outcomes: _Optional[_Iterable[_Union[SubmitResultOutcome, _Mapping]]] = ..., grants: _Optional[_Iterable[_Union[LockedJob, _Mapping]]] = ...) -> None: ...

class QueueSlots(_message.Message):
    __slots__ = ("queue", "slots")
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    queue: str
    slots: int
    def __init__(self, queue: _Optional[str] = ..., slots: _Optional[int] = ...) -> None: ...

class SubmitResultOutcome(_message.Message):
    __slots__ = ("status", "error")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    status: _job_pb2.JobStatus
    error: _status_pb2.Status
    def __init__(self, status: _Optional[_Union[_job_pb2.JobStatus, str]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class ResolveCredentialRequest(_message.Message):
    __slots__ = ("job_id", "lease_token")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ...) -> None: ...

class ResolveCredentialResponse(_message.Message):
    __slots__ = ("api_key", "provider", "credential_id")
    API_KEY_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_ID_FIELD_NUMBER: _ClassVar[int]
    api_key: str
    provider: str
    credential_id: str
    def __init__(self, api_key: _Optional[str] = ..., provider: _Optional[str] = ..., credential_id: _Optional[str] = ...) -> None: ...

class WorkerSessionRequest(_message.Message):
    __slots__ = ("worker_id", "goodbye", "incarnation", "free_slots", "reports_slots", "grants_taken", "runnable_definitions")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    GOODBYE_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    FREE_SLOTS_FIELD_NUMBER: _ClassVar[int]
    REPORTS_SLOTS_FIELD_NUMBER: _ClassVar[int]
    GRANTS_TAKEN_FIELD_NUMBER: _ClassVar[int]
    RUNNABLE_DEFINITIONS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    goodbye: bool
    incarnation: str
    free_slots: _containers.RepeatedCompositeFieldContainer[QueueSlots]
    reports_slots: bool
    grants_taken: int
    runnable_definitions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, worker_id: _Optional[str] = ..., goodbye: _Optional[bool] = ..., incarnation: _Optional[str] = ..., free_slots: _Optional[_Iterable[_Union[QueueSlots, _Mapping]]] = ..., reports_slots: _Optional[bool] = ..., grants_taken: _Optional[int] = ..., runnable_definitions: _Optional[_Iterable[str]] = ...) -> None: ...

class WorkerSessionResponse(_message.Message):
    __slots__ = ("session_id", "disconnect_grace_ms", "ping_interval_ms", "closed", "grants")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    DISCONNECT_GRACE_MS_FIELD_NUMBER: _ClassVar[int]
    PING_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    disconnect_grace_ms: int
    ping_interval_ms: int
    closed: bool
    grants: _containers.RepeatedCompositeFieldContainer[LockedJob]
    def __init__(self, session_id: _Optional[str] = ..., disconnect_grace_ms: _Optional[int] = ..., ping_interval_ms: _Optional[int] = ..., closed: _Optional[bool] = ..., grants: _Optional[_Iterable[_Union[LockedJob, _Mapping]]] = ...) -> None: ...

class ReportUsageRequest(_message.Message):
    __slots__ = ("job_id", "lease_token", "usage")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    usage: _containers.RepeatedCompositeFieldContainer[ProviderUsage]
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., usage: _Optional[_Iterable[_Union[ProviderUsage, _Mapping]]] = ...) -> None: ...

class ReportUsageResponse(_message.Message):
    __slots__ = ("attempt", "recorded")
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    RECORDED_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    recorded: int
    def __init__(self, attempt: _Optional[int] = ..., recorded: _Optional[int] = ...) -> None: ...

class StepResponse(_message.Message):
    __slots__ = ("text", "parsed_json", "model", "input_tokens", "output_tokens", "provider")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    PARSED_JSON_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    text: str
    parsed_json: str
    model: str
    input_tokens: int
    output_tokens: int
    provider: str
    def __init__(self, text: _Optional[str] = ..., parsed_json: _Optional[str] = ..., model: _Optional[str] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., provider: _Optional[str] = ...) -> None: ...

class RecordStepRequest(_message.Message):
    __slots__ = ("job_id", "lease_token", "step", "response", "usage")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    step: str
    response: StepResponse
    usage: ProviderUsage
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., step: _Optional[str] = ..., response: _Optional[_Union[StepResponse, _Mapping]] = ..., usage: _Optional[_Union[ProviderUsage, _Mapping]] = ...) -> None: ...

class RecordStepResponse(_message.Message):
    __slots__ = ("attempt",)
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    def __init__(self, attempt: _Optional[int] = ...) -> None: ...

class StepOutcome(_message.Message):
    __slots__ = ("result_json", "error")
    RESULT_JSON_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    result_json: str
    error: StepError
    def __init__(self, result_json: _Optional[str] = ..., error: _Optional[_Union[StepError, _Mapping]] = ...) -> None: ...

class StepError(_message.Message):
    __slots__ = ("code", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class RecordStepResultRequest(_message.Message):
    __slots__ = ("job_id", "lease_token", "ordinal", "name", "outcome")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ORDINAL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    ordinal: int
    name: str
    outcome: StepOutcome
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., ordinal: _Optional[int] = ..., name: _Optional[str] = ..., outcome: _Optional[_Union[StepOutcome, _Mapping]] = ...) -> None: ...

class RecordStepResultResponse(_message.Message):
    __slots__ = ("recorded", "stored")
    RECORDED_FIELD_NUMBER: _ClassVar[int]
    STORED_FIELD_NUMBER: _ClassVar[int]
    recorded: bool
    stored: StepResult
    def __init__(self, recorded: _Optional[bool] = ..., stored: _Optional[_Union[StepResult, _Mapping]] = ...) -> None: ...

class StepResult(_message.Message):
    __slots__ = ("ordinal", "name", "outcome", "attempt")
    ORDINAL_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    ordinal: int
    name: str
    outcome: StepOutcome
    attempt: int
    def __init__(self, ordinal: _Optional[int] = ..., name: _Optional[str] = ..., outcome: _Optional[_Union[StepOutcome, _Mapping]] = ..., attempt: _Optional[int] = ...) -> None: ...

class RecordedStep(_message.Message):
    __slots__ = ("step", "response", "attempt", "call_id")
    STEP_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    step: str
    response: StepResponse
    attempt: int
    call_id: str
    def __init__(self, step: _Optional[str] = ..., response: _Optional[_Union[StepResponse, _Mapping]] = ..., attempt: _Optional[int] = ..., call_id: _Optional[str] = ...) -> None: ...

class FetchSignalsRequest(_message.Message):
    __slots__ = ("job_id", "lease_token", "after_seq")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQ_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    after_seq: int
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., after_seq: _Optional[int] = ...) -> None: ...

class FetchSignalsResponse(_message.Message):
    __slots__ = ("signals", "more")
    SIGNALS_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    signals: _containers.RepeatedCompositeFieldContainer[JobSignal]
    more: bool
    def __init__(self, signals: _Optional[_Iterable[_Union[JobSignal, _Mapping]]] = ..., more: _Optional[bool] = ...) -> None: ...

class JobSignal(_message.Message):
    __slots__ = ("seq", "name", "payload", "sent_at")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    seq: int
    name: str
    payload: _struct_pb2.Struct
    sent_at: _timestamp_pb2.Timestamp
    def __init__(self, seq: _Optional[int] = ..., name: _Optional[str] = ..., payload: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., sent_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AcquireCallPermitRequest(_message.Message):
    __slots__ = ("job_id", "lease_token", "model_tier", "reserved_slot")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    MODEL_TIER_FIELD_NUMBER: _ClassVar[int]
    RESERVED_SLOT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    model_tier: str
    reserved_slot: str
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., model_tier: _Optional[str] = ..., reserved_slot: _Optional[str] = ...) -> None: ...

class AcquireCallPermitResponse(_message.Message):
    __slots__ = ("granted", "retry_after_ms", "valid_for_ms", "unlimited", "reserved_slot", "slot_at")
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    VALID_FOR_MS_FIELD_NUMBER: _ClassVar[int]
    UNLIMITED_FIELD_NUMBER: _ClassVar[int]
    RESERVED_SLOT_FIELD_NUMBER: _ClassVar[int]
    SLOT_AT_FIELD_NUMBER: _ClassVar[int]
    granted: bool
    retry_after_ms: int
    valid_for_ms: int
    unlimited: bool
    reserved_slot: str
    slot_at: _timestamp_pb2.Timestamp
    def __init__(self, granted: _Optional[bool] = ..., retry_after_ms: _Optional[int] = ..., valid_for_ms: _Optional[int] = ..., unlimited: _Optional[bool] = ..., reserved_slot: _Optional[str] = ..., slot_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ReportRateLimitedRequest(_message.Message):
    __slots__ = ("job_id", "lease_token", "model_tier", "retry_after_ms")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    MODEL_TIER_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    model_tier: str
    retry_after_ms: int
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., model_tier: _Optional[str] = ..., retry_after_ms: _Optional[int] = ...) -> None: ...

class ReportRateLimitedResponse(_message.Message):
    __slots__ = ("blocked_until",)
    BLOCKED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    blocked_until: _timestamp_pb2.Timestamp
    def __init__(self, blocked_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class FetchDependencyResultsRequest(_message.Message):
    __slots__ = ("job_id", "lease_token", "after_job_id", "page_size")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    AFTER_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    lease_token: str
    after_job_id: str
    page_size: int
    def __init__(self, job_id: _Optional[str] = ..., lease_token: _Optional[str] = ..., after_job_id: _Optional[str] = ..., page_size: _Optional[int] = ...) -> None: ...

class DependencyResult(_message.Message):
    __slots__ = ("job_id", "job_type", "status", "output", "error_code", "target_type", "target_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    TARGET_TYPE_FIELD_NUMBER: _ClassVar[int]
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    job_type: str
    status: _job_pb2.JobStatus
    output: _struct_pb2.Struct
    error_code: str
    target_type: str
    target_id: str
    def __init__(self, job_id: _Optional[str] = ..., job_type: _Optional[str] = ..., status: _Optional[_Union[_job_pb2.JobStatus, str]] = ..., output: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., error_code: _Optional[str] = ..., target_type: _Optional[str] = ..., target_id: _Optional[str] = ...) -> None: ...

class FetchDependencyResultsResponse(_message.Message):
    __slots__ = ("results", "more")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[DependencyResult]
    more: bool
    def __init__(self, results: _Optional[_Iterable[_Union[DependencyResult, _Mapping]]] = ..., more: _Optional[bool] = ...) -> None: ...

class DeclareJobTypeRequest(_message.Message):
    __slots__ = ("worker_id", "spec")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    spec: _job_type_pb2.JobTypeSpec
    def __init__(self, worker_id: _Optional[str] = ..., spec: _Optional[_Union[_job_type_pb2.JobTypeSpec, _Mapping]] = ...) -> None: ...

class DeclareJobTypeResponse(_message.Message):
    __slots__ = ("first_declared_by", "first_declared_at")
    FIRST_DECLARED_BY_FIELD_NUMBER: _ClassVar[int]
    FIRST_DECLARED_AT_FIELD_NUMBER: _ClassVar[int]
    first_declared_by: str
    first_declared_at: _timestamp_pb2.Timestamp
    def __init__(self, first_declared_by: _Optional[str] = ..., first_declared_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
