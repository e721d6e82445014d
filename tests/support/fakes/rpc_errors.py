"""A failed gRPC call as a client sees it (``grpc.RpcError`` that is a ``grpc.Call``)."""

from __future__ import annotations

from collections.abc import Sequence

import grpc


class FakeRpcError(grpc.RpcError):  # type: ignore[misc]
    """What a failed call looks like to ``grpc_status.rpc_status.from_call``: a code,
    details and trailing metadata (None: the call had none)."""

    def __init__(
        self,
        code: grpc.StatusCode,
        details: str,
        trailing_metadata: Sequence[tuple[str, bytes]] | None,
    ) -> None:
        super().__init__()
        self._code = code
        self._details = details
        self._trailing = trailing_metadata

    @classmethod
    def of(cls, status: grpc.Status) -> FakeRpcError:
        """The call a service aborted with ``status``."""
        return cls(status.code, status.details, status.trailing_metadata)

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self) -> Sequence[tuple[str, bytes]] | None:
        return self._trailing
