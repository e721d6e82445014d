"""`python -m worker_service`: parse the configuration and run the worker."""

from __future__ import annotations

import logging
import sys

import uvloop
from pydantic import ValidationError

from shared.ai.router import ModelSettings
from shared.settings_errors import describe
from worker_service.app import main
from worker_service.settings import WorkerSettings


def run() -> None:
    try:
        settings = WorkerSettings()
        models = ModelSettings()
    except ValidationError as error:
        print(f"worker_service: invalid configuration:\n{describe(error)}", file=sys.stderr)
        sys.exit(2)
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    uvloop.run(main(settings, models))


if __name__ == "__main__":
    run()
