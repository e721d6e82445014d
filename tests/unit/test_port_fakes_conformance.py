"""The job service's ports keep one shape on both sides (pgqueuer's test_port_conformance):
every method of a shared fake (tests/support/fakes/) is a method of the port or class it
fakes, with the same parameters (names, kinds, defaults) and the same async-ness; a fake
that stands for a whole port has every method of it; and each real adapter offers every
method of the port it implements, alike. mypy holds the types where the wiring passes an
adapter as its port; this holds what it does not (names and defaults a caller relies on,
the fakes, which it does not check)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

import grpc
import pytest

import job_service.ports
import job_service.usecases
import tests.support.fakes
from job_service.adapters.local_kek import LocalKeyEncryptionKey
from job_service.adapters.nats_partials import NatsPartialOutputFeed
from job_service.adapters.nats_publisher import NatsPublisher
from job_service.adapters.postgres.backfill import BackfillRepository
from job_service.adapters.postgres.batches import BatchRepository
from job_service.adapters.postgres.bulk import BulkRepository
from job_service.adapters.postgres.call_permits import CallPermitRepository
from job_service.adapters.postgres.claims import ClaimRepository, ClaimStatements
from job_service.adapters.postgres.console_sessions import ConsoleSessionRepository
from job_service.adapters.postgres.credentials import CredentialRepository
from job_service.adapters.postgres.data_keys import DataKeyRepository
from job_service.adapters.postgres.dependencies import DependencyRepository
from job_service.adapters.postgres.erasure import ErasureRepository
from job_service.adapters.postgres.gauges import GaugeRepository
from job_service.adapters.postgres.job_deadlines import DeadlineRepository
from job_service.adapters.postgres.job_types import JobTypeRepository
from job_service.adapters.postgres.jobs import JobRepository
from job_service.adapters.postgres.leases import AttemptTransaction, LeaseRepository
from job_service.adapters.postgres.listing import JobListing
from job_service.adapters.postgres.new_jobs import NewJobRepository
from job_service.adapters.postgres.outbox import OutboxRepository
from job_service.adapters.postgres.queues import QueueRepository
from job_service.adapters.postgres.rate_limits import RateLimitRepository
from job_service.adapters.postgres.reruns import RerunRepository
from job_service.adapters.postgres.results import ResultRepository
from job_service.adapters.postgres.retention import RetentionRepository
from job_service.adapters.postgres.schedules import FiringRound, ScheduleRepository
from job_service.adapters.postgres.sessions import SessionRepository
from job_service.adapters.postgres.signals import SignalRepository
from job_service.adapters.postgres.steps import StepRepository
from job_service.adapters.postgres.usage_reports import UsageReportRepository
from job_service.ports.backfill import BackfillStore
from job_service.ports.bulk import BulkStore
from job_service.ports.claims import ClaimStore, ClaimTransaction
from job_service.ports.console_sessions import ConsoleSessionStore
from job_service.ports.credentials import CredentialStore
from job_service.ports.data_keys import DataKeyStore
from job_service.ports.erasure import ErasureStore
from job_service.ports.gauges import OutboxBacklog, QueueDepth
from job_service.ports.job_types import JobTypeStore
from job_service.ports.jobs import (
    BatchStore,
    CancelNotifier,
    CredentialOwnership,
    JobStore,
    NewJobStore,
    RerunStore,
)
from job_service.ports.key_encryption import KeyEncryptionKey
from job_service.ports.leases import AttemptEnding, LeaseStore
from job_service.ports.listing import JobListingStore
from job_service.ports.outbox import BatchPublisher, GrantPush, Handoff, OutboxStore, Waker
from job_service.ports.partials import PartialOutputFeed
from job_service.ports.queues import QueueStore
from job_service.ports.rate_limits import CallPermitStore, RateLimitStore
from job_service.ports.results import ResultStore
from job_service.ports.retention import RetentionStore
from job_service.ports.schedules import Round, ScheduleStore
from job_service.ports.sessions import SessionStore
from job_service.ports.signals import SignalNotifier, SignalStore
from job_service.ports.steps import StepStore
from job_service.ports.usage import UsageStore
from job_service.usecases.admin import Admin
from job_service.usecases.claims import Claims
from job_service.usecases.dependencies import DependencyStore
from job_service.usecases.grants import Grants
from job_service.usecases.job_deadlines import DeadlineStore
from job_service.usecases.leases import Leases
from job_service.usecases.outbox import OutboxDispatcher
from job_service.usecases.sealed_schedules import SealedScheduleStore
from tests.support.fakes import (
    FakeAdmin,
    FakeBulkStore,
    FakeCancelNotifier,
    FakeClaims,
    FakeDispatcher,
    FakeJobListingStore,
    FakeLeases,
    FakeLeaseStore,
    FakePartialOutputFeed,
    FakeRateLimitStore,
    FakeResultStore,
    FakeRpcError,
    FakeSessionStore,
    FakeUsageStore,
)


@dataclass(frozen=True)
class Pair:
    """A fake and what it stands for (ports, or the real classes it fakes a part of).
    ``whole``: it offers every method of each; ``helpers``: its methods a test drives it
    with, which what it fakes does not have."""

    fake: type
    real: tuple[type, ...]
    whole: bool
    helpers: frozenset[str] = field(default_factory=frozenset)


FAKES = [
    Pair(FakeBulkStore, (BulkStore,), whole=True),
    Pair(FakeCancelNotifier, (CancelNotifier,), whole=True),
    Pair(FakeDispatcher, (Waker, Handoff), whole=True),
    Pair(FakeLeaseStore, (LeaseStore, AttemptEnding), whole=True),
    Pair(FakePartialOutputFeed, (PartialOutputFeed,), whole=True, helpers=frozenset({"publish"})),
    Pair(FakeRateLimitStore, (RateLimitStore,), whole=True),
    Pair(FakeResultStore, (ResultStore,), whole=True),
    Pair(FakeSessionStore, (SessionStore,), whole=True),
    Pair(FakeUsageStore, (UsageStore,), whole=True),
    # what WatchJob's poll reads of the read side
    Pair(FakeJobListingStore, (JobListingStore,), whole=False),
    # use cases as other use cases call them
    Pair(FakeAdmin, (Admin,), whole=False),
    Pair(FakeClaims, (Claims,), whole=False),
    Pair(FakeLeases, (Leases,), whole=False),
    # a failed call as grpc raises it on a client
    Pair(FakeRpcError, (grpc.Call,), whole=False, helpers=frozenset({"of"})),
]

# Each port and what implements it in the service: found by the ports' names and the
# wiring (job_service/wiring/, job_service/loops.py). A function stands for a port that is a
# callable (its ``__call__``).
ADAPTERS: list[tuple[type, type | Callable[..., Any]]] = [
    (BulkStore, BulkRepository),
    (DeadlineStore, DeadlineRepository),
    (ClaimStore, ClaimRepository),
    (ClaimTransaction, ClaimStatements),
    (ConsoleSessionStore, ConsoleSessionRepository),
    (JobTypeStore, JobTypeRepository),
    (KeyEncryptionKey, LocalKeyEncryptionKey),
    (CredentialStore, CredentialRepository),
    (QueueDepth, GaugeRepository),
    (OutboxBacklog, OutboxRepository),
    (NewJobStore, NewJobRepository),
    (BatchStore, BatchRepository),
    (RerunStore, RerunRepository),
    (JobStore, JobRepository),
    (CancelNotifier, NatsPublisher),
    (CredentialOwnership, CredentialRepository),
    (LeaseStore, LeaseRepository),
    (AttemptEnding, AttemptTransaction),
    (JobListingStore, JobListing),
    (OutboxStore, OutboxRepository),
    (BatchPublisher, NatsPublisher),
    (Waker, OutboxDispatcher),
    (Handoff, OutboxDispatcher),
    (GrantPush, Grants.push),
    (PartialOutputFeed, NatsPartialOutputFeed),
    (QueueStore, QueueRepository),
    (RateLimitStore, RateLimitRepository),
    (CallPermitStore, CallPermitRepository),
    (ResultStore, ResultRepository),
    (RetentionStore, RetentionRepository),
    (Round, FiringRound),
    (ScheduleStore, ScheduleRepository),
    (ScheduleStore, SealedScheduleStore),
    (SessionStore, SessionRepository),
    (SignalStore, SignalRepository),
    (SignalNotifier, NatsPublisher),
    (StepStore, StepRepository),
    (DataKeyStore, DataKeyRepository),
    (ErasureStore, ErasureRepository),
    (BackfillStore, BackfillRepository),
    (UsageStore, UsageReportRepository),
    (DependencyStore, DependencyRepository),
]


# --- shapes --------------------------------------------------------------------------------


def members(cls: type, *, own_module: str = "") -> dict[str, Any]:
    """The methods, properties and declared attributes a caller uses: public names and
    ``__call__``, from the classes of ``cls``'s MRO (those of ``own_module`` only, when
    given: a fake's own, not what it inherits from ``grpc.RpcError``)."""
    found: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or (own_module and not klass.__module__.startswith(own_module)):
            continue
        for name in [*vars(klass).get("__annotations__", {}), *vars(klass)]:
            if name.startswith("_") and name != "__call__":
                continue
            found[name] = vars(klass).get(name, "an attribute")
    return found


def offered(cls: type | Callable[..., Any], name: str) -> Any:
    """What ``cls`` offers under ``name`` (None: nothing): a class member, or an attribute
    its methods set on ``self``."""
    if not isinstance(cls, type):
        return cls if name == "__call__" else None
    if hasattr(cls, name):
        return inspect.getattr_static(cls, name)
    if re.search(rf"\bself\.{name}\s*(:[^=\n]+)?=[^=]", inspect.getsource(cls)):
        return "an attribute"
    return None


def shape(member: Any) -> str:
    """What a caller relies on: how it is called (``async def``, ``def`` — an async
    context manager is a ``def`` —, ``async generator``, or a property or attribute), and
    its parameters after ``self`` (names, kinds and defaults; no annotations)."""
    if isinstance(member, (property, str)) or not callable(member):
        return "property or attribute"
    if isinstance(member, (classmethod, staticmethod)):
        member = member.__func__
    if inspect.iscoroutinefunction(member):
        how = "async def"
    elif inspect.isasyncgenfunction(member):
        how = "async generator"
    else:
        how = "def"
    parameters = list(inspect.signature(member).parameters.values())[1:]
    bare = [p.replace(annotation=p.empty) for p in parameters]
    return how + str(inspect.Signature(bare))


def differences(
    port: type, implementation: type | Callable[..., Any], names: set[str]
) -> list[str]:
    """Each of ``names`` (members of ``port``) that ``implementation`` lacks or shapes
    otherwise."""
    declared = members(port)
    found = []
    for name in sorted(names):
        wanted = declared.get(name) or offered(port, name)
        theirs = offered(implementation, name)
        if theirs is None:
            found.append(f"{name}: missing ({port.__name__} has it)")
        elif shape(theirs) != shape(wanted):
            found.append(
                f"{name}: {shape(theirs)}\n    differs from {port.__name__}.{name}: {shape(wanted)}"
            )
    return found


def report(who: str, problems: list[str]) -> None:
    if problems:
        pytest.fail(f"{who}:\n  " + "\n  ".join(problems), pytrace=False)


def modules(package: ModuleType) -> Iterator[ModuleType]:
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        yield importlib.import_module(info.name)


# --- the fakes -------------------------------------------------------------------------


def test_every_shared_fake_is_held_to_what_it_fakes() -> None:
    defined = {
        cls
        for module in modules(tests.support.fakes)
        for cls in vars(module).values()
        if isinstance(cls, type) and cls.__name__.startswith("Fake")
        if cls.__module__ == module.__name__
    }
    assert defined == {f.fake for f in FAKES}


@pytest.mark.parametrize("pair", FAKES, ids=lambda f: f.fake.__name__)
def test_every_method_of_a_fake_is_on_what_it_fakes_with_the_same_signature(
    pair: Pair,
) -> None:
    problems = []
    for name, member in members(pair.fake, own_module=tests.support.fakes.__name__).items():
        if name in pair.helpers or (not callable(member) and not isinstance(member, property)):
            continue  # the fake's records and settings
        faking = [r for r in pair.real if offered(r, name) is not None]
        if not faking:
            problems.append(f"{name}: not a member of {[r.__name__ for r in pair.real]}")
        for real in faking:
            problems += differences(real, pair.fake, {name})
    report(pair.fake.__name__, problems)


@pytest.mark.parametrize("pair", [f for f in FAKES if f.whole], ids=lambda f: f.fake.__name__)
def test_a_fake_of_a_whole_port_has_every_method_of_it(pair: Pair) -> None:
    problems = [p for port in pair.real for p in differences(port, pair.fake, set(members(port)))]
    report(pair.fake.__name__, problems)


# --- the adapters ----------------------------------------------------------------------


def test_every_port_is_paired_with_its_adapter() -> None:
    ports = {
        cls
        for package in (job_service.ports, job_service.usecases)
        for module in modules(package)
        for cls in vars(module).values()
        if isinstance(cls, type) and getattr(cls, "_is_protocol", False)
        if cls.__module__ == module.__name__
    }
    assert ports == {port for port, _ in ADAPTERS}


@pytest.mark.parametrize(
    ("port", "adapter"), ADAPTERS, ids=[f"{p.__name__}-{a.__qualname__}" for p, a in ADAPTERS]
)
def test_an_adapter_offers_every_method_of_its_port_with_the_same_signature(
    port: type, adapter: type | Callable[..., Any]
) -> None:
    problems = differences(port, adapter, set(members(port)))
    report(adapter.__qualname__, problems)
