"""JOBS_AUTH_TOKEN_FILE (and jobctl's --token-file): the token read from a file, kept out
of ``ps``, shell history and manifests, for the worker, the engine's own channels, the
client library and jobctl; both sources at once, an unreadable or empty file: a clear
error naming the setting, before any call."""

from __future__ import annotations

from pathlib import Path

import pytest
from durable_jobs_client import ClientConfig, ConfigError
from pydantic import ValidationError

from jobctl.__main__ import client_settings
from jobctl.cli import parse
from jobctl.exits import UsageError
from shared.grpc_client import ChannelConfig, ClientConfigError
from worker_service.settings import WorkerSettings


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "worker.token"
    path.write_text("s3cret-token\n")
    return path


def test_the_engine_channel_reads_the_token_from_its_file(token_file: Path) -> None:
    env = {"JOBS_AUTH_TOKEN_FILE": str(token_file)}
    assert ChannelConfig.from_env("t:1", env).token == "s3cret-token"


def test_the_worker_reads_the_token_from_its_file(
    monkeypatch: pytest.MonkeyPatch, token_file: Path
) -> None:
    monkeypatch.delenv("JOBS_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("JOBS_AUTH_TOKEN_FILE", str(token_file))
    assert WorkerSettings().channel_config().token == "s3cret-token"


def test_the_client_library_reads_the_token_from_its_file(token_file: Path) -> None:
    env = {"JOBS_AUTH_TOKEN_FILE": str(token_file)}
    assert ClientConfig.resolve(env=env).token == "s3cret-token"
    assert ClientConfig.resolve(token="given", env=env).token == "given"  # an argument wins


def test_jobctl_reads_the_token_file_its_option_names(
    monkeypatch: pytest.MonkeyPatch, token_file: Path
) -> None:
    monkeypatch.setenv("JOBS_AUTH_TOKEN", "from-the-environment")
    settings = client_settings(parse(["--token-file", str(token_file), "queues"]))
    assert settings.token() == "s3cret-token"  # the option replaces the variable
    with pytest.raises(UsageError, match="--token or --token-file"):
        client_settings(parse(["--token", "x", "--token-file", str(token_file), "queues"]))


@pytest.mark.parametrize("content", [None, "", "  \n"], ids=["missing", "empty", "blank"])
def test_a_token_file_that_gives_no_token_is_refused_naming_it(
    tmp_path: Path, content: str | None
) -> None:
    path = tmp_path / "t.token"
    if content is not None:
        path.write_text(content)
    env = {"JOBS_AUTH_TOKEN_FILE": str(path)}
    with pytest.raises(ClientConfigError, match="JOBS_AUTH_TOKEN_FILE"):
        ChannelConfig.from_env("t:1", env)
    with pytest.raises(ConfigError, match="JOBS_AUTH_TOKEN_FILE"):
        ClientConfig.resolve(env=env)


def test_both_sources_at_once_are_refused(
    monkeypatch: pytest.MonkeyPatch, token_file: Path
) -> None:
    env = {"JOBS_AUTH_TOKEN": "a", "JOBS_AUTH_TOKEN_FILE": str(token_file)}
    with pytest.raises(ClientConfigError, match="not both"):
        ChannelConfig.from_env("t:1", env)
    with pytest.raises(ConfigError, match="not both"):
        ClientConfig.resolve(env=env)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ClientConfigError, match="not both"):
        WorkerSettings().channel_config()
    with pytest.raises(ValidationError, match="not both"):
        client_settings(parse(["queues"]))
