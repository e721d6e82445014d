"""`python -m worker_service`: parse the configuration and run the worker."""

from __future__ import annotations

import logging
import sys

import uvloop
from pydantic import ValidationError

from shared.grpc_client import ClientConfigError
from shared.settings_errors import describe
from worker_service.app import main
from worker_service.settings import WorkerSettings


def run() -> None:
    try:
        settings = WorkerSettings()
    except ValidationError as error:
        print(f"worker_service: invalid configuration:\n{describe(error)}", file=sys.stderr)
        sys.exit(2)
    try:
        settings.channel_config().credentials()  # TLS files readable, pairs complete
    except ClientConfigError as error:
        print(f"worker_service: invalid configuration: {error}", file=sys.stderr)
        sys.exit(2)
    if not settings.auth_token:
        print(
            "worker_service: JOBS_AUTH_TOKEN is not set; the job service will refuse the "
            "worker's calls unless it is given a token with the worker role",
            file=sys.stderr,
        )
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    uvloop.run(main(settings))


if __name__ == "__main__":
    run()
