"""The worker's adapters: the job service over gRPC, dispatch and cancel messages over NATS,
model providers over HTTP (``openai_compat``) or none at all (``fake_provider``)."""
