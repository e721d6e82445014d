"""The fault suites start workers the way the e2e tests do: the same fixtures, imported."""

from tests.e2e.conftest import spawn_worker, worker

__all__ = ["spawn_worker", "worker"]
