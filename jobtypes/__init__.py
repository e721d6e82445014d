"""The job types shipped with the product, one module each, and the toolkit they build on.

``synthetic`` (tests and benchmarks), ``feynman_evaluation`` and ``review_card_generation``
(the reference AI job types), ``knowledge_base_review`` and ``study_plan`` (fan-out and
fan-in: a review creates an evaluation per item and a plan that waits for them all),
``approval_agent`` (the example of durable steps and waits: draft, wait for approval, send
once per key, to the fake ``message_service``), built with ``jobtypes.aijob`` (the AI
pipeline from declarative parts) and ``jobtypes.safety`` (content-safety checks).

Why a package of its own: both services load job definitions — the job service validates
input, takes snapshots and checks child job types; the worker runs them — so a job type is
neither service's code. Job types are plug-ins, found through the ``durable_jobs.job_types``
entry-point group (pyproject.toml) exactly as a product team's own package would be. So
they live here, depending on ``shared`` (the registry and the contract types it names),
and neither ``shared`` nor either service imports this package: the services reach job
types only through ``shared.registry.default_registry``.
"""
