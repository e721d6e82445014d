"""UsageService: what provider calls cost. Errors are raised, never aborted here: the
ErrorInterceptor translates them."""

from __future__ import annotations

from datetime import UTC, datetime

import grpc

from job_service.adapters.grpc.auth import SEES_ALL, TokenTable
from job_service.adapters.grpc.convert import instant_from_pb
from job_service.domain.usage import Grouping, UsageGroup, UsageTotals
from job_service.usecases.usage import UsageReports
from shared.pb.jobs.v1 import usage_service_pb2 as pb
from shared.pb.jobs.v1 import usage_service_pb2_grpc
from shared.pbconv import timestamp

_GROUPINGS = {
    pb.USAGE_GROUPING_DAY: Grouping.DAY,
    pb.USAGE_GROUPING_MODEL: Grouping.MODEL,
    pb.USAGE_GROUPING_JOB_TYPE: Grouping.JOB_TYPE,
    pb.USAGE_GROUPING_USER: Grouping.USER,
}


class UsageServicer(usage_service_pb2_grpc.UsageServiceServicer):
    def __init__(self, reports: UsageReports, tokens: TokenTable) -> None:
        self._reports = reports
        self._tokens = tokens

    async def GetUsage(
        self, request: pb.GetUsageRequest, context: grpc.aio.ServicerContext
    ) -> pb.GetUsageResponse:
        # a client is a product service acting for the user it names; only an admin or an
        # operator may ask across users
        admin = bool(SEES_ALL & self._tokens.roles(context.invocation_metadata()))
        report = await self._reports.get_usage(
            request.user_id,
            instant_from_pb(request, "start_time"),
            instant_from_pb(request, "end_time"),
            [_GROUPINGS.get(g) for g in request.group_by],
            any_user=admin,
        )
        return pb.GetUsageResponse(
            groups=[_group_to_pb(g) for g in report.groups], totals=_totals_to_pb(report.totals)
        )


def _totals_to_pb(totals: UsageTotals) -> pb.UsageTotals:
    return pb.UsageTotals(
        calls=totals.calls,
        failed_calls=totals.failed_calls,
        input_tokens=totals.input_tokens,
        output_tokens=totals.output_tokens,
        cost_usd=f"{totals.cost_usd:.6f}",
    )


def _group_to_pb(group: UsageGroup) -> pb.UsageGroup:
    day = None
    if group.day is not None:
        day = timestamp(datetime(group.day.year, group.day.month, group.day.day, tzinfo=UTC))
    return pb.UsageGroup(
        day=day,
        provider=group.provider,
        model=group.model,
        job_type=group.job_type,
        user_id=group.user_id,
        totals=_totals_to_pb(group.totals),
    )
