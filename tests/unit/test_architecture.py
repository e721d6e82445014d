"""The dependency rules of docs/style.md hold: import-linter's contracts in pyproject.toml, and
modules stay small."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_import_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).parent / "lint-imports"
    run = subprocess.run(
        [str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True
    )

    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 broken" in run.stdout


# The hand-written product code: every package a deployment or a user runs (tests, the
# benchmarks, generated code and migrations aside).
PRODUCT = ("job_service", "worker_service", "shared", "jobctl", "console", "jobtypes", "devstack")
GENERATED = ("/pb/", "/_pb/", "/migrations/")
# The ceiling (a test fails above it) and, below it, where a module is near enough that
# the next feature should split it first (listed, never failed: see the test).
MAX_MODULE_LINES = 380
SOFT_MODULE_LINES = 350
MAX_MEDIAN_LINES = 120


def product_modules() -> dict[str, int]:
    roots = [ROOT / p for p in PRODUCT] + [ROOT / "client" / "durable_jobs_client"]
    return {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for root in roots
        for path in root.rglob("*.py")
        if not any(part in path.as_posix() for part in GENERATED)
    }


def test_no_product_module_is_over_the_ceiling_and_the_median_is_small() -> None:
    sizes = product_modules()
    too_long = {path: n for path, n in sizes.items() if n > MAX_MODULE_LINES}
    lengths = sorted(sizes.values())

    assert len(sizes) > 100
    assert not too_long, f"split these modules by concern: {too_long}"
    assert lengths[len(lengths) // 2] <= MAX_MEDIAN_LINES


def near_the_ceiling() -> dict[str, int]:
    """The product modules over the soft limit (and within the ceiling), longest first."""
    sizes = product_modules()
    near = [(p, n) for p, n in sizes.items() if SOFT_MODULE_LINES < n <= MAX_MODULE_LINES]
    return dict(sorted(near, key=lambda pn: (-pn[1], pn[0])))


def test_modules_near_the_ceiling_are_listed() -> None:
    """The soft limit is a report, not a gate: a module between SOFT_MODULE_LINES and the
    ceiling is one to split before the next feature lands in it, not a broken build. The
    list is printed; pytest shows a passing test's output with ``-rP``
    (``pytest tests/unit/test_architecture.py -rP``, docs/development.md). Printed rather
    than warned (``filterwarnings = error`` would fail it) or skipped (a skip would say the
    check did not run)."""
    near = near_the_ceiling()
    print(
        f"{len(near)} product modules over {SOFT_MODULE_LINES} lines (ceiling {MAX_MODULE_LINES}):"
    )
    for path, lines in near.items():
        print(f"  {lines:4d}  {path}")


def test_every_postgres_concern_module_is_in_the_star_contract() -> None:
    """A new concern module of the PostgreSQL adapter joins the independence contract, so
    that it too shares SQL only through the vocabulary."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [star] = [
        c
        for c in config["tool"]["importlinter"]["contracts"]
        if c["name"].startswith("the PostgreSQL adapter's concern modules")
    ]
    shared = {"__init__", "pool", "rows", "tables", "vocabulary", "units", "migrations"}
    adapter = ROOT / "job_service" / "adapters" / "postgres"
    concerns = {
        p.stem
        for p in adapter.iterdir()
        if (p.suffix == ".py" or p.is_dir()) and p.stem not in shared
    } - {"__pycache__"}

    assert set(star["modules"]) == {f"job_service.adapters.postgres.{c}" for c in concerns}
