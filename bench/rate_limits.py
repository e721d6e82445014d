"""Rate limits at the provider under load: what the provider sees, per sliding window,
against the fleet-wide limit, and how much of the quota the fleet uses.

    python -m bench.rate_limits                       # 2 minutes, 300 requests/minute
    python -m bench.rate_limits --seconds 60 --rpm 240 --burst 3 --no-burner

Two job_service replicas and four worker processes (started as ``make run`` starts them)
run a backlog of ``calls`` jobs (bench/call_jobtypes.py: one or two steps, and the local
OpenAI-compatible server refuses every other job's first answer, so a repair call follows:
one to three calls a job) under JOBS_RATE_LIMITS on the primary tier, while a CPU burner
keeps both cores busy (the processes' calls are then late and bunched, which is what a
limiter metered at grant time let through). The server stands for the provider, which is
not on this machine: it runs in a process of its own at real-time priority (when the
bench may set it; else it says so), so that its clock of arrivals is not the burner's
victim too. Its log of when each request arrived is judged:

- the busiest 1 s and 60 s windows against the bound the engine promises,
  ``max(burst, 1 + rate x slack) + rate x W`` (docs/adr/0002-scheduler.md);
- the share of the quota used: requests in the first ``--seconds`` after the first one,
  against ``rpm x seconds / 60``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import uvloop

from bench.e2e import Stack, channel
from devstack.embedded import free_port
from devstack.openai_server import LocalOpenAIServer, fake_responder
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pb.jobs.v1 import job_service_pb2_grpc
from shared.pbconv import struct_from_dict
from shared.registry import default_registry

MODULES = "bench.call_jobtypes"
SLACK_S = 0.2  # JOBS_RATE_LIMIT_CALL_SLACK_S's default
JOB_NUMBER = re.compile(r"job (\d+)\b")


class RateStack(Stack):
    """bench.e2e's stack with a second replica, the primary tier on the local server and
    a rate limit on it."""

    def __init__(self, root: Path, base_url: str, limits: dict[str, Any]) -> None:
        super().__init__(root)
        self.base_url = base_url
        self.limits = limits
        self.second_port = free_port()
        self.second: subprocess.Popen[bytes] | None = None
        self.metrics_ports: list[int] = []  # every process's /metrics, read at the end

    def _env(self) -> dict[str, str]:
        return {
            **super()._env(),
            "JOBS_JOB_TYPE_MODULES": MODULES,
            "JOBS_RATE_LIMITS": json.dumps(self.limits),
            "JOBS_MAX_ACTIVE_JOBS_PER_USER": "0",
            "JOBS_DAILY_JOB_QUOTA_PER_USER": "0",
            "JOBS_MODEL_PRIMARY_PROVIDER": "openai",
            "JOBS_MODEL_PRIMARY_BASE_URL": self.base_url,
            "JOBS_MODEL_PRIMARY_MODEL": "bench-rate",
            "JOBS_MODEL_PRIMARY_API_KEY": "sk-bench-0123456789abcdef",
        }

    def _spawn(self, *args: str) -> subprocess.Popen[bytes]:
        port = free_port()
        self.metrics_ports.append(port)
        log = (self.root / f"{args[0]}-{len(self.workers)}.log").open("wb")
        env = {**self._env(), "JOBS_METRICS_PORT": str(port)}
        return subprocess.Popen(
            [sys.executable, "-m", *args], env=env, stdout=log, stderr=subprocess.STDOUT
        )

    def start_second_replica(self) -> None:
        port = free_port()
        self.metrics_ports.append(port)
        env = {
            **self._env(),
            "JOBS_GRPC_PORT": str(self.second_port),
            "JOBS_METRICS_PORT": str(port),
        }
        log = (self.root / "job_service-second.log").open("wb")
        self.second = subprocess.Popen(
            [sys.executable, "-m", "job_service", "serve"], env=env, stdout=log, stderr=log
        )

    def start_worker_on(self, port: int) -> None:
        metrics = free_port()
        self.metrics_ports.append(metrics)
        env = {
            **self._env(),
            "JOBS_JOB_SERVICE_TARGET": f"127.0.0.1:{port}",
            "JOBS_WORKER_METRICS_PORT": str(metrics),
        }
        log = (self.root / f"worker-{len(self.workers)}.log").open("wb")
        self.workers.append(
            subprocess.Popen(
                [sys.executable, "-m", "worker_service"], env=env, stdout=log, stderr=log
            )
        )

    def stop(self) -> None:
        if self.second is not None and self.second.poll() is None:
            self.second.terminate()
            self.second.wait(30)
        super().stop()


def repairing_responder(requests: dict[int, int]) -> Any:
    """The fake answers, except the first answer of every other job, which is off its
    schema (a repair call follows)."""

    def respond(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        status, answer = fake_responder(body)
        messages = body.get("messages") or []
        user = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
        found = JOB_NUMBER.search(str(user))
        if found and len(messages) <= 2:
            number = int(found.group(1))
            requests[number] = requests.get(number, 0) + 1
            if number % 2 and requests[number] == 1:
                answer["choices"][0]["message"]["content"] = "{}"
        return status, answer

    return respond


PERMIT_LINE = re.compile(
    r"^(jobs_call_permits_total|jobs_worker_call_permits_late_total)\{([^}]*)\} ([0-9.e+]+)$"
)


async def permit_answers(ports: list[int]) -> dict[str, float]:
    """The permit answers job_service gave (granted, reserved, wait, late, blocked) and the
    permits workers got too late, summed over every process's /metrics."""
    totals: dict[str, float] = {}
    async with httpx.AsyncClient(timeout=5) as http:
        for port in ports:
            try:
                text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
            except httpx.HTTPError:
                continue
            for line in text.splitlines():
                found = PERMIT_LINE.match(line)
                if found:
                    answer = re.search(r'answer="(\w+)"', found.group(2))
                    name = answer.group(1) if answer else "worker_late"
                    totals[name] = totals.get(name, 0) + float(found.group(3))
    return totals


def serve_provider(urls: Any, first: Any, stop: Any, times: Any) -> None:
    """The provider's stand-in, in a process of its own: the local server answering like
    ``repairing_responder``, at real-time priority where allowed; puts its URL on
    ``urls``, the first request's arrival in ``first``, and every arrival on ``times`` once
    ``stop`` is set."""
    priority = "real-time"
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
    except (OSError, AttributeError):
        priority = "normal (no real-time scheduling here: arrivals may be timed late)"

    async def run() -> None:
        default_registry({"JOBS_JOB_TYPE_MODULES": MODULES})
        server = LocalOpenAIServer(repairing_responder({}))
        await server.start()
        urls.put((server.url, priority))
        while not stop.is_set():
            if server.requests and not first.value:
                first.value = server.requests[0].at
            await asyncio.sleep(0.1)
        times.put([r.at for r in server.requests])
        await server.stop()

    asyncio.run(run())


def burn() -> None:
    while True:
        pass


def busiest(times: list[float], window_s: float) -> int:
    times = sorted(times)
    most, start = 0, 0
    for end, at in enumerate(times):
        while at - times[start] >= window_s:
            start += 1
        most = max(most, end - start + 1)
    return most


async def create_backlog(port: int, jobs: int) -> None:
    async with channel(port) as ch:
        stub = job_service_pb2_grpc.JobServiceStub(ch)
        for start in range(0, jobs, 100):
            await stub.CreateJobs(
                jpb.CreateJobsRequest(
                    requests=[
                        jpb.CreateJobRequest(
                            user_id=f"bench-{n % 20}",
                            job_type="calls",
                            input=struct_from_dict({"text": f"job {n} text", "steps": 1 + n % 2}),
                        )
                        for n in range(start, min(start + 100, jobs))
                    ]
                )
            )


async def main(args: argparse.Namespace) -> None:
    root = Path(tempfile.mkdtemp(prefix="jobs-bench-rate-"))
    if args.keep:
        print(f"logs in {root}")
    urls: multiprocessing.Queue[tuple[str, str]] = multiprocessing.Queue()
    arrivals: multiprocessing.Queue[list[float]] = multiprocessing.Queue()
    first, stop = multiprocessing.Value("d", 0.0), multiprocessing.Event()
    provider = multiprocessing.Process(target=serve_provider, args=(urls, first, stop, arrivals))
    provider.start()
    url, priority = await asyncio.to_thread(urls.get, True, 30)
    rate = args.rpm / 60
    limits = {"primary": {"requests_per_minute": args.rpm, "burst_requests": args.burst}}
    stack = RateStack(root, url, limits)
    burners: list[multiprocessing.Process] = []
    try:
        await stack.start()
        stack.start_second_replica()
        # enough work for the whole run, at about two calls a job
        await create_backlog(stack.port, math.ceil(rate * args.seconds * 0.75) + 50)
        if args.burner:
            burners = [multiprocessing.Process(target=burn, daemon=True) for _ in range(2)]
            for b in burners:
                b.start()
        for n in range(4):
            stack.start_worker_on(stack.port if n % 2 == 0 else stack.second_port)
        deadline = time.monotonic() + args.seconds + 120
        while time.monotonic() < deadline:
            if first.value and time.time() - first.value > args.seconds + 1:
                break
            await asyncio.sleep(0.5)
        permits = await permit_answers(stack.metrics_ports)
        db = await asyncpg.connect(stack.database_url)
        try:
            statuses = dict(await db.fetch("SELECT status, count(*) FROM jobs GROUP BY 1"))
        finally:
            await db.close()
    finally:
        for b in burners:
            b.terminate()
        stack.stop()
        stop.set()
        times = sorted(await asyncio.to_thread(arrivals.get, True, 60))
        provider.join(10)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    if not times:
        raise SystemExit("the provider saw no request")
    window = [t for t in times if t - times[0] < args.seconds]
    floor = max(args.burst, 1 + rate * SLACK_S)
    bound_1 = math.floor(floor + rate * 1)
    bound_60 = math.floor(floor + rate * 60)
    used = len(window) / (args.rpm * args.seconds / 60)
    print(
        f"\nRate limit at the provider: {args.rpm:g} requests/min, burst {args.burst:g},"
        f" 2 replicas, 4 workers, CPU burner {'on' if args.burner else 'off'},"
        f" provider at {priority} priority"
    )
    print(f"{'figure':<46}{'seen':>8}{'bound':>8}")
    print(f"{'busiest 1 s window (requests)':<46}{busiest(times, 1.0):>8}{bound_1:>8}")
    print(f"{'busiest 60 s window (requests)':<46}{busiest(times, 60.0):>8}{bound_60:>8}")
    print(f"{f'requests in the first {args.seconds:g} s':<46}{len(window):>8}")
    print(f"{'jobs by status at the end':<46}{json.dumps(statuses)}")
    print(f"{'permit answers (all processes)':<46}{json.dumps(permits)}")
    print(f"{'share of the quota used':<46}{used:>8.1%}{'90.0%':>8}")
    ok = busiest(times, 1.0) <= bound_1 and busiest(times, 60.0) <= bound_60 and used >= 0.9
    print("RESULT:", "PASS" if ok else "FAIL")
    if not ok:
        raise SystemExit(1)


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="the measured window")
    parser.add_argument("--rpm", type=float, default=300.0, help="requests per minute")
    parser.add_argument("--burst", type=float, default=2.0, help="burst_requests")
    parser.add_argument("--no-burner", dest="burner", action="store_false")
    parser.add_argument("--keep", action="store_true", help="keep the logs (printed path)")
    return parser.parse_args()


if __name__ == "__main__":
    uvloop.run(main(parse()))
