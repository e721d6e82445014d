"""The lifetime every long-running component shares: ``async with component:`` starts it
and stops it on the way out, so that no component writes its own ``__aexit__``.

A component says what starting means (``start()``; by default nothing) and what stopping
means (``stop()``: idempotent, and safe before ``start()``). One whose work is a ``run()``
loop starts that loop with ``run_in_background()``; leaving the block then waits, after
``stop()``, for ``run()`` to end and raises its failure, so that the error of a loop that
nobody awaits is not lost (temporal's worker, arq's worker).

Leaving is not run for a block that was never entered: a ``start()`` that can fail half-way
releases what it had acquired itself (``JobServiceApp`` does).
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Coroutine
from typing import Any, Self


class Lifetime(abc.ABC):
    """``async with`` = ``start()`` … ``stop()`` (then the background ``run()``'s end)."""

    _background: asyncio.Task[None] | None = None

    async def start(self) -> None:  # noqa: B027 - starting nothing is a fine default
        """Begin the component's life (subscribe, bind, start its loop)."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """End the component's life; idempotent."""

    def run_in_background(self, run: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Run ``run`` (the component's ``run()``) as a named task that leaving waits for."""
        self._background = asyncio.create_task(run, name=name)
        return self._background

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()
        if self._background is not None:
            await self._background
