"""`python -m tests.chaos [--profile short|long] [--seed N] [--keep]` (`make chaos`)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys

# This process forks servers (pg_ctl as another user cannot use vfork) while gRPC threads
# run; gRPC's fork handlers then only log, or crash the child before it execs.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from tests.chaos.harness import run
from tests.chaos.profiles import PROFILES


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="short")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep logs and data afterwards")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    report = asyncio.run(run(PROFILES[args.profile], args.seed, keep=args.keep))
    print(report.table(), flush=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
