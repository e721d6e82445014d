from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class UsageGrouping(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    USAGE_GROUPING_UNSPECIFIED: _ClassVar[UsageGrouping]
    USAGE_GROUPING_DAY: _ClassVar[UsageGrouping]
    USAGE_GROUPING_MODEL: _ClassVar[UsageGrouping]
    USAGE_GROUPING_JOB_TYPE: _ClassVar[UsageGrouping]
    USAGE_GROUPING_USER: _ClassVar[UsageGrouping]
USAGE_GROUPING_UNSPECIFIED: UsageGrouping
USAGE_GROUPING_DAY: UsageGrouping
USAGE_GROUPING_MODEL: UsageGrouping
USAGE_GROUPING_JOB_TYPE: UsageGrouping
USAGE_GROUPING_USER: UsageGrouping

class GetUsageRequest(_message.Message):
    __slots__ = ("user_id", "start_time", "end_time", "group_by")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    GROUP_BY_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    group_by: _containers.RepeatedScalarFieldContainer[UsageGrouping]
    def __init__(self, user_id: _Optional[str] = ..., start_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., group_by: _Optional[_Iterable[_Union[UsageGrouping, str]]] = ...) -> None: ...

class UsageTotals(_message.Message):
    __slots__ = ("calls", "failed_calls", "input_tokens", "output_tokens", "cost_usd")
    CALLS_FIELD_NUMBER: _ClassVar[int]
    FAILED_CALLS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    calls: int
    failed_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: str
    def __init__(self, calls: _Optional[int] = ..., failed_calls: _Optional[int] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cost_usd: _Optional[str] = ...) -> None: ...

class UsageGroup(_message.Message):
    __slots__ = ("day", "provider", "model", "job_type", "user_id", "totals")
    DAY_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    JOB_TYPE_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    TOTALS_FIELD_NUMBER: _ClassVar[int]
    day: _timestamp_pb2.Timestamp
    provider: str
    model: str
    job_type: str
    user_id: str
    totals: UsageTotals
    def __init__(self, day: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., provider: _Optional[str] = ..., model: _Optional[str] = ..., job_type: _Optional[str] = ..., user_id: _Optional[str] = ..., totals: _Optional[_Union[UsageTotals, _Mapping]] = ...) -> None: ...

class GetUsageResponse(_message.Message):
    __slots__ = ("groups", "totals")
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    TOTALS_FIELD_NUMBER: _ClassVar[int]
    groups: _containers.RepeatedCompositeFieldContainer[UsageGroup]
    totals: UsageTotals
    def __init__(self, groups: _Optional[_Iterable[_Union[UsageGroup, _Mapping]]] = ..., totals: _Optional[_Union[UsageTotals, _Mapping]] = ...) -> None: ...
