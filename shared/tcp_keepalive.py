"""TCP keepalives on a process's own sockets.

A peer that vanished without closing (a network cut, a host frozen or powered off) sends
no FIN: a socket waiting for its answer waits for ever, and the kernel's default keepalive
(off, or two hours) does not help. With these, a silent peer is given up after
``dead_after_s``: keepalive probes from ``idle_s`` of silence, every ``interval_s``,
``count`` unanswered; and ``TCP_USER_TIMEOUT`` gives up data left unacknowledged as long.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass

# The options by name: absent from the socket module on some platforms (then skipped).
_PROBES = ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT")


@dataclass(frozen=True)
class TcpKeepalive:
    idle_s: int
    interval_s: int
    count: int

    @property
    def dead_after_s(self) -> int:
        """How long a silent peer is given before the connection is dropped."""
        return self.idle_s + self.interval_s * self.count

    def apply(self, sock: socket.socket) -> None:
        """Keepalives on ``sock`` when it is TCP (a Unix socket has no peer to lose)."""
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in zip(_PROBES, (self.idle_s, self.interval_s, self.count), strict=True):
            option = getattr(socket, name, None)
            if option is not None:
                sock.setsockopt(socket.IPPROTO_TCP, option, value)
        user_timeout = getattr(socket, "TCP_USER_TIMEOUT", None)
        if user_timeout is not None:
            sock.setsockopt(socket.IPPROTO_TCP, user_timeout, self.dead_after_s * 1000)
