# One image for job_service, its migrations, worker_service and the console; the command picks the role.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first, so that a code change does not reinstall them: exactly the versions
# and hashes of requirements.lock (`make lock`), nothing resolved at build time: the lock
# holds the build backend too (setuptools), and the project and the client library are
# built with it (--no-build-isolation), not with one pip would fetch. The embedded
# PostgreSQL and NATS (the `embedded` extra) are not in it.
COPY requirements.lock ./
RUN pip install --require-hashes --no-deps -r requirements.lock

COPY shared ./shared
COPY job_service ./job_service
COPY worker_service ./worker_service
COPY jobctl ./jobctl
# job types are plug-ins registered by entry point: both services load them
COPY jobtypes ./jobtypes
# what `jobctl dev` runs (its embedded servers need the `embedded` extra, not installed here)
COPY devstack ./devstack
# the web console (python -m console), with its templates and static files
COPY console ./console
COPY pyproject.toml ./
RUN pip install --no-deps --no-build-isolation . && rm -rf build *.egg-info
# the client library (durable-jobs-client), which jobctl calls the service through; its
# three dependencies (grpcio, protobuf, googleapis-common-protos) are in the lock above
COPY client ./client
RUN pip install --no-deps --no-build-isolation ./client && rm -rf client

RUN useradd --system --uid 10001 --no-create-home jobs
USER jobs

# gRPC, job_service metrics, worker metrics, the web console.
EXPOSE 50051 9464 9465 8080

# Overridden per service in docker-compose.yml and deploy/k8s.
CMD ["python", "-m", "job_service", "serve"]
