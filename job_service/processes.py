"""Several job_service processes on one host and one port (``JOBS_SERVICE_PROCESSES``).

One Python process runs one event loop on one core. With ``JOBS_SERVICE_PROCESSES=N`` the
process started (the parent) is a replica like any other and also starts N-1 copies of
itself (``python -m job_service serve``); each child is a full replica: its own pools, NATS
connection, outbox dispatcher and loops, as two replicas on two hosts would be. gRPC's
servers set ``SO_REUSEPORT`` on Linux (its ``grpc.so_reuseport`` option, on by default), so
every process binds ``JOBS_GRPC_PORT`` and the kernel spreads new connections over them.

A child differs from its parent by its environment only:

- ``JOBS_SERVICE_PROCESSES=1``: it starts none of its own;
- ``JOBS_METRICS_PORT``: the parent's plus the child's index 1..N-1 (0 stays 0, an
  ephemeral port each; off stays off);
- ``JOBS_INSTANCE_ID``: the parent's with ``-<index>`` appended when it is set (unset, each
  process takes ``<hostname>-<pid>``, distinct already);
- ``JOBS_SERVICE_PARENT_PID``: the child asks the kernel for a SIGTERM when its parent
  dies, even by SIGKILL (``PR_SET_PDEATHSIG``), so no replica outlives its parent.

The parent forwards SIGTERM and SIGINT to its children and waits for them (up to the
shutdown delay and grace, plus 10 s, then SIGKILL). **A child that exits while the parent
is not stopping ends the whole**: the parent stops its own replica and the other children
and exits with the child's status (1 if that was 0 or a signal). The orchestrator (the
Deployment, systemd, compose) restarts the whole then, as it restarts a one-process
replica; a child restarted in place would hide a crash loop behind a parent that looks
healthy.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import signal
import sys
from collections.abc import Mapping
from typing import Self

from job_service.settings import JobServiceSettings

log = logging.getLogger(__name__)

PARENT_PID_ENV = "JOBS_SERVICE_PARENT_PID"
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


class ReplicaExited(Exception):
    """A child replica exited while its parent was serving: the whole stops."""

    def __init__(self, index: int, returncode: int) -> None:
        super().__init__(f"replica process {index} exited with status {returncode}")
        self.index, self.returncode = index, returncode

    @property
    def exit_status(self) -> int:
        """The parent's exit status: the child's own when it reported a failure."""
        return self.returncode if self.returncode > 0 else 1


def child_environment(
    settings: JobServiceSettings, index: int, environ: Mapping[str, str], parent_pid: int
) -> dict[str, str]:
    """The environment of child ``index`` (1..N-1): the parent's, with the differences
    the module docstring lists."""
    env = dict(environ)
    env["JOBS_SERVICE_PROCESSES"] = "1"
    env[PARENT_PID_ENV] = str(parent_pid)
    port = settings.metrics_port
    env["JOBS_METRICS_PORT"] = "off" if port is None else str(port + index if port else 0)
    if settings.instance_id:
        env["JOBS_INSTANCE_ID"] = f"{settings.instance_id}-{index}"
    else:
        env.pop("JOBS_INSTANCE_ID", None)
    return env


def bind_to_parent(environ: Mapping[str, str] = os.environ) -> bool:
    """In a child: SIGTERM from the kernel when the parent dies. False when the parent is
    gone already (the child then should not start)."""
    parent = environ.get(PARENT_PID_ENV)
    if not parent:
        return True
    if os.getppid() != int(parent):
        return False
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    # the parent may have died before the prctl above: then this process was re-parented
    return os.getppid() == int(parent)


class ReplicaProcesses:
    """The children of a job_service parent: ``async with`` starts them and stops them;
    ``exited()`` answers when the first one ends."""

    def __init__(self, settings: JobServiceSettings) -> None:
        self.settings = settings
        self.children: list[asyncio.subprocess.Process] = []
        self._signalled = False
        self._stop_timeout_s = settings.shutdown_delay_s + settings.shutdown_grace_s + 10.0

    async def start(self) -> None:
        for index in range(1, self.settings.service_processes):
            env = child_environment(self.settings, index, os.environ, os.getpid())
            # from the event loop's thread, the main one: PR_SET_PDEATHSIG fires when the
            # thread that forked the child ends, and the main thread ends with the process
            child = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "job_service", "serve", env=env
            )
            self.children.append(child)
            log.info("started replica process %d (pid %d)", index, child.pid)

    async def exited(self) -> ReplicaExited:
        """The first child to exit (never answers without children)."""
        if not self.children:
            await asyncio.get_running_loop().create_future()  # never set
        waits = {
            asyncio.ensure_future(child.wait()): index
            for index, child in enumerate(self.children, start=1)
        }
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        first = done.pop()
        return ReplicaExited(waits[first], first.result())

    def terminate(self) -> None:
        """SIGTERM to every child still running (once: a second signal changes nothing)."""
        if self._signalled:
            return
        self._signalled = True
        for child in self.children:
            if child.returncode is None:
                child.send_signal(signal.SIGTERM)

    async def stop(self) -> None:
        self.terminate()
        for child in self.children:
            try:
                await asyncio.wait_for(child.wait(), self._stop_timeout_s)
            except TimeoutError:
                log.warning("replica process %d did not stop: killed", child.pid)
                with contextlib.suppress(ProcessLookupError):
                    child.kill()
                await child.wait()

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
