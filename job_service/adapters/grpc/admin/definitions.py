"""The job types workers declared, one entry per (job_type, version), with where each spec
came from (who declared it first and last, and when) and which version is current."""

from __future__ import annotations

import grpc

from job_service.adapters.grpc.admin.base import AdminHandlers
from job_service.ports.job_types import Declaration
from shared.pb.jobs.v1 import admin_service_pb2 as pb


class DefinitionHandlers(AdminHandlers):
    async def ListJobDefinitions(
        self, request: pb.ListJobDefinitionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListJobDefinitionsResponse:
        declarations = await self._declared.declarations()
        current = {}
        for d in declarations:  # oldest first: the last one of a type is its current version
            current[d.spec.job_type] = d.spec.version
        return pb.ListJobDefinitionsResponse(
            definitions=[
                self._definition_to_pb(d, current[d.spec.job_type] == d.spec.version)
                for d in sorted(declarations, key=lambda d: (d.spec.job_type, d.first_declared_at))
            ]
        )

    def _definition_to_pb(self, d: Declaration, current: bool) -> pb.JobDefinitionInfo:
        spec = d.spec
        info = pb.JobDefinitionInfo(
            job_type=spec.job_type,
            label=spec.label,
            domain=spec.domain,
            version=spec.version,
            queue=spec.queue,
            default_priority=spec.default_priority,
            timeout_seconds=spec.timeout_seconds,
            max_attempts=spec.max_attempts,
            max_concurrency=spec.concurrency,
            fairness_key=spec.fairness_key,
            concurrency_key=spec.concurrency_key,
            concurrency_limit=spec.concurrency_limit,
            estimated_tokens=spec.estimated_tokens,
            input_schema_json=spec.input_schema_json,
            output_schema_json=spec.output_schema_json,
            output_redaction=sorted(spec.output_redaction),
            redaction_version=spec.redaction_version,
            content_safety_check=spec.content_safety_check,
            retention_seconds=(
                spec.retention_seconds
                if spec.HasField("retention_seconds")
                else self._job_retention_s
            ),
            first_declared_by=d.first_declared_by,
            last_declared_by=d.last_declared_by,
            current=current,
        )
        info.first_declared_at.FromDatetime(d.first_declared_at)
        info.last_declared_at.FromDatetime(d.last_declared_at)
        return info
