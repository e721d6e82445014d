"""The composition of job_service, one module per concern: each builds its concern's stores
and use cases from the connections (``Connections``) and hands them on as a small frozen
record; ``assembly.wire`` joins them into the gRPC server and the loops. ``app.py`` keeps
the process around them: the connections, health, serving and shutdown."""
