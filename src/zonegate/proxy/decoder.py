"""Decodes Kafka messages into kio's dataclasses without trusting a single length.

kio's own reader is native code that sizes buffers from counts read off the
wire: a 31-byte request claiming 16 million array elements made it abort the
process, and an abort cannot be caught. This reader is pure Python,
built per message class from the same dataclass metadata kio's writer uses,
and compiled once into straight-line code. Every count and length is checked
against the bytes actually present before anything is read or allocated, a
null where the schema has no null is refused, and every failure, whatever its
kind, comes out as `MalformedMessage` naming the field. docs/robustness.md
says why this over checking frames ahead of kio's reader, and what it costs.
"""

from __future__ import annotations

import dataclasses
import datetime
import struct
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

Reader = Callable[[bytes, int], tuple[Any, int]]


class MalformedMessage(ValueError):
    """The bytes are not a valid encoding of the message; `reason` says where."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# Fixed-width types: struct code and what to turn the value into (None: as is).
_FIXED: dict[str, str] = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float64": "d",
    "bool": "b",
    "error_code": "h",
    "timedelta_i32": "i",
    "timedelta_i64": "q",
    "datetime_i64": "q",
    "uuid": "16s",
}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_UUID_ZERO = bytes(16)


def _to_bool(v: int) -> bool:
    return v != 0  # as Kafka's ByteBufferAccessor.readByte() != 0


def _to_error(v: int) -> ErrorCode:
    try:
        return ErrorCode(v)
    except ValueError:
        raise MalformedMessage(f"unknown error code {v}") from None


def _to_timedelta(v: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=v)


def _to_datetime(v: int) -> datetime.datetime:
    return _EPOCH + datetime.timedelta(milliseconds=v)


def _to_nullable_datetime(v: int) -> datetime.datetime | None:
    return None if v == -1 else _EPOCH + datetime.timedelta(milliseconds=v)


def _to_uuid(v: bytes) -> uuid.UUID | None:
    return None if v == _UUID_ZERO else uuid.UUID(bytes=v)


_CONVERT: dict[str, Callable[[Any], Any]] = {
    "bool": _to_bool,
    "error_code": _to_error,
    "timedelta_i32": _to_timedelta,
    "timedelta_i64": _to_timedelta,
    "datetime_i64": _to_datetime,
    "uuid": _to_uuid,
}


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """An unsigned varint of at most 5 bytes (a 32-bit value), and the position after it."""
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise MalformedMessage("varint runs past the end of the message")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise MalformedMessage("varint is longer than 5 bytes")


def _length(buf: bytes, pos: int, compact: bool, wide: bool) -> tuple[int, int]:
    """A length prefix: -1 for null. Legacy strings use int16, bytes and arrays int32;
    compact ones an unsigned varint of length + 1 (0 for null)."""
    if compact:
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    if wide:
        if pos + 4 > len(buf):
            raise MalformedMessage("length runs past the end of the message")
        return int.from_bytes(buf[pos : pos + 4], "big", signed=True), pos + 4
    if pos + 2 > len(buf):
        raise MalformedMessage("length runs past the end of the message")
    return int.from_bytes(buf[pos : pos + 2], "big", signed=True), pos + 2


def _blob(buf: bytes, pos: int, compact: bool, wide: bool, nullable: bool, what: str) -> Any:
    """Length-prefixed bytes: (the bytes or None, position after them)."""
    if compact:
        # read_uvarint inlined: every records field of a produce request comes here.
        n = 0
        shift = 0
        while True:
            if pos >= len(buf):
                raise MalformedMessage(f"{what}: length runs past the end of the message")
            b = buf[pos]
            pos += 1
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if shift > 28:
                raise MalformedMessage(f"{what}: length varint is longer than 5 bytes")
        n -= 1
    else:
        n, pos = _length(buf, pos, False, wide)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise MalformedMessage(f"{what}: length {n} where the schema allows no null")
    end = pos + n
    if end > len(buf):
        raise MalformedMessage(f"{what}: length {n} runs {end - len(buf)} bytes past the end")
    return buf[pos:end], end


def _string(buf: bytes, pos: int, compact: bool, nullable: bool, what: str) -> Any:
    raw, pos = _blob(buf, pos, compact, False, nullable, what)
    if raw is None:
        return None, pos
    try:
        return raw.decode("utf-8"), pos
    except UnicodeDecodeError:
        raise MalformedMessage(f"{what}: not UTF-8") from None


def _count(buf: bytes, pos: int, compact: bool, nullable: bool, min_size: int, what: str) -> Any:
    """An array's element count, checked against the bytes left before any element is read."""
    n, pos = _length(buf, pos, compact, True)
    if n < 0:
        if n == -1 and nullable:
            return -1, pos
        raise MalformedMessage(f"{what}: count {n} where the schema allows no null")
    if n * max(min_size, 1) > len(buf) - pos:
        raise MalformedMessage(
            f"{what}: {n} elements cannot fit in the {len(buf) - pos} bytes left"
        )
    return n, pos


def _skip_tags(buf: bytes, pos: int, what: str) -> int:
    """Skips a tagged-field section of which no tag is known to the schema."""
    count, pos = read_uvarint(buf, pos)
    for _ in range(count):
        _, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise MalformedMessage(f"{what}: tagged field runs past the end")
    return pos


class _Builder:
    """Generates the source of one reader function per entity class, then compiles them."""

    def __init__(self) -> None:
        self.namespace: dict[str, Any] = {
            "MalformedMessage": MalformedMessage,
            "read_uvarint": read_uvarint,
            "_blob": _blob,
            "_string": _string,
            "_count": _count,
            "_skip_tags": _skip_tags,
            "_new": object.__new__,
            "_UUID_ZERO": _UUID_ZERO,
            "_to_uuid": _to_uuid,
        }
        self.readers: dict[tuple[type[Any], bool], str] = {}
        self.min_sizes: dict[type[Any], int] = {}
        self.sources: list[str] = []
        self._n = 0

    def _name(self, prefix: str, value: Any) -> str:
        self._n += 1
        name = f"{prefix}{self._n}"
        self.namespace[name] = value
        return name

    def entity(self, cls: type[Any], nullable: bool = False) -> str:
        """The name of the generated reader of `cls`: (buf, pos) -> (instance, pos)."""
        key = (cls, nullable)
        if key in self.readers:
            return self.readers[key]
        fn = f"read_{cls.__name__}_{self._n}{'_n' if nullable else ''}"
        self._n += 1
        self.readers[key] = fn
        if nullable:
            inner = self.entity(cls)
            self.sources.append(
                f"def {fn}(buf, pos):\n"
                f"    if pos >= len(buf):\n"
                f"        raise MalformedMessage('{cls.__name__}: marker runs past the end')\n"
                f"    marker = buf[pos]\n"
                f"    if marker == 0xFF:\n"
                f"        return None, pos + 1\n"
                f"    if marker != 1:\n"
                f"        raise MalformedMessage('{cls.__name__}: bad null marker %d' % marker)\n"
                f"    return {inner}(buf, pos + 1)\n"
            )
            return fn
        flexible: bool = cls.__flexible__
        lines = [f"def {fn}(buf, pos):"]
        values: list[tuple[str, str]] = []  # (field name, local variable)
        tagged: list[tuple[int, dataclasses.Field[Any]]] = []
        fixed_run: list[tuple[str, str, str]] = []  # (struct code, variable, kafka type)
        min_size = 0

        def flush() -> None:
            nonlocal min_size
            if not fixed_run:
                return
            fmt = struct.Struct(">" + "".join(code for code, _, _ in fixed_run))
            s = self._name("_s", fmt)
            names = ", ".join(v for _, v, _ in fixed_run)
            lines.append(f"    if pos + {fmt.size} > len(buf):")
            lines.append(
                f"        raise MalformedMessage('{cls.__name__}: fields run past the end')"
            )
            lines.append(f"    ({names},) = {s}.unpack_from(buf, pos)")
            lines.append(f"    pos += {fmt.size}")
            for _, var, conv in fixed_run:
                if conv == "bool":
                    lines.append(f"    {var} = {var} != 0")
                elif conv == "uuid":  # the zero UUID, the usual value, reads as None
                    lines.append(f"    {var} = None if {var} == _UUID_ZERO else _to_uuid({var})")
                elif conv:
                    lines.append(f"    {var} = {conv}({var})")
            min_size += fmt.size
            fixed_run.clear()

        for i, field in enumerate(dataclasses.fields(cls)):
            tag = get_field_tag(field)
            if tag is not None:
                tagged.append((int(tag), field))
                continue
            var = f"v{i}"
            values.append((field.name, var))
            what = f"{cls.__name__}.{field.name}"
            fc = classify_field(field)
            if isinstance(fc, PrimitiveField):
                kafka_type = get_schema_field_type(field)
                code = _FIXED.get(kafka_type)
                if code is not None:
                    conv = _CONVERT.get(kafka_type)
                    if kafka_type == "datetime_i64" and is_optional(field):
                        conv = _to_nullable_datetime
                    if kafka_type in ("bool", "uuid"):
                        fixed_run.append((code, var, kafka_type))
                    else:
                        fixed_run.append((code, var, self._name("_c", conv) if conv else ""))
                    continue
                flush()
                call = self._variable(kafka_type, flexible, is_optional(field), what)
                if flexible:
                    # Most compact strings are under 127 bytes: one length byte, read here.
                    lines.append("    if pos < len(buf) and 0 < buf[pos] < 0x80:")
                    lines.append("        end = pos + buf[pos]")
                    lines.append("        if end > len(buf):")
                    past = f"{what}: runs past the end"
                    lines.append(f"            raise MalformedMessage({past!r})")
                    get = "buf[pos + 1 : end]"
                    if kafka_type == "string":
                        get += ".decode()"
                    lines.append(f"        {var} = {get}")
                    lines.append("        pos = end")
                    if is_optional(field):
                        lines.append("    elif pos < len(buf) and buf[pos] == 0:")
                        lines.append(f"        {var} = None")
                        lines.append("        pos += 1")
                    lines.append("    else:")
                    lines.append(f"        {var}, pos = {call}")
                else:
                    lines.append(f"    {var}, pos = {call}")
                min_size += self._least_size(kafka_type, flexible)
                continue
            flush()
            if isinstance(fc, EntityField):
                reader = self.entity(fc.type_, nullable=is_optional(field))
                lines.append(f"    {var}, pos = {reader}(buf, pos)")
                min_size += 1 if is_optional(field) else self.min_sizes[fc.type_]
                continue
            # An array: of entities, or of primitives.
            if isinstance(fc, EntityTupleField):
                item = self.entity(fc.type_)
                item_min = self.min_sizes[fc.type_]
            else:
                assert isinstance(fc, PrimitiveTupleField)
                # Nullability of a primitive array is the array's, never the elements'.
                kafka_type = get_schema_field_type(field)
                item = self._primitive(kafka_type, flexible, False, what)
                item_min = self._least_size(kafka_type, flexible)
            count = f"_count(buf, pos, {flexible}, {is_optional(field)}, {item_min}, {what!r})"
            if flexible:
                # Arrays of one to a hundred elements have a one-byte count, read here.
                lines.append("    if pos < len(buf) and 1 < buf[pos] < 0x80:")
                lines.append("        n = buf[pos] - 1")
                lines.append("        pos += 1")
                lines.append(f"        if n * {max(item_min, 1)} > len(buf) - pos:")
                lines.append(f"            n, pos = {count.replace('pos,', 'pos - 1,', 1)}")
                lines.append("    else:")
                lines.append(f"        n, pos = {count}")
            else:
                lines.append(f"    n, pos = {count}")
            lines.append("    if n < 0:")
            lines.append(f"        {var} = None")
            lines.append("    else:")
            lines.append("        items = []")
            lines.append("        for _ in range(n):")
            lines.append(f"            x, pos = {item}(buf, pos)")
            lines.append("            items.append(x)")
            lines.append(f"        {var} = tuple(items)")
            min_size += 1 if flexible else 4
        flush()
        if flexible:
            min_size += 1
            if tagged:
                self._tag_section(lines, cls, tagged, values)
            else:
                lines.append("    if pos < len(buf) and buf[pos] == 0:")
                lines.append("        pos += 1")
                lines.append("    else:")
                lines.append(f"        pos = _skip_tags(buf, pos, {cls.__name__!r})")
        new = self._name("_cls", cls)
        lines.append(f"    obj = _new({new})")
        for name, var in values:
            setter = self._name("_set", cls.__dict__[name].__set__)
            lines.append(f"    {setter}(obj, {var})")
        lines.append("    return obj, pos")
        self.min_sizes[cls] = min_size
        self.sources.append("\n".join(lines) + "\n")
        return fn

    @staticmethod
    def _variable(kafka_type: str, flexible: bool, nullable: bool, what: str) -> str:
        """The call reading a length-prefixed primitive (string, bytes, records)."""
        if kafka_type == "string":
            return f"_string(buf, pos, {flexible}, {nullable}, {what!r})"
        if kafka_type in ("bytes", "records"):
            return f"_blob(buf, pos, {flexible}, True, {nullable}, {what!r})"
        raise TypeError(f"{what}: kafka type {kafka_type!r} has no reader")

    def _primitive(self, kafka_type: str, flexible: bool, nullable: bool, what: str) -> str:
        """A function reading one primitive value of `kafka_type`; its name."""
        fn = self._name("_prim", None)
        code = _FIXED.get(kafka_type)
        if code is None:
            body = f"    return {self._variable(kafka_type, flexible, nullable, what)}\n"
        else:
            fmt = struct.Struct(">" + code)
            s = self._name("_s", fmt)
            conv = _CONVERT.get(kafka_type)
            if kafka_type == "datetime_i64" and nullable:
                conv = _to_nullable_datetime
            c = self._name("_c", conv) if conv else ""
            body = (
                f"    if pos + {fmt.size} > len(buf):\n"
                f"        raise MalformedMessage({what + ': runs past the end'!r})\n"
                f"    (v,) = {s}.unpack_from(buf, pos)\n"
                f"    return {c}(v), pos + {fmt.size}\n"
            )
        self.sources.append(f"def {fn}(buf, pos):\n{body}")
        return fn

    @staticmethod
    def _least_size(kafka_type: str, flexible: bool) -> int:
        code = _FIXED.get(kafka_type)
        if code is not None:
            return struct.calcsize(">" + code)
        return 1 if flexible else (2 if kafka_type == "string" else 4)

    def _tag_section(
        self,
        lines: list[str],
        cls: type[Any],
        tagged: list[tuple[int, dataclasses.Field[Any]]],
        values: list[tuple[str, str]],
    ) -> None:
        """Reads a tagged-field section where some tags are fields of `cls`; the others
        are skipped, and a field whose tag is absent takes its default."""
        for tag, field in tagged:
            var = f"t{tag}"
            values.append((field.name, var))
            default = self._name("_default", get_tagged_field_default(field))
            lines.append(f"    {var} = {default}")
        lines.append("    count, pos = read_uvarint(buf, pos)")
        lines.append("    for _ in range(count):")
        lines.append("        tag, pos = read_uvarint(buf, pos)")
        lines.append("        size, pos = read_uvarint(buf, pos)")
        lines.append("        end = pos + size")
        lines.append("        if end > len(buf):")
        lines.append(
            f"            raise MalformedMessage('{cls.__name__}: tagged field runs past the end')"
        )
        first = True
        for tag, field in tagged:
            what = f"{cls.__name__}.{field.name}"
            reader = self._tagged_reader(field, what)
            kw = "if" if first else "elif"
            first = False
            lines.append(f"        {kw} tag == {tag}:")
            lines.append(f"            t{tag}, at = {reader}(buf, pos)")
            lines.append("            if at != end:")
            mismatch = f"{what}: tagged field size does not match"
            lines.append(f"                raise MalformedMessage({mismatch!r})")
        lines.append("        pos = end")

    def _tagged_reader(self, field: dataclasses.Field[Any], what: str) -> str:
        """A reader of a tagged field's value. Tagged fields are always in flexible form,
        and kio writes their values with the non-nullable writers (arrays excepted)."""
        fc = classify_field(field)
        if isinstance(fc, EntityField):
            return self.entity(fc.type_)
        if isinstance(fc, PrimitiveField):
            return self._primitive(get_schema_field_type(field), True, False, what)
        if isinstance(fc, EntityTupleField):
            item = self.entity(fc.type_)
            item_min = self.min_sizes[fc.type_]
        else:
            kafka_type = get_schema_field_type(field)
            item = self._primitive(kafka_type, True, False, what)
            item_min = self._least_size(kafka_type, True)
        fn = self._name("_tag", None)
        self.sources.append(
            f"def {fn}(buf, pos):\n"
            f"    n, pos = _count(buf, pos, True, {is_optional(field)}, {item_min}, {what!r})\n"
            f"    if n < 0:\n"
            f"        return None, pos\n"
            f"    items = []\n"
            f"    for _ in range(n):\n"
            f"        x, pos = {item}(buf, pos)\n"
            f"        items.append(x)\n"
            f"    return tuple(items), pos\n"
        )
        return fn

    def compile(self, fn: str) -> Reader:
        code = "\n".join(self.sources)
        exec(compile(code, f"<zonegate decoder {fn}>", "exec"), self.namespace)
        reader: Reader = self.namespace[fn]
        return reader


_readers: dict[type[Any], Reader] = {}


def message_reader(cls: type[Any]) -> Reader:
    """The reader of a kio message class: (buf, pos) -> (message, position after it).

    Raises `MalformedMessage` for any input that is not a valid encoding; never
    anything else, and never allocates more than the input's size warrants.
    """
    reader = _readers.get(cls)
    if reader is None:
        builder = _Builder()
        fn = builder.entity(cls)
        compiled = builder.compile(fn)

        def reader(buf: bytes, pos: int) -> tuple[Any, int]:
            try:
                return compiled(buf, pos)
            except MalformedMessage:
                raise
            except (struct.error, ValueError, OverflowError, IndexError) as exc:
                # UnicodeDecodeError is a ValueError: a string read on the fast path.
                raise MalformedMessage(f"{cls.__name__}: {type(exc).__name__}: {exc}") from None

        _readers[cls] = reader
    return reader
