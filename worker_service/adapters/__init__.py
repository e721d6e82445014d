"""The worker's adapters: the job service over gRPC, dispatch and cancel messages over NATS."""
