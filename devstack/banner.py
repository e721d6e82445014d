"""What ``make run`` prints once the stack serves: where everything is, how to use it."""

from __future__ import annotations

from devstack.config import DevstackConfig
from shared.ai.provider import ModelTier
from worker_service.model_router import ModelSettings


def banner(
    config: DevstackConfig,
    target: str,
    database_url: str,
    nats_url: str,
    metrics_ports: tuple[int, int] | None = None,
    generated: bool = True,
    console_port: int | None = None,
) -> str:
    token_source = f"$(cat {config.data_dir / 'client.token'})" if generated else "<a client token>"
    auth = f'-H "authorization: Bearer {token_source}" '
    create = (
        f"grpcurl -plaintext {auth}-d "
        """'{"user_id":"u1","job_type":"synthetic","input":{"sleep_ms":100}}' """
        f"{target} jobs.v1.JobService/CreateJob"
    )
    get = (
        f"grpcurl -plaintext {auth}"
        """-d '{"user_id":"u1","job_id":"<id from CreateJob>"}' """
        f"{target} jobs.v1.JobService/GetJob"
    )
    feynman = (
        f"grpcurl -plaintext {auth}-d "
        """'{"user_id":"u1","job_type":"feynman_evaluation","input":"""
        """{"knowledge_item_id":"ki-1","knowledge_base_id":"kb-1","title":"Osmosis","""
        """"content":"Water moves through a membrane towards higher solute concentration","""
        """"explanation":"Water moves through a membrane"}}' """
        f"{target} jobs.v1.JobService/CreateJob"
    )
    models = ModelSettings()
    tiers = ", ".join(
        f"{tier.value}: {kind.value} {model}{' at ' + url if url else ''}"
        for tier in ModelTier
        for kind, url, model, _ in [models.tier(tier)]
    )
    tokens = (
        f"  auth tokens        {config.data_dir}/{{client,admin,worker}}.token"
        if generated
        else "  auth tokens        from JOBS_AUTH_TOKENS / JOBS_AUTH_TOKENS_FILE"
    )
    return "\n".join(
        [
            "",
            "  The job engine is running.",
            f"  gRPC (job_service) {target}",
            f"    list its services: grpcurl -plaintext {target} list",
            f"  PostgreSQL         {database_url}",
            f"  NATS JetStream     {nats_url}",
            f"  data               {config.data_dir}",
            tokens,
            *(
                [
                    f"  web console        http://127.0.0.1:{console_port}/",
                    "                     sign in with the admin token: "
                    + (
                        f"cat {config.data_dir / 'admin.token'}"
                        if generated
                        else "one with the admin role"
                    ),
                ]
                if console_port
                else []
            ),
            *(
                [
                    f"  metrics            job_service http://127.0.0.1:{metrics_ports[0]}/metrics",
                    f"                     worker      http://127.0.0.1:{metrics_ports[1]}/metrics",
                ]
                if metrics_ports
                else []
            ),
            "",
            "  Or with jobctl (installed with the package):",
            f"    export JOBS_AUTH_TOKEN={token_source}",
            f"    jobctl --target {target} create synthetic -i '{{\"sleep_ms\": 500}}' --watch",
            f"    jobctl --target {target} list",
            "",
            "  Create a job:",
            f"    {create}",
            "  Read it back:",
            f"    {get}",
            "  An AI job (its review-card child follows; GetJob shows child_job_ids):",
            f"    {feynman}",
            f"  Models             {tiers} (JOBS_MODEL_* to change)",
            "",
            "  Ctrl-C stops everything.",
            "",
        ]
    )
