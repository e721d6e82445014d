"""The composition root: connects NATS and the job service, wires the adapters into a
``Worker``, and runs it until SIGTERM/SIGINT.

In-process use (tests)::

    async with WorkerApp(WorkerSettings(nats_url=..., job_service_target=...)) as app:
        ...  # the worker is consuming here; leaving the block drains it and closes all
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal

import grpc
from nats.aio.client import Client

from shared.lifetime import Lifetime
from shared.metrics import MetricsServer, publish_build_info
from shared.registry import Registry, default_registry
from shared.startup import connect_nats, within_startup
from worker_service.adapters.grpc_executor import GrpcExecutorClient, open_channel
from worker_service.adapters.nats import CancelListener, NatsDispatchSource, SignalListener
from worker_service.call_permits import CallPermits
from worker_service.declarations import declare_job_types
from worker_service.gateway import ModelGateway
from worker_service.health import WorkerHealth
from worker_service.model_router import ModelRouter, ModelSettings
from worker_service.partial_output import PartialOutputRelay
from worker_service.settings import WorkerSettings
from worker_service.worker import Worker

log = logging.getLogger(__name__)


class WorkerApp(Lifetime):
    """One worker process's resources and its ``Worker``. ``run()`` connects, consumes until
    ``stop()``, drains, and closes; ``stop()`` is idempotent and waits for all of that;
    ``async with`` returns once consuming has started and stops on exit."""

    def __init__(
        self,
        settings: WorkerSettings,
        registry: Registry | None = None,
        models: ModelSettings | None = None,
    ) -> None:
        self.settings = settings
        self.registry = registry or default_registry()
        # Providers per model tier (JOBS_MODEL_*): the fake provider unless configured.
        self.models = models or ModelSettings()
        self.slots = settings.queue_slots(self.registry)
        self.worker: Worker | None = None
        self._stop_requested = asyncio.Event()
        self._ready = asyncio.Event()
        self._done = asyncio.Event()
        self._started = False
        self._source: NatsDispatchSource | None = None
        self._declaring: set[asyncio.Task[None]] = set()
        self.health = WorkerHealth()
        # /metrics, and /livez and /readyz for the orchestrator's probes
        self.metrics = MetricsServer(
            settings.worker_metrics_host, settings.worker_metrics_port, self.health.endpoints()
        )
        self._nc_connected: bool = False

    async def run(self) -> None:
        if self._started:
            raise RuntimeError("a WorkerApp runs once")
        self._started = True
        try:
            async with contextlib.AsyncExitStack() as stack:
                worker = await self._connect_unless_stopped(stack)
                if worker is None:
                    return
                self.worker = worker
                if self._stop_requested.is_set():
                    await worker.stop()  # stop() came while connecting: run drains at once
                stack.callback(self.metrics.stop)
                self.metrics.start()
                publish_build_info("worker_service")
                ticking = asyncio.create_task(self.health.run(), name="worker-health")
                stack.callback(ticking.cancel)
                stack.callback(self.health.stopping)
                self.health.consuming(lambda: self._nc_connected)
                log.info(
                    "worker %s: metrics on %s",
                    self.settings.worker_id,
                    f"port {self.metrics.port}" if self.metrics.port is not None else "no port",
                )
                self._ready.set()
                await worker.run()
        finally:
            self._done.set()

    async def stop(self) -> None:
        self._stop_requested.set()
        self.health.stopping()
        if self.worker is not None:
            await self.worker.stop()
        if self._started:
            await self._done.wait()

    async def start(self) -> None:
        """Run in the background; return once consuming has started."""
        running = self.run_in_background(self.run(), "worker-app")
        ready = asyncio.create_task(self._ready.wait())
        try:
            await asyncio.wait({running, ready}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            running.cancel()
            raise
        finally:
            ready.cancel()
        if running.done():
            running.result()  # raises the start-up failure

    async def _connect_unless_stopped(self, stack: contextlib.AsyncExitStack) -> Worker | None:
        """Connect (NATS is waited for indefinitely) unless stop() comes first."""
        connecting = asyncio.create_task(self._connect(stack), name="worker-connect")
        stopped = asyncio.create_task(self._stop_requested.wait(), name="worker-stop")
        try:
            await asyncio.wait({connecting, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            # nats-py can swallow a cancellation while it tidies up a failed attempt: insist.
            while not connecting.done():
                connecting.cancel()
                await asyncio.wait({connecting}, timeout=0.1)
        if connecting.cancelled():
            return None
        return connecting.result()

    async def _connect(self, stack: contextlib.AsyncExitStack) -> Worker:
        s = self.settings
        # Unreachable dependencies at start-up: retried until startup_timeout_s, then
        # DependencyUnavailable (the process exits non-zero with that message).
        nc = await within_startup(
            "NATS",
            s.startup_timeout_s,
            lambda: connect_nats(
                s.nats_url,
                f"worker {s.worker_id}",
                security=s.nats_security(),
                ping_interval_s=s.nats_ping_interval_s,
                max_outstanding_pings=s.nats_max_outstanding_pings,
                error_cb=self._nats_error,
                disconnected_cb=self._nats_disconnected,
                reconnected_cb=self._nats_reconnected,
            ),
        )
        stack.push_async_callback(nc.close)
        self._nc_connected = True
        channel = open_channel(s.channel_config())
        stack.push_async_callback(channel.close)
        await within_startup(
            f"job_service at {s.job_service_target}", s.startup_timeout_s, channel.channel_ready
        )
        await self._declare(channel)
        source = self._source = NatsDispatchSource(nc.jetstream())
        # retried too: a JetStream cluster still electing its leaders (or a server still
        # starting) times the declarations out for a while, as for the job service
        await within_startup(
            "JetStream dispatch consumers",
            s.startup_timeout_s,
            lambda: source.subscribe(self.slots),
        )
        stack.push_async_callback(source.close)
        router = ModelRouter.from_settings(self.models)
        stack.push_async_callback(router.aclose)
        executor = GrpcExecutorClient(channel)
        worker = Worker(
            executor=executor,
            source=source,
            lookup=self.registry.get,
            slots=self.slots,
            worker_id=s.worker_id,
            fetch_batch=s.worker_fetch_batch,
            fetch_timeout_s=s.worker_fetch_timeout_s,
            shutdown_grace_s=s.worker_shutdown_grace_s,
            gateway=ModelGateway(router, partials=_relay(s, nc), permits=CallPermits(executor)),
            runnable=sorted(f"{d.job_type}@{d.version}" for d in self.registry),
            sessions=executor,
            grants_ahead=s.worker_grants_ahead,
            lock_on_submit=s.worker_lock_on_submit,
        )
        await stack.enter_async_context(CancelListener(nc, worker.cancel_job))
        await stack.enter_async_context(SignalListener(nc, worker.signal_job))
        return worker

    async def _declare(self, channel: grpc.aio.Channel) -> None:
        """Declares the job types to the job service (retried while it is unreachable);
        one it refuses is dropped from what this worker consumes and runs."""
        s = self.settings
        accepted = await within_startup(
            "declaring job types",
            s.startup_timeout_s,
            lambda: declare_job_types(channel, s.worker_id, self.registry),
        )
        if len(list(accepted)) != len(list(self.registry)):
            self.registry = accepted
            self.slots = s.queue_slots(accepted)

    async def _nats_error(self, exc: Exception) -> None:
        log.warning("nats: %s: %s", type(exc).__name__, exc)

    async def _nats_reconnected(self) -> None:
        log.info("nats: reconnected")
        self._nc_connected = True
        # The server may have come back without its store (streams and consumers gone):
        # declaring them again is idempotent and cheap, and fetches would fail until then.
        if self._source is not None:
            task = asyncio.create_task(self._source.declare_again(), name="nats-declare")
            self._declaring.add(task)
            task.add_done_callback(self._declaring.discard)

    async def _nats_disconnected(self) -> None:
        self._nc_connected = False
        level = logging.DEBUG if self._stop_requested.is_set() else logging.WARNING
        log.log(level, "nats: disconnected")


def _relay(settings: WorkerSettings, nc: Client) -> PartialOutputRelay | None:
    if not settings.partial_output_enabled:
        return None
    return PartialOutputRelay(nc.publish, settings.partial_output_interval_ms / 1000)


async def main(settings: WorkerSettings, models: ModelSettings | None = None) -> None:
    """Run a worker until SIGTERM or SIGINT, then shut down gracefully."""
    app = WorkerApp(settings, models=models)
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    running = asyncio.create_task(app.run(), name="worker-app")
    signalled = asyncio.create_task(stopping.wait(), name="signals")
    await asyncio.wait({running, signalled}, return_when=asyncio.FIRST_COMPLETED)
    if stopping.is_set():
        log.info("worker %s: signal received; shutting down", settings.worker_id)
        await app.stop()
    signalled.cancel()
    await running  # re-raises a failure: the process then exits non-zero
