"""The gRPC server of the job service: the services behind the error and auth
interceptors, plus health and reflection."""

from __future__ import annotations

from pathlib import Path

import grpc
from grpc_health.v1 import health, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from job_service.adapters.grpc.admin_api import AdminServicer
from job_service.adapters.grpc.auth import TokenTable
from job_service.adapters.grpc.credential_api import CredentialServicer
from job_service.adapters.grpc.executor_api import ExecutorServicer
from job_service.adapters.grpc.interceptor import CallInterceptor
from job_service.adapters.grpc.job_api import JobServicer
from job_service.adapters.grpc.schedule_api import ScheduleServicer
from job_service.adapters.grpc.usage_api import UsageServicer
from job_service.settings import JobServiceSettings
from job_service.usecases.admin import Admin
from job_service.usecases.bulk import BulkActions
from job_service.usecases.call_permits import CallPermits
from job_service.usecases.console_sessions import ConsoleSessions
from job_service.usecases.credentials import CredentialVault
from job_service.usecases.dependencies import DependencyResults
from job_service.usecases.erasure import UserErasure
from job_service.usecases.grants import Grants
from job_service.usecases.job_types import DeclaredJobTypes
from job_service.usecases.jobs import Jobs
from job_service.usecases.leases import Leases
from job_service.usecases.new_jobs import NewJobs
from job_service.usecases.outbox import OutboxUpkeep
from job_service.usecases.queues import Queues
from job_service.usecases.results import Results
from job_service.usecases.schedules import Schedules
from job_service.usecases.sessions import WorkerSessions
from job_service.usecases.signals import Signals
from job_service.usecases.steps import Steps
from job_service.usecases.usage import UsageReports
from job_service.usecases.watch import WatchHub
from shared.pb.jobs.v1 import (
    admin_service_pb2,
    admin_service_pb2_grpc,
    credential_service_pb2,
    credential_service_pb2_grpc,
    executor_service_pb2,
    executor_service_pb2_grpc,
    job_service_pb2,
    job_service_pb2_grpc,
    schedule_service_pb2,
    schedule_service_pb2_grpc,
    usage_service_pb2,
    usage_service_pb2_grpc,
)

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# Clients are asked (GOAWAY) to open a new connection for new calls after this long; calls
# in flight, WatchJob streams included, finish on the old one (no grace limit is set). A
# client balancing over a headless Service (round_robin) thereby resolves the replicas
# again and spreads over ones added since.
MAX_CONNECTION_AGE_MS = 5 * 60 * 1000
# The shortest interval between a client's keepalive pings the server accepts (gRPC's
# default: 5 minutes without data, and a GOAWAY after the third ping sooner).
MIN_PING_INTERVAL_MS = 5_000

SERVICE_NAMES = (
    job_service_pb2.DESCRIPTOR.services_by_name["JobService"].full_name,
    executor_service_pb2.DESCRIPTOR.services_by_name["ExecutorService"].full_name,
    admin_service_pb2.DESCRIPTOR.services_by_name["AdminService"].full_name,
    credential_service_pb2.DESCRIPTOR.services_by_name["CredentialService"].full_name,
    usage_service_pb2.DESCRIPTOR.services_by_name["UsageService"].full_name,
    schedule_service_pb2.DESCRIPTOR.services_by_name["ScheduleService"].full_name,
)


def build_server(
    s: JobServiceSettings,
    declared: DeclaredJobTypes,
    tokens: TokenTable,
    health_servicer: health.aio.HealthServicer,
    *,
    new_jobs: NewJobs,
    jobs: Jobs,
    leases: Leases,
    results: Results,
    grants: Grants,
    queues: Queues,
    admin: Admin,
    console_sessions: ConsoleSessions,
    bulk: BulkActions,
    erasure: UserErasure,
    outbox: OutboxUpkeep,
    vault: CredentialVault,
    watches: WatchHub,
    sessions: WorkerSessions,
    usage: UsageReports,
    steps: Steps,
    schedules: Schedules,
    signals: Signals,
    permits: CallPermits,
    dependencies: DependencyResults,
) -> grpc.aio.Server:
    server = grpc.aio.server(
        # metrics, errors and auth in one, its handlers kept per method
        interceptors=[CallInterceptor(tokens)],
        # batch submits carry many outputs; the default 4 MiB would refuse a few large ones
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_connection_age_ms", MAX_CONNECTION_AGE_MS),
            # workers ping every 10 s to notice a frozen replica (worker_service's
            # grpc_executor): accepted whatever data flows, so they are never told off
            ("grpc.http2.min_ping_interval_without_data_ms", MIN_PING_INTERVAL_MS),
        ],
    )
    job_service_pb2_grpc.add_JobServiceServicer_to_server(  # type: ignore[no-untyped-call]
        JobServicer(new_jobs, jobs, admin, watches, tokens, signals=signals), server
    )
    admin_service_pb2_grpc.add_AdminServiceServicer_to_server(  # type: ignore[no-untyped-call]
        AdminServicer(
            admin,
            outbox,
            queues,
            declared,
            tokens,
            bulk,
            console_sessions,
            erasure=erasure,
            job_retention_s=s.job_retention_s,
        ),
        server,
    )
    executor_service_pb2_grpc.add_ExecutorServiceServicer_to_server(  # type: ignore[no-untyped-call]
        ExecutorServicer(
            leases,
            results,
            grants,
            vault,
            lease_ttl_s=s.lease_ttl_s,
            heartbeat_interval_s=s.heartbeat_interval_s,
            sessions=sessions,
            steps=steps,
            signals=signals,
            permits=permits,
            dependencies=dependencies,
            declared=declared,
        ),
        server,
    )
    credential_service_pb2_grpc.add_CredentialServiceServicer_to_server(  # type: ignore[no-untyped-call]
        CredentialServicer(vault), server
    )
    usage_service_pb2_grpc.add_UsageServiceServicer_to_server(  # type: ignore[no-untyped-call]
        UsageServicer(usage, tokens), server
    )
    schedule_service_pb2_grpc.add_ScheduleServiceServicer_to_server(  # type: ignore[no-untyped-call]
        ScheduleServicer(schedules, tokens), server
    )
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*SERVICE_NAMES, health.SERVICE_NAME, reflection.SERVICE_NAME), server
    )
    return server


def server_credentials(s: JobServiceSettings) -> grpc.ServerCredentials | None:
    """TLS when a certificate is configured; mutual TLS (client certificates required and
    checked against JOBS_TLS_CLIENT_CA_FILE) when a client CA is, too."""
    if not s.tls_cert_file:
        return None
    client_ca = Path(s.tls_client_ca_file).read_bytes() if s.tls_client_ca_file else None
    return grpc.ssl_server_credentials(
        [(Path(s.tls_key_file).read_bytes(), Path(s.tls_cert_file).read_bytes())],
        root_certificates=client_ca,
        require_client_auth=client_ca is not None,
    )
