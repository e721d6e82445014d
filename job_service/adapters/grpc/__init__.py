"""The gRPC face of the job service: one servicer per service (protobuf in, use case call,
protobuf out), the auth interceptor with its role table, and the one error interceptor
that translates JobsError to google.rpc.Status."""
