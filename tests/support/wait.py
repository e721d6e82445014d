"""Wait for a condition instead of sleeping: the only polling loop the tests may use.

A fixed ``sleep`` is either too short on a loaded CI machine (flaky) or too long everywhere
else (slow); polling with a deadline is neither.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TypeVar, overload

T = TypeVar("T")


@overload
async def eventually(  # type: ignore[overload-overlap]
    predicate: Callable[[], Awaitable[T]],
    *,
    timeout: float = ...,
    interval: float = ...,
    message: str = ...,
) -> T: ...


@overload
async def eventually(
    predicate: Callable[[], T],
    *,
    timeout: float = ...,
    interval: float = ...,
    message: str = ...,
) -> T: ...


async def eventually(
    predicate: Callable[[], object],
    *,
    timeout: float = 10.0,
    interval: float = 0.02,
    message: str = "condition not met",
) -> object:
    """Call ``predicate`` (sync or async) until it returns something truthy; return that.

    Raises ``AssertionError(message)`` once ``timeout`` seconds have passed, with the last
    value seen. Exceptions raised by the predicate propagate at once: a predicate that can
    fail transiently should catch what it expects.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = predicate()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return result
        if loop.time() >= deadline:
            raise AssertionError(f"{message} (not within {timeout}s; last value: {result!r})")
        await asyncio.sleep(interval)
