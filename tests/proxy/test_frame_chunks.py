"""FrameDecoder over chunks of every shape: several frames per chunk, frames across chunks."""

from __future__ import annotations

import random
import struct

import pytest

from zonegate.proxy.codec import FrameDecoder

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("seed", range(20))
def test_frames_come_out_whole_whatever_the_chunking(seed: int) -> None:
    rng = random.Random(seed)
    bodies = [rng.randbytes(rng.choice([0, 1, 3, 50, 700, 5000])) for _ in range(40)]
    wire = b"".join(struct.pack(">i", len(b)) + b for b in bodies)
    dec = FrameDecoder(10_000)
    out: list[bytes] = []
    pos = 0
    while pos < len(wire):
        step = rng.choice([1, 2, 5, 64, 1000, 9000, 30000])
        dec.receive_data(wire[pos : pos + step])
        pos += step
        while (frame := dec.next_frame()) is not None:
            out.append(frame)
    assert out == bodies
    assert dec.next_frame() is None
