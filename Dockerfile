# Two images from one base (docs/adr/0010): `--target job-service` (job_service, its
# migrations and the console: the control plane, which runs no job type code, so it carries
# none) and `--target worker` (worker_service with the job types it runs). Adding or changing
# a job type rebuilds and redeploys the workers only. The command picks the role.
FROM python:3.11-slim AS base

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

# the client library (durable-jobs-client), which jobctl and the console call the service
# through; its three dependencies (grpcio, protobuf, googleapis-common-protos) are in the
# lock above
COPY client ./client
RUN pip install --no-deps --no-build-isolation ./client && rm -rf client

COPY shared ./shared
COPY job_service ./job_service
COPY worker_service ./worker_service
COPY jobctl ./jobctl
# what `jobctl dev` runs (its embedded servers need the `embedded` extra, not installed here)
COPY devstack ./devstack
# the web console (python -m console), with its templates and static files
COPY console ./console
COPY pyproject.toml ./

RUN useradd --system --uid 10001 --no-create-home jobs

# job_service, its migrations and the web console. No job type: workers declare theirs
# (ExecutorService.DeclareJobType) and job_service keeps them as data, so the `jobtypes`
# package is not copied (the project is built without it) and JOBS_JOB_TYPE_MODULES is
# never set here.
FROM base AS job-service
RUN pip install --no-deps --no-build-isolation . && rm -rf build *.egg-info
USER jobs
# gRPC, job_service metrics, the web console.
EXPOSE 50051 9464 8080
# Overridden per service in docker-compose.yml and deploy/k8s.
CMD ["python", "-m", "job_service", "serve"]

# worker_service and the job types it runs: the `durable_jobs.job_types` entry points of
# the packages installed here, and the modules JOBS_JOB_TYPE_MODULES names. A team's own
# job types: a worker image of theirs, `FROM` this one with their package installed
# (docs/job-types.md, "Add a job type: deploy a worker").
FROM base AS worker
# job types are plug-ins registered by entry point: the worker loads them, job_service never
COPY jobtypes ./jobtypes
RUN pip install --no-deps --no-build-isolation . && rm -rf build *.egg-info
USER jobs
# worker metrics, /livez and /readyz
EXPOSE 9465
CMD ["python", "-m", "worker_service"]
