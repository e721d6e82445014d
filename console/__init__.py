"""The web console: server-rendered pages for operators and product engineers.

A client of job_service like any other: it calls AdminService and JobService over gRPC with
the admin token its user signed in with, and holds no database connection. ``app`` builds
the Starlette application, ``backend`` wraps the gRPC stubs, ``sessions`` keeps the token in
an encrypted cookie, ``overview`` assembles the overview from RPCs and metrics endpoints.
"""
