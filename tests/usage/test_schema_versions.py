"""Usage-record schema 3 (the principal) and the readers of older schemas: a schema-1 or
schema-2 object is read with no principal, a schema-3 one with its principals, by the
report's facts as by `conform` (docs/usage-records.md)."""

from __future__ import annotations

import dataclasses

import pyarrow as pa
import pytest

from zonegate.analytics.facts import facts_of
from zonegate.analytics.synthetic import SyntheticSpec, generate
from zonegate.usage.schema import (
    ARROW_SCHEMA,
    CLIENT_KINDS,
    KNOWN_VERSIONS,
    SCHEMA_VERSION,
    UnknownSchemaVersion,
    conform,
)

pytestmark = pytest.mark.unit
SPEC = SyntheticSpec(days=1, intervals_per_day=1, topics=1, clients_per_zone=1)


def _table(version: int) -> pa.Table:
    objects = list(generate(dataclasses.replace(SPEC, schema_version=version)))
    return pa.concat_tables([o.table for o in objects], promote_options="default")


def test_schema_3_is_current_and_older_ones_are_still_read() -> None:
    assert SCHEMA_VERSION == 3 and KNOWN_VERSIONS == {1, 2, 3}
    assert ARROW_SCHEMA.names[-1] == "principal"


@pytest.mark.parametrize("version", [1, 2])
def test_an_older_object_is_read_with_no_principal(version: int) -> None:
    raw = _table(version)
    assert "principal" not in raw.column_names
    read = conform(raw, "an old object")
    assert read.schema == ARROW_SCHEMA
    assert set(read.column("principal").to_pylist()) == {""}


def test_a_schema_3_object_keeps_its_principals_and_facts_carry_them() -> None:
    read = conform(_table(3), "a new object")
    rows = read.select(["kind", "principal"]).to_pylist()
    assert {r["principal"] for r in rows if r["kind"] in CLIENT_KINDS} == {"User:ANONYMOUS"}
    assert {r["principal"] for r in rows if r["kind"] not in CLIENT_KINDS} == {""}
    facts = facts_of(read)
    assert "User:ANONYMOUS" in facts.column("principal").to_pylist()


def test_facts_of_an_older_object_read_as_the_current_schema() -> None:
    """The local reader reads each object against the current schema: a column the
    object lacks is null; the facts take it as no principal."""
    raw = _table(2)
    nulls = raw.append_column(
        ARROW_SCHEMA.field("principal"), pa.nulls(raw.num_rows, pa.string())
    ).select(ARROW_SCHEMA.names)
    assert set(facts_of(nulls).column("principal").to_pylist()) == {""}


def test_a_later_version_is_refused_by_name() -> None:
    table = conform(_table(3), "x")
    later = table.set_column(0, "schema_version", pa.array([4] * table.num_rows, pa.int32()))
    with pytest.raises(UnknownSchemaVersion, match="schema_version 4"):
        conform(later, "a later object")
