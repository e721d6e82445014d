"""`python -m tests.chaos [--profile short|long|cluster|failover] [--seed N] [--keep]`
(`make chaos`)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import faulthandler
import logging
import os
import signal
import sys
from collections.abc import Coroutine
from typing import Any

# This process forks servers (pg_ctl as another user cannot use vfork) while gRPC threads
# run; gRPC's fork handlers then only log, or crash the child before it execs.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from tests.chaos.checker import Report
from tests.chaos.harness import run
from tests.chaos.profiles import PROFILES


async def _until_signalled(coro: Coroutine[Any, Any, Report]) -> Report:
    """SIGTERM/SIGINT cancel the run, so that it stops every process it started."""
    task = asyncio.ensure_future(coro)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, task.cancel)
    return await task


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="short")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep logs and data afterwards")
    parser.add_argument(
        "--faults",
        help="only these fault kinds, comma-separated, in order (the profile's load and stack)",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    # a child forked from this process crashing before its exec reports here
    faulthandler.enable()
    profile = PROFILES[args.profile]
    rerun = f"python -m tests.chaos --profile {args.profile} --seed {args.seed}"
    print(f"chaos: profile {args.profile}, seed {args.seed} (to rerun: {rerun})", flush=True)
    if args.faults:
        profile = dataclasses.replace(profile, schedule=tuple(args.faults.split(",")))
    report = asyncio.run(_until_signalled(run(profile, args.seed, keep=args.keep)))
    print(report.table(), flush=True)
    if not report.ok:
        print(f"chaos: FAILED with seed {args.seed}; rerun: {rerun}", flush=True)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
