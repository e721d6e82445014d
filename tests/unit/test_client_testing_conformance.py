"""``durable_jobs_client.testing`` keeps the real client's shape: every public method of a
fake face is a method of the real one with the same signature (names, kinds, defaults and
types), and every method of the real faces the fake covers is there. What a fake answers is
held to the real service by tests/integration/test_client_testing_behaviour.py."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

import pytest
from durable_jobs_client import AsyncAdminClient, AsyncCredentialsClient, AsyncJobsClient
from durable_jobs_client.testing import (
    FakeAdminClient,
    FakeAsyncJobsClient,
    FakeCredentialsClient,
)

FACES = [
    (AsyncJobsClient, FakeAsyncJobsClient),
    (AsyncAdminClient, FakeAdminClient),
    (AsyncCredentialsClient, FakeCredentialsClient),
]
# What the fake leaves out, by face (its docstring says so): ScheduleService.
NOT_FAKED = {"schedules"}


def public(cls: type) -> dict[str, Any]:
    """The methods and properties a caller uses (``__aenter__``/``__aexit__`` included)."""
    names = {n for n in dir(cls) if not n.startswith("_")} | {"__aenter__", "__aexit__"}
    return {n: inspect.getattr_static(cls, n) for n in names if hasattr(cls, n)}


def shape(method: Callable[..., Any], owner: type) -> list[tuple[str, Any, Any, Any]]:
    """Each parameter after ``self``: its name, kind, default and resolved type."""
    hints = typing.get_type_hints(method)
    return [
        (p.name, p.kind, p.default, hints.get(p.name))
        for p in list(inspect.signature(method).parameters.values())[1:]
    ]


def returned(method: Callable[..., Any], owner: type) -> Any:
    answer = typing.get_type_hints(method).get("return")
    return "the client itself" if answer is owner else answer


@pytest.mark.parametrize(("real", "fake"), FACES, ids=lambda c: c.__name__)
def test_every_method_of_the_fake_is_the_real_clients_with_the_same_signature(
    real: type, fake: type
) -> None:
    for name, member in public(fake).items():
        if name in ("service",) or (not callable(member) and not isinstance(member, property)):
            continue
        assert name in public(real), f"{fake.__name__}.{name} is not a method of {real.__name__}"
        theirs = public(real)[name]
        if not inspect.isfunction(member):  # a property: the face it leads to
            assert type(member) is type(theirs), name
            continue
        assert shape(member, fake) == shape(theirs, real), f"{name}: parameters differ"
        assert returned(member, fake) == returned(theirs, real), f"{name}: answers differ"
        assert inspect.iscoroutinefunction(member) == inspect.iscoroutinefunction(theirs)
        assert inspect.isasyncgenfunction(member) == inspect.isasyncgenfunction(theirs)


@pytest.mark.parametrize(("real", "fake"), FACES, ids=lambda c: c.__name__)
def test_every_method_of_the_real_client_is_faked(real: type, fake: type) -> None:
    wanted = {n for n, m in public(real).items() if not isinstance(m, (int, str, float))}
    missing = wanted - set(public(fake)) - NOT_FAKED
    assert not missing, f"{fake.__name__} lacks {sorted(missing)}"
