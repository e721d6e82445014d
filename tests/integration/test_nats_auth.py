"""NATS with TLS and users, as deploy/k8s/nats.yaml runs it: the services' client
(shared.startup.connect_nats with the settings' NatsSecurity) gets in with the CA and its
user's password, and is refused without TLS, without credentials, with a wrong password
or against a server its CA did not sign."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from nats.aio.client import Client as NATS

from devstack.embedded import free_port, nats_server_binary
from shared.startup import NatsSecurity, connect_nats
from tests.support.certs import Certs, make_certs
from tests.support.wait import eventually

pytestmark = pytest.mark.timeout(60)

PASSWORD = "a-password-from-a-secret"
# the server reads the password from its environment ($WORKER_PASSWORD), as the StatefulSet
# sets it from the Secret
CONFIG = """
port: {port}
http_port: {monitor}
tls {{
  cert_file: "{cert}"
  key_file: "{key}"
  timeout: 5
}}
authorization {{
  users = [
    {{ user: jobs-worker, password: $WORKER_PASSWORD }}
  ]
}}
jetstream {{ store_dir: "{store}" }}
"""


@dataclass(frozen=True)
class SecuredNats:
    url: str
    monitor: str
    certs: Certs
    password_file: Path


@pytest.fixture(scope="module")
def secured_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredNats]:
    root = tmp_path_factory.mktemp("nats-auth")
    certs = make_certs(root / "certs")
    port, monitor = free_port(), free_port()
    config = root / "nats.conf"
    config.write_text(
        CONFIG.format(
            port=port,
            monitor=monitor,
            cert=certs.server_cert,
            key=certs.server_key,
            store=root / "store",
        )
    )
    password_file = root / "password"
    password_file.write_text(PASSWORD + "\n")
    with (root / "nats.log").open("ab") as log:
        server = subprocess.Popen(
            [str(nats_server_binary()), "-c", str(config), "-a", "127.0.0.1"],
            env={**os.environ, "WORKER_PASSWORD": PASSWORD},
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        asyncio.run(eventually(lambda: listening(port), timeout=20, interval=0.05))
        yield SecuredNats(
            f"nats://127.0.0.1:{port}", f"http://127.0.0.1:{monitor}", certs, password_file
        )
    finally:
        server.terminate()
        server.wait(timeout=10)


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture
async def connected(secured_nats: SecuredNats) -> AsyncIterator[NATS]:
    security = NatsSecurity(
        str(secured_nats.certs.ca), "jobs-worker", str(secured_nats.password_file)
    )
    client = await connect_nats(secured_nats.url, "test", security=security, connect_timeout=5)
    try:
        yield client
    finally:
        await client.close()


async def refused(url: str, security: NatsSecurity) -> BaseException:
    """The first connection's failure (connect_nats reconnects forever only once in)."""
    # nats-py raises several kinds: an SSL error, its own Error for the server's -ERR
    with pytest.raises(Exception) as raised:
        client = await connect_nats(
            url, "test", security=security, connect_timeout=5, allow_reconnect=False
        )
        await client.close()
    return raised.value


async def test_tls_and_the_users_password_let_the_client_in(
    connected: NATS, secured_nats: SecuredNats
) -> None:
    js = connected.jetstream()
    await js.add_stream(name="AUTH_CHECK", subjects=["auth.check"])
    ack = await js.publish("auth.check", b"over TLS, authenticated")

    assert ack.seq == 1
    # as the server sees the connection: encrypted, and authenticated as the user
    async with httpx.AsyncClient(base_url=secured_nats.monitor) as http:
        connz = (await http.get("/connz", params={"auth": "true"})).json()
    [connection] = [c for c in connz["connections"] if c.get("name") == "test"]
    assert connection["tls_version"].startswith("1.")
    assert connection["authorized_user"] == "jobs-worker"


async def test_without_credentials_the_server_refuses(secured_nats: SecuredNats) -> None:
    error = await refused(secured_nats.url, NatsSecurity(str(secured_nats.certs.ca)))

    assert "Authorization Violation" in str(error)


async def test_a_wrong_password_is_refused(secured_nats: SecuredNats, tmp_path: Path) -> None:
    wrong = tmp_path / "password"
    wrong.write_text("not-the-password")
    security = NatsSecurity(str(secured_nats.certs.ca), "jobs-worker", str(wrong))

    error = await refused(secured_nats.url, security)

    assert "Authorization Violation" in str(error)


async def test_without_tls_the_client_does_not_get_in(secured_nats: SecuredNats) -> None:
    """The server requires TLS: a client without the CA refuses the certificate it is
    shown (no system CA signed it) and never sends its password in clear."""
    security = NatsSecurity("", "jobs-worker", str(secured_nats.password_file))

    error = await refused(secured_nats.url, security)

    assert "CERTIFICATE_VERIFY_FAILED" in str(error)


async def test_a_server_another_ca_signed_is_refused(secured_nats: SecuredNats) -> None:
    security = NatsSecurity(
        str(secured_nats.certs.other_ca), "jobs-worker", str(secured_nats.password_file)
    )

    error = await refused(secured_nats.url, security)

    assert "CERTIFICATE_VERIFY_FAILED" in str(error)
