"""PostgreSQL adapters, one module per concern, each with its SQL next to the code that
binds it. Queries run on asyncpg directly (the ORM runs the hot path at a fifth of the
speed); SQLAlchemy Core describes the schema (``tables.py``) for Alembic only.

Every status write is a compare-and-set whose ``WHERE status = ANY(...)`` comes from the
lifecycle table (``job_service.domain.lifecycle``); an update that matches no row lost a
race and changes nothing. The hot path (create, lock, heartbeat, submit results) is one
statement each: data-modifying CTEs write the job, its timeline event, snapshot, artifacts
and outbox rows atomically in a single round trip.
"""
