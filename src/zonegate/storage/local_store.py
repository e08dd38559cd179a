"""Object store over a local directory: the embedded default (`file:///path`).

Keys map to relative paths under the root. Every write goes to a temporary
file in the destination directory and is renamed into place, so a reader sees
either nothing or the whole object, as with S3. Blocking file calls run in a
worker thread so a slow disk does not stall the event loop, with one exception,
the WAL PUT on every produce's path (docs/latency.md):

`put_new` (a WAL object) appends the object to the end of this store's
current pack file under the key's directory (`put_packed`, `pack_files`) and
returns the key it can be read by.
An object of at most `inline_bytes` is written on the calling (event loop)
thread with one `pwritev`: tens of microseconds into the page cache, while the
hop to a worker thread and back costs milliseconds under load (the worker
waits for the GIL, which a busy loop hands over only every
`sys.getswitchinterval()`, 5 ms). No file is created per object: creating an
inode was the one slow file call (0.3-1.4 ms of kernel CPU on ext4 without a
journal after deletes). Larger objects get a pack file of their own, written
in the worker thread. Without fsync a write is durable across a process crash
(kill -9) once it returns, in the thread or not; with fsync the store does not
pack (`packs` is False) and `put_new` is a `put`. Only this module and
`pack_files` know a packed object's key; others ask `deletion_unit`.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import secrets
from collections.abc import Sequence
from pathlib import Path

from zonegate.runtime.clock import SYSTEM_CLOCK, Clock
from zonegate.storage import pack_files
from zonegate.storage.objects import DeletionUnit, ObjectInfo, ObjectNotFound, check_range
from zonegate.storage.pack_files import (
    PACK_SUFFIX,
    RECORD_HEADER_SIZE,
    PackedKey,
    header_names,
    is_reserved_name,
    parse_packed_key,
    record_header,
    walk_records,
)

# Temporary files start with this; `list` skips them, so a crash mid-write
# leaves litter but never a visible partial object.
_TMP_PREFIX = ".zg-tmp-"

# A pack file is closed and a new one begun once it would pass this size.
DEFAULT_PACK_BYTES = 64 * 1024 * 1024
DEFAULT_PACK_MAX_AGE_S = 60.0
# Larger packed objects are written in a worker thread, each in a pack file of
# its own: there the copy is long enough to pay for the hop.
DEFAULT_INLINE_BYTES = 1024 * 1024
_NOT_A_FILE = (FileNotFoundError, IsADirectoryError, NotADirectoryError)


class _Pack:
    """The pack file a prefix's objects are appended to now."""

    __slots__ = ("fd", "key", "opened", "size")

    def __init__(self, key: str, fd: int, opened: float) -> None:
        self.key = key
        self.fd = fd
        self.size = 0
        self.opened = opened  # on the store's monotonic clock


class LocalObjectStore:
    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        fsync: bool = False,
        pack_bytes: int = DEFAULT_PACK_BYTES,
        inline_bytes: int = DEFAULT_INLINE_BYTES,
        pack_max_age_s: float = DEFAULT_PACK_MAX_AGE_S,
        clock: Clock = SYSTEM_CLOCK,  # for the pack files' age
    ) -> None:
        # A pack file takes new objects for at most this long: object GC may delete one
        # whose objects nothing names once it is older than its orphan grace, which is
        # longer, so it never deletes a file still growing (docs/storage.md).
        self._pack_max_age_s = pack_max_age_s
        self._clock = clock
        self._root = Path(root).resolve()
        self._fsync = fsync
        self._pack_bytes = 0 if fsync else pack_bytes
        self._inline_bytes = inline_bytes
        self._dirs: set[str] = set()  # directories known to exist
        # Pack file names carry a random run id: two stores (processes) sharing a
        # directory never append to the same file.
        self._run_id = secrets.token_hex(8)
        self._pack_seq = 0
        self._packs: dict[str, _Pack] = {}  # prefix -> its open pack file

    @property
    def root(self) -> Path:
        return self._root

    @property
    def packs(self) -> bool:
        """Whether `put_packed` may be used (not with fsync, nor with `pack_bytes=0`)."""
        return self._pack_bytes > 0

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

    def _ordinary_path(self, key: str) -> Path:
        """The path of an object `put` may write: not a pack file, not a packed key."""
        parts = self._parts(key)
        if is_reserved_name(parts[-1]):
            raise ValueError(
                f"invalid object key {key!r}: names ending in {PACK_SUFFIX!r} (and "
                f"'<pack>@<offset>+<length>') are kept for pack files (put_packed)"
            )
        return self._root.joinpath(*parts)

    async def put(self, key: str, data: bytes) -> None:
        await asyncio.to_thread(self._write, self._ordinary_path(key), data, False)

    async def put_new(self, key: str, data: bytes) -> str:
        """Packs the object under `key`'s directory, and returns its packed key; with
        packing off it is a `put` under `key`."""
        self._ordinary_path(key)  # the same keys as `put` take
        if not self.packs:
            await self.put(key, data)
            return key
        return await self.put_packed(key[: key.rfind("/") + 1], data)

    def deletion_unit(self, key: str) -> DeletionUnit:
        return pack_files.deletion_unit(key)

    # -- pack files ---------------------------------------------------------

    async def put_packed(self, prefix: str, data: bytes) -> str:
        """Appends `data` as one object to a pack file under `prefix`; returns its key."""
        if not self.packs:
            raise ValueError("this local store does not pack objects (fsync is on)")
        header = record_header(len(data))
        if len(data) > self._inline_bytes:
            key = self._new_pack_key(prefix)
            await asyncio.to_thread(self._write_alone, self._path(key), header, data)
            return PackedKey(key, RECORD_HEADER_SIZE, len(data)).key
        pack = self._packs.get(prefix)
        if pack is not None and (
            pack.size + RECORD_HEADER_SIZE + len(data) > self._pack_bytes
            or self._clock.monotonic() - pack.opened > self._pack_max_age_s
        ):
            self._close_pack(prefix)
            pack = None
        if pack is None:
            pack = self._open_pack(prefix)
        start = pack.size
        try:
            _pwrite_all(pack.fd, header, data, start)
        except BaseException:
            # No later record may follow a half-written one: walking the file
            # stops there. Give this pack up; the next object starts another.
            self._close_pack(prefix)
            raise
        pack.size = start + RECORD_HEADER_SIZE + len(data)
        return PackedKey(pack.key, start + RECORD_HEADER_SIZE, len(data)).key

    def _new_pack_key(self, prefix: str) -> str:
        self._pack_seq += 1
        return f"{prefix}{self._run_id}-{self._pack_seq:06d}{PACK_SUFFIX}"

    def _open_pack(self, prefix: str) -> _Pack:
        key = self._new_pack_key(prefix)
        fd = _create(str(self._path(key)), self._dirs)
        pack = self._packs[prefix] = _Pack(key, fd, self._clock.monotonic())
        return pack

    def _close_pack(self, prefix: str) -> None:
        pack = self._packs.pop(prefix, None)
        if pack is not None:
            os.close(pack.fd)

    def _write_alone(self, path: Path, header: bytes, data: bytes) -> None:
        fd = _create(str(path), self._dirs)
        try:
            _pwrite_all(fd, header, data, 0)
        finally:
            os.close(fd)

    def _read_packed(self, packed: PackedKey, key: str, start: int, length: int) -> bytes:
        path = self._path(packed.pack)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except _NOT_A_FILE:
            raise ObjectNotFound(key) from None
        try:
            header = os.pread(fd, RECORD_HEADER_SIZE, packed.offset - RECORD_HEADER_SIZE)
            if not header_names(header, packed.length):
                raise ObjectNotFound(key)
            end = min(start + length, packed.length)
            if start >= end:
                return b""
            data = os.pread(fd, end - start, packed.offset + start)
            if len(data) != end - start:
                raise ObjectNotFound(key)  # the pack file was cut short
            return data
        except IsADirectoryError:
            raise ObjectNotFound(key) from None
        finally:
            os.close(fd)

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        path = self._ordinary_path(key)
        return await asyncio.to_thread(self._write, path, data, True)

    def _write(self, path: Path, data: bytes, exclusive: bool) -> bool:
        parent = str(path.parent)
        final = str(path)
        tmp = os.path.join(parent, f"{_TMP_PREFIX}{path.name}-{secrets.token_hex(6)}")
        placed = False
        try:
            fd = _create(tmp, self._dirs)
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
        packed = parse_packed_key(key)
        if packed is not None:
            return await asyncio.to_thread(self._read_packed, packed, key, 0, packed.length)
        path = self._path(key)
        try:
            return await asyncio.to_thread(path.read_bytes)
        except _NOT_A_FILE:
            raise ObjectNotFound(key) from None

    async def get_range(self, key: str, start: int, length: int) -> bytes:
        check_range(start, length)
        packed = parse_packed_key(key)
        if packed is not None:
            return await asyncio.to_thread(self._read_packed, packed, key, start, length)
        path = self._path(key)
        try:
            return await asyncio.to_thread(self._read_range, path, start, length)
        except _NOT_A_FILE:
            raise ObjectNotFound(key) from None

    @staticmethod
    def _read_range(path: Path, start: int, length: int) -> bytes:
        with open(path, "rb") as f:
            f.seek(start)
            return f.read(length)

    async def delete_many(self, keys: Sequence[str]) -> None:
        for k in keys:
            packed = parse_packed_key(k)
            if packed is not None:
                raise ValueError(
                    f"cannot delete {k!r} alone: it is one object of the pack file "
                    f"{packed.pack!r}, whose objects are deleted together by deleting it"
                )
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
        """Keys under `prefix`; a pack file is listed as the objects in it."""
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
                if name.startswith(_TMP_PREFIX):
                    continue
                try:
                    if name.endswith(PACK_SUFFIX):
                        if key.startswith(prefix) or prefix.startswith(key):
                            out += self._list_pack(os.path.join(dirpath, name), key, prefix)
                    elif key.startswith(prefix):
                        st = os.stat(os.path.join(dirpath, name))
                        out.append(ObjectInfo(key, st.st_size, st.st_mtime_ns // 1_000_000))
                except FileNotFoundError:
                    continue  # deleted while listing
        out.sort(key=lambda info: info.key)
        return out

    @staticmethod
    def _list_pack(path: str, pack_key: str, prefix: str) -> builtins.list[ObjectInfo]:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            infos = []
            st = os.fstat(fd)
            modified_ms = st.st_mtime_ns // 1_000_000  # the pack's last append
            for offset, length in walk_records(fd, st.st_size):
                key = PackedKey(pack_key, offset, length).key
                if key.startswith(prefix):
                    infos.append(ObjectInfo(key, length, modified_ms))
            return infos
        finally:
            os.close(fd)

    async def close(self) -> None:
        for prefix in builtins.list(self._packs):
            self._close_pack(prefix)


def _create(path: str, known_dirs: set[str]) -> int:
    """Creates `path` (which must not exist) for writing, its directory too if need be."""
    parent = os.path.dirname(path)
    if parent not in known_dirs:
        os.makedirs(parent, exist_ok=True)
        known_dirs.add(parent)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    try:
        return os.open(path, flags, 0o666)
    except FileNotFoundError:
        # The directory went away (deleted by hand): make it again, once.
        os.makedirs(parent, exist_ok=True)
        return os.open(path, flags, 0o666)


def _pwrite_all(fd: int, header: bytes, data: bytes, offset: int) -> None:
    """Writes `header` then `data` at `offset`, however many calls the kernel needs."""
    done = os.pwritev(fd, [header, data], offset)
    total = len(header) + len(data)
    if done < total:
        rest = memoryview(header + data)[done:]
        while rest:
            n = os.pwrite(fd, rest, offset + done)
            rest, done = rest[n:], done + n
