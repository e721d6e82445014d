"""In-memory fakes of the job service's ports and of the use cases other use cases call,
shared by the unit tests: one per port (or collaborator), each recording what it was asked
and configured by its arguments. tests/unit/test_port_fakes_conformance.py holds each to
the signatures of what it fakes (and the real adapters to their ports). The worker's fakes
are in tests/unit/worker/fakes.py; the client's are ``durable_jobs_client.testing``."""

from tests.support.fakes.admin import FakeAdmin
from tests.support.fakes.bulk import FakeBulkStore
from tests.support.fakes.claims import FakeClaims
from tests.support.fakes.jobs import FakeCancelNotifier
from tests.support.fakes.leases import FakeLeases, FakeLeaseStore
from tests.support.fakes.listing import FakeJobListingStore
from tests.support.fakes.outbox import FakeDispatcher
from tests.support.fakes.partials import FakePartialOutputFeed
from tests.support.fakes.rate_limits import FakeRateLimitStore
from tests.support.fakes.results import FakeResultStore
from tests.support.fakes.rpc_errors import FakeRpcError
from tests.support.fakes.sessions import FakeSessionStore
from tests.support.fakes.usage import FakeUsageStore

__all__ = [
    "FakeAdmin",
    "FakeBulkStore",
    "FakeCancelNotifier",
    "FakeClaims",
    "FakeDispatcher",
    "FakeJobListingStore",
    "FakeLeaseStore",
    "FakeLeases",
    "FakePartialOutputFeed",
    "FakeRateLimitStore",
    "FakeResultStore",
    "FakeRpcError",
    "FakeSessionStore",
    "FakeUsageStore",
]
