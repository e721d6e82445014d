"""AdminService's handlers, one module per concern (jobs, definitions, dead letters, queues,
workers, console sessions, bulk actions, erasure). Each is a mixin that declares the use cases it
reads; ``admin_api.AdminServicer`` composes them into the one servicer the server
registers and sets those use cases."""
