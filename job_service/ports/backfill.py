"""What the backfill of rows written before encryption needs from storage: plaintext
payloads a batch at a time, a compare-and-set that seals one (a row changed meanwhile is
left for the next round), and how many are left."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class PlainRow:
    """A payload stored in the clear: its table, the row's key, the id it is bound to when
    sealed (its job's, or a schedule's) and its user, the field it is bound to, and the
    stored value (a step's: [text, parsed])."""

    table: str
    key: tuple[Any, ...]
    bound_to: str
    user_id: str
    field: str
    value: Any
    content_hash: str = ""  # a snapshot's: keyed when it is sealed
    request_hash: str = ""  # its job's


class BackfillStore(Protocol):
    @property
    def tables(self) -> Sequence[str]:
        """The tables with a payload column, in the order a round seals them."""
        ...

    async def plain(self, table: str, limit: int) -> list[PlainRow]:
        """Up to ``limit`` rows of ``table`` whose payload is still plaintext."""
        ...

    async def seal(self, row: PlainRow, sealed: Any, content_hash: str, request_hash: str) -> bool:
        """Stores ``sealed`` for ``row`` (and, for a snapshot, its keyed hashes) unless the
        row changed since it was read; whether it did."""
        ...

    async def count_plain(self, table: str) -> int: ...
