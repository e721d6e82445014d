"""The web console: server-rendered pages for operators and product engineers.

A client of job_service like any other: it calls AdminService and JobService through the
client library (``durable_jobs_client``) with the admin token its user signed in with, and
holds no database connection. ``app`` assembles the Starlette application from the page
modules of ``pages``; ``site`` is what they share (the guard, the templates), ``backend``
the one channel to job_service, ``sessions`` keeps the token in an encrypted cookie,
``overview`` assembles the overview from RPCs and metrics endpoints.
"""
