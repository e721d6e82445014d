"""Generate the Python code for proto/jobs/v1 into shared/pb, and the copy the client
distribution ships (client/durable_jobs_client/_pb: the services a client calls, JobService,
AdminService and CredentialService, never the worker's ExecutorService, under the client's
own import path), or check that both are current.

protoc names modules after their proto paths (``jobs.v1.job_pb2``); our generated package
lives at ``shared.pb.jobs.v1``, so the absolute imports between generated modules are
rewritten. ``--check`` regenerates into a temporary folder and fails when anything differs.

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
import sys
import tempfile
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
_IMPORT = re.compile(r"^from jobs\.v1 import ", re.MULTILINE)


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if shared/pb is stale")
    check = parser.parse_args().check
    targets = (
        (OUTPUT, (), PACKAGE_PREFIX),
        (CLIENT_OUTPUT, CLIENT_PROTOS, CLIENT_PREFIX),
    )
    with tempfile.TemporaryDirectory() as tmp:
        for n, (output, only, prefix) in enumerate(targets):
            fresh = Path(tmp) / f"pb{n}"
            generate(fresh, only, prefix)
            if check:
                name = output.relative_to(ROOT)
                stale = differences(fresh, output) if output.exists() else [f"{name} missing"]
                if stale:
                    print(f"{name} is stale; run `make gen`:", ", ".join(stale))
                    return 1
                continue
            shutil.rmtree(output, ignore_errors=True)
            shutil.copytree(fresh, output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
