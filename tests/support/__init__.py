"""Helpers shared by the test suites: waiting on conditions, resetting real servers."""
