"""The ports the use cases are written against, one module per concern; the postgres,
NATS and gRPC adapters implement them. A port names domain values only."""
