"""The long fault suites (`make test-faults`): killed, frozen and cut-off workers and
replicas, retention at scale, the scheduler's fleet tests."""
