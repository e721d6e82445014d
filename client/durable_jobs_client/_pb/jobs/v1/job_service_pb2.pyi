from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.rpc import status_pb2 as _status_pb2
from durable_jobs_client._pb.jobs.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateJobRequest(_message.Message):
    __slots__ = ("user_id", "job_type", "input", "idempotency_key", "priority", "credential_mode", "credential_id", "run_at", "delay", "depends_on", "dependency_policy", "deadline", "target_type", "target_id", "prompt_version", "output_schema_version")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_MODE_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_AT_FIELD_NUMBER: _ClassVar[int]
    DELAY_FIELD_NUMBER: _ClassVar[int]
    DEPENDS_ON_FIELD_NUMBER: _ClassVar[int]
    DEPENDENCY_POLICY_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    TARGET_TYPE_FIELD_NUMBER: _ClassVar[int]
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    PROMPT_VERSION_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    job_type: str
    input: _struct_pb2.Struct
    idempotency_key: str
    priority: int
    credential_mode: _job_pb2.CredentialMode
    credential_id: str
    run_at: _timestamp_pb2.Timestamp
    delay: _duration_pb2.Duration
    depends_on: _containers.RepeatedScalarFieldContainer[str]
    dependency_policy: _job_pb2.DependencyPolicy
    deadline: _timestamp_pb2.Timestamp
    target_type: str
    target_id: str
    prompt_version: str
    output_schema_version: str
    def __init__(self, user_id: _Optional[str] = ..., job_type: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., priority: _Optional[int] = ..., credential_mode: _Optional[_Union[_job_pb2.CredentialMode, str]] = ..., credential_id: _Optional[str] = ..., run_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., delay: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., depends_on: _Optional[_Iterable[str]] = ..., dependency_policy: _Optional[_Union[_job_pb2.DependencyPolicy, str]] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., target_type: _Optional[str] = ..., target_id: _Optional[str] = ..., prompt_version: _Optional[str] = ..., output_schema_version: _Optional[str] = ...) -> None: ...

class CreateJobResponse(_message.Message):
    __slots__ = ("job", "created")
    JOB_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    created: bool
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., created: bool = ...) -> None: ...

class GetJobRequest(_message.Message):
    __slots__ = ("job_id", "user_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    user_id: str
    def __init__(self, job_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class GetJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class CancelJobRequest(_message.Message):
    __slots__ = ("job_id", "user_id")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    user_id: str
    def __init__(self, job_id: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class CancelJobResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ("user_id", "page_size", "page_token", "target_type", "target_id", "id_suffix")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TARGET_TYPE_FIELD_NUMBER: _ClassVar[int]
    TARGET_ID_FIELD_NUMBER: _ClassVar[int]
    ID_SUFFIX_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    page_size: int
    page_token: str
    target_type: str
    target_id: str
    id_suffix: str
    def __init__(self, user_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., target_type: _Optional[str] = ..., target_id: _Optional[str] = ..., id_suffix: _Optional[str] = ...) -> None: ...

class ListJobsResponse(_message.Message):
    __slots__ = ("jobs", "next_page_token")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[_job_pb2.Job]
    next_page_token: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[_job_pb2.Job, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchJobRequest(_message.Message):
    __slots__ = ("job_id", "user_id", "include_partial_output")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PARTIAL_OUTPUT_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    user_id: str
    include_partial_output: bool
    def __init__(self, job_id: _Optional[str] = ..., user_id: _Optional[str] = ..., include_partial_output: bool = ...) -> None: ...

class WatchJobResponse(_message.Message):
    __slots__ = ("job", "partial")
    JOB_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    job: _job_pb2.Job
    partial: PartialOutput
    def __init__(self, job: _Optional[_Union[_job_pb2.Job, _Mapping]] = ..., partial: _Optional[_Union[PartialOutput, _Mapping]] = ...) -> None: ...

class CreateJobsRequest(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[CreateJobRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[CreateJobRequest, _Mapping]]] = ...) -> None: ...

class CreateJobResult(_message.Message):
    __slots__ = ("response", "error")
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    response: CreateJobResponse
    error: _status_pb2.Status
    def __init__(self, response: _Optional[_Union[CreateJobResponse, _Mapping]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class CreateJobsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CreateJobResult]
    def __init__(self, results: _Optional[_Iterable[_Union[CreateJobResult, _Mapping]]] = ...) -> None: ...

class SendSignalRequest(_message.Message):
    __slots__ = ("job_id", "user_id", "name", "payload", "idempotency_key")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    job_id: str
    user_id: str
    name: str
    payload: _struct_pb2.Struct
    idempotency_key: str
    def __init__(self, job_id: _Optional[str] = ..., user_id: _Optional[str] = ..., name: _Optional[str] = ..., payload: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SendSignalResponse(_message.Message):
    __slots__ = ("signal", "created")
    SIGNAL_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    signal: _job_pb2.ReceivedSignal
    created: bool
    def __init__(self, signal: _Optional[_Union[_job_pb2.ReceivedSignal, _Mapping]] = ..., created: bool = ...) -> None: ...

class PartialOutput(_message.Message):
    __slots__ = ("text", "seq", "attempt", "call", "offset")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    CALL_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    text: str
    seq: int
    attempt: int
    call: int
    offset: int
    def __init__(self, text: _Optional[str] = ..., seq: _Optional[int] = ..., attempt: _Optional[int] = ..., call: _Optional[int] = ..., offset: _Optional[int] = ...) -> None: ...
