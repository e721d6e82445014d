"""worker_service: pulls dispatch messages, locks jobs over RPC, runs them, submits results.

It holds no database connection: the job service decides every outcome (retries included);
the worker only reports what one attempt did.
"""
