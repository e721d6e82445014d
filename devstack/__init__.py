"""Development tooling: the whole product on one machine from pip-installed parts.

``python -m devstack`` (what ``make run`` and ``jobctl dev`` run) starts an embedded
PostgreSQL and NATS JetStream (``devstack.embedded``), then job_service and one worker as
child processes; ``python -m devstack.openai_server`` is a local OpenAI-compatible server.
Tests, benchmarks and chaos runs use the same parts. Nothing in production imports this
package.
"""
