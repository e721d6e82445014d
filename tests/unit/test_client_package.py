"""The client distribution as another team installs it: it says its version and has the
README its metadata names."""

from __future__ import annotations

import tomllib
from pathlib import Path

import durable_jobs_client

CLIENT = Path(__file__).resolve().parents[2] / "client"


def test_the_client_says_the_version_it_was_released_as() -> None:
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]
    assert durable_jobs_client.__version__ == project["version"]
    assert (CLIENT / project["readme"]).is_file()
