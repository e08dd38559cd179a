"""The DaemonSet's node identity: the zone label read from an API server (a local HTTP
server answering as one), the id from the machine's address."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from zonegate.broker.k8s_node import NodeIdentityError, node_id_from_ip, zone_from_node_label

pytestmark = pytest.mark.integration  # a loopback HTTP server

NODES = {
    "ip-10-0-1-7": {"metadata": {"labels": {"topology.kubernetes.io/zone": "eu-west-1a"}}},
    "unlabelled": {"metadata": {"labels": {}}},
}


class _Api(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        name = self.path.removeprefix("/api/v1/nodes/")
        if name == "forbidden":
            self.send_response(403)
            self.end_headers()
            return
        body = json.dumps(NODES[name]).encode() if name in NODES else b"{}"
        self.send_response(200 if name in NODES else 404)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_zone_is_the_machines_label(api: str) -> None:
    assert zone_from_node_label("ip-10-0-1-7", api) == "eu-west-1a"
    with pytest.raises(NodeIdentityError, match="has no topology.kubernetes.io/zone label"):
        zone_from_node_label("unlabelled", api)
    with pytest.raises(NodeIdentityError, match="needs get on nodes"):
        zone_from_node_label("forbidden", api)
    with pytest.raises(NodeIdentityError, match="HTTP 404"):
        zone_from_node_label("nope", api)


def test_the_node_id_is_the_machines_address() -> None:
    assert node_id_from_ip("from-ip:10.0.1.7") == (10 << 24) + (1 << 8) + 7
    assert node_id_from_ip("from-ip:10.0.1.8") != node_id_from_ip("from-ip:10.0.1.7")
    assert 0 < node_id_from_ip("from-ip:fd00::1") < 1 << 31
    assert node_id_from_ip("from-ip:192.168.255.254") < 1 << 31, "a Kafka broker id"
    with pytest.raises(NodeIdentityError, match="not an IP address"):
        node_id_from_ip("from-ip:machine-7")
