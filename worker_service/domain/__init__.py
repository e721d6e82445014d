"""The worker's pure core: values that cross the ports and the rules that map what an
attempt did to what the job service is told. No grpc or nats imports here."""
