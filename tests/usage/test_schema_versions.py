"""Usage-record schema 4 (the cross-zone reason) and 3 (the principal), and the readers of
older schemas: a schema-1 or schema-2 object is read with no principal, a schema-3 one with
its principals and no reason, by the report's facts as by `conform`
(docs/usage-records.md)."""

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
    OUTAGE,
    ROUTED,
    SCHEMA_VERSION,
    UnknownSchemaVersion,
    conform,
)

pytestmark = pytest.mark.unit
SPEC = SyntheticSpec(days=1, intervals_per_day=1, topics=1, clients_per_zone=1)


def _table(version: int) -> pa.Table:
    objects = list(generate(dataclasses.replace(SPEC, schema_version=version)))
    return pa.concat_tables([o.table for o in objects], promote_options="default")


def test_schema_4_is_current_and_older_ones_are_still_read() -> None:
    assert SCHEMA_VERSION == 4 and KNOWN_VERSIONS == {1, 2, 3, 4}
    assert ARROW_SCHEMA.names[-2:] == ["principal", "cross_zone_reason"]


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
    for name in ("principal", "cross_zone_reason"):
        raw = raw.append_column(ARROW_SCHEMA.field(name), pa.nulls(raw.num_rows, pa.string()))
    nulls = raw.select(ARROW_SCHEMA.names)
    assert set(facts_of(nulls).column("principal").to_pylist()) == {""}
    assert set(facts_of(nulls).column("outage_window").to_pylist()) == {""}


def test_a_later_version_is_refused_by_name() -> None:
    table = conform(_table(3), "x")
    later = table.set_column(0, "schema_version", pa.array([5] * table.num_rows, pa.int32()))
    with pytest.raises(UnknownSchemaVersion, match="schema_version 5"):
        conform(later, "a later object")


@pytest.mark.parametrize("version", [1, 2, 3])
def test_an_older_object_is_read_with_no_cross_zone_reason(version: int) -> None:
    raw = _table(version)
    assert "cross_zone_reason" not in raw.column_names
    read = conform(raw, "an old object")
    assert read.schema == ARROW_SCHEMA
    assert set(read.column("cross_zone_reason").to_pylist()) == {""}
    assert set(facts_of(read).column("outage_window").to_pylist()) == {""}


def test_a_schema_4_object_names_its_misrouted_clients_and_outage_rows_get_their_hour() -> None:
    spec = dataclasses.replace(SPEC, clients_per_zone=4, misrouted_fraction=0.5)
    raw = pa.concat_tables([o.table for o in generate(spec)])
    read = conform(raw, "a new object")
    rows = read.to_pylist()
    crossed = [r for r in rows if r["kind"] in CLIENT_KINDS and r["client_zone"] != r["node_zone"]]
    assert crossed and {r["cross_zone_reason"] for r in crossed} == {ROUTED}
    assert {r["cross_zone_reason"] for r in rows if r not in crossed} == {""}
    # The same rows as if their clients' zone had been lost: the facts keep the hour.
    reasons = [OUTAGE if r in crossed else "" for r in rows]
    lost = read.set_column(
        read.schema.get_field_index("cross_zone_reason"),
        "cross_zone_reason",
        pa.array(reasons, pa.string()),
    )
    facts = facts_of(lost).to_pylist()
    assert {f["outage_window"] for f in facts if f["outage_window"]} == {"2025-01-01 00:00"}
    outage = sum(f["bytes_in"] + f["bytes_out"] for f in facts if f["outage_window"])
    assert outage == sum(r["bytes_in"] + r["bytes_out"] for r in crossed)
