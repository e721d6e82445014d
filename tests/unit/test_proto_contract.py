"""What other teams generating from proto/ rely on (docs/api.md, "Generate a client"): every field
says how it behaves (google.api.field_behavior), every file names its package for every
language, and the vendored googleapis files are exactly the ones the wheel ships."""

from __future__ import annotations

import re
from pathlib import Path

import google.api
import pytest
from google.api import field_behavior_pb2
from google.protobuf.descriptor import Descriptor, FileDescriptor

from shared.errors import Reason
from shared.pb.jobs.v1 import (
    admin_service_pb2,
    credential_service_pb2,
    errors_pb2,
    executor_service_pb2,
    job_pb2,
    job_service_pb2,
    job_type_pb2,
    schedule_service_pb2,
    usage_service_pb2,
)

ROOT = Path(__file__).resolve().parents[2]
FILES: list[FileDescriptor] = [
    m.DESCRIPTOR
    for m in (
        job_pb2,
        job_service_pb2,
        job_type_pb2,
        admin_service_pb2,
        credential_service_pb2,
        executor_service_pb2,
        usage_service_pb2,
        schedule_service_pb2,
        errors_pb2,
    )
]
LANGUAGE_OPTIONS = (
    "csharp_namespace",
    "java_multiple_files",
    "java_package",
    "php_namespace",
    "ruby_package",
    "objc_class_prefix",
)


def _messages(descriptors: list[Descriptor]) -> list[Descriptor]:
    found = []
    for d in descriptors:
        found += [d, *_messages(list(d.nested_types))]
    return found


MESSAGES = [m for f in FILES for m in _messages(list(f.message_types_by_name.values()))]


def test_every_proto_file_is_compiled_here() -> None:
    names = {f.name for f in FILES}
    assert names == {f"jobs/v1/{p.name}" for p in (ROOT / "proto" / "jobs" / "v1").glob("*.proto")}


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: m.full_name)
def test_every_field_declares_its_behavior(message: Descriptor) -> None:
    bare = [
        f.name
        for f in message.fields
        if not f.GetOptions().Extensions[field_behavior_pb2.field_behavior]
    ]
    assert bare == [], f"{message.full_name}: fields without google.api.field_behavior"


def test_answers_are_output_only_and_ids_of_a_request_are_required() -> None:
    behavior = field_behavior_pb2.FieldBehavior
    job = job_pb2.Job.DESCRIPTOR.fields_by_name
    assert list(job["id"].GetOptions().Extensions[field_behavior_pb2.field_behavior]) == [
        behavior.OUTPUT_ONLY
    ]
    get = job_service_pb2.GetJobRequest.DESCRIPTOR.fields_by_name["job_id"]
    assert list(get.GetOptions().Extensions[field_behavior_pb2.field_behavior]) == [
        behavior.REQUIRED
    ]


@pytest.mark.parametrize("file", FILES, ids=lambda f: f.name)
def test_every_file_names_its_package_for_every_language(file: FileDescriptor) -> None:
    options = file.GetOptions()
    missing = [o for o in LANGUAGE_OPTIONS if not options.HasField(o)]
    assert missing == []
    assert options.java_multiple_files


@pytest.mark.parametrize("file", FILES, ids=lambda f: f.name)
def test_no_file_claims_a_go_import_path(file: FileDescriptor) -> None:
    """No Go module of ours exists to import from: a team generating Go code names its own
    (buf managed mode's go_package_prefix)."""
    assert not file.GetOptions().HasField("go_package")


def test_error_reasons_in_the_proto_are_every_reason_the_service_sends() -> None:
    names = {
        v.name.removeprefix("ERROR_REASON_")
        for v in errors_pb2.ErrorReason.DESCRIPTOR.values
        if v.number
    }
    assert names == {r.value for r in Reason}


@pytest.mark.parametrize("path", sorted((ROOT / "proto").rglob("*.proto")), ids=lambda p: p.name)
def test_public_comments_stand_alone(path: Path) -> None:
    """Teams read these protos without this repository: no comment may send them to a
    document they do not have."""
    cited = re.findall(r"//.*\b(README|seed \d|docs/|ADR \d|adr/)", path.read_text())
    assert cited == []


@pytest.mark.parametrize("name", ["google/rpc/status.proto", "google/api/field_behavior.proto"])
def test_vendored_googleapis_protos_are_the_wheels(name: str) -> None:
    wheel = Path(next(iter(google.api.__path__))).parent.parent
    vendored = ROOT / "third_party" / "googleapis" / name
    assert vendored.read_bytes() == (wheel / name).read_bytes()


def test_no_other_googleapis_file_is_vendored() -> None:
    """Only what proto/ imports: the list shrinks to nothing once buf deps can be fetched."""
    vendored = {
        str(p.relative_to(ROOT / "third_party" / "googleapis"))
        for p in (ROOT / "third_party" / "googleapis").rglob("*.proto")
    }
    imported = {
        m
        for p in (ROOT / "proto").rglob("*.proto")
        for m in re.findall(r'^import "(google/(?:api|rpc)/[^"]+)";', p.read_text(), re.M)
    }
    assert vendored == imported


def _services(root: Path) -> set[str]:
    return {
        name
        for p in root.rglob("*.proto")
        for name in re.findall(r"^service (\w+)", p.read_text(), re.M)
    }


def test_the_release_buf_breaking_guards_holds_every_service() -> None:
    """`make lint-proto` compares proto/ with the release the Makefile names: a service
    missing from it would be guarded by nothing."""
    [release] = re.findall(r"^PROTO_RELEASE := (\S+)$", (ROOT / "Makefile").read_text(), re.M)
    newest = max(
        (ROOT / "proto-release").iterdir(), key=lambda p: tuple(map(int, p.name[1:].split(".")))
    )
    assert ROOT / release == newest
    assert _services(ROOT / release / "proto") == _services(ROOT / "proto")
