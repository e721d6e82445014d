"""Alembic migrations, run programmatically: ``python -m job_service migrate``.

Migrations are expand-only: add tables, columns and indexes; never drop or rename in the
same release that stops using them.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from alembic import command
from alembic.config import Config

HERE = Path(__file__).resolve().parent


def sqlalchemy_url(database_url: str) -> str:
    """The asyncpg-driver form of a libpq-style URL."""
    scheme, sep, rest = database_url.partition("://")
    if not sep or scheme not in {"postgresql", "postgres", "postgresql+asyncpg"}:
        raise ValueError("the database URL must start with postgresql://")
    return f"postgresql+asyncpg://{rest}"


def alembic_config(database_url: str, server_settings: dict[str, str] | None = None) -> Config:
    """``server_settings``: the migration session's (``SessionGuards.for_migrations``)."""
    config = Config()
    config.attributes["server_settings"] = dict(server_settings or {})
    config.set_main_option("script_location", str(HERE))
    # '%' would be read as interpolation by configparser
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(database_url).replace("%", "%%"))
    return config


def upgrade(
    database_url: str, revision: str = "head", server_settings: dict[str, str] | None = None
) -> None:
    """Bring the database to ``revision``. Synchronous: the migration runs its own event
    loop in a thread of its own, so this may be called from inside a running loop too."""
    config = alembic_config(database_url, server_settings)
    with ThreadPoolExecutor(max_workers=1) as executor:
        executor.submit(command.upgrade, config, revision).result()
