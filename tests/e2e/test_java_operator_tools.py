"""Apache Kafka 4.x's operator tools against zonegate, their output read as an operator
reads it: consumer groups (list, describe, reset offsets by every strategy, delete,
delete offsets; classic and KIP-848 groups), delete records, get offsets, log dirs,
and the cluster-level commands.

The group and record commands run against a zonegate node and against a real Apache
Kafka broker (tests/apache_kafka.py) with the same assertions, so what is checked is
Kafka's outcome, not a guess at it. The cluster-level commands where zonegate answers
as a Kafka cluster without a KRaft quorum (features, metadata quorum, unregister;
docs/compatibility.md) are checked against zonegate alone.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import java_peer
from tests.apache_kafka import ApacheKafkaBroker
from tests.node_harness import RunningNode

pytestmark = pytest.mark.e2e

TOPIC = "ops-groups"  # 2 partitions, 10 records each
RECORDS_TOPIC = "ops-records"  # likewise, for DeleteRecords and ListOffsets
CLASSIC, CONSUMER = "ops-classic", "ops-consumer"
LEO = 10


@dataclass
class Setup:
    name: str
    bootstrap: str
    committed: dict[str, dict[int, int]]  # group -> partition -> committed offset


def _consume(bootstrap: str, group: str, protocol: str, count: int) -> dict[int, int]:
    """A group member that handles `count` records and commits after them; the offsets
    it committed (only partitions it handled records of)."""
    out = java_peer.client("consume", bootstrap, TOPIC, group, protocol, str(count), "30000")
    offsets = out[-1]["offsets"]
    return {int(p): o for p, o in offsets.items() if o is not None}


@pytest.fixture(scope="module", params=["zonegate", "apache-kafka"])
def setup(request: pytest.FixtureRequest) -> Setup:
    """Two topics of 2x10 records; a classic and a consumer-protocol group, both empty,
    with the offsets their members committed."""
    if request.param == "zonegate":
        node: RunningNode = request.getfixturevalue("session_node")
        bootstrap = node.bootstrap
    else:
        broker: ApacheKafkaBroker = request.getfixturevalue("apache_kafka")
        bootstrap = broker.bootstrap
    out = java_peer.client("admin", bootstrap, f"create:{TOPIC}:2", f"create:{RECORDS_TOPIC}:2")
    assert [o["ok"] for o in out] == [True, True], out
    for topic in (TOPIC, RECORDS_TOPIC):
        produced = java_peer.client("produce", bootstrap, topic, str(2 * LEO), "2")
        assert produced[-1] == {"event": "produced", "count": 2 * LEO}
    committed = {
        CLASSIC: _consume(bootstrap, CLASSIC, "classic", 7),
        CONSUMER: _consume(bootstrap, CONSUMER, "consumer", 13),
    }
    for offsets in committed.values():
        assert sum(offsets.values()) in (7, 13) and offsets
    return Setup(request.param, bootstrap, committed)


def _groups(s: Setup, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return java_peer.tool(
        "kafka-consumer-groups", "--bootstrap-server", s.bootstrap, *args, check=check
    )


def _rows(text: str, first: str = "GROUP") -> list[dict[str, str]]:
    """The rows of the tables the tool prints (header line starting with `first`), as
    header -> value; a last column may hold spaces."""
    rows: list[dict[str, str]] = []
    header: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            header = []
        elif line.startswith(first + " "):
            header = line.split()
        elif header:
            values = line.strip().split(maxsplit=len(header) - 1)
            rows.append(dict(zip(header, values, strict=False)))
    return rows


def _offsets(text: str) -> dict[tuple[str, int], int]:
    """(group, partition) -> NEW-OFFSET of a --reset-offsets table."""
    return {
        (r["GROUP"], int(r["PARTITION"])): int(r["NEW-OFFSET"])
        for r in _rows(text)
        if r["TOPIC"] == TOPIC
    }


def test_list_shows_each_groups_type_and_state(setup: Setup) -> None:
    out = _groups(setup, "--list", "--state", "--type")
    assert out.stdout.splitlines()[0].split() == ["GROUP", "TYPE", "STATE"]
    listed = {r["GROUP"]: (r["TYPE"], r["STATE"]) for r in _rows(out.stdout)}
    assert listed[CLASSIC] == ("Classic", "Empty")
    assert listed[CONSUMER] == ("Consumer", "Empty")
    names = _groups(setup, "--list").stdout.split()
    assert CLASSIC in names and CONSUMER in names
    # The filters, case-insensitive as Kafka's: only empty consumer-protocol groups.
    filtered = _groups(setup, "--list", "--state", "empty", "--type", "consumer")
    kinds = {(r["TYPE"], r["STATE"]) for r in _rows(filtered.stdout)}
    assert kinds == {("Consumer", "Empty")}
    assert CONSUMER in {r["GROUP"] for r in _rows(filtered.stdout)}


def test_describe_shows_offsets_lag_and_state_of_empty_groups(setup: Setup) -> None:
    out = _groups(setup, "--describe", "--group", CLASSIC, "--group", CONSUMER)
    for group in (CLASSIC, CONSUMER):
        assert f"Consumer group '{group}' has no active members." in out.stderr
    described = {(r["GROUP"], int(r["PARTITION"])): r for r in _rows(out.stdout)}
    expected = {(g, p) for g, offsets in setup.committed.items() for p in offsets}
    assert set(described) == expected  # the partitions with committed offsets
    for (group, p), r in described.items():
        current = setup.committed[group][p]
        assert r["TOPIC"] == TOPIC
        assert (r["CURRENT-OFFSET"], r["LOG-END-OFFSET"]) == (str(current), str(LEO))
        assert r["LAG"] == str(LEO - current)
        assert (r["CONSUMER-ID"], r["HOST"], r["CLIENT-ID"]) == ("-", "-", "-")

    state = _groups(setup, "--describe", "--group", CLASSIC, "--group", CONSUMER, "--state")
    lines = [line.split() for line in state.stdout.splitlines() if line.startswith("ops-")]
    host, port = setup.bootstrap.rsplit(":", 1)
    # GROUP, COORDINATOR (ID) as "host:port  (id)", ASSIGNMENT-STRATEGY, STATE, #MEMBERS
    assert [(x[0], x[1].rsplit(":", 1)[1], x[3], x[4], x[5]) for x in lines] == [
        (CLASSIC, port, "-", "Empty", "0"),
        (CONSUMER, port, "uniform", "Empty", "0"),
    ]


@pytest.fixture
def live_members(setup: Setup) -> Iterator[tuple[str, str]]:
    """A console consumer in a classic group and one in a consumer-protocol group, each
    running until the test ends."""
    groups = (f"{CLASSIC}-live", f"{CONSUMER}-live")
    procs = [
        subprocess.Popen(
            java_peer.java_command(
                java_peer.TOOLS["kafka-console-consumer"],
                [
                    "--bootstrap-server",
                    setup.bootstrap,
                    "--topic",
                    TOPIC,
                    "--group",
                    group,
                    "--command-property",
                    f"group.protocol={protocol}",
                ],
            ),  # fmt: skip
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for group, protocol in zip(groups, ("classic", "consumer"), strict=True)
    ]
    try:
        yield groups
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)


def test_describe_active_members_and_what_an_active_group_refuses(
    setup: Setup, live_members: tuple[str, str]
) -> None:
    classic, consumer = live_members
    deadline = time.monotonic() + 60
    while True:
        state = _groups(
            setup, "--describe", "--group", classic, "--group", consumer, "--state", check=False
        )
        stable = [line.split() for line in state.stdout.splitlines() if line.startswith("ops-")]
        if [(x[0], x[4], x[5]) for x in stable] == [
            (classic, "Stable", "1"),
            (consumer, "Stable", "1"),
        ]:
            break
        assert time.monotonic() < deadline, state.stdout
        time.sleep(1)
    assert [x[3] for x in stable] == ["range", "uniform"]

    members = _groups(
        setup, "--describe", "--group", classic, "--group", consumer, "--members", "--verbose"
    )
    by_group = {r["GROUP"]: r for r in _rows(members.stdout)}
    assert by_group[classic]["CONSUMER-ID"].startswith("console-consumer-")
    for group in (classic, consumer):
        r = by_group[group]
        assert (r["HOST"], r["CLIENT-ID"], r["#PARTITIONS"]) == (
            "/127.0.0.1",
            "console-consumer",
            "2",
        )
        assert r["CURRENT-ASSIGNMENT"] == f"{TOPIC}:0,1"
    # Only the consumer protocol has member epochs and a target assignment.
    assert by_group[classic]["CURRENT-EPOCH"] == by_group[classic]["TARGET-EPOCH"] == "-"
    assert int(by_group[consumer]["CURRENT-EPOCH"]) >= 1
    assert by_group[consumer]["TARGET-ASSIGNMENT"] == f"{TOPIC}:0,1"

    reset = _groups(setup, "--reset-offsets", "--group", consumer, "--all-topics",
                    "--to-earliest", "--execute")  # fmt: skip
    assert (
        f"Error: Assignments can only be reset if the group '{consumer}' is inactive, "
        "but the current state is Stable." in reset.stdout
    )
    deleted = _groups(setup, "--delete", "--group", classic)
    assert (
        f"* Group '{classic}' could not be deleted due to: "
        "org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty."
        in deleted.stdout
    )
    kept = _groups(setup, "--delete-offsets", "--group", consumer, "--topic", TOPIC)
    assert "Error: Encountered some partition-level error" in kept.stdout
    statuses = {r["PARTITION"]: r["STATUS"] for r in _rows(kept.stdout, "TOPIC")}
    assert set(statuses) == {"0", "1"}
    assert all("GroupSubscribedToTopicException" in s for s in statuses.values())


def test_reset_offsets_of_a_classic_group(setup: Setup) -> None:
    g, before = CLASSIC, setup.committed[CLASSIC]
    dry = _groups(setup, "--reset-offsets", "--group", g, "--all-topics", "--to-earliest",
                  "--dry-run")  # fmt: skip
    assert _rows(dry.stdout)[0].keys() == {"GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"}
    assert _offsets(dry.stdout) == {(g, p): 0 for p in before}
    # A dry run writes nothing: the offsets in force are still the committed ones.
    current = _groups(setup, "--reset-offsets", "--group", g, "--all-topics", "--to-current",
                      "--dry-run")  # fmt: skip
    assert _offsets(current.stdout) == {(g, p): o for p, o in before.items()}

    steps: list[tuple[list[str], dict[int, int]]] = [
        (["--topic", f"{TOPIC}:0,1", "--to-latest"], {0: LEO, 1: LEO}),
        (["--topic", f"{TOPIC}:0", "--to-offset", "4"], {0: 4}),
        (["--topic", TOPIC, "--shift-by", "-3"], {0: 1, 1: 7}),
        (["--topic", TOPIC, "--to-datetime", "2000-01-01T00:00:00.000"], {0: 0, 1: 0}),
    ]
    for args, expected in steps:
        out = _groups(setup, "--reset-offsets", "--group", g, *args, "--execute")
        assert _offsets(out.stdout) == {(g, p): o for p, o in expected.items()}, args
    described = _rows(_groups(setup, "--describe", "--group", g).stdout)
    assert {(r["PARTITION"], r["CURRENT-OFFSET"], r["LAG"]) for r in described} == {
        ("0", "0", str(LEO)),
        ("1", "0", str(LEO)),
    }


def test_reset_offsets_of_a_consumer_protocol_group(setup: Setup, tmp_path: Path) -> None:
    g = CONSUMER
    plan = tmp_path / "offsets.csv"
    plan.write_text(f"{TOPIC},0,2\n{TOPIC},1,5\n")
    steps: list[tuple[list[str], dict[int, int]]] = [
        # No record is that new: Kafka's tool then takes the log end.
        (["--topic", TOPIC, "--to-datetime", "2999-01-01T00:00:00.000"], {0: LEO, 1: LEO}),
        # Every record is newer than an hour ago: the first one.
        (["--topic", f"{TOPIC}:1", "--by-duration", "PT1H"], {1: 0}),
        (["--from-file", str(plan)], {0: 2, 1: 5}),
        (["--all-topics", "--to-current"], {0: 2, 1: 5}),
    ]
    for args, expected in steps:
        out = _groups(setup, "--reset-offsets", "--group", g, *args, "--execute")
        assert _offsets(out.stdout) == {(g, p): o for p, o in expected.items()}, args
    export = _groups(setup, "--reset-offsets", "--group", g, "--topic", TOPIC, "--shift-by",
                     "1", "--dry-run", "--export")  # fmt: skip
    assert sorted(export.stdout.split()) == [f"{TOPIC},0,3", f"{TOPIC},1,6"]
    described = _rows(_groups(setup, "--describe", "--group", g).stdout)
    assert {(r["PARTITION"], r["CURRENT-OFFSET"], r["LAG"]) for r in described} == {
        ("0", "2", str(LEO - 2)),
        ("1", "5", str(LEO - 5)),
    }


def test_delete_offsets_and_delete_groups(setup: Setup) -> None:
    out = _groups(setup, "--delete-offsets", "--group", CONSUMER, "--topic", f"{TOPIC}:0")
    assert out.stdout.startswith(f"Request succeeded for deleting offsets from group {CONSUMER}.")
    assert {(r["PARTITION"], r["STATUS"]) for r in _rows(out.stdout, "TOPIC")} == {
        ("0", "Successful")
    }
    left = _rows(_groups(setup, "--describe", "--group", CONSUMER).stdout)
    assert [r["PARTITION"] for r in left] == ["1"]

    gone = _groups(setup, "--delete", "--group", CLASSIC, "--group", CONSUMER)
    assert (
        gone.stdout.strip()
        == f"Deletion of requested consumer groups ('{CLASSIC}', '{CONSUMER}') was successful."
        or gone.stdout.strip()
        == f"Deletion of requested consumer groups ('{CONSUMER}', '{CLASSIC}') was successful."
    )
    names = _groups(setup, "--list").stdout.split()
    assert CLASSIC not in names and CONSUMER not in names

    missing = _groups(setup, "--delete", "--group", "ops-no-such-group")
    assert (
        "* Group 'ops-no-such-group' could not be deleted due to: "
        "org.apache.kafka.common.errors.GroupIdNotFoundException: The group id does not exist."
        in missing.stdout
    )
    described = _groups(setup, "--describe", "--group", "ops-no-such-group", check=False)
    assert (
        "Error: Executing consumer group command failed due to "
        "org.apache.kafka.common.errors.GroupIdNotFoundException: Group ops-no-such-group "
        "not found." in described.stdout
    )


def _get_offsets(s: Setup, time_arg: str) -> dict[int, int]:
    out = java_peer.tool("kafka-get-offsets", "--bootstrap-server", s.bootstrap, "--topic",
                         RECORDS_TOPIC, "--time", time_arg)  # fmt: skip
    parsed = {}
    for line in out.stdout.splitlines():
        topic, p, offset = line.split(":")
        assert topic == RECORDS_TOPIC
        parsed[int(p)] = int(offset)
    return parsed


def test_delete_records_then_get_offsets(setup: Setup, tmp_path: Path) -> None:
    assert _get_offsets(setup, "-1") == {0: LEO, 1: LEO}
    assert _get_offsets(setup, "-2") == {0: 0, 1: 0}
    plan = tmp_path / "delete.json"
    plan.write_text(
        json.dumps({"version": 1, "partitions": [
            {"topic": RECORDS_TOPIC, "partition": 0, "offset": 3}]})
    )  # fmt: skip
    out = java_peer.tool("kafka-delete-records", "--bootstrap-server", setup.bootstrap,
                         "--offset-json-file", str(plan))  # fmt: skip
    assert out.stdout == (
        "Executing records delete operation\n"
        "Records delete operation completed:\n"
        f"partition: {RECORDS_TOPIC}-0\tlow_watermark: 3\n"
    )
    assert _get_offsets(setup, "-2") == {0: 3, 1: 0}
    plan.write_text(
        json.dumps({"version": 1, "partitions": [
            {"topic": RECORDS_TOPIC, "partition": 1, "offset": LEO + 1}]})
    )  # fmt: skip
    past = java_peer.tool("kafka-delete-records", "--bootstrap-server", setup.bootstrap,
                          "--offset-json-file", str(plan))  # fmt: skip
    assert past.stdout.splitlines()[-1] == (
        f"partition: {RECORDS_TOPIC}-1\terror: org.apache.kafka.common.errors."
        "OffsetOutOfRangeException: The requested offset is not within the range of offsets "
        "maintained by the server."
    )
    assert _get_offsets(setup, "-1") == {0: LEO, 1: LEO}
    # By time: the first offset at or after an hour ago is the first one kept.
    hour_ago = str(int(time.time() * 1000) - 3_600_000)
    assert _get_offsets(setup, hour_ago) == {0: 3, 1: 0}
    # -3: the first record with the largest timestamp of its batch, as Kafka finds it
    # (the records were sent within a few milliseconds, so which one varies; Kafka
    # does not move it up to the log start, a batch being kept whole).
    newest = _get_offsets(setup, "-3")
    assert set(newest) == {0, 1} and all(0 <= o < LEO for o in newest.values())


def test_log_dirs_reports_each_partitions_size(setup: Setup) -> None:
    out = java_peer.tool("kafka-log-dirs", "--bootstrap-server", setup.bootstrap, "--describe",
                         "--topic-list", RECORDS_TOPIC)  # fmt: skip
    lines = out.stdout.splitlines()
    assert lines[0] == "Querying brokers for log directories information"
    assert lines[1].startswith("Received log directory information from brokers ")
    report = json.loads(lines[2])
    assert report["version"] == 1
    partitions = {}
    for broker in report["brokers"]:
        (log_dir,) = broker["logDirs"]  # one log directory per node
        assert log_dir["error"] is None and log_dir["logDir"]
        for p in log_dir["partitions"]:
            partitions[p["partition"]] = p
    # Every partition, once (the brokers the client is told of cover them all).
    assert set(partitions) == {f"{RECORDS_TOPIC}-0", f"{RECORDS_TOPIC}-1"}
    for p in partitions.values():
        assert p["size"] > 10 * len("v-10") and (p["offsetLag"], p["isFuture"]) == (0, False)


# -- cluster-level commands, against zonegate ----------------------------------------


def _tool(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return java_peer.tool(name, *args, check=False)


def test_cluster_id_and_unregister(session_node: RunningNode) -> None:
    cid = _tool("kafka-cluster", "cluster-id", "--bootstrap-server", session_node.bootstrap)
    assert cid.returncode == 0
    (line,) = cid.stdout.splitlines()
    assert line.startswith("Cluster ID: ") and len(line.removeprefix("Cluster ID: ")) == 22
    # No KRaft quorum to unregister from: Kafka's answer for such a cluster.
    unregister = _tool(
        "kafka-cluster", "unregister", "--bootstrap-server", session_node.bootstrap, "--id", "2"
    )
    assert (unregister.returncode, unregister.stdout) == (
        0,
        "The target cluster does not support the broker unregistration API.\n",
    )


def test_features_describe_and_update(session_node: RunningNode) -> None:
    described = _tool("kafka-features", "--bootstrap-server", session_node.bootstrap, "describe")
    # Only transaction.version is advertised (KIP-890 part 2: finalized at 2).
    assert described.returncode == 0
    assert described.stdout.split() == [
        "Feature:", "transaction.version", "SupportedMinVersion:", "0",
        "SupportedMaxVersion:", "2", "FinalizedVersionLevel:", "2", "Epoch:", "1",
    ]  # fmt: skip
    upgrade = _tool(
        "kafka-features", "--bootstrap-server", session_node.bootstrap,
        "upgrade", "--feature", "group.version=1",
    )  # fmt: skip
    assert upgrade.returncode == 1
    assert upgrade.stdout.strip() == (
        "Could not upgrade group.version to 1. The node does not support UPDATE_FEATURES"
    )


def test_metadata_quorum_is_refused_as_without_kraft(session_node: RunningNode) -> None:
    out = _tool(
        "kafka-metadata-quorum", "--bootstrap-server", session_node.bootstrap, "describe",
        "--status",
    )  # fmt: skip
    assert out.returncode == 1
    assert (
        "org.apache.kafka.common.errors.UnsupportedVersionException: "
        "The node does not support DESCRIBE_QUORUM" in out.stderr.splitlines()[0]
    )


def test_broker_api_versions(session_node: RunningNode) -> None:
    out = java_peer.tool("kafka-broker-api-versions", "--bootstrap-server", session_node.bootstrap)
    assert out.returncode == 0
    lines = [line.strip().rstrip(",") for line in out.stdout.splitlines()]
    assert lines[0].startswith(f"{session_node.bootstrap} (id: 1 rack: ")
    for expected in (
        "DescribeLogDirs(35): 0 to 4 [usable: 4]",
        "DeleteRecords(21): 0 to 2 [usable: 2]",
        "OffsetDelete(47): 0 [usable: 0]",
        "ConsumerGroupDescribe(69): 0 to 1 [usable: 1]",
        "Produce(0): 3 to 12 [usable: 12]",
        "EndTxn(26): 0 to 5 [usable: 5]",
        "TxnOffsetCommit(28): 0 to 5 [usable: 5]",
        "DescribeQuorum(55): UNSUPPORTED",
        "UpdateFeatures(57): UNSUPPORTED",
        "UnregisterBroker(64): UNSUPPORTED",
    ):
        assert expected in lines
