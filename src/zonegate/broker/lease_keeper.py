"""Lease renewals and controller passes on a thread of their own, never behind client work.

A node is declared dead when its lease runs out, and its partitions move. If
renewals ran on the event loop that serves clients, a flood of client work (a
consumer catching up on thousands of batches) delayed them past the lease, and
the controller moved partitions off nodes that were alive. So each node renews
from a dedicated thread, with its own event loop and its own
connection to the metadata store, and the controller's passes run there too
(Kafka's brokers likewise heartbeat to the controller from a thread of their
own, not from the request handlers).

The same thread probes the other nodes' leader RPC (peer_probes.py), so what a
node reports it reaches, written with each renewal, does not depend on how busy
its serving loop is.

A node whose serving loop is stuck is not alive, though: the serving loop
ticks `loop_tick()` every interval, and a keeper that has not seen a tick for
`stall_s` stops renewing, so a wedged node's partitions still move.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from zonegate.broker.controller import Controller
from zonegate.broker.peer_probes import PeerProbes
from zonegate.metastore.api import MetaStore
from zonegate.metastore.models import MetaStoreUnavailable
from zonegate.router.membership import Membership

log = logging.getLogger(__name__)


class LeaseKeeper:
    def __init__(
        self,
        open_meta: Callable[[], MetaStore],
        membership: Membership,
        controller: Controller,
        *,
        interval_s: float,
        stall_s: float,
        monotonic: Callable[[], float] = time.monotonic,
        on_fenced: Callable[[], None] = lambda: None,
        probes: PeerProbes | None = None,
    ) -> None:
        self._open_meta = open_meta
        self._membership = membership
        self._controller = controller
        self._interval = interval_s
        self._stall = stall_s
        self._monotonic = monotonic
        self._on_fenced = on_fenced
        self.probes = probes
        self._last_tick = monotonic()
        self._stopping = False
        self._wake: asyncio.Event | None = None  # the keeper loop's, set from outside it
        self._keeper_loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ticker: asyncio.Task[None] | None = None
        self.renewals = 0
        self._store_down = False  # said in the log once, until a renewal works again
        self._said_stalled = False

    def loop_tick(self) -> None:
        """Called by the serving loop: it is still turning."""
        self._last_tick = self._monotonic()

    async def start(self) -> None:
        """Starts the thread and the serving loop's ticks; the caller has renewed once."""
        self.loop_tick()
        self._ticker = asyncio.get_running_loop().create_task(self._tick())
        name = f"leases-node-{self._membership.me.node_id}"
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    async def _tick(self) -> None:
        while True:
            self.loop_tick()
            await asyncio.sleep(self._interval)

    async def stop(self) -> None:
        self._stopping = True
        if self._ticker is not None:
            self._ticker.cancel()
        loop, wake = self._keeper_loop, self._wake
        if loop is not None and wake is not None:
            loop.call_soon_threadsafe(wake.set)
        if self._thread is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._thread.join)

    def _run(self) -> None:
        asyncio.run(self._keep())

    async def _keep(self) -> None:
        self._keeper_loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        meta = self._open_meta()
        probing = asyncio.get_running_loop().create_task(self._probe())
        # The controller's passes in a loop of their own: a pass reads much of the
        # store, and behind a slow link to it (200 ms a round trip) took over a second,
        # which, run between renewals, left this node's renewals more than a quarter
        # lease apart: the other nodes counted it silent (router/membership.py) and
        # told clients its partitions had no leader.
        controlling = asyncio.get_running_loop().create_task(self._control(meta))
        try:
            while not self._stopping:
                started = self._monotonic()
                if not self._stalled():
                    await self.renew_once(meta)
                # Every interval from the last one's start, not after it: a renewal
                # slowed by the link does not space the next one out.
                wait = self._rest_of_interval(started)
                try:
                    await asyncio.wait_for(self._wake.wait(), wait)
                except TimeoutError:
                    pass
        finally:
            probing.cancel()
            controlling.cancel()
            await asyncio.gather(controlling, return_exceptions=True)
            if self.probes is not None:
                await self.probes.close()
            await meta.close()

    def _rest_of_interval(self, started: float) -> float:
        """Seconds until an interval has passed since `started`: each of the keeper's
        loops starts a round every interval, however long the last one took."""
        return max(0.0, self._interval - (self._monotonic() - started))

    def _stalled(self) -> bool:
        """Whether the serving loop has not turned for `stall_s` (said once in the log)."""
        idle = self._monotonic() - self._last_tick
        if idle <= self._stall:
            self._said_stalled = False
            return False
        if not self._said_stalled:
            log.warning(
                "node %d: its serving loop has not turned for %.1f s; no longer renewing its lease",
                self._membership.me.node_id,
                idle,
            )
            self._said_stalled = True
        return True

    async def _control(self, meta: MetaStore) -> None:
        """A controller pass every interval, while this node renews its lease."""
        while not self._stopping and not self._membership.fenced:
            started = self._monotonic()
            if not self._stalled():
                await self.control_once(meta)
            await asyncio.sleep(self._rest_of_interval(started))

    async def _probe(self) -> None:
        """Probes the other nodes every interval, or as soon as the last round ends when
        probes time out (a cut link)."""
        while self.probes is not None:
            started = self._monotonic()
            try:
                await self.probes.probe_all()
            except Exception:
                me = self._membership.me.node_id
                log.exception("node %d: probing the other nodes failed", me)
            await asyncio.sleep(self._rest_of_interval(started))

    async def pass_once(self, meta: MetaStore) -> None:
        """One renewal of this node's lease, then one controller pass."""
        if await self.renew_once(meta):
            await self.control_once(meta)

    async def renew_once(self, meta: MetaStore) -> bool:
        """One renewal of this node's lease; False if another incarnation holds it. While
        the metadata store is out of reach the log says so once, and once when it is
        back, not at every heartbeat."""
        me = self._membership.me.node_id
        if self.probes is not None:
            self._membership.unreached = self.probes.unreached()
        try:
            if not await self._membership.renew(meta):
                # Another incarnation holds this node's lease: we are a zombie. No
                # controller pass either; the node stops (called from this thread).
                self._on_fenced()
                return False
            self.renewals += 1
            if self._store_down:
                self._store_down = False
                log.warning("node %d renews its lease again", me)
        except MetaStoreUnavailable as exc:
            if not self._store_down:
                self._store_down = True
                log.warning("node %d cannot renew its lease until the store is back: %s", me, exc)
        except Exception:
            log.exception("node %d could not renew its lease", me)
        return True

    async def control_once(self, meta: MetaStore) -> None:
        """One controller pass."""
        try:
            # Run even with the store down: the controller notes the outage (controller.py).
            await self._controller.run_once(meta)
        except MetaStoreUnavailable as exc:
            if not self._store_down:
                log.warning("controller pass failed: %s", exc)
        except Exception:
            log.exception("controller pass failed")
