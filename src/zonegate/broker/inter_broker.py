"""Kafka's inter-broker settings, checked as Kafka checks them, kept to be shown, with
no effect: zonegate nodes do not speak Kafka to each other (they call each other
over the leader RPC, secured by zonegate.rpc.ssl.*, docs/internode-tls.md).

A Kafka operator's server.properties carries `inter.broker.listener.name` or
`security.inter.broker.protocol`, `sasl.mechanism.inter.broker.protocol` and
`ssl.endpoint.identification.algorithm` (also per listener); they work as they
are. Their values are refused as KafkaConfig refuses them (both of the first two
set, a listener that does not exist, a protocol that is not one, an inter-broker
SASL mechanism the listener does not enable), so a file that starts zonegate also
starts Kafka. `shown` is what DescribeConfigs of the broker shows of them.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

LISTENER_NAME = "inter.broker.listener.name"
PROTOCOL = "security.inter.broker.protocol"
MECHANISM = "sasl.mechanism.inter.broker.protocol"
ENDPOINT_IDENTIFICATION = "ssl.endpoint.identification.algorithm"
DEFAULT_MECHANISM = "GSSAPI"  # Kafka's sasl.mechanism.inter.broker.protocol


class InterBrokerSettingsError(ValueError):
    """An inter-broker setting Kafka would refuse; the message is Kafka's."""


def check(
    args: argparse.Namespace,
    listeners: Sequence[tuple[str, str]],
    mechanisms_of: dict[str, tuple[str, ...]],
) -> None:
    """KafkaConfig's checks of the inter-broker settings against the listeners
    ((name, protocol) in order) and each SASL listener's enabled mechanisms. Only what
    is set is checked: left unset, Kafka's default (the PLAINTEXT listener) would name
    a listener a zonegate node need not have, and has no use here."""
    name: str | None = args.inter_broker_listener_name
    protocol: str | None = args.security_inter_broker_protocol
    if name is not None and protocol is not None:
        raise InterBrokerSettingsError(f"Only one of {LISTENER_NAME} and {PROTOCOL} should be set.")
    protocols = dict(listeners)
    if name is not None:
        listener = name.strip().upper()
        if listener not in protocols:
            raise InterBrokerSettingsError(
                f"Listener with name {listener} defined in {LISTENER_NAME} not found in "
                "listener.security.protocol.map."
            )
    elif protocol is not None:
        listener = protocol  # ListenerName.forSecurityProtocol
    else:
        return
    if listener not in protocols:
        raise InterBrokerSettingsError(
            f"{LISTENER_NAME} must be a listener name defined in advertised.listeners. The "
            "valid options based on currently configured listeners are "
            + ",".join(n for n, _ in listeners)
        )
    if protocols[listener] in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = args.sasl_mechanism_inter_broker_protocol or DEFAULT_MECHANISM
        if mechanism not in mechanisms_of.get(listener, ()):
            raise InterBrokerSettingsError(
                f"{MECHANISM} must be included in sasl.enabled.mechanisms when SASL is used "
                "for inter-broker communication"
            )


def shown(args: argparse.Namespace, overrides: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The ones set, under their Kafka names, for DescribeConfigs of the broker
    (STATIC_BROKER_CONFIG): the top-level four and the listener-prefixed
    ssl.endpoint.identification.algorithm lines."""
    values = {
        LISTENER_NAME: args.inter_broker_listener_name,
        PROTOCOL: args.security_inter_broker_protocol,
        MECHANISM: args.sasl_mechanism_inter_broker_protocol,
        ENDPOINT_IDENTIFICATION: args.ssl_endpoint_identification_algorithm,
    }
    out = {k: v for k, v in values.items() if v is not None}
    if LISTENER_NAME in out:
        out[LISTENER_NAME] = out[LISTENER_NAME].upper()
    for key, value in overrides:
        if key.endswith("." + ENDPOINT_IDENTIFICATION):
            out[key] = value
    return out
