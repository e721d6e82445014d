import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.rpc import status_pb2 as _status_pb2
from shared.pb.jobs.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EraseUserDataRequest(_message.Message):
    __slots__ = ("user_id", "dry_run", "cancel_running")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    CANCEL_RUNNING_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    dry_run: bool
    cancel_running: bool
    def __init__(self, user_id: _Optional[str] = ..., dry_run: _Optional[bool] = ..., cancel_running: _Optional[bool] = ...) -> None: ...

class EraseUserDataResponse(_message.Message):
    __slots__ = ("jobs", "artifacts", "steps", "signals", "events", "schedules", "credentials", "usage_records", "data_key_destroyed", "unfinished", "cancelled")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    ARTIFACTS_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    SIGNALS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    SCHEDULES_FIELD_NUMBER: _ClassVar[int]
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    USAGE_RECORDS_FIELD_NUMBER: _ClassVar[int]
    DATA_KEY_DESTROYED_FIELD_NUMBER: _ClassVar[int]
    UNFINISHED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    jobs: int
    artifacts: int
    steps: int
    signals: int
    events: int
    schedules: int
    credentials: int
    usage_records: int
    data_key_destroyed: bool
    unfinished: int
    cancelled: int
    def __init__(self, jobs: _Optional[int] = ..., artifacts: _Optional[int] = ..., steps: _Optional[int] = ..., signals: _Optional[int] = ..., events: _Optional[int] = ..., schedules: _Optional[int] = ..., credentials: _Optional[int] = ..., usage_records: _Optional[int] = ..., data_key_destroyed: _Optional[bool] = ..., unfinished: _Optional[int] = ..., cancelled: _Optional[int] = ...) -> None: ...

class CountJobsRequest(_message.Message):
    __slots__ = ("since", "until")
    SINCE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    since: _timestamp_pb2.Timestamp
    until: _timestamp_pb2.Timestamp
    def __init__(self, since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class StatusCount(_message.Message):
    __slots__ = ("status", "count")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    status: _job_pb2.JobStatus
    count: int
    def __init__(self, status: _Optional[_Union[_job_pb2.JobStatus, str]] = ..., count: _Optional[int] = ...) -> None: ...

class CountJobsResponse(_message.Message):
    __slots__ = ("since", "until", "created", "finished", "unfinished", "delayed")
    SINCE_FIELD_NUMBER: _ClassVar[int]
    UNTIL_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    UNFINISHED_FIELD_NUMBER: _ClassVar[int]
    DELAYED_FIELD_NUMBER: _ClassVar[int]
    since: _timestamp_pb2.Timestamp
    until: _timestamp_pb2.Timestamp
    created: _containers.RepeatedCompositeFieldContainer[StatusCount]
    finished: _containers.RepeatedCompositeFieldContainer[StatusCount]
    unfinished: _containers.RepeatedCompositeFieldContainer[StatusCount]
    delayed: int
    def __init__(self, since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created: _Optional[_Iterable[_Union[StatusCount, _Mapping]]] = ..., finished: _Optional[_Iterable[_Union[StatusCount, _Mapping]]] = ..., unfinished: _Optional[_Iterable[_Union[StatusCount, _Mapping]]] = ..., delayed: _Optional[int] = ...) -> None: ...

class OpenConsoleSessionRequest(_message.Message):
    __slots__ = ("idle_timeout", "max_age")
    IDLE_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    MAX_AGE_FIELD_NUMBER: _ClassVar[int]
    idle_timeout: _duration_pb2.Duration
    max_age: _duration_pb2.Duration
    def __init__(self, idle_timeout: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., max_age: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class OpenConsoleSessionResponse(_message.Message):
    __slots__ = ("session_id", "principal", "expires_at")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    principal: str
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, session_id: _Optional[str] = ..., principal: _Optional[str] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CheckConsoleSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CheckConsoleSessionResponse(_message.Message):
    __slots__ = ("principal", "expires_at")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    principal: str
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, principal: _Optional[str] = ..., expires_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CloseConsoleSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CloseConsoleSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RevokeConsoleSessionsRequest(_message.Message):
    __slots__ = ("principal",)
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    principal: str
    def __init__(self, principal: _Optional[str] = ...) -> None: ...

class RevokeConsoleSessionsResponse(_message.Message):
    __slots__ = ("revoked",)
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    revoked: int
    def __init__(self, revoked: _Optional[int] = ...) -> None: ...

class ListWorkersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Worker(_message.Message):
    __slots__ = ("worker_id", "connected_at", "definitions", "running_jobs")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_AT_FIELD_NUMBER: _ClassVar[int]
    DEFINITIONS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_JOBS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    connected_at: _timestamp_pb2.Timestamp
    definitions: _containers.RepeatedScalarFieldContainer[str]
    running_jobs: int
    def __init__(self, worker_id: _Optional[str] = ..., connected_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., definitions: _Optional[_Iterable[str]] = ..., running_jobs: _Optional[int] = ...) -> None: ...

class ListWorkersResponse(_message.Message):
    __slots__ = ("workers",)
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[Worker]
    def __init__(self, workers: _Optional[_Iterable[_Union[Worker, _Mapping]]] = ...) -> None: ...

class JobSelection(_message.Message):
    __slots__ = ("job_ids", "job_type", "status", "queue", "user_id", "created_after", "created_before", "target_type", "target_id")
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    TARGET_TYPE_FIELD_NUMBER: _ClassVar[int]
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    job_type: str
    status: _job_pb2.JobStatus
    queue: str
    user_id: str
    created_after: _timestamp_pb2.Timestamp
    created_before: _timestamp_pb2.Timestamp
    target_type: str
    target_id: str
    def __init__(self, job_ids: _Optional[_Iterable[str]] = ..., job_type: _Optional[str] = ..., status: _Optional[_Union[_job_pb2.JobStatus, str]] = ..., queue: _Optional[str] = ..., user_id: _Optional[str] = ..., created_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., target_type: _Optional[str] = ..., target_id: _Optional[str] = ...) -> None: ...

class CancelJobsRequest(_message.Message):
    __slots__ = ("selection", "dry_run", "limit", "page_token", "reason")
    SELECTION_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    selection: JobSelection
    dry_run: bool
    limit: int
    page_token: str
    reason: str
    def __init__(self, selection: _Optional[_Union[JobSelection, _Mapping]] = ..., dry_run: _Optional[bool] = ..., limit: _Optional[int] = ..., page_token: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelJobsResponse(_message.Message):
    __slots__ = ("cancelled", "skipped", "matched", "job_ids", "next_page_token")
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    JOB_IDS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    cancelled: int
    skipped: int
    matched: int
    job_ids: _containers.RepeatedScalarFieldContainer[str]
    next_page_token: str
    def __init__(self, cancelled: _Optional[int] = ..., skipped: _Optional[int] = ..., matched: _Optional[int] = ..., job_ids: _Optional[_Iterable[str]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RetryJobsRequest(_message.Message):
    __slots__ = ("selection", "dry_run", "limit", "page_token", "reason")
    SELECTION_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    selection: JobSelection
    dry_run: bool
    limit: int
    page_token: str
    reason: str
    def __init__(self, selection: _Optional[_Union[JobSelection, _Mapping]] = ..., dry_run: _Optional[bool] = ..., limit: _Optional[int] = ..., page_token: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class RetryJobOutcome(_message.Message):
    __slots__ = ("job_id", "new_job_id", "status")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NEW_JOB_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    new_job_id: str
    status: _status_pb2.Status
    def __init__(self, job_id: _Optional[str] = ..., new_job_id: _Optional[str] = ..., status: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class RetryJobsResponse(_message.Message):
    __slots__ = ("retried", "matched", "outcomes", "next_page_token")
    RETRIED_FIELD_NUMBER: _ClassVar[int]
    MATCHED_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    retried: int
    matched: int
    outcomes: _containers.RepeatedCompositeFieldContainer[RetryJobOutcome]
    next_page_token: str
    def __init__(self, retried: _Optional[int] = ..., matched: _Optional[int] = ..., outcomes: _Optional[_Iterable[_Union[RetryJobOutcome, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class AdminListJobsRequest(_message.Message):
    __slots__ = ("job_type", "status", "queue", "user_id", "created_after", "created_before", "page_size", "page_token", "target_type", "target_id", "id_suffix")
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TARGET_TYPE_FIELD_NUMBER: _ClassVar[int]
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    ID_SUFFIX_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    status: _job_pb2.JobStatus
    queue: str
    user_id: str
    created_after: _timestamp_pb2.Timestamp
    created_before: _timestamp_pb2.Timestamp
    page_size: int
    page_token: str
    target_type: str
    target_id: str
    id_suffix: str
    def __init__(self, job_type: _Optional[str] = ..., status: _Optional[_Union[_job_pb2.JobStatus, str]] = ..., queue: _Optional[str] = ..., user_id: _Optional[str] = ..., created_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., target_type: _Optional[str] = ..., target_id: _Optional[str] = ..., id_suffix: _Optional[str] = ...) -> None: ...

class AdminListJobsResponse(_message.Message):
    __slots__ = ("jobs", "next_page_token")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_job_pb2.Job]
    next_page_token: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[_job_pb2.Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class AdminGetJobRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    def __init__(self, job_id: _Optional[str] = ...) -> None: ...

class AdminGetJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class RetryJobRequest(_message.Message):
    __slots__ = ("job_id", "idempotency_key")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    idempotency_key: str
    def __init__(self, job_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class RetryJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class ListDeadLettersRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class DeadOutboxEvent(_message.Message):
    __slots__ = ("id", "job_id", "subject", "attempts", "last_error", "created_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    id: int
    job_id: str
    subject: str
    attempts: int
    last_error: str
    created_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[int] = ..., job_id: _Optional[str] = ..., subject: _Optional[str] = ..., attempts: _Optional[int] = ..., last_error: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListDeadLettersResponse(_message.Message):
    __slots__ = ("failed_jobs", "dead_events", "next_page_token")
    FAILED_JOBS_FIELD_NUMBER: _ClassVar[int]
    DEAD_EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    failed_jobs: _containers.RepeatedCompositeFieldContainer[_job_pb2.Job]
    dead_events: _containers.RepeatedCompositeFieldContainer[DeadOutboxEvent]
    next_page_token: str
    def __init__(self, failed_jobs: _Optional[_Iterable[_Union[_job_pb2.Job, _Mapping]]] = ..., dead_events: _Optional[_Iterable[_Union[DeadOutboxEvent, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RedriveDeadLettersRequest(_message.Message):
    __slots__ = ("event_ids",)
    EVENT_IDS_FIELD_NUMBER: _ClassVar[int]
    event_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, event_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class RedriveDeadLettersResponse(_message.Message):
    __slots__ = ("redriven",)
    REDRIVEN_FIELD_NUMBER: _ClassVar[int]
    redriven: int
    def __init__(self, redriven: _Optional[int] = ...) -> None: ...

class ListJobDefinitionsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class JobDefinitionInfo(_message.Message):
    __slots__ = ("job_type", "label", "domain", "version", "queue", "default_priority", "timeout_seconds", "max_attempts", "max_concurrency", "input_schema_json", "output_schema_json", "fairness_key", "concurrency_key", "concurrency_limit", "estimated_tokens", "output_redaction", "redaction_version", "content_safety_check", "retention_seconds", "first_declared_by", "first_declared_at", "last_declared_by", "last_declared_at", "current")
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    FAIRNESS_KEY_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_REDACTION_FIELD_NUMBER: _ClassVar[int]
    REDACTION_VERSION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SAFETY_CHECK_FIELD_NUMBER: _ClassVar[int]
    RETENTION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    FIRST_DECLARED_BY_FIELD_NUMBER: _ClassVar[int]
    FIRST_DECLARED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_DECLARED_BY_FIELD_NUMBER: _ClassVar[int]
    LAST_DECLARED_AT_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    label: str
    domain: str
    version: str
    queue: str
    default_priority: int
    timeout_seconds: float
    max_attempts: int
    max_concurrency: int
    input_schema_json: str
    output_schema_json: str
    fairness_key: str
    concurrency_key: str
    concurrency_limit: int
    estimated_tokens: int
    output_redaction: _containers.RepeatedScalarFieldContainer[str]
    redaction_version: str
    content_safety_check: bool
    retention_seconds: float
    first_declared_by: str
    first_declared_at: _timestamp_pb2.Timestamp
    last_declared_by: str
    last_declared_at: _timestamp_pb2.Timestamp
    current: bool
    def __init__(self, job_type: _Optional[str] = ..., label: _Optional[str] = ..., domain: _Optional[str] = ..., version: _Optional[str] = ..., queue: _Optional[str] = ..., default_priority: _Optional[int] = ..., timeout_seconds: _Optional[float] = ..., max_attempts: _Optional[int] = ..., max_concurrency: _Optional[int] = ..., input_schema_json: _Optional[str] = ..., output_schema_json: _Optional[str] = ..., fairness_key: _Optional[str] = ..., concurrency_key: _Optional[str] = ..., concurrency_limit: _Optional[int] = ..., estimated_tokens: _Optional[int] = ..., output_redaction: _Optional[_Iterable[str]] = ..., redaction_version: _Optional[str] = ..., content_safety_check: _Optional[bool] = ..., retention_seconds: _Optional[float] = ..., first_declared_by: _Optional[str] = ..., first_declared_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_declared_by: _Optional[str] = ..., last_declared_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., current: _Optional[bool] = ...) -> None: ...

class ListJobDefinitionsResponse(_message.Message):
    __slots__ = ("definitions",)
    DEFINITIONS_FIELD_NUMBER: _ClassVar[int]
    definitions: _containers.RepeatedCompositeFieldContainer[JobDefinitionInfo]
    def __init__(self, definitions: _Optional[_Iterable[_Union[JobDefinitionInfo, _Mapping]]] = ...) -> None: ...

class PauseQueueRequest(_message.Message):
    __slots__ = ("queue",)
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class PauseQueueResponse(_message.Message):
    __slots__ = ("queue",)
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: QueueInfo
    def __init__(self, queue: _Optional[_Union[QueueInfo, _Mapping]] = ...) -> None: ...

class ResumeQueueRequest(_message.Message):
    __slots__ = ("queue",)
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: str
    def __init__(self, queue: _Optional[str] = ...) -> None: ...

class ResumeQueueResponse(_message.Message):
    __slots__ = ("queue",)
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    queue: QueueInfo
    def __init__(self, queue: _Optional[_Union[QueueInfo, _Mapping]] = ...) -> None: ...

class ListQueuesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class QueueInfo(_message.Message):
    __slots__ = ("name", "paused", "paused_at", "paused_by", "waiting", "eligible", "running", "concurrency_limit")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    PAUSED_AT_FIELD_NUMBER: _ClassVar[int]
    PAUSED_BY_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    ELIGIBLE_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    name: str
    paused: bool
    paused_at: _timestamp_pb2.Timestamp
    paused_by: str
    waiting: int
    eligible: int
    running: int
    concurrency_limit: int
    def __init__(self, name: _Optional[str] = ..., paused: _Optional[bool] = ..., paused_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., paused_by: _Optional[str] = ..., waiting: _Optional[int] = ..., eligible: _Optional[int] = ..., running: _Optional[int] = ..., concurrency_limit: _Optional[int] = ...) -> None: ...

class ListQueuesResponse(_message.Message):
    __slots__ = ("queues",)
    QUEUES_FIELD_NUMBER: _ClassVar[int]
    queues: _containers.RepeatedCompositeFieldContainer[QueueInfo]
    def __init__(self, queues: _Optional[_Iterable[_Union[QueueInfo, _Mapping]]] = ...) -> None: ...

class ListRateLimitsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RateLimitInfo(_message.Message):
    __slots__ = ("key", "requests_per_minute", "tokens_per_minute", "effective_factor", "requests_available", "tokens_available", "blocked_until", "waiting", "throttled_total")
    KEY_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_FACTOR_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    BLOCKED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    THROTTLED_TOTAL_FIELD_NUMBER: _ClassVar[int]
    key: str
    requests_per_minute: float
    tokens_per_minute: float
    effective_factor: float
    requests_available: float
    tokens_available: float
    blocked_until: _timestamp_pb2.Timestamp
    waiting: int
    throttled_total: int
    def __init__(self, key: _Optional[str] = ..., requests_per_minute: _Optional[float] = ..., tokens_per_minute: _Optional[float] = ..., effective_factor: _Optional[float] = ..., requests_available: _Optional[float] = ..., tokens_available: _Optional[float] = ..., blocked_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., waiting: _Optional[int] = ..., throttled_total: _Optional[int] = ...) -> None: ...

class ListRateLimitsResponse(_message.Message):
    __slots__ = ("limits",)
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    limits: _containers.RepeatedCompositeFieldContainer[RateLimitInfo]
    def __init__(self, limits: _Optional[_Iterable[_Union[RateLimitInfo, _Mapping]]] = ...) -> None: ...
