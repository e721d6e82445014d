"""Garbage collection for a long-running service process (issue 42: a CPU diet).

CPython collects its youngest generation every 700 net allocations of container objects;
a service's event loop makes thousands per second (coroutines, futures, protobuf and
asyncpg records), almost all freed by reference counting, so most collections find
nothing and each walks everything young. After start-up the objects that live for the
process (modules, settings, compiled schemas, prepared statements) are frozen out of the
collector's way (``gc.freeze``), and the youngest generation is collected every
``GEN0_THRESHOLD`` allocations instead: cycles still go, a little later.
"""

from __future__ import annotations

import gc

GEN0_THRESHOLD = 10_000


def tune() -> None:
    """Freezes what exists now (call once start-up is done) and collects less often."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, gen1, gen2)
