"""`python -m worker_service`: parse the configuration and run the worker.

Exit status: 0 after a clean stop (SIGTERM/SIGINT: intake stops, in-flight jobs finish or
are handed back), 2 for invalid configuration, 3 when it cannot start: NATS or
job_service stayed unreachable for JOBS_STARTUP_TIMEOUT_S, or the metrics port cannot be
bound.
"""

from __future__ import annotations

import sys

import uvloop
from pydantic import ValidationError

from shared import gc_tuning, logs, tracing
from shared.grpc_client import ClientConfigError
from shared.settings_errors import describe
from shared.startup import StartupError
from worker_service.app import main
from worker_service.model_router import ModelSettings
from worker_service.settings import WorkerSettings

EXIT_CONFIG = 2
EXIT_UNAVAILABLE = 3


def run() -> None:
    try:
        settings = WorkerSettings()
        models = ModelSettings()
    except ValidationError as error:
        print(f"worker_service: invalid configuration:\n{describe(error)}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    try:
        settings.channel_config().credentials()  # TLS files readable, pairs complete
    except ClientConfigError as error:
        print(f"worker_service: invalid configuration: {error}", file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    if not settings.auth_token and not settings.auth_token_file:
        print(
            "worker_service: neither JOBS_AUTH_TOKEN nor JOBS_AUTH_TOKEN_FILE is set; the job "
            "service will refuse the worker's calls unless it is given a token with the "
            "worker role",
            file=sys.stderr,
        )
    logs.configure(settings.log_level, settings.log_format)
    logs.set_worker_id(settings.worker_id)
    tracing.configure("worker_service")
    gc_tuning.tune()  # what the imports and the settings made lives for the process
    try:
        uvloop.run(main(settings, models))
    except StartupError as error:
        print(f"worker_service: cannot start: {error}", file=sys.stderr)
        sys.exit(EXIT_UNAVAILABLE)
    finally:
        tracing.shutdown()


if __name__ == "__main__":
    run()
