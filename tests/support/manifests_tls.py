"""Whether the manifests' TLS and NATS users are in force in a running cluster (not merely
configured), for tests/deploy/test_manifests_run.py: NATS sees every connection of the
engine encrypted and signed in as its service's user, NATS refuses a client without a
user, and job_service refuses gRPC without TLS."""

from __future__ import annotations

import ssl
from collections.abc import Mapping

import grpc
import httpx
import nats
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.support.deploy.cluster import Cluster
from tests.support.deploy.kubelet import Pod

# the users nats.yaml's authorization block gives the services (JOBS_NATS_USER)
NATS_USERS = {"job-service", "worker-service"}


async def assert_tls_and_nats_users_in_force(
    cluster: Cluster, nats_pods: list[Pod], secrets: Mapping[str, Mapping[str, str]]
) -> None:
    users: set[str | None] = set()
    async with httpx.AsyncClient(timeout=10) as http:
        for pod in nats_pods:
            monitor = f"http://{pod.address}:{pod.container.ports['monitor']}/connz"
            connz = (await http.get(monitor, params={"auth": "true"})).json()
            for connection in connz.get("connections") or []:
                assert connection.get("tls_version"), f"{pod.name}: not TLS: {connection}"
                users.add(connection.get("authorized_user"))
    assert users == NATS_USERS, f"the engine's NATS connections signed in as {users}"

    # over TLS, checked against the Secret's CA, but with no user: refused
    tls = ssl.create_default_context(cadata=secrets["jobs-nats-tls"]["ca.crt"])
    nats_service = cluster.service("nats").address(4222)
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        client = await nats.connect(
            f"tls://{nats_service}", tls=tls, allow_reconnect=False, connect_timeout=5
        )
        await client.close()

    # gRPC in plaintext: job_service serves TLS only
    async with grpc.aio.insecure_channel(cluster.service("job-service").address(50051)) as plain:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await health_pb2_grpc.HealthStub(plain).Check(
                health_pb2.HealthCheckRequest(), timeout=5
            )
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, refused.value
