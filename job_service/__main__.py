"""`python -m job_service [serve|migrate]`: parse configuration and run.

Exit status: 0 after a clean stop (SIGTERM/SIGINT), 2 for invalid configuration, 3 when it
cannot start: PostgreSQL or NATS stayed unreachable for JOBS_STARTUP_TIMEOUT_S, or the
metrics port cannot be bound. With JOBS_SERVICE_PROCESSES above 1, a child replica that
exits stops the parent with the child's status (job_service/processes.py).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

import uvloop
from pydantic import ValidationError

from job_service import fault_hooks
from job_service.settings import JobServiceSettings
from shared import gc_tuning, logs, tracing
from shared.settings_errors import describe
from shared.startup import StartupError

EXIT_CONFIG = 2
EXIT_UNAVAILABLE = 3


async def serve(settings: JobServiceSettings) -> None:
    """This replica, and its N-1 sibling processes when JOBS_SERVICE_PROCESSES is N (they
    stop with it; one that exits on its own stops the whole: ReplicaExited)."""
    from job_service.app import JobServiceApp
    from job_service.processes import ReplicaProcesses

    async with ReplicaProcesses(settings) as children, JobServiceApp(settings) as app:
        gc_tuning.tune()  # started: what lives for the process is frozen out of the GC's way
        stopping: asyncio.Future[None] | None = None

        def stop() -> None:
            nonlocal stopping
            children.terminate()
            stopping = stopping or asyncio.ensure_future(app.stop())

        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop)
        child_exit = asyncio.ensure_future(children.exited())
        stopped = asyncio.ensure_future(app.wait())
        await asyncio.wait({child_exit, stopped}, return_when=asyncio.FIRST_COMPLETED)
        for waiting in (child_exit, stopped):
            waiting.cancel()
        if child_exit.done() and not child_exit.cancelled() and stopping is None:
            raise child_exit.result()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m job_service")
    parser.add_argument(
        "command",
        nargs="?",
        default="serve",
        choices=["serve", "migrate", "reseal-credentials"],
        help="reseal-credentials: re-seal stored user keys under the current master key",
    )
    command = parser.parse_args().command
    try:
        settings = JobServiceSettings()
    except ValidationError as error:
        print(f"job_service: invalid configuration:\n{describe(error)}", file=sys.stderr)
        return EXIT_CONFIG
    logs.configure(settings.log_level, settings.log_format)
    if command == "migrate":
        from job_service.adapters.postgres.migrations import upgrade
        from job_service.databases import session_guards

        upgrade(settings.database_url, server_settings=session_guards(settings).for_migrations())
        return 0
    if command == "reseal-credentials":
        from job_service.databases import reseal_credentials

        try:
            count = uvloop.run(reseal_credentials(settings))
        except ValueError as error:
            print(f"job_service: {error}", file=sys.stderr)
            return 2
        print(f"job_service: re-sealed {count} credential(s) under the current master key")
        return 0
    from job_service.adapters.grpc.auth import AuthConfigError, TokenTable
    from job_service.processes import ReplicaExited, bind_to_parent
    from job_service.usecases.credentials import MasterKeyMissing

    if not bind_to_parent():
        print("job_service: the parent process is gone: not starting", file=sys.stderr)
        return EXIT_UNAVAILABLE
    tracing.configure("job_service")
    fault_hooks.install()
    try:
        TokenTable.from_settings(settings)
    except AuthConfigError as error:
        print(f"job_service: refusing to start: {error}", file=sys.stderr)
        return 2
    try:
        uvloop.run(serve(settings))
    except MasterKeyMissing as error:  # configuration, not a crash: one sentence
        print(f"job_service: {error}", file=sys.stderr)
        return EXIT_CONFIG
    except StartupError as error:
        print(f"job_service: cannot start: {error}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except ReplicaExited as error:
        print(f"job_service: stopped: {error}", file=sys.stderr)
        return error.exit_status
    finally:
        tracing.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
