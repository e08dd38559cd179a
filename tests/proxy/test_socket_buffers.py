"""socket.receive.buffer.bytes and socket.send.buffer.bytes size the Kafka listeners'
sockets as Kafka's acceptor does: the listening socket (accepted ones inherit it) and
each accepted one; -1 leaves the OS's autotuning alone."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from tests.inprocess import InProcessNode

pytestmark = pytest.mark.integration


def _buffers(node: InProcessNode) -> tuple[tuple[int, int], list[tuple[int, int]]]:
    """(SO_RCVBUF, SO_SNDBUF) of the first listener's listening socket and of each
    connection it accepted, as the kernel reports them (Linux doubles what was set)."""
    server = node.nodes[0].server

    def sizes(sock: socket.socket) -> tuple[int, int]:
        return (
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
            sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
        )

    async def read() -> tuple[tuple[int, int], list[tuple[int, int]]]:
        assert server._server is not None
        listening = sizes(server._server.sockets[0])  # type: ignore[arg-type]
        accepted = [
            sizes(c._transport.get_extra_info("socket"))
            for c in list(server.connections)
            if c._transport is not None
        ]
        return listening, accepted

    result: tuple[tuple[int, int], list[tuple[int, int]]] = node.call(read())
    return result


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), (2 * 102400, 2 * 102400)),  # Kafka's defaults
        (
            ("--socket-receive-buffer-bytes", "65536", "--socket-send-buffer-bytes", "131072"),
            (2 * 65536, 2 * 131072),
        ),
    ],
)
def test_the_listeners_sockets_take_the_buffer_sizes(
    tmp_path: Path, args: tuple[str, ...], expected: tuple[int, int]
) -> None:
    node = InProcessNode(tmp_path, args).start()
    try:
        with socket.create_connection(("127.0.0.1", node.port)) as client:
            deadline = time.monotonic() + 10
            while not _buffers(node)[1] and time.monotonic() < deadline:
                time.sleep(0.05)
            listening, accepted = _buffers(node)
            assert listening == expected
            assert accepted and all(a == expected for a in accepted)
            client.sendall(b"")
    finally:
        node.stop()


def test_minus_one_leaves_the_os_default(tmp_path: Path) -> None:
    with socket.socket() as probe:  # what a fresh socket gets here
        default = (
            probe.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
            probe.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
        )
    node = InProcessNode(
        tmp_path, ("--socket-receive-buffer-bytes", "-1", "--socket-send-buffer-bytes", "-1")
    ).start()
    try:
        listening, _ = _buffers(node)
        assert listening == default
    finally:
        node.stop()
