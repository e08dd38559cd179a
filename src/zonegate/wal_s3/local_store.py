"""Object store over a local directory: the embedded default (`file:///path`).

Keys map to relative paths under the root. Every write goes to a temporary
file in the destination directory and is renamed into place, so a reader sees
either nothing or the whole object, as with S3. Blocking file calls run in a
worker thread so a slow disk does not stall the event loop, with one exception,
the PUT on every produce's path (docs/latency.md):

A PUT of at most `inline_put_bytes` without fsync is written on the calling
(event loop) thread into a file made ahead of time: an unnamed O_TMPFILE inode
from a small pool that a worker thread refills, given its name with linkat()
once all bytes are written. write() and linkat() take tens of microseconds,
while the hop to a worker thread and back costs milliseconds under load (the
worker waits for the GIL, which a busy loop hands over only every
`sys.getswitchinterval()`, 5 ms), and creating an inode is the one slow call
(0.3-1 ms of kernel CPU on the machines measured), so it is done off the path.
An unnamed file is freed by the kernel if the process dies, so the pool leaves
no litter. Without fsync a write is durable across a process crash (kill -9)
once write() returns, in the thread or not. Where O_TMPFILE or /proc/self/fd is
missing, or the pool is empty, PUTs go to the worker thread as before.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import errno
import logging
import os
import secrets
from collections.abc import Sequence
from pathlib import Path

from zonegate.wal_s3.object_store import ObjectInfo, ObjectNotFound, check_range

# Temporary files start with this; `list` skips them, so a crash mid-write
# leaves litter but never a visible partial object.
_TMP_PREFIX = ".zg-tmp-"
log = logging.getLogger(__name__)


# Larger PUTs (and every PUT with fsync) go to a worker thread: there the copy
# or the fsync is long enough to pay for the hop.
DEFAULT_INLINE_PUT_BYTES = 1024 * 1024
# Unnamed files kept ready for inline PUTs; refilled when fewer than half remain.
_SPARE_FILES = 32
# linkat() of /proc/self/fd/N cannot work here: no /proc, another filesystem, not allowed.
_NO_LINKAT = {errno.ENOENT, errno.EXDEV, errno.EPERM, errno.EACCES, errno.EOPNOTSUPP}


class LocalObjectStore:
    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        fsync: bool = False,
        inline_put_bytes: int = DEFAULT_INLINE_PUT_BYTES,
    ) -> None:
        self._root = Path(root).resolve()
        self._root_str = str(self._root)
        self._fsync = fsync
        self._inline_put_bytes = 0 if fsync else inline_put_bytes
        self._dirs: set[str] = set()  # directories known to exist
        self._spares: list[int] = []  # O_TMPFILE descriptors, unnamed, empty
        self._refill: asyncio.Future[None] | None = None
        self._closed = False

    @property
    def root(self) -> Path:
        return self._root

    def _path(self, key: str) -> Path:
        return self._root.joinpath(*self._parts(key))

    @staticmethod
    def _parts(key: str) -> builtins.list[str]:
        parts = key.split("/")
        if (
            not key
            or key.startswith("/")
            or any(p in ("", ".", "..") for p in parts)
            or parts[-1].startswith(_TMP_PREFIX)
            or "\\" in key
            or "\0" in key
        ):
            raise ValueError(f"invalid object key {key!r}")
        return parts

    async def put(self, key: str, data: bytes) -> None:
        parts = self._parts(key)
        if len(data) <= self._inline_put_bytes:
            parent = os.path.join(self._root_str, *parts[:-1])
            if self._spares and self._put_spare(parent, parts[-1], data):
                self._maybe_refill()
                return
            self._maybe_refill()
        await asyncio.to_thread(self._write, self._root.joinpath(*parts), data, False)

    def _put_spare(self, parent: str, name: str, data: bytes) -> bool:
        """Writes `data` into a spare unnamed file and links it in as `path`.

        False if the object must be written the ordinary way: the name exists (an
        overwrite), or linking is not possible here (then the pool is given up).
        A failed write (a full disk) raises, as the ordinary way would.
        """
        fd = self._spares.pop()
        try:
            if parent not in self._dirs:
                os.makedirs(parent, exist_ok=True)
                self._dirs.add(parent)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            dir_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                # Given a dir fd, os.link calls linkat(..., AT_SYMLINK_FOLLOW): the
                # name goes to the file /proc/self/fd/N stands for, atomically.
                os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=dir_fd)
            except FileExistsError:
                return False
            except OSError as exc:
                if exc.errno not in _NO_LINKAT:
                    raise
                log.warning("local store: inline PUTs off, linking a spare file failed: %s", exc)
                self._inline_put_bytes = 0
                return False
            finally:
                os.close(dir_fd)
            return True
        finally:
            os.close(fd)

    def _maybe_refill(self) -> None:
        if (
            self._refill is None
            and not self._closed
            and self._inline_put_bytes
            and len(self._spares) < _SPARE_FILES // 2
        ):
            self._refill = asyncio.ensure_future(self._refill_spares())

    async def _refill_spares(self) -> None:
        try:
            fds = await asyncio.to_thread(self._make_spares, _SPARE_FILES - len(self._spares))
        except OSError as exc:
            log.warning("local store: inline PUTs off, O_TMPFILE not available: %s", exc)
            self._inline_put_bytes = 0
            fds = []
        finally:
            self._refill = None
        if self._closed:
            for fd in fds:
                os.close(fd)
        else:
            self._spares += fds

    def _make_spares(self, count: int) -> builtins.list[int]:
        os.makedirs(self._root, exist_ok=True)
        flags = os.O_WRONLY | os.O_TMPFILE | os.O_CLOEXEC
        fds: builtins.list[int] = []
        try:
            for _ in range(count):
                fds.append(os.open(self._root, flags, 0o666))
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        path = self._path(key)
        return await asyncio.to_thread(self._write, path, data, True)

    def _write(self, path: Path, data: bytes, exclusive: bool) -> bool:
        parent = str(path.parent)
        if parent not in self._dirs:
            os.makedirs(parent, exist_ok=True)
            self._dirs.add(parent)
        final = str(path)
        tmp = os.path.join(parent, f"{_TMP_PREFIX}{path.name}-{secrets.token_hex(6)}")
        placed = False
        try:
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            except FileNotFoundError:
                # The directory went away (deleted by hand): make it again, once.
                os.makedirs(parent, exist_ok=True)
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if self._fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            if exclusive:
                # link() fails if the name exists, atomically: two racing
                # writers cannot both win, and neither exposes a partial file.
                try:
                    os.link(tmp, final)
                except FileExistsError:
                    return False
            else:
                os.replace(tmp, final)
                placed = True
        finally:
            if not placed:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        if self._fsync:
            self._fsync_dir(path.parent)
        return True

    @staticmethod
    def _fsync_dir(directory: Path) -> None:
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    async def get(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ObjectNotFound(key) from None

    async def get_range(self, key: str, start: int, length: int) -> bytes:
        check_range(start, length)
        path = self._path(key)
        try:
            return await asyncio.to_thread(self._read_range, path, start, length)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise ObjectNotFound(key) from None

    @staticmethod
    def _read_range(path: Path, start: int, length: int) -> bytes:
        with open(path, "rb") as f:
            f.seek(start)
            return f.read(length)

    async def delete_many(self, keys: Sequence[str]) -> None:
        paths = [self._path(k) for k in keys]
        if paths:
            await asyncio.to_thread(self._delete, paths)

    @staticmethod
    def _delete(paths: Sequence[Path]) -> None:
        for p in paths:
            try:
                p.unlink()
            except (FileNotFoundError, NotADirectoryError):
                pass

    async def list(self, prefix: str) -> list[ObjectInfo]:
        return await asyncio.to_thread(self._list, prefix)

    def _list(self, prefix: str) -> builtins.list[ObjectInfo]:
        # Only walk the deepest directory the prefix names fully.
        head, _, _ = prefix.rpartition("/")
        base = self._root.joinpath(*head.split("/")) if head else self._root
        out: builtins.list[ObjectInfo] = []
        if not base.is_dir():
            return out
        for dirpath, dirnames, filenames in os.walk(base):
            rel_dir = os.path.relpath(dirpath, self._root)
            rel = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
            # Prune directories that cannot hold a matching key.
            dirnames[:] = [
                d
                for d in dirnames
                if (rel + d + "/").startswith(prefix) or prefix.startswith(rel + d + "/")
            ]
            for name in filenames:
                key = rel + name
                if name.startswith(_TMP_PREFIX) or not key.startswith(prefix):
                    continue
                try:
                    size = os.stat(os.path.join(dirpath, name)).st_size
                except FileNotFoundError:
                    continue  # deleted while listing
                out.append(ObjectInfo(key, size))
        out.sort(key=lambda info: info.key)
        return out

    async def close(self) -> None:
        self._closed = True
        refill, self._refill = self._refill, None
        if refill is not None:
            with contextlib.suppress(Exception):
                await refill
        spares, self._spares = self._spares, []
        for fd in spares:
            os.close(fd)
