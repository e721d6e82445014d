"""Numbers as their JSON said (docs/api.md, "Numbers in inputs and outputs"): a Struct's whole
doubles come back as integers, and nothing else changes."""

from __future__ import annotations

from durable_jobs_client import plain, to_python
from durable_jobs_client.protos import job_pb2
from google.protobuf import struct_pb2


def test_whole_numbers_become_integers_and_fractions_stay_floats() -> None:
    struct = struct_pb2.Struct()
    struct.update(
        {"score": 29, "sleep_ms": 800, "ratio": 29.5, "nested": {"items": [1, 2.25, -0.0]}}
    )
    value = to_python(struct)
    assert value == {"score": 29, "sleep_ms": 800, "ratio": 29.5, "nested": {"items": [1, 2.25, 0]}}
    assert [type(value["score"]), type(value["ratio"])] == [int, float]
    assert type(value["nested"]["items"][0]) is int


def test_a_number_a_double_cannot_count_exactly_stays_a_float() -> None:
    assert plain(2.0**53) == 2**53
    assert type(plain(2.0**53 + 2)) is float
    assert type(plain(float("inf"))) is float
    assert plain([True, "29.0", None]) == [True, "29.0", None]  # booleans and text kept


def test_a_job_read_through_to_python_shows_its_output_as_the_worker_wrote_it() -> None:
    job = job_pb2.Job(id="j", attempt_count=2)
    job.output.update({"score": 29})
    shown = to_python(job, preserving_proto_field_name=True)
    assert shown["output"] == {"score": 29}
    assert shown["attempt_count"] == 2
