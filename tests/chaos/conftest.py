"""The chaos run forks servers (pg_ctl as another user cannot use vfork) from a process in
which gRPC threads run; gRPC's fork handlers then log, or crash the child before it execs.
Off for the session (read when gRPC initialises, after collection)."""

from __future__ import annotations

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
