"""The broker configs AlterConfigs may change at run time, checked with Kafka's rules.

Kafka lets a broker resource (a broker id, or "" for the cluster's defaults)
change the configs of DynamicBrokerConfig's reconfigurable sets: the topic
configs' defaults under their broker names (`log.retention.ms`...: see
topic_configs.py), and the broker's own (`num.io.threads`, `message.max.bytes`,
`sasl.kerberos.min.time.before.relogin`, `ssl.*`...). Those configs are checked
here with Kafka's types and ranges and stored by the catalog per scope, the
topic defaults under their topic names, the others under their own. The leaders
honour `producer.id.expiration.ms` and `transaction.partition.verification.enable`
(services/leader_txn_settings.py); a config zonegate has no use for is kept and shown
with no effect (docs/compatibility.md).

Kafka's answers are followed, all INVALID_REQUEST on a broker resource: a
config of a single broker named for the cluster's defaults, a static config
("Cannot update these configs dynamically"), a bad value. A name Kafka does not
know is accepted and shown as sensitive (Kafka cannot tell it is not a
plugin's secret), as Kafka does.
"""

from __future__ import annotations

from zonegate.services.config_defs import (
    ConfigDef,
    InvalidConfig,
    boolean,
    list_,
    long,
    password,
    string,
)
from zonegate.services.kafka_static_configs import STATIC_BROKER_NAMES
from zonegate.services.topic_configs import (
    BROKER_DEFAULT_NAMES,
    TOPIC_CONFIGS,
    TOPIC_NAME_OF_DEFAULT,
)

LONG_MAX_TEXT = "9223372036854775807"


class InvalidBrokerConfig(InvalidConfig):
    """A refused broker config: Kafka answers INVALID_REQUEST, not INVALID_CONFIG, on a
    broker resource."""


def _int(default: str, lo: int | None = None) -> ConfigDef:
    return ConfigDef("INT", default, lo)


# DynamicBrokerConfig's reconfigurable configs of Kafka 4.3 other than the topic
# defaults, with Kafka's types, defaults and validators. PER_BROKER: those Kafka
# lets only a broker id set (listeners and security), never the cluster default.
DYNAMIC_BROKER_CONFIGS: dict[str, ConfigDef] = {
    "background.threads": _int("10", 1),
    "config.providers": list_(""),
    "cordoned.log.dirs": list_(""),
    "follower.fetch.last.tiered.offset.enable": boolean("false"),
    "follower.replication.throttled.rate": long(LONG_MAX_TEXT, 0),
    "group.consumer.assignment.interval.ms": _int("1000", 0),
    "group.coordinator.cached.buffer.max.bytes": _int("1048588", 524288),
    "group.share.assignment.interval.ms": _int("1000", 0),
    "group.streams.assignment.interval.ms": _int("1000", 0),
    "leader.replication.throttled.rate": long(LONG_MAX_TEXT, 0),
    "listener.security.protocol.map": string(
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"
    ),
    "listeners": list_("PLAINTEXT://:9092"),
    "log.cleaner.backoff.ms": long("15000", 0),
    "log.cleaner.dedupe.buffer.size": long("134217728"),
    "log.cleaner.io.buffer.load.factor": ConfigDef("DOUBLE", "0.9"),
    "log.cleaner.io.buffer.size": _int("524288", 0),
    "log.cleaner.io.max.bytes.per.second": ConfigDef("DOUBLE", "1.7976931348623157E308"),
    "log.cleaner.threads": _int("1", 0),
    "max.connection.creation.rate": _int("2147483647", 0),
    "max.connections": _int("2147483647", 0),
    "max.connections.per.ip": _int("2147483647", 0),
    "max.connections.per.ip.overrides": string(""),
    "metric.reporters": list_("org.apache.kafka.common.metrics.JmxReporter"),
    "num.io.threads": _int("8", 1),
    "num.network.threads": _int("3", 1),
    "num.recovery.threads.per.data.dir": _int("2", 1),
    "num.replica.fetchers": _int("1", 1),
    "principal.builder.class": ConfigDef(
        "CLASS", "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"
    ),
    "producer.id.expiration.ms": _int("86400000", 1),
    "remote.fetch.max.wait.ms": _int("500", 1),
    "remote.list.offsets.request.timeout.ms": long("30000", 1),
    "remote.log.index.file.cache.total.size.bytes": long("1073741824", 1),
    "remote.log.manager.copier.thread.pool.size": _int("10", 1),
    "remote.log.manager.copy.max.bytes.per.second": long(LONG_MAX_TEXT, 1),
    "remote.log.manager.expiration.thread.pool.size": _int("10", 1),
    "remote.log.manager.fetch.max.bytes.per.second": long(LONG_MAX_TEXT, 1),
    "remote.log.manager.follower.thread.pool.size": _int("2", 1),
    "remote.log.reader.threads": _int("10", 1),
    "replica.alter.log.dirs.io.max.bytes.per.second": long(LONG_MAX_TEXT, 0),
    "sasl.enabled.mechanisms": list_("GSSAPI"),
    "sasl.jaas.config": password(),
    "sasl.kerberos.kinit.cmd": string("/usr/bin/kinit"),
    "sasl.kerberos.min.time.before.relogin": long("60000"),
    "sasl.kerberos.principal.to.local.rules": list_("DEFAULT"),
    "sasl.kerberos.service.name": string(None),
    "sasl.kerberos.ticket.renew.jitter": ConfigDef("DOUBLE", "0.05"),
    "sasl.kerberos.ticket.renew.window.factor": ConfigDef("DOUBLE", "0.8"),
    "sasl.login.refresh.buffer.seconds": ConfigDef("SHORT", "300"),
    "sasl.login.refresh.min.period.seconds": ConfigDef("SHORT", "60"),
    "sasl.login.refresh.window.factor": ConfigDef("DOUBLE", "0.8"),
    "sasl.login.refresh.window.jitter": ConfigDef("DOUBLE", "0.05"),
    "sasl.mechanism.inter.broker.protocol": string("GSSAPI"),
    "share.coordinator.cached.buffer.max.bytes": _int("1048588", 524288),
    "ssl.cipher.suites": list_(""),
    "ssl.client.auth": string("none", ("required", "requested", "none")),
    "ssl.enabled.protocols": list_("TLSv1.2,TLSv1.3"),
    "ssl.endpoint.identification.algorithm": string("https"),
    "ssl.engine.factory.class": ConfigDef("CLASS", None),
    "ssl.key.password": password(),
    "ssl.keymanager.algorithm": string("SunX509"),
    "ssl.keystore.certificate.chain": password(),
    "ssl.keystore.key": password(),
    "ssl.keystore.location": string(None),
    "ssl.keystore.password": password(),
    "ssl.keystore.type": string("JKS"),
    "ssl.protocol": string("TLSv1.3"),
    "ssl.provider": string(None),
    "ssl.secure.random.implementation": string(None),
    "ssl.trustmanager.algorithm": string("PKIX"),
    "ssl.truststore.certificates": password(),
    "ssl.truststore.location": string(None),
    "ssl.truststore.password": password(),
    "ssl.truststore.type": string("JKS"),
    "transaction.partition.verification.enable": boolean("true"),
}
PER_BROKER = frozenset(
    n
    for n in DYNAMIC_BROKER_CONFIGS
    if n.startswith(("ssl.", "sasl.", "listener"))
    or n in ("cordoned.log.dirs", "principal.builder.class")
)
# Kafka's DYNAMIC_SECURITY_CONFIGS: only per listener (listener.name.x.ssl...).
PER_LISTENER = frozenset(
    {
        "ssl.key.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.type",
        "ssl.truststore.certificates",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.type",
    }
)


def broker_config_def(name: str) -> ConfigDef | None:
    """Kafka's definition of a broker config that may change at run time."""
    topic_name = TOPIC_NAME_OF_DEFAULT.get(name)
    if topic_name is not None:
        return TOPIC_CONFIGS[topic_name]
    return DYNAMIC_BROKER_CONFIGS.get(name)


def stored_name(name: str) -> str:
    """The name a broker config is stored under: a topic default's topic name."""
    return TOPIC_NAME_OF_DEFAULT.get(name, name)


def shown_name(stored: str) -> str:
    """The broker name of a stored config (inverse of `stored_name`)."""
    return BROKER_DEFAULT_NAMES.get(stored, stored)


def validate_broker_configs(
    configs: dict[str, str | None], *, cluster_default: bool
) -> dict[str, str | None]:
    """The changes by stored name (None: removed), or InvalidBrokerConfig with Kafka's
    message for the first refused one."""
    if cluster_default:
        per_broker = sorted(n for n in configs if n in PER_BROKER)
        if per_broker:
            raise InvalidBrokerConfig(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: [{', '.join(per_broker)}]"
            )
    static = sorted(n for n in configs if n in STATIC_BROKER_NAMES)
    if static:
        raise InvalidBrokerConfig(f"Cannot update these configs dynamically: [{', '.join(static)}]")
    listener_only = sorted(n for n in configs if n in PER_LISTENER)
    if listener_only:
        raise InvalidBrokerConfig(
            "These security configs can be dynamically updated only per-listener using the "
            "listener prefix: "
            f"[{', '.join(listener_only)}]"
        )
    out: dict[str, str | None] = {}
    for name, value in configs.items():
        defn = broker_config_def(name)
        if value is not None and defn is not None:
            try:
                defn.check(name, value)
            except InvalidConfig as exc:
                raise InvalidBrokerConfig(str(exc)) from None
        out[stored_name(name)] = value
    return out
