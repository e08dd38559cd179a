"""Runs group members (tests/e2e/group_worker.py) as processes and checks what they consumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Member:
    name: str
    client: str
    proc: subprocess.Popen[str]
    events: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            event["member"] = self.name
            with self.lock:
                self.events.append(event)

    def snapshot(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.events)

    def assignment(self) -> set[int]:
        found: set[int] = set()
        for e in self.snapshot():
            if e["e"] == "assigned":
                found = set(e["parts"])
        return found

    def assignment_events(self) -> list[list[int]]:
        return [e["parts"] for e in self.snapshot() if e["e"] == "assigned"]

    def records(self) -> list[dict[str, Any]]:
        return [e for e in self.snapshot() if e["e"] == "rec"]

    def committed(self) -> dict[int, int]:
        offs: dict[int, int] = {}
        for e in self.snapshot():
            if e["e"] == "commit":
                for p, o in e["offs"].items():
                    offs[int(p)] = max(offs.get(int(p), 0), o)
        return offs

    def stop(self, timeout: float = 30) -> None:
        """A clean leave: the worker closes its consumer."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def kill9(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def alive(self) -> bool:
        return self.proc.poll() is None


class Members:
    """Every member a test started; all are stopped at the end."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.all: list[Member] = []

    def start(
        self,
        client: str,
        bootstrap: str,
        group: str,
        topic: str,
        *,
        assignor: str = "",
        session_ms: int = 10000,
        instance_id: str = "",
        name: str | None = None,
    ) -> Member:
        name = name or f"{client}{len(self.all)}"
        cmd = [sys.executable, "-m", "tests.e2e.group_worker", client, bootstrap, group, topic]
        cmd += ["--session-ms", str(session_ms)]
        if assignor:
            cmd += ["--assignor", assignor]
        if instance_id:
            cmd += ["--instance-id", instance_id]
        return self.spawn(name, client, cmd)

    def spawn(self, name: str, client: str, cmd: list[str]) -> Member:
        """Runs a worker speaking the JSON-lines protocol above; its stderr goes to a log."""
        log = open(self.log_dir / f"{name}.log", "a")  # noqa: SIM115 - the child's stderr
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        member = Member(name, client, proc)
        threading.Thread(target=member._read, daemon=True).start()
        self.all.append(member)
        return member

    def close(self) -> None:
        for m in self.all:
            if m.alive():
                try:
                    m.stop(10)
                except Exception:
                    m.kill9()

    def events(self) -> list[dict[str, Any]]:
        return sorted((e for m in self.all for e in m.snapshot()), key=lambda e: e["t"])


def wait_for(what: str, cond: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def split_ok(members: Iterable[Member], partitions: int) -> bool:
    """Every partition owned by exactly one of `members`, every member owning some."""
    sets = [m.assignment() for m in members]
    owned = [p for s in sets for p in s]
    return all(sets) and sorted(owned) == list(range(partitions))


def consumed_all(members: Iterable[Member], produced: dict[int, int]) -> bool:
    seen = _seen(members)
    return all(len(seen[p]) >= n for p, n in produced.items())


def _seen(members: Iterable[Member]) -> dict[int, set[int]]:
    seen: dict[int, set[int]] = defaultdict(set)
    for m in members:
        for r in m.records():
            seen[r["p"]].add(r["o"])
    return seen


def stall_report(members: Iterable[Member], produced: dict[int, int]) -> str:
    """What a consumed_all() that timed out was waiting for: per partition not read to the
    end, the first offset nobody read, who owns it, and how far each owner got."""
    members = list(members)
    seen = _seen(members)
    lines = []
    for p, n in sorted(produced.items()):
        if len(seen[p]) >= n:
            continue
        first_gap = next(o for o in range(n) if o not in seen[p])
        owners = [m.name for m in members if p in m.assignment()]
        last = {
            m.name: max((r["o"] for r in m.records() if r["p"] == p), default=-1) for m in members
        }
        lines.append(
            f"partition {p}: {len(seen[p])} of {n} read, first unread offset {first_gap}, "
            f"owned by {owners}, last offset read per member {last}"
        )
    return "\n".join(lines)


def check_delivery(events: list[dict[str, Any]], produced: dict[int, list[str]]) -> dict[str, int]:
    """Every produced record consumed at least once, with its value, and read again only when
    no commit covering it had been acknowledged before the re-reader was given its partition.

    `produced` maps partition -> values in offset order. Returns counts for the test's log.
    """
    first_read: dict[tuple[int, int], dict[str, Any]] = {}
    duplicates = 0
    commits: dict[int, list[tuple[float, int]]] = defaultdict(list)  # p -> (t, offset)
    assigned_at: dict[tuple[str, int], float] = {}
    for e in events:
        if e["e"] == "commit":
            for p, o in e["offs"].items():
                commits[int(p)].append((e["t"], o))
        elif e["e"] == "assigned":
            for p in e["parts"]:
                assigned_at.setdefault((e["member"], p), e["t"])
            for key in [k for k in assigned_at if k[0] == e["member"] and k[1] not in e["parts"]]:
                del assigned_at[key]
        elif e["e"] == "rec":
            key = (e["p"], e["o"])
            values = produced.get(e["p"], [])
            assert e["o"] < len(values), f"read partition {e['p']} offset {e['o']}: never produced"
            assert e["v"] == values[e["o"]], f"partition {e['p']} offset {e['o']}: wrong value"
            if key in first_read:
                duplicates += 1
                since = assigned_at.get((e["member"], e["p"]), e["t"])
                covered = [o for t, o in commits[e["p"]] if t < since and o > e["o"]]
                assert not covered, (
                    f"partition {e['p']} offset {e['o']} read again by {e['member']} although "
                    f"offset {max(covered)} was committed before it got the partition"
                )
            else:
                first_read[key] = e
    missing = [
        (p, o)
        for p, values in produced.items()
        for o in range(len(values))
        if (p, o) not in first_read
    ]
    assert not missing, f"{len(missing)} produced records never consumed, e.g. {missing[:5]}"
    return {"records": len(first_read), "duplicates": duplicates}
