"""An in-memory job service and its clients, for tests of code that uses this library
(as httpx ships ``MockTransport``): no server, no network, the same methods, arguments and
answers as ``AsyncJobsClient`` and its ``.admin`` and ``.credentials``::

    from durable_jobs_client.testing import FakeJobService
    from durable_jobs_client.protos import job_pb2

    service = FakeJobService()
    jobs = service.client(user_id="u1")           # a FakeAsyncJobsClient
    job = (await jobs.create("synthetic", {"n": 1})).job
    service.update(job.id, status=job_pb2.JOB_STATUS_SUCCEEDED, output={"ok": True})
    done = await jobs.wait(job.id, timeout=5)
    assert service.asked("create")[0]["input"] == {"n": 1}

Seed it (``service.put(job)``, ``service.queues``, ``service.console_sessions``, ...),
change jobs as a worker would (``update``: watchers see it), read every call
(``service.calls``, ``service.asked(method)``), and put a hook between a call and its
answer (``service.on(method, handler)``: wait, answer otherwise, or raise; ``refuse(method,
error)`` raises a client error). Refusals are the client's own exceptions with their status
codes, as the real client raises them.

Not faked: ScheduleService (``.schedules``), the blocking ``JobsClient``, partial output
(a fake runs no model) and retries (nothing fails unless a hook says so). The real
client's methods and these have the same signatures: tests/unit/
test_client_testing_conformance.py holds them to it.
"""

from durable_jobs_client.testing._admin import FakeAdminClient
from durable_jobs_client.testing._credentials import FakeCredentialsClient
from durable_jobs_client.testing._fake_service import FakeJobService
from durable_jobs_client.testing._jobs import FakeAsyncJobsClient
from durable_jobs_client.testing._service import Call, JobServiceState, new_id

__all__ = [
    "Call",
    "FakeAdminClient",
    "FakeAsyncJobsClient",
    "FakeCredentialsClient",
    "FakeJobService",
    "JobServiceState",
    "new_id",
]
