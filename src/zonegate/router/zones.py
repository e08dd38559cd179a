"""Which zone a Kafka client is in, in the order docs/architecture.md gives.

1. a zone tag in `client.id`: `zonegate_az=Z`, and for clients configured for
   other zone-aware brokers `automq_az=`, `ws_az=`/`warpstream_az=`, `zone=`;
2. a configured CIDR -> zone map of source addresses (most specific wins);
3. the zone of the node the client connected to.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass

ZONE_TAGS = ("zonegate_az", "automq_az", "warpstream_az", "ws_az", "zone")
# A tag may stand anywhere in client.id after a non-word character ("app,zonegate_az=a",
# "ck-zonegate_az=a"); "zone=" must not match inside "my_zone=".
_TAG = re.compile(r"(?:^|[^A-Za-z0-9_])(" + "|".join(ZONE_TAGS) + r")=([A-Za-z0-9._-]+)")


def zone_from_client_id(client_id: str | None) -> str | None:
    if not client_id:
        return None
    m = _TAG.search(client_id)
    return m.group(2) if m else None


@dataclass(frozen=True)
class ZoneResolver:
    node_zone: str
    cidrs: tuple[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str], ...] = ()

    @classmethod
    def from_map(cls, node_zone: str, cidr_map: Mapping[str, str]) -> ZoneResolver:
        """`cidr_map` maps CIDRs ("10.0.1.0/24") to zones; a bad CIDR raises ValueError."""
        nets = []
        for cidr, zone in cidr_map.items():
            try:
                nets.append((ipaddress.ip_network(cidr, strict=False), zone))
            except ValueError:
                raise ValueError(f"bad CIDR in the zone map: {cidr!r}") from None
        nets.sort(key=lambda nz: nz[0].prefixlen, reverse=True)
        return cls(node_zone, tuple(nets))

    def resolve(self, client_id: str | None, host: str) -> str:
        tagged = zone_from_client_id(client_id)
        if tagged:
            return tagged
        if self.cidrs:
            try:
                addr = ipaddress.ip_address(host)
            except ValueError:
                addr = None
            if addr is not None:
                for net, zone in self.cidrs:
                    if addr.version == net.version and addr in net:
                        return zone
        return self.node_zone


def parse_cidr_map(spec: str) -> dict[str, str]:
    """`10.0.1.0/24=zone-a,10.0.2.0/24=zone-b` -> {cidr: zone}."""
    out: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        cidr, sep, zone = item.partition("=")
        if not sep or not zone:
            raise ValueError(f"bad zone map item {item!r}: expected CIDR=ZONE")
        out[cidr.strip()] = zone.strip()
    return out
