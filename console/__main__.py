"""``python -m console``: the web console on ``JOBS_CONSOLE_HOST:JOBS_CONSOLE_PORT``
(settings in ``console.settings``). SIGTERM or Ctrl-C stops it; open live streams get
``SHUTDOWN_GRACE_S`` to end."""

from __future__ import annotations

import sys

import uvicorn
from pydantic import ValidationError

from console.app import create_app
from console.settings import ConsoleSettings

SHUTDOWN_GRACE_S = 3


def main() -> None:
    try:
        settings = ConsoleSettings()
    except ValidationError as error:
        sys.exit(f"console: bad settings: {error}")
    scheme = "https" if settings.serves_tls else "http"
    print(
        f"console: serving on {scheme}://{settings.console_host}:{settings.console_port}/ "
        f"(job_service at {settings.job_service_target})",
        flush=True,
    )
    uvicorn.run(
        create_app(settings),
        host=settings.console_host,
        port=settings.console_port,
        ssl_certfile=settings.console_tls_cert_file if settings.serves_tls else None,
        ssl_keyfile=settings.console_tls_key_file if settings.serves_tls else None,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        # Paths and status codes only: query strings may name users, never job data.
        access_log=False,
        log_level="warning",
        proxy_headers=False,
    )


if __name__ == "__main__":
    main()
