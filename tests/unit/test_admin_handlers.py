"""AdminService's handlers live in one module per concern (``adapters/grpc/admin/``) and
are composed into the one ``AdminServicer``: every RPC of the service is served by a
concern's handler, none by the generated base (which answers UNIMPLEMENTED), and no
handler is composed twice."""

from __future__ import annotations

from job_service.adapters.grpc.admin_api import AdminServicer
from shared.pb.jobs.v1 import admin_service_pb2, admin_service_pb2_grpc

RPCS = set(admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"].methods_by_name)
CONCERNS = [
    c for c in AdminServicer.__mro__ if c.__module__.startswith("job_service.adapters.grpc.admin.")
]


def test_every_admin_rpc_is_served_by_a_concern_module() -> None:
    generated = admin_service_pb2_grpc.AdminServiceServicer
    served = {rpc: getattr(AdminServicer, rpc) for rpc in RPCS}

    assert len(RPCS) >= 18
    assert not [rpc for rpc, handler in served.items() if handler is getattr(generated, rpc)]
    assert all(
        handler.__module__.startswith("job_service.adapters.grpc.admin.")
        for handler in served.values()
    )


def test_each_rpc_has_one_concern() -> None:
    homes = {rpc: [c.__name__ for c in CONCERNS if rpc in vars(c)] for rpc in RPCS}

    assert {rpc: h for rpc, h in homes.items() if len(h) != 1} == {}
