"""Sampling profiles of running processes with py-spy (the bench extra), and their top costs.

``bench.peers --profile DIR`` records job_service and each worker while the engine drains
its backlog: one collapsed-stack file per process in DIR (``py-spy record --format raw``;
flame graphs can be drawn from them), and a summary of each: the functions with the most
samples on the stack (inclusive) and at the top of it (self), in % of the process's samples.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

TOP = 12
# Frames that are on every stack of an asyncio process and say nothing about the cost.
EVERYWHERE = ("<module>", "_run_module_as_main", "_run_code", "run (uvloop", "run_until_complete")


class Profiler:
    """py-spy record on each of ``pids`` (name -> pid) until ``stop()``."""

    def __init__(self, pids: dict[str, int], out: Path, rate: int = 200) -> None:
        out.mkdir(parents=True, exist_ok=True)
        self.out = out
        py_spy = str(Path(sys.executable).with_name("py-spy"))
        self.running = {
            name: subprocess.Popen(
                [
                    py_spy,
                    "record",
                    "--pid",
                    str(pid),
                    "--rate",
                    str(rate),
                    "--format",
                    "raw",
                    "--output",
                    str(out / f"{name}.txt"),
                    "--nonblocking",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for name, pid in pids.items()
        }

    def stop(self) -> str:
        """Ends the recordings (py-spy writes its file on SIGINT); returns the summary."""
        for process in self.running.values():
            process.send_signal(signal.SIGINT)
        for process in self.running.values():
            process.wait(60)
        return "\n\n".join(summary(self.out / f"{name}.txt", name) for name in self.running)


def summary(path: Path, name: str) -> str:
    if not path.exists():
        return f"{name}: no profile (py-spy needs ptrace: run as root or with CAP_SYS_PTRACE)"
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        samples = int(count)
        total += samples
        frames = [f for f in stack.split(";") if not f.startswith(EVERYWHERE)]
        for frame in set(frames):
            inclusive[frame] += samples
        if frames:
            own[frames[-1]] += samples
    lines = [f"{name}: {total} samples; inclusive % / self %"]
    for frame, samples in inclusive.most_common(TOP):
        lines.append(f"  {100 * samples / total:5.1f}  {frame}")
    lines.append("  -- self")
    for frame, samples in own.most_common(TOP):
        lines.append(f"  {100 * samples / total:5.1f}  {frame}")
    return "\n".join(lines)
