"""A node's identity from the Kubernetes machine it runs on, for the DaemonSet.

- Zone: `--zone from-node-label` reads the `topology.kubernetes.io/zone` label
  of the machine (`NODE_NAME`, given by the downward API's `spec.nodeName`)
  from the API server, with the pod's service account. That account needs
  one permission: `get` on `nodes` (a ClusterRole, since nodes are not
  namespaced; deploy/base/rbac.yaml). It cannot list or watch nodes, nor
  read anything else.
- Node id: `--node-id from-ip:ADDRESS` makes the id from the machine's address
  (the downward API's `status.hostIP`): its low 31 bits, since Kafka's broker
  ids are 32-bit signed. The machines of one cluster share a private network
  (10/8, 172.16/12, 192.168/16 or an IPv6 /64), whose addresses differ in
  those bits, so the id is unique among them and the same each time the pod
  restarts on that machine, with no permission at all.
"""

from __future__ import annotations

import ipaddress
import json
import os
import ssl
import urllib.error
import urllib.request
from pathlib import Path

ZONE_LABEL = "topology.kubernetes.io/zone"
MAX_NODE_ID = (1 << 31) - 1  # Kafka's broker ids (and the WAL format's) are int32
FROM_NODE_LABEL = "from-node-label"
_SA = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class NodeIdentityError(Exception):
    """What is missing to tell the zone or id; the message says what to fix."""


def node_id_from_ip(text: str) -> int:
    """`from-ip:10.0.3.7` -> 167773959: the address's low 31 bits."""
    address = text.removeprefix("from-ip:")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise NodeIdentityError(f"{address!r} is not an IP address") from None
    return int(ip) & MAX_NODE_ID


def zone_from_node_label(
    node_name: str | None = None, api: str | None = None, timeout_s: float = 10.0
) -> str:
    """The machine's zone label, asked of the API server (`api`: its URL, default the
    in-cluster one from KUBERNETES_SERVICE_HOST/PORT)."""
    name = node_name or os.environ.get("NODE_NAME")
    if not name:
        raise NodeIdentityError(
            "--zone from-node-label needs NODE_NAME (the downward API's spec.nodeName)"
        )
    if api is None:
        host = os.environ.get("KUBERNETES_SERVICE_HOST")
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if not host:
            raise NodeIdentityError("--zone from-node-label runs only inside Kubernetes")
        api = f"https://{host}:{port}"
    request = urllib.request.Request(f"{api}/api/v1/nodes/{name}")
    context = None
    token = _SA / "token"
    if token.exists():
        request.add_header("Authorization", f"Bearer {token.read_text().strip()}")
    if api.startswith("https://"):
        context = ssl.create_default_context(cafile=str(_SA / "ca.crt"))
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as answer:
            node = json.load(answer)
    except urllib.error.HTTPError as exc:
        hint = " (the service account needs get on nodes)" if exc.code == 403 else ""
        raise NodeIdentityError(f"reading node {name}: HTTP {exc.code}{hint}") from None
    except (OSError, ValueError) as exc:
        raise NodeIdentityError(f"reading node {name}: {exc}") from None
    zone = node.get("metadata", {}).get("labels", {}).get(ZONE_LABEL)
    if not zone:
        raise NodeIdentityError(f"node {name} has no {ZONE_LABEL} label")
    return str(zone)
