"""The configuration table (docs/configuration.md, the section "Configuration") matches the
settings classes: every setting is listed, nothing listed is made up, defaults are the
code's, and "used by" names exactly the programs that read the variable."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import SecretStr
from pydantic_core import PydanticUndefined

from console.settings import ConsoleSettings
from job_service.settings import JobServiceSettings
from jobctl.connection import ClientSettings
from tests.support.docs import section
from worker_service.model_router import ModelSettings
from worker_service.settings import WorkerSettings

PROGRAMS: dict[str, tuple[type[Any], ...]] = {
    "job_service": (JobServiceSettings,),
    "worker": (WorkerSettings, ModelSettings),
    "jobctl": (ClientSettings,),
    "console": (ConsoleSettings,),
}
# Read outside the settings classes: the embedded stack's data directory
# (devstack/config.py), the tracing switch (shared/tracing.py) and the job-type modules
# (shared/registry.py, read by the worker only: job_service knows declared types).
NOT_SETTINGS = {"JOBS_DATA_DIR", "JOBS_TRACING", "JOBS_JOB_TYPE_MODULES"}
ROW = re.compile(r"^\| `(JOBS_[A-Z0-9_]+)` \| ([^|]*) \| ([^|]*) \| ([^|]*) \|$")


def table() -> dict[str, tuple[str, set[str]]]:
    rows = {}
    for line in section("Configuration").splitlines():
        if match := ROW.match(line):
            name, default, users, _ = match.groups()
            rows[name] = (default.strip().strip("`"), {u.strip() for u in users.split(",")})
    return rows


def settings() -> dict[str, dict[str, Any]]:
    """Per variable, per program reading it, the field's declared default."""
    found: dict[str, dict[str, Any]] = {}
    for program, classes in PROGRAMS.items():
        for cls in classes:
            for name, field in cls.model_fields.items():
                default = "<factory>" if field.default_factory is not None else field.default
                found.setdefault(f"JOBS_{name.upper()}", {})[program] = default
    return found


def shown(default: Any) -> str | None:
    """How the table shows a default; None when it is described in words instead."""
    if default is PydanticUndefined:
        return "required"
    if isinstance(default, SecretStr):
        default = default.get_secret_value()
    if default in (None, "", "<factory>"):
        return None
    if isinstance(default, float):
        return f"{default:g}"
    return str(default)


def test_every_setting_is_documented_and_nothing_else() -> None:
    documented, code = table(), settings()
    assert sorted(code.keys() - documented.keys()) == [], "settings missing from the table"
    assert sorted(documented.keys() - code.keys() - NOT_SETTINGS) == [], "not settings"


@pytest.mark.parametrize("name", sorted(settings()))
def test_default_and_users_match_the_code(name: str) -> None:
    default, users = table()[name]
    readers = settings()[name]
    assert users & PROGRAMS.keys() == readers.keys()
    for program, value in readers.items():
        expected = shown(value)
        if expected is not None:
            assert default == expected, f"{name}: {program} defaults to {expected}"
