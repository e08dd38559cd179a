"""Object store over a local directory: the embedded default (`file:///path`).

Keys map to relative paths under the root. Every write goes to a temporary
file in the destination directory and is renamed into place, so a reader sees
either nothing or the whole object, as with S3. Blocking file calls run in a
worker thread so a slow disk does not stall the event loop.
"""

from __future__ import annotations

import asyncio
import builtins
import os
import secrets
from collections.abc import Sequence
from pathlib import Path

from zonegate.wal_s3.object_store import ObjectInfo, ObjectNotFound, check_range

# Temporary files start with this; `list` skips them, so a crash mid-write
# leaves litter but never a visible partial object.
_TMP_PREFIX = ".zg-tmp-"


class LocalObjectStore:
    def __init__(self, root: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self._root = Path(root).resolve()
        self._fsync = fsync

    @property
    def root(self) -> Path:
        return self._root

    def _path(self, key: str) -> Path:
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
        return self._root.joinpath(*parts)

    async def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        await asyncio.to_thread(self._write, path, data, False)

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        path = self._path(key)
        return await asyncio.to_thread(self._write, path, data, True)

    def _write(self, path: Path, data: bytes, exclusive: bool) -> bool:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{_TMP_PREFIX}{path.name}-{secrets.token_hex(6)}")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                if self._fsync:
                    f.flush()
                    os.fsync(f.fileno())
            if exclusive:
                # link() fails if the name exists, atomically: two racing
                # writers cannot both win, and neither exposes a partial file.
                try:
                    os.link(tmp, path)
                except FileExistsError:
                    return False
            else:
                os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
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
        return None
