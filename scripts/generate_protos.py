"""Generate the Python code for proto/jobs/v1 into shared/pb, and the copy the client
distribution ships (client/durable_jobs_client/_pb: the services a client calls, JobService,
AdminService and CredentialService, never the worker's ExecutorService, under the client's
own import path), or check that both are current.

protoc names modules after their proto paths (``jobs.v1.job_pb2``); our generated package
lives at ``shared.pb.jobs.v1``, so the absolute imports between generated modules are
rewritten. ``--check`` regenerates into a temporary folder and fails when anything differs.

The two copies come from two generators. shared/pb from the dev extra's grpcio-tools (the
server runs the newest protobuf); the client's from the older grpcio-tools pinned in
client/protoc-requirements.txt, so that its stubs load on every protobuf runtime the
client supports (client/protoc-requirements.in says why that version). `make gen` installs
that generator into build/client-protoc; run under another grpcio-tools, this script hands
the client's part to that venv's Python, and a bare ``--check`` (the unit test's) skips the
client's part with a notice where the venv is missing. Name the parts (``shared``,
``client``) to have each one done or refused.

The googleapis protos we import (google/rpc/status.proto, google/api/field_behavior.proto)
resolve from third_party/googleapis, the vendored copy buf compiles too; their Python
modules are not generated here but come from the googleapis-common-protos wheel, which
ships the same files.
"""

from __future__ import annotations

import argparse
import filecmp
import re
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO_ROOT = ROOT / "proto"
GOOGLEAPIS = ROOT / "third_party" / "googleapis"
OUTPUT = ROOT / "shared" / "pb"
PACKAGE_PREFIX = "shared.pb."
CLIENT_OUTPUT = ROOT / "client" / "durable_jobs_client" / "_pb"
CLIENT_PREFIX = "durable_jobs_client._pb."
# what the client library calls: JobService, AdminService (jobctl's operator commands),
# CredentialService, and the messages they need
CLIENT_PROTOS = (
    "jobs/v1/job.proto",
    "jobs/v1/job_service.proto",
    "jobs/v1/admin_service.proto",
    "jobs/v1/credential_service.proto",
    "jobs/v1/schedule_service.proto",
    "jobs/v1/usage_service.proto",
)
# the client's generator: its pin, and the venv `make gen` installs it into
CLIENT_GENERATOR_LOCK = ROOT / "client" / "protoc-requirements.txt"
CLIENT_GENERATOR_PYTHON = ROOT / "build" / "client-protoc" / "bin" / "python"
_IMPORT = re.compile(r"^from jobs\.v1 import ", re.MULTILINE)
_TOOLS_PIN = re.compile(r"^grpcio-tools==(\S+)", re.MULTILINE)


def rewrite_imports(source: str, prefix: str = PACKAGE_PREFIX) -> str:
    """Point protoc's `from jobs.v1 import x` at our package."""
    return _IMPORT.sub(f"from {prefix}jobs.v1 import ", source)


def generate(out: Path, only: tuple[str, ...] = (), prefix: str = PACKAGE_PREFIX) -> None:
    from grpc_tools import protoc  # dev dependency: only this script needs it

    protos = list(only) or sorted(
        str(p.relative_to(PROTO_ROOT)) for p in PROTO_ROOT.rglob("*.proto")
    )
    out.mkdir(parents=True, exist_ok=True)
    args = [
        "protoc",
        f"-I{PROTO_ROOT}",
        f"-I{Path(protoc.__file__).parent / '_proto'}",
        f"-I{GOOGLEAPIS}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *protos,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    for path in out.rglob("*.py*"):
        path.write_text(rewrite_imports(path.read_text(), prefix))
    for folder in [out, *(p for p in out.rglob("*") if p.is_dir())]:
        (folder / "__init__.py").touch()


def differences(left: Path, right: Path) -> list[str]:
    cmp = filecmp.dircmp(left, right, ignore=["__pycache__"])
    found = [*cmp.left_only, *cmp.right_only, *cmp.diff_files]
    found += [f for name in cmp.common_dirs for f in differences(left / name, right / name)]
    return found


def client_generator_version() -> str | None:
    """The grpcio-tools version the client's stubs are generated with (None in a copy of
    the repository without the client's lock)."""
    if not CLIENT_GENERATOR_LOCK.exists():
        return None
    found = _TOOLS_PIN.search(CLIENT_GENERATOR_LOCK.read_text())
    if found is None:
        raise SystemExit(f"no grpcio-tools== pin in {CLIENT_GENERATOR_LOCK.relative_to(ROOT)}")
    return found.group(1)


def installed_generator_version() -> str | None:
    try:
        return metadata.version("grpcio-tools")
    except metadata.PackageNotFoundError:
        return None


def update(output: Path, only: tuple[str, ...], prefix: str, check: bool, tmp: Path) -> bool:
    """Regenerate one copy (or, with ``check``, compare it): False when it is stale."""
    fresh = tmp / output.name
    generate(fresh, only, prefix)
    name = output.relative_to(ROOT)
    if check:
        stale = differences(fresh, output) if output.exists() else [f"{name} missing"]
        if stale:
            print(f"{name} is stale; run `make gen`:", ", ".join(stale))
        return not stale
    shutil.rmtree(output, ignore_errors=True)
    shutil.copytree(fresh, output)
    return True


def client_part(check: bool, named: bool, tmp: Path) -> int:
    """The client's copy, by its own pinned generator: here when this is it, else in its
    venv; without one, a named part fails and a bare --check passes with a notice."""
    pinned = client_generator_version()
    if pinned is not None and installed_generator_version() == pinned:
        return 0 if update(CLIENT_OUTPUT, CLIENT_PROTOS, CLIENT_PREFIX, check, tmp) else 1
    venv = CLIENT_GENERATOR_PYTHON.parents[1]
    if (
        pinned is not None
        and CLIENT_GENERATOR_PYTHON.exists()
        and Path(sys.prefix).resolve() != venv.resolve()
    ):
        flags = ["--check"] if check else []
        command = [str(CLIENT_GENERATOR_PYTHON), __file__, *flags, "client"]
        return subprocess.run(command, check=False).returncode
    wanted = f"the client's stubs need grpcio-tools=={pinned} (client/protoc-requirements.txt)"
    if check and not named:
        print(f"{CLIENT_OUTPUT.relative_to(ROOT)} not checked: {wanted}; `make check-generate`")
        return 0
    print(f"{wanted}: `make gen` installs it into build/client-protoc", file=sys.stderr)
    return 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if a copy is stale")
    # no argparse choices: with nargs="*" Python 3.11 checks the empty default against them
    parser.add_argument("parts", nargs="*", help="shared, client (default: both, see above)")
    args = parser.parse_args()
    if unknown := set(args.parts) - {"shared", "client"}:
        parser.error(f"unknown parts: {', '.join(sorted(unknown))}")
    parts = args.parts or ["shared", "client"]
    with tempfile.TemporaryDirectory() as tmp:
        if "shared" in parts and not update(OUTPUT, (), PACKAGE_PREFIX, args.check, Path(tmp)):
            return 1
        if "client" in parts:
            return client_part(args.check, named=bool(args.parts), tmp=Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
