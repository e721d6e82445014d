"""Operators' reads and actions: listing across users (and the page tokens every listing
signs), retries and dead letters, bulk actions, EraseUserData."""

from __future__ import annotations

from dataclasses import dataclass

from job_service.adapters.postgres.bulk import BulkRepository
from job_service.adapters.postgres.erasure import ErasureRepository
from job_service.adapters.postgres.listing import JobListing
from job_service.adapters.postgres.reruns import RerunRepository
from job_service.domain.paging import PageTokens
from job_service.settings import JobServiceSettings
from job_service.usecases.admin import Admin
from job_service.usecases.bulk import BulkActions
from job_service.usecases.erasure import UserErasure
from job_service.wiring.connections import Connections
from job_service.wiring.delivery import Delivery
from job_service.wiring.jobs import JobsWiring


@dataclass(frozen=True)
class AdminWiring:
    listing: JobListing
    page_tokens: PageTokens
    admin: Admin
    bulk: BulkActions
    erasure: UserErasure


async def wire_admin(c: Connections, delivery: Delivery, jobs: JobsWiring) -> AdminWiring:
    listing = JobListing(c.pool)
    page_tokens = PageTokens(await _page_token_secret(c.settings, listing))
    admin = Admin(
        c.registry,
        jobs.job_store,
        RerunRepository(c.hot),
        listing,
        delivery.outbox_store,
        page_tokens,
        delivery.dispatcher,
        jobs.dependency_store,
        sealer=c.sealer,
    )
    bulk = BulkActions(
        c.registry,
        admin,
        BulkRepository(c.pool),
        page_tokens,
        delivery.publisher,
        delivery.dispatcher,
    )
    erasure = UserErasure(ErasureRepository(c.pool), c.sealer, bulk)
    return AdminWiring(listing, page_tokens, admin, bulk, erasure)


async def _page_token_secret(s: JobServiceSettings, listing: JobListing) -> bytes:
    if s.page_token_secret:
        return s.page_token_secret.encode()
    secret = await listing.page_token_secret()
    if secret is None:
        raise RuntimeError("no page token secret: run `python -m job_service migrate` first")
    return secret
