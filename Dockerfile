# One image for job_service, its migrations, worker_service and the console; the command picks the role.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first, so that a code change does not reinstall them.
COPY pyproject.toml ./
RUN mkdir job_service worker_service shared jobctl jobtypes devstack console \
    && touch job_service/__init__.py worker_service/__init__.py shared/__init__.py \
        jobctl/__init__.py jobtypes/__init__.py devstack/__init__.py console/__init__.py \
    && pip install . \
    && pip uninstall -y durable-jobs \
    && rm -rf job_service worker_service shared jobctl jobtypes devstack console build *.egg-info

COPY shared ./shared
COPY job_service ./job_service
COPY worker_service ./worker_service
COPY jobctl ./jobctl
# job types are plug-ins registered by entry point: both services load them
COPY jobtypes ./jobtypes
# what `jobctl dev` runs
COPY devstack ./devstack
# the web console (python -m console), with its templates and static files
COPY console ./console
RUN pip install --no-deps . && rm -rf build *.egg-info

RUN useradd --system --uid 10001 --no-create-home jobs
USER jobs

# gRPC, job_service metrics, worker metrics, the web console.
EXPOSE 50051 9464 9465 8080

# Overridden per service in docker-compose.yml and deploy/k8s.
CMD ["python", "-m", "job_service", "serve"]
