"""The test suite is shaped like the product (docs/development.md): the folder decides which
run a test belongs to, with no hand-kept list of paths, every test folder is some target's,
and no test file is over 800 lines (docs/style.md)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_TEST_FILE_LINES = 800


def test_no_test_file_is_over_800_lines() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in (ROOT / "tests").rglob("*.py")
    }
    over = {path: lines for path, lines in sizes.items() if lines > MAX_TEST_FILE_LINES}

    assert not over, f"split by what the parts test: {over}"


def test_membership_is_by_folder_not_by_ignore_lists() -> None:
    pytest_options = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    makefile = (ROOT / "Makefile").read_text()

    assert "--ignore" not in str(pytest_options["ini_options"])
    assert "--ignore" not in makefile
    assert "--deselect" not in str(pytest_options["ini_options"]) + makefile


def test_every_test_folder_is_run_by_a_target() -> None:
    testpaths = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"][
        "ini_options"
    ]["testpaths"]
    makefile = (ROOT / "Makefile").read_text()
    named = set(testpaths) | set(re.findall(r"pytest -q[^\n]*?(tests/\w+)", makefile))
    folders = {str(path.parent.relative_to(ROOT)) for path in (ROOT / "tests").glob("*/test_*.py")}

    assert folders - named == set(), "a test folder no target runs"
