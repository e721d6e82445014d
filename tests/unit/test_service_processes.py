"""JOBS_SERVICE_PROCESSES: the setting, and what each child process is told."""

from __future__ import annotations

import os
from typing import Any

import pytest
from pydantic import ValidationError

from job_service.processes import (
    PARENT_PID_ENV,
    ReplicaExited,
    bind_to_parent,
    child_environment,
)
from job_service.settings import JobServiceSettings

URL = "postgresql://x@y/z"


def settings(**overrides: Any) -> JobServiceSettings:
    return JobServiceSettings(database_url=URL, **overrides)


def test_one_process_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("JOBS_SERVICE_PROCESSES", raising=False)
    assert settings().service_processes == 1


def test_the_count_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JOBS_SERVICE_PROCESSES", "2")
    assert settings().service_processes == 2


@pytest.mark.parametrize("count", [0, -1, 65])
def test_counts_out_of_range_are_refused(count: int) -> None:
    with pytest.raises(ValidationError, match="service_processes"):
        settings(service_processes=count)


def test_several_processes_need_a_fixed_grpc_port() -> None:
    with pytest.raises(ValidationError, match="fixed JOBS_GRPC_PORT"):
        settings(service_processes=2, grpc_port=0)
    assert settings(service_processes=1, grpc_port=0).grpc_port == 0


def test_the_metrics_ports_of_every_process_must_exist() -> None:
    with pytest.raises(ValidationError, match="above 65535"):
        settings(service_processes=3, metrics_port=65534)
    assert settings(service_processes=2, metrics_port=65534).service_processes == 2
    # an ephemeral or no metrics port has nothing to add to
    assert settings(service_processes=64, metrics_port=0).metrics_port == 0
    assert settings(service_processes=64, metrics_port="off").metrics_port is None


def test_a_child_serves_metrics_on_the_next_port_and_starts_no_children() -> None:
    env = child_environment(
        settings(service_processes=3, metrics_port=9464),
        2,
        {"JOBS_SERVICE_PROCESSES": "3", "OTHER": "kept"},
        parent_pid=4242,
    )
    assert env["JOBS_SERVICE_PROCESSES"] == "1"
    assert env["JOBS_METRICS_PORT"] == "9466"
    assert env[PARENT_PID_ENV] == "4242"
    assert env["OTHER"] == "kept"


@pytest.mark.parametrize(("port", "child"), [(0, "0"), ("off", "off")])
def test_ephemeral_or_disabled_metrics_stay_so_in_children(port: object, child: str) -> None:
    env = child_environment(settings(service_processes=2, metrics_port=port), 1, {}, 1)
    assert env["JOBS_METRICS_PORT"] == child
    # and the child's settings read it back as the parent's
    assert JobServiceSettings(database_url=URL, metrics_port=child).metrics_port == (
        settings(metrics_port=port).metrics_port
    )


def test_replica_ids_do_not_collide() -> None:
    named = child_environment(
        settings(service_processes=2, instance_id="js-a"), 1, {"JOBS_INSTANCE_ID": "js-a"}, 1
    )
    assert named["JOBS_INSTANCE_ID"] == "js-a-1"
    # unnamed, every process takes <hostname>-<pid> (job_service/app.py): distinct already
    unnamed = child_environment(settings(service_processes=2), 1, {"JOBS_INSTANCE_ID": ""}, 1)
    assert "JOBS_INSTANCE_ID" not in unnamed


def test_a_child_dead_of_a_signal_or_at_peace_fails_its_parent_with_status_1() -> None:
    assert ReplicaExited(1, -9).exit_status == 1
    assert ReplicaExited(1, 0).exit_status == 1
    assert ReplicaExited(2, 3).exit_status == 3  # its own reason, e.g. a port in use


def test_a_process_started_by_hand_is_bound_to_no_parent() -> None:
    assert bind_to_parent({}) is True


def test_a_child_whose_parent_is_gone_does_not_start() -> None:
    # re-parented: the pid it was given is no longer its parent's (checked before the
    # prctl, so this test asks the kernel for nothing)
    not_the_parent = os.getppid() + 1_000_000
    assert bind_to_parent({PARENT_PID_ENV: str(not_the_parent)}) is False
