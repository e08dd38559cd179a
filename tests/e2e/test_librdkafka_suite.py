"""librdkafka's own C tests against zonegate: 0077 (a compacted topic created by
kafka-topics with a full set of topic configs), the AlterConfigs and
IncrementalAlterConfigs sub-tests of 0081 (admin), 0103 (transactions) and 0129 (a
read_committed consumer skipping an aborted transaction).

The runner is built by tests/librdkafka/build.sh (scripts/test runs it) from the C
sources of librdkafka's test suite, with only these tests in it. It reads its
broker from test.conf and its selection from TESTS and SUBTESTS, as upstream runs
it; kafka-topics.sh, which 0077 runs from $KAFKA_PATH/bin as against a Kafka
install, is Apache Kafka's own TopicCommand from the Java cache (tests/java_peer.py).
The runner prints a summary table (one row per test with its state and the first
failure) and a line per sub-test that passed; both are asserted on. 0077, mostly its
own fixed waits, runs while the 0081 tests do and is checked last.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import java_peer
from tests.e2e.conftest import NodeFactory
from tests.node_harness import RunningNode

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / ".cache" / "rdkafka-tests" / "build" / "test-runner"
# The runner adapts its expectations to the broker version it is told: zonegate
# answers as Apache Kafka 4.x does (the version of tests/java/pom.xml), so it is
# told that one; from 4.0 on, 0081 expects KIP-848 group configs to be accepted.
KAFKA_VERSION = java_peer.KAFKA_VERSION
# 0077 waits 20 s, 30 s and 20 s for compaction in its three rounds and takes
# about 95 s in all on a quiet machine; pytest's own timeout is raised to match.
RUN_TIMEOUT_S = 360

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# |  0081_admin                               |     PASSED |   3.021s |
SUMMARY_ROW = re.compile(r"^\|\s*(\d{4}_\w+)\s*\|\s*(\w+)\s*\|\s*[\d.]+s\s*\|\s*(.*)$")
SUBTEST_PASS = re.compile(r"\[ (\w+):\d+(?:: [^\]]*)?: PASS \(")


@dataclass
class RunnerResult:
    returncode: int
    output: str
    states: dict[str, str]  # test name -> PASSED, FAILED, SKIPPED, ...
    failures: dict[str, str]  # test name -> the first failure, as the summary shows it
    subtests_passed: list[str]  # sub-test function names, in order

    def report(self) -> str:
        return f"test-runner exited {self.returncode}; output tail:\n{self.output[-6000:]}"


def parse_output(returncode: int, text: str) -> RunnerResult:
    output = ANSI.sub("", text)
    states: dict[str, str] = {}
    failures: dict[str, str] = {}
    for line in output.splitlines():
        m = SUMMARY_ROW.match(line)
        if m is None:
            continue
        name, state, rest = m.groups()
        states[name] = state
        if rest.strip().strip("|").strip():
            failures[name] = rest.strip().strip("|").strip()
    passed = [m.group(1) for m in SUBTEST_PASS.finditer(output)]
    return RunnerResult(returncode, output, states, failures, passed)


def kafka_path(base: Path) -> Path:
    """A stand-in Kafka install whose bin/kafka-topics.sh runs Kafka's TopicCommand."""
    bin_dir = base / "kafka" / "bin"
    bin_dir.mkdir(parents=True)
    script = bin_dir / "kafka-topics.sh"
    command = shlex.join(java_peer.java_command(java_peer.TOOLS["kafka-topics"]))
    script.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
    script.chmod(0o755)
    return base / "kafka"


def start_suite(
    node: RunningNode, work: Path, tests: str, subtests: str | None = None
) -> subprocess.Popen[str]:
    """The runner started on `tests` (and `subtests`) against `node`; `finish` waits."""
    if not RUNNER.is_file():
        pytest.fail(
            f"librdkafka's test runner is not built ({RUNNER}): scripts/test builds it "
            "before running pytest; run it once, or just tests/librdkafka/build.sh",
            pytrace=False,
        )
    work.mkdir(parents=True, exist_ok=True)
    conf = work / "test.conf"
    conf.write_text(f"bootstrap.servers={node.bootstrap}\n")
    # Not upstream's CI mode (the environment's CI variable, set by CI services): it
    # adds 2 to the timeout multiplier, which stretches every fixed pause as well as
    # every deadline (see -p1 below), so the same run would take twice as long there.
    env = {
        **{k: v for k, v in os.environ.items() if k != "CI"},
        "RDKAFKA_TEST_CONF": str(conf),
        "TESTS": tests,
        "TEST_KAFKA_VERSION": KAFKA_VERSION,
        # kafka-topics.sh from 3.0 on is given --bootstrap-server $BROKERS.
        "KAFKA_PATH": str(kafka_path(work)),
        "BROKERS": node.bootstrap,
    }
    if subtests is not None:
        env["SUBTESTS"] = subtests
    # The full tests, not upstream's quick mode (-Q), which would skip 0077's
    # 1000-messages-per-key and snappy rounds and 0081's consumer-handle round;
    # -E: no sockem socket emulation, nothing here needs it. -p1: one test at a time,
    # as each run selects one; the default (5 at a time) adds 5/3 to the timeout
    # multiplier, and 0081's pauses for a change to propagate (rd_sleep(tmout_multip(2)),
    # eight in DeleteAcls' four rounds) are multiplied too: 5 s each instead of 2, where a
    # single node answers from what it has committed at once. stdout line
    # buffered: the summary table is printf'ed just before the runner's exit check,
    # which aborts when a failed test left its client threads behind, and a pipe's
    # buffer would die with it.
    return subprocess.Popen(
        ["stdbuf", "-oL", str(RUNNER), "-E", "-p1"],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )


def finish(proc: subprocess.Popen[str], work: Path, timeout: float = RUN_TIMEOUT_S) -> RunnerResult:
    """The runner's result once it exits (killed past `timeout`, as subprocess.run does)."""
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    (work / "runner-output.txt").write_text(output)
    return parse_output(proc.returncode, output)


def run_suite(
    node: RunningNode, work: Path, tests: str, subtests: str | None = None
) -> RunnerResult:
    return finish(start_suite(node, work, tests, subtests), work)


@dataclass
class Started:
    proc: subprocess.Popen[str]
    work: Path
    at: float  # monotonic


@pytest.fixture(scope="module", autouse=True)
def compaction_run(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Started | None]:
    """0077 started when this module's tests start, when it is selected: most of its
    ~90 s is its own fixed waits for compaction (20, 30 and 20 s, not scaled by any
    setting), which the other tests here (0081's sub-tests, on the same node or their
    own, on other topics) fill instead of idling. test_0077_compaction, the module's
    last, waits for it and checks it as before."""
    selected = any(
        item.name == "test_0077_compaction" and item.module is request.module
        for item in request.session.items
    )
    if not selected:
        yield None
        return
    node: RunningNode = request.getfixturevalue("session_node")
    work = tmp_path_factory.mktemp("rdkafka-0077")
    started = Started(start_suite(node, work, "0077"), work, time.monotonic())
    try:
        yield started
    finally:
        if started.proc.poll() is None:
            started.proc.kill()
            started.proc.communicate()


class KnownGap(AssertionError):
    """The runner failed only on the zonegate gaps its test is marked with."""


# A failed test's every message, as the runner prints it to stderr:
# ### Test "0081_admin (do_test_AlterConfigs:725)" failed at FILE:LINE:FUNC() at DATE: ###
# MESSAGE
FAILURE = re.compile(r'^### Test "(\w+)(?: \([^"]*\))?" failed at .*###\n(.*)$', re.MULTILINE)
# Failures that only follow from another one: a sub-test's closing count of its
# earlier failures, and a command whose error it printed before exiting non-zero.
CONSEQUENCES = (
    re.compile(r'^Test assertion failed: "!fails": See \d+ previous failure'),
    re.compile(r'^system\(".*/kafka-topics\.sh .*\) failed with exit status 1$'),
)


def assert_passed(
    result: RunnerResult, test: str, subtests: list[str], known_gaps: tuple[str, ...] = ()
) -> None:
    """The test passed, with each named sub-test; or, when `known_gaps` are given, it
    failed on exactly those errors (each one shown, no other failure), which raises
    KnownGap for the test's xfail(raises=KnownGap) to take: any other failure stays
    a failure."""
    state = result.states.get(test)
    if state != "PASSED" and known_gaps:
        messages = [m.group(2) for m in FAILURE.finditer(result.output) if m.group(1) == test]
        unexplained = [
            msg
            for msg in messages
            if not any(gap in msg for gap in known_gaps)
            and not any(c.match(msg) for c in CONSEQUENCES)
        ]
        shown = all(gap in result.output for gap in known_gaps)
        if state == "FAILED" and messages and shown and not unexplained:
            raise KnownGap(f"{test}: {'; '.join(known_gaps)}")
    assert state == "PASSED", f"{test}: {state}: {result.failures.get(test)}\n{result.report()}"
    assert result.returncode == 0, result.report()
    # A sub-test filter that matched nothing would pass vacuously.
    for name in subtests:
        assert name in result.subtests_passed, f"{name} did not run\n{result.report()}"


# A gap these tests once failed on (issue 24), kept as the unit test's sample.
BROKER_CONFIG_REFUSED = (
    "got INVALID_CONFIG (broker config sasl.kerberos.min.time.before.relogin "
    "cannot be changed at run time)"
)


def test_0081_alter_configs(session_node: RunningNode, tmp_path: Path) -> None:
    """AlterConfigs on topics and on a broker (a config Kafka changes at run time)."""
    result = run_suite(session_node, tmp_path, "0081", "do_test_AlterConfigs")
    assert_passed(result, "0081_admin", ["do_test_AlterConfigs"])


def test_0081_incremental_alter_configs(session_node: RunningNode, tmp_path: Path) -> None:
    """IncrementalAlterConfigs on topics, a broker and a KIP-848 group."""
    result = run_suite(session_node, tmp_path, "0081", "do_test_IncrementalAlterConfigs")
    assert_passed(result, "0081_admin", ["do_test_IncrementalAlterConfigs"])


SAMPLE = """\
[0081_admin                  /  1.032s] ConfigResource #1: type BROKER (4), "1"
### Test "0081_admin (do_test_AlterConfigs:725)" failed at 0081-admin.c:882:f() at D: ###
ConfigResource #1: expected NO_ERROR (0), {first}
### Test "0081_admin (do_test_AlterConfigs:725)" failed at 0081-admin.c:891:f() at D: ###
Test assertion failed: "!fails": See 1 previous failure(s)
TEST 20261126004142 (bare, scenario default) SUMMARY
#==================================================================#
| <MAIN>                                   |     PASSED |   1.208s |
| 0081_admin                               |     FAILED |   1.207s | do_test_AlterConfigs:725: x |
#==================================================================#
### Test "<MAIN>" failed at test.c:1950:test_wait_exit() at D: ###
3 thread(s) still active in librdkafka
"""


@pytest.mark.unit
def test_only_the_known_gap_counts_as_one() -> None:
    """The xfail marks above take KnownGap only: a failure on anything else (here a
    different error for the same resource) is reported as a failure."""
    known = parse_output(-6, SAMPLE.format(first=BROKER_CONFIG_REFUSED))
    assert known.states == {"0081_admin": "FAILED"}
    with pytest.raises(KnownGap):
        assert_passed(known, "0081_admin", ["do_test_AlterConfigs"], (BROKER_CONFIG_REFUSED,))
    other = parse_output(-6, SAMPLE.format(first="got UNKNOWN_SERVER_ERROR (boom)"))
    with pytest.raises(AssertionError) as caught:
        assert_passed(other, "0081_admin", ["do_test_AlterConfigs"], (BROKER_CONFIG_REFUSED,))
    assert not isinstance(caught.value, KnownGap)
    passed = parse_output(
        0,
        "[ do_test_AlterConfigs:725: PASS (0.05s) ]\n"
        "| 0081_admin                               |     PASSED |   1.207s |\n",
    )
    assert_passed(passed, "0081_admin", ["do_test_AlterConfigs"])


@pytest.mark.parametrize("subtest", ["do_test_DescribeTopics", "do_test_DescribeCluster"])
def test_0081_authorized_operations(
    session_node: RunningNode, tmp_path: Path, subtest: str
) -> None:
    """DescribeTopics and DescribeCluster, also with authorized operations asked: with no
    authorizer every operation (8 for a topic, 7 for the cluster), as Kafka answers."""
    result = run_suite(session_node, tmp_path, "0081", subtest)
    assert_passed(result, "0081_admin", [subtest])


@pytest.mark.parametrize(
    "subtest", ["do_test_CreateAcls", "do_test_DescribeAcls", "do_test_DeleteAcls"]
)
def test_0081_acls(node_factory: NodeFactory, tmp_path: Path, subtest: str) -> None:
    """CreateAcls, DescribeAcls and DeleteAcls (each at two request versions) against a
    node with Kafka's authorizer on; the runner connects without authentication, so its
    principal, User:ANONYMOUS, is the super user."""
    node = node_factory(
        [
            "--zones",
            "zone-a",
            "--authorizer-class-name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "--super-users",
            "User:ANONYMOUS",
        ]
    )
    result = run_suite(node, tmp_path, "0081", subtest)
    assert_passed(result, "0081_admin", [subtest])


TXN_SUBTESTS = [
    "do_test_misuse_txn",
    "do_test_basic_producer_txn",
    "do_test_consumer_producer_txn",
    "do_test_fenced_txn",
    "do_test_fatal_idempo_error_without_kip360",
    "do_test_empty_txn",
    "do_test_wmark_isolation_level",
    "do_test_txn_abort_control_message_leader_epoch",
]


def test_0103_transactions(session_node: RunningNode, tmp_path: Path) -> None:
    """librdkafka's transaction tests: misuse, basic commit and abort (with and without
    compression), consume-transform-produce with offsets, fencing, empty transactions,
    watermarks by isolation level, an abort marker's leader epoch."""
    result = run_suite(session_node, tmp_path, "0103")
    assert_passed(result, "0103_transactions", TXN_SUBTESTS)
    assert result.subtests_passed.count("do_test_empty_txn") == 4, result.report()


def test_0129_fetch_aborted_msgs(session_node: RunningNode, tmp_path: Path) -> None:
    """An aborted transaction of 1000 messages, then a read_committed consumer that must
    skip them all and reach the end (KIP-98's aborted transactions in Fetch)."""
    result = run_suite(session_node, tmp_path, "0129")
    assert_passed(result, "0129_fetch_aborted_msgs", [])


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_0077_compaction(compaction_run: Started | None) -> None:
    """`kafka-topics --create ... --config file.delete.delay.ms=10000`, then compaction.
    Run while the tests above ran (`compaction_run`); this one, last, waits for it."""
    assert compaction_run is not None
    left = RUN_TIMEOUT_S - (time.monotonic() - compaction_run.at)
    result = finish(compaction_run.proc, compaction_run.work, max(left, 1.0))
    assert_passed(result, "0077_compaction", [])
    # Its three rounds: 10 and 1000 messages per key uncompressed, 10 with snappy.
    assert result.output.count("Compaction test with no compression: PASS") == 2, result.report()
    assert "Compaction test with snappy compression: PASS" in result.output, result.report()
