"""gRPC's fork support off for a chaos session. Too late here to matter (issue 43: gRPC
reads it when first imported, by the root conftest, and about every other fork of pg_ctl
as another user crashed before its exec); devstack's PostgreSQL runs its binaries through
setpriv instead, which needs no fork (tests/integration/test_embedded_forks.py)."""

from __future__ import annotations

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
