from google.api import field_behavior_pb2 as _field_behavior_pb2
from shared.pb.jobs.v1 import job_pb2 as _job_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AbortStrategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ABORT_STRATEGY_UNSPECIFIED: _ClassVar[AbortStrategy]
    ABORT_STRATEGY_FAIL: _ClassVar[AbortStrategy]
    ABORT_STRATEGY_RETRY: _ClassVar[AbortStrategy]
ABORT_STRATEGY_UNSPECIFIED: AbortStrategy
ABORT_STRATEGY_FAIL: AbortStrategy
ABORT_STRATEGY_RETRY: AbortStrategy

class JobTypeSpec(_message.Message):
    __slots__ = ("job_type", "version", "label", "domain", "queue", "input_schema_json", "output_schema_json", "input_schema_version", "output_schema_version", "default_priority", "timeout_seconds", "max_attempts", "backoff_base_seconds", "backoff_max_seconds", "abort_strategy", "cancellable", "concurrency", "fairness_key", "concurrency_key", "concurrency_limit", "estimated_tokens", "default_target_type", "default_target_path", "snapshot_fields", "snapshot_ttl_seconds", "output_redaction", "redaction_version", "content_safety_check", "retention_seconds", "prompt_key", "prompt_version", "model_tier", "child_job_types", "credential_modes", "deadline_seconds")
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_JSON_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_PRIORITY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_BASE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BACKOFF_MAX_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ABORT_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    CANCELLABLE_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_FIELD_NUMBER: _ClassVar[int]
    FAIRNESS_KEY_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    CONCURRENCY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    ESTIMATED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_TARGET_TYPE_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_TARGET_PATH_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FIELDS_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_REDACTION_FIELD_NUMBER: _ClassVar[int]
    REDACTION_VERSION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SAFETY_CHECK_FIELD_NUMBER: _ClassVar[int]
    RETENTION_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_KEY_FIELD_NUMBER: _ClassVar[int]
    PROMPT_VERSION_FIELD_NUMBER: _ClassVar[int]
    MODEL_TIER_FIELD_NUMBER: _ClassVar[int]
    CHILD_JOB_TYPES_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_MODES_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    job_type: str
    version: str
    label: str
    domain: str
    queue: str
    input_schema_json: str
    output_schema_json: str
    input_schema_version: str
    output_schema_version: str
    default_priority: int
    timeout_seconds: float
    max_attempts: int
    backoff_base_seconds: float
    backoff_max_seconds: float
    abort_strategy: AbortStrategy
    cancellable: bool
    concurrency: int
    fairness_key: str
    concurrency_key: str
    concurrency_limit: int
    estimated_tokens: int
    default_target_type: str
    default_target_path: str
    snapshot_fields: _containers.RepeatedScalarFieldContainer[str]
    snapshot_ttl_seconds: float
    output_redaction: _containers.RepeatedScalarFieldContainer[str]
    redaction_version: str
    content_safety_check: bool
    retention_seconds: float
    prompt_key: str
    prompt_version: str
    model_tier: str
    child_job_types: _containers.RepeatedScalarFieldContainer[str]
    credential_modes: _containers.RepeatedScalarFieldContainer[_job_pb2.CredentialMode]
    deadline_seconds: float
    def __init__(self, job_type: _Optional[str] = ..., version: _Optional[str] = ..., label: _Optional[str] = ..., domain: _Optional[str] = ..., queue: _Optional[str] = ..., input_schema_json: _Optional[str] = ..., output_schema_json: _Optional[str] = ..., input_schema_version: _Optional[str] = ..., output_schema_version: _Optional[str] = ..., default_priority: _Optional[int] = ..., timeout_seconds: _Optional[float] = ..., max_attempts: _Optional[int] = ..., backoff_base_seconds: _Optional[float] = ..., backoff_max_seconds: _Optional[float] = ..., abort_strategy: _Optional[_Union[AbortStrategy, str]] = ..., cancellable: _Optional[bool] = ..., concurrency: _Optional[int] = ..., fairness_key: _Optional[str] = ..., concurrency_key: _Optional[str] = ..., concurrency_limit: _Optional[int] = ..., estimated_tokens: _Optional[int] = ..., default_target_type: _Optional[str] = ..., default_target_path: _Optional[str] = ..., snapshot_fields: _Optional[_Iterable[str]] = ..., snapshot_ttl_seconds: _Optional[float] = ..., output_redaction: _Optional[_Iterable[str]] = ..., redaction_version: _Optional[str] = ..., content_safety_check: _Optional[bool] = ..., retention_seconds: _Optional[float] = ..., prompt_key: _Optional[str] = ..., prompt_version: _Optional[str] = ..., model_tier: _Optional[str] = ..., child_job_types: _Optional[_Iterable[str]] = ..., credential_modes: _Optional[_Iterable[_Union[_job_pb2.CredentialMode, str]]] = ..., deadline_seconds: _Optional[float] = ...) -> None: ...
