"""worker_service.stage_times: nothing written unless a directory is named; then one line
per job and stage, which bench.stages reads back."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.stages import worker_times
from worker_service import stage_times


def test_off_by_default_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stage_times, "_DIR", "")
    monkeypatch.setattr(stage_times, "_file", None)
    stage_times.mark(["a"], "started")
    assert not stage_times.enabled()
    assert stage_times._file is None


def test_marks_are_read_back_first_time_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stage_times, "_DIR", str(tmp_path))
    monkeypatch.setattr(stage_times, "_file", None)
    stage_times.mark(["a", "b"], "pushed")
    stage_times.mark(["a"], "started")
    stage_times.mark(["a"], "started")  # a later attempt's start
    assert stage_times._file is not None
    stage_times._file.close()
    times = worker_times(tmp_path)
    assert set(times) == {"a", "b"}
    assert set(times["a"]) == {"pushed", "started"}
    assert times["a"]["pushed"] <= times["a"]["started"]
