"""The job types this service knows, as the registry defines them (with their schemas)."""

from __future__ import annotations

import json

import grpc

from job_service.adapters.grpc.admin.base import AdminHandlers
from shared.pb.jobs.v1 import admin_service_pb2 as pb
from shared.registry import JobDefinition


class DefinitionHandlers(AdminHandlers):
    async def ListJobDefinitions(
        self, request: pb.ListJobDefinitionsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListJobDefinitionsResponse:
        return pb.ListJobDefinitionsResponse(
            definitions=[
                self._definition_to_pb(d) for d in sorted(self._registry, key=lambda d: d.job_type)
            ]
        )

    def _definition_to_pb(self, d: JobDefinition) -> pb.JobDefinitionInfo:
        return pb.JobDefinitionInfo(
            job_type=d.job_type,
            label=d.label,
            domain=d.domain,
            version=d.version,
            queue=d.queue,
            default_priority=d.default_priority,
            timeout_seconds=d.timeout_s,
            max_attempts=d.max_attempts,
            max_concurrency=d.concurrency,
            fairness_key=d.fairness_key,
            concurrency_key=d.concurrency_key,
            concurrency_limit=d.concurrency_limit,
            estimated_tokens=d.estimated_tokens,
            input_schema_json=json.dumps(d.input_model.model_json_schema()),
            output_schema_json=json.dumps(d.output_model.model_json_schema()),
            output_redaction=sorted(d.output_redaction),
            redaction_version=d.redaction_version,
            content_safety_check=d.content_safety_check,
            retention_seconds=(self._job_retention_s if d.retention_s is None else d.retention_s),
        )
