"""The SQL vocabulary of the PostgreSQL adapters: every piece that more than one statement
is built from, spelled once. A statement stays in its concern's module, beside the code
that binds it; the concern modules import these pieces (and ``pool.py``, ``rows.py``),
never each other — a star, not a web (an import-linter contract). SQL text and row
mapping only: nothing here runs a statement (a test); a transaction that more than one
concern runs is a unit of work (``units.py``, the star's second hub).

- ``statuses.py``: a status as an SQL literal (from the lifecycle), the waiting set, the
  timeline event of a change of status, CancelJob's step for set-based cancels;
- ``new_job.py``: what a new job brings (columns, record, keys, today's spend) and its
  rows — job, snapshot, first timeline event, dispatch row — as the CTEs every producer
  uses (CreateJob, CreateJobs, a projected child, a re-run);
- ``children.py``: a child job a result projects, with what it takes from its parent's
  row;
- ``outbox_rows.py``: dispatch and domain-event rows, their dedupe keys, and the rows a
  statement hands to its replica's dispatcher;
- ``line.py``: a waiting job's place in line, a retry's, and the work tokens an attempt
  that frees a limited slot re-issues;
- ``holds.py``: what holds a waiting job back (a paused queue, a full key, no worker of
  its version), for the statements that leave held jobs alone;
- ``deadlines.py``: an attempt's deadline (its timeout plus a grace), where its lease stops;
- ``grants.py``: a claim's grant (waiting jobs become RUNNING with a fresh lease) and its
  rows;
- ``buckets.py``: a tier's rate bucket refilled, its back-off factor recovered or halved
  (the pure twins are ``domain/rate_limits.py``'s);
- ``quotas.py``: the quota gate of CreateJob and CreateJobs — a user's usage, whether a
  new job fits (the pure twin is ``domain/quotas.admits``), the day's counter;
- ``dependencies.py``: attaching a job to its dependencies, and the resolver's outcome
  (the pure twin is ``domain/dependencies.outcome``);
- ``usage_rows.py``: usage rows, one per provider call;
- ``filters.py``: a job filter's conditions, and bound parameters of a query built on
  the fly.
"""
