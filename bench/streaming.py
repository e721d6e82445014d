"""Partial-output latency: from the provider sending text to a WatchJob client seeing it.

    python -m bench.streaming                 # 30 Feynman evaluations, one after another
    python -m bench.streaming --runs 60 --interval-ms 50

The stack runs as ``make run`` runs it (bench.e2e's Stack: PostgreSQL, NATS, job_service
and one worker, each its own process); the worker's primary tier is the local
OpenAI-compatible server, started in this process, streaming 20 chunks a second (8
characters each). For each job this process creates it, watches it with
include_partial_output (the watch is live before the server starts answering: the server
waits ``--lead-ms`` before its first chunk) and compares, on this process's clock:

* first piece: when the client received the first partial output, against when the server
  wrote the first chunk to the socket (the issue's figure: p99 under 100 ms);
* every piece: when the client received each partial output, against when the server wrote
  the newest chunk it contains (coalescing adds up to JOBS_PARTIAL_OUTPUT_INTERVAL_MS to the
  older chunks of a piece, by design);
* whole: the pieces joined equal the text the server sent and the job's output.

With the default 30 runs the p99 is the worst run's figure.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import uvloop

from bench.e2e import Stack, channel
from devstack.openai_server import LocalOpenAIServer
from shared.pb.jobs.v1 import job_pb2, job_service_pb2_grpc
from shared.pb.jobs.v1 import job_service_pb2 as jpb
from shared.pbconv import dict_from_struct, struct_from_dict
from shared.registry import default_registry

FEYNMAN_INPUT = {
    "knowledge_item_id": "ki-bench",
    "knowledge_base_id": "kb-bench",
    "title": "Photosynthesis",
    "content": (
        "Plants convert light energy, water and carbon dioxide into glucose and oxygen "
        "inside chloroplasts; chlorophyll absorbs the light."
    ),
    "explanation": "Plants take light and water and make glucose.",
}


class StreamingStack(Stack):
    """bench.e2e's stack with the worker's primary tier on the local server."""

    def __init__(self, root: Path, base_url: str, interval_ms: int) -> None:
        super().__init__(root)
        self.base_url = base_url
        self.interval_ms = interval_ms

    def _env(self) -> dict[str, str]:
        return {
            **super()._env(),
            "JOBS_MODEL_PRIMARY_PROVIDER": "openai",
            "JOBS_MODEL_PRIMARY_BASE_URL": self.base_url,
            "JOBS_MODEL_PRIMARY_MODEL": "bench-streaming",
            "JOBS_MODEL_PRIMARY_API_KEY": "sk-bench-0123456789abcdef",
            "JOBS_PARTIAL_OUTPUT_INTERVAL_MS": str(self.interval_ms),
        }


class Run:
    def __init__(self) -> None:
        self.first_ms: float | None = None
        self.piece_ms: list[float] = []
        self.whole = False
        self.missed_start = False


async def one_job(
    stub: job_service_pb2_grpc.JobServiceStub, server: LocalOpenAIServer, n: int
) -> Run:
    user = f"bench-stream-{n}"
    created = await stub.CreateJob(
        jpb.CreateJobRequest(
            user_id=user, job_type="feynman_evaluation", input=struct_from_dict(FEYNMAN_INPUT)
        )
    )
    sent_before = len(server.sent)
    pieces: list[tuple[jpb.PartialOutput, float]] = []
    final: job_pb2.Job | None = None
    request = jpb.WatchJobRequest(job_id=created.job.id, user_id=user, include_partial_output=True)
    async for answer in stub.WatchJob(request):
        if answer.HasField("partial"):
            pieces.append((answer.partial, time.time()))
        else:
            final = answer.job
    run = Run()
    sent = server.sent[sent_before:]
    if not pieces or not sent or final is None:
        return run
    run.missed_start = pieces[0][0].offset != 0
    if not run.missed_start:
        run.first_ms = (pieces[0][1] - sent[0].at) * 1000
    # the send time of the chunk that ends at each character offset
    ends: dict[int, float] = {}
    total = 0
    for chunk in sent:
        total += len(chunk.text)
        ends[total] = chunk.at
    for piece, received in pieces:
        newest = ends.get(piece.offset + len(piece.text))
        if newest is not None:
            run.piece_ms.append((received - newest) * 1000)
    text = "".join(p.text for p, _ in pieces)
    streamed = "".join(c.text for c in sent)
    run.whole = (
        final.status == job_pb2.JOB_STATUS_SUCCEEDED
        and text == streamed
        and json.loads(text) == dict_from_struct(final.output)
    )
    return run


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(args: argparse.Namespace) -> None:
    default_registry()  # the job types register their prompts: the server answers them
    root = Path(tempfile.mkdtemp(prefix="jobs-bench-streaming-"))
    server = LocalOpenAIServer(
        delay_s=args.lead_ms / 1000, stream_interval_s=1 / args.chunks_per_s, stream_chunk_chars=8
    )
    await server.start()
    stack = StreamingStack(root, server.url, args.interval_ms)
    runs: list[Run] = []
    try:
        await stack.start()
        stack.start_worker()
        async with channel(stack.port) as client_channel:
            stub = job_service_pb2_grpc.JobServiceStub(client_channel)
            await one_job(stub, server, -1)  # warm-up: connections, imports, first plans
            for n in range(args.runs):
                runs.append(await one_job(stub, server, n))
    finally:
        stack.stop()
        await server.stop()
        shutil.rmtree(root, ignore_errors=True)

    first = [r.first_ms for r in runs if r.first_ms is not None]
    every = [ms for r in runs for ms in r.piece_ms]
    print(
        f"\nPartial output, {args.runs} Feynman evaluations, {args.chunks_per_s:g} chunks/s,"
        f" JOBS_PARTIAL_OUTPUT_INTERVAL_MS={args.interval_ms}"
    )
    print(f"{'figure':<44}{'p50':>9}{'p99':>9}{'max':>9}")
    for name, values in (("first piece: server sent -> client got, ms", first),
                         ("every piece: newest chunk -> client got, ms", every)):  # fmt: skip
        if values:
            print(
                f"{name:<44}{statistics.median(values):>9.1f}"
                f"{percentile(values, 0.99):>9.1f}{max(values):>9.1f}"
            )
    print(f"{'pieces per job (mean)':<44}{len(every) / max(1, len(runs)):>9.1f}")
    print(f"{'jobs whose pieces join to the output':<44}{sum(r.whole for r in runs):>9}")
    print(f"{'jobs whose start was missed':<44}{sum(r.missed_start for r in runs):>9}")


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="jobs, one after another")
    parser.add_argument("--chunks-per-s", type=float, default=20.0, help="the server's pace")
    parser.add_argument("--interval-ms", type=int, default=50, help="the worker's coalescing")
    parser.add_argument(
        "--lead-ms", type=int, default=300, help="the server's wait before its first chunk"
    )
    return parser.parse_args()


if __name__ == "__main__":
    uvloop.run(main(parse()))
