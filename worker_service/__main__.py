"""`python -m worker_service`: parse the configuration and run the worker."""

from __future__ import annotations

import logging

import uvloop

from worker_service.app import main
from worker_service.settings import WorkerSettings


def run() -> None:
    settings = WorkerSettings()
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    uvloop.run(main(settings))


if __name__ == "__main__":
    run()
