"""``FakeJobService``: the in-memory job service (``JobServiceState``) with a factory of its
clients. Apart from the state so that the clients' modules import the state, never the
other way round."""

from __future__ import annotations

from durable_jobs_client.testing._jobs import FakeAsyncJobsClient
from durable_jobs_client.testing._service import JobServiceState


class FakeJobService(JobServiceState):
    """The job service a fake client talks to, in memory: seed it (``put``, or the lists
    and dicts of ``JobServiceState``), change its jobs as a worker would (``update``), read
    what was asked (``calls``, ``asked``) and make any call wait, answer otherwise or raise
    (``on``, ``refuse``). One service serves any number of clients (``client(user_id=...)``)."""

    def client(self, *, user_id: str = "", timeout: float = 30.0) -> FakeAsyncJobsClient:
        """A ``FakeAsyncJobsClient`` of this service acting as ``user_id``."""
        return FakeAsyncJobsClient(self, user_id=user_id, timeout=timeout)
