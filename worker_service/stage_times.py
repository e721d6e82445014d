"""Per-job stage timestamps for the benchmarks (issue 42): when a grant reached this worker
(pushed down its session, or answered to LockJobs for a fetched token), when the attempt
started and when its result was sent, each as wall-clock seconds.

Off unless ``JOBS_STAGE_TIMES_DIR`` names a directory: then each worker process appends
``job_id<TAB>stage<TAB>time`` lines to ``stages-<pid>.tsv`` there (buffered, flushed at
exit), which ``bench.peers`` joins with the database's own timestamps. The wall clock is
the host's, the same one PostgreSQL's ``now()`` reads on this machine.
"""

from __future__ import annotations

import atexit
import os
import time
from collections.abc import Iterable
from typing import TextIO

_DIR = os.environ.get("JOBS_STAGE_TIMES_DIR", "")
_file: TextIO | None = None


def enabled() -> bool:
    return bool(_DIR)


def mark(job_ids: Iterable[str], stage: str) -> None:
    """Records that each job reached ``stage`` now (nothing when off)."""
    if not _DIR:
        return
    global _file
    if _file is None:
        _file = open(os.path.join(_DIR, f"stages-{os.getpid()}.tsv"), "a")  # noqa: SIM115
        atexit.register(_file.close)
    now = time.time()
    _file.writelines(f"{job_id}\t{stage}\t{now:.6f}\n" for job_id in job_ids)
