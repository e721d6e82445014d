"""CPU spent per job, from /proc: by the processes of the system under test (each group
with the processes it started and has reaped) and by the whole machine.

On a shared machine CPU per job is far steadier than a wall-clock rate: the load of other
sessions slows a phase but hardly changes the CPU each of its jobs costs. The machine's
figure (``/proc/stat``: every non-idle tick of every core) includes the other sessions'
work and is printed beside the processes' own for that reason.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
MACHINE = "machine"


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of ``pid``, of its children it has reaped and of its
    live descendants; 0 for a process that is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return 0.0
    # utime, stime, cutime, cstime: fields 14-17 of stat, in clock ticks
    own = sum(int(f) for f in fields[11:15]) / TICK
    return own + sum(tree_cpu_s(int(child)) for child in children)


def machine_cpu_s() -> float:
    """Every core's busy time (not idle, not waiting for I/O) so far, in seconds."""
    ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = ticks[:8]
    return (user + nice + system + irq + softirq + steal) / TICK


def own_cpu_s() -> float:
    """This process's own CPU seconds (the load generator), without its children."""
    times = os.times()
    return times.user + times.system


def trees(pids: Callable[[], list[int]]) -> Callable[[], float]:
    """A group's CPU seconds: the trees of the pids it has now."""
    return lambda: sum(map(tree_cpu_s, pids()))


@dataclass
class CpuMeter:
    """CPU of named process groups (each a callable giving its CPU seconds so far) and of
    the machine, between ``start`` and ``per_job``."""

    groups: Mapping[str, Callable[[], float]]

    def __post_init__(self) -> None:
        self._start: dict[str, float] = {}

    def read(self) -> dict[str, float]:
        now = {name: seconds() for name, seconds in self.groups.items()}
        now[MACHINE] = machine_cpu_s()
        return now

    def start(self) -> None:
        self._start = self.read()

    def per_job(self, jobs: int) -> dict[str, float]:
        """Milliseconds of CPU per job since ``start``, per group and for the machine. A
        group whose processes started after ``start`` counts from zero."""
        end = self.read()
        return {
            name: (value - self._start.get(name, 0.0)) * 1000 / max(jobs, 1)
            for name, value in end.items()
        }
