"""The generated code in shared/pb matches proto/ (`make check-generate`), and the check
really fails when it does not."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "generate_protos.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_protos_under_test", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


generate_protos = _load_script()


def _check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "scripts" / "generate_protos.py"), "--check"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_generated_code_is_current() -> None:
    result = _check(ROOT)
    assert result.returncode == 0, (
        f"shared/pb is stale; run `make gen`\n{result.stdout}\n{result.stderr}"
    )


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """proto/, third_party/, both generated copies (shared/pb, the client's _pb) and
    scripts/ copied: the script works on the copy's root."""
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "proto", root / "proto")
    shutil.copytree(ROOT / "third_party", root / "third_party")
    shutil.copytree(ROOT / "shared" / "pb", root / "shared" / "pb", ignore=_pycache)
    client_pb = Path("client") / "durable_jobs_client" / "_pb"
    shutil.copytree(ROOT / client_pb, root / client_pb, ignore=_pycache)
    shutil.copytree(ROOT / "scripts", root / "scripts", ignore=_pycache)
    return root


def _pycache(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if n == "__pycache__"]


def test_the_check_passes_on_an_unchanged_copy(repo_copy: Path) -> None:
    # The baseline for the next tests: a failure there is the change's doing.
    result = _check(repo_copy)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_check_fails_when_a_proto_changed(repo_copy: Path) -> None:
    proto = repo_copy / "proto" / "jobs" / "v1" / "job.proto"
    proto.write_text(proto.read_text() + "\nmessage StaleCheckProbe {\n  string probe = 1;\n}\n")
    result = _check(repo_copy)
    assert result.returncode == 1
    assert "stale" in result.stdout
    assert "job_pb2.py" in result.stdout


def test_the_check_fails_when_a_generated_file_was_edited(repo_copy: Path) -> None:
    generated = repo_copy / "shared" / "pb" / "jobs" / "v1" / "job_pb2_grpc.py"
    generated.write_text(generated.read_text() + "\n# edited by hand\n")
    result = _check(repo_copy)
    assert result.returncode == 1
    assert "job_pb2_grpc.py" in result.stdout


def test_the_check_fails_when_a_generated_file_is_missing(repo_copy: Path) -> None:
    (repo_copy / "shared" / "pb" / "jobs" / "v1" / "job_pb2.pyi").unlink()
    result = _check(repo_copy)
    assert result.returncode == 1
    assert "job_pb2.pyi" in result.stdout


def test_the_check_fails_when_shared_pb_is_missing(repo_copy: Path) -> None:
    shutil.rmtree(repo_copy / "shared" / "pb")
    result = _check(repo_copy)
    assert result.returncode == 1
    assert "shared/pb missing" in result.stdout


# --- differences() ---------------------------------------------------------------------


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_differences_of_equal_trees_is_empty(tmp_path: Path) -> None:
    files = {"a.py": "a = 1\n", "jobs/v1/b_pb2.py": "b = 2\n", "jobs/__init__.py": ""}
    left = _tree(tmp_path / "left", files)
    right = _tree(tmp_path / "right", files)
    assert generate_protos.differences(left, right) == []


def test_differences_finds_every_kind_of_change(tmp_path: Path) -> None:
    left = _tree(
        tmp_path / "left",
        {
            "same.py": "same\n",
            "changed.py": "old\n",
            "only_left.py": "x\n",
            "jobs/v1/deep_changed.py": "one\n",
            "jobs/v1/deep_same.py": "same\n",
            "jobs/v1/deep_only_left.pyi": "x\n",
        },
    )
    right = _tree(
        tmp_path / "right",
        {
            "same.py": "same\n",
            "changed.py": "newer\n",
            "only_right.py": "y\n",
            "jobs/v1/deep_changed.py": "two two\n",
            "jobs/v1/deep_same.py": "same\n",
        },
    )
    assert sorted(generate_protos.differences(left, right)) == [
        "changed.py",
        "deep_changed.py",
        "deep_only_left.pyi",
        "only_left.py",
        "only_right.py",
    ]


def test_differences_ignores_pycache(tmp_path: Path) -> None:
    left = _tree(tmp_path / "left", {"a.py": "a\n", "__pycache__/a.cpython-311.pyc": "x"})
    right = _tree(tmp_path / "right", {"a.py": "a\n", "jobs/__pycache__/b.pyc": "y"})
    (left / "jobs").mkdir()
    assert generate_protos.differences(left, right) == []


def test_rewrite_imports_points_at_the_package() -> None:
    source = "from jobs.v1 import job_pb2 as jobs_dot_v1_dot_job__pb2\nimport grpc\n"
    assert generate_protos.rewrite_imports(source) == (
        "from shared.pb.jobs.v1 import job_pb2 as jobs_dot_v1_dot_job__pb2\nimport grpc\n"
    )
