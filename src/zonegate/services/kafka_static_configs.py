"""The names of Apache Kafka 4.x's broker configs that cannot change at run time.

Kafka refuses them in AlterConfigs on a broker resource ("Cannot update these
configs dynamically"), where a name it does not know at all is accepted (a
plugin's own config). Listed from Kafka 4.3's KafkaConfig, less the names of
DynamicBrokerConfig's reconfigurable sets (services/broker_configs.py).
"""

from __future__ import annotations

STATIC_BROKER_NAMES = frozenset(
    """
    add.partitions.to.txn.retry.backoff.max.ms add.partitions.to.txn.retry.backoff.ms
    advertised.listeners alter.config.policy.class.name
    alter.log.dirs.replication.quota.window.num
    alter.log.dirs.replication.quota.window.size.seconds authorizer.class.name
    auto.create.topics.enable auto.leader.rebalance.enable broker.heartbeat.interval.ms
    broker.id broker.rack broker.session.timeout.ms client.quota.callback.class
    connection.failed.authentication.delay.ms connections.max.idle.ms
    connections.max.reauth.ms controlled.shutdown.enable controller.listener.names
    controller.performance.always.log.threshold.ms controller.performance.sample.period.ms
    controller.quorum.append.linger.ms controller.quorum.auto.join.enable
    controller.quorum.bootstrap.servers controller.quorum.election.backoff.max.ms
    controller.quorum.election.timeout.ms controller.quorum.fetch.max.bytes
    controller.quorum.fetch.snapshot.max.bytes controller.quorum.fetch.timeout.ms
    controller.quorum.request.timeout.ms controller.quorum.retry.backoff.ms
    controller.quorum.voters controller.quota.window.num
    controller.quota.window.size.seconds controller.socket.timeout.ms
    create.topic.policy.class.name default.replication.factor
    delegation.token.expiry.check.interval.ms delegation.token.expiry.time.ms
    delegation.token.max.lifetime.ms delegation.token.secret.key
    delete.records.purgatory.purge.interval.requests delete.topic.enable
    early.start.listeners fetch.max.bytes fetch.purgatory.purge.interval.requests
    group.consumer.assignors group.consumer.heartbeat.interval.ms
    group.consumer.max.assignment.interval.ms group.consumer.max.heartbeat.interval.ms
    group.consumer.max.session.timeout.ms group.consumer.max.size
    group.consumer.migration.policy group.consumer.min.assignment.interval.ms
    group.consumer.min.heartbeat.interval.ms group.consumer.min.session.timeout.ms
    group.consumer.regex.refresh.interval.ms group.consumer.session.timeout.ms
    group.coordinator.append.linger.ms group.coordinator.background.threads
    group.coordinator.rebalance.protocols group.coordinator.threads
    group.initial.rebalance.delay.ms group.max.session.timeout.ms group.max.size
    group.min.session.timeout.ms group.share.assignors group.share.delivery.count.limit
    group.share.heartbeat.interval.ms group.share.initialize.retry.interval.ms
    group.share.max.assignment.interval.ms group.share.max.delivery.count.limit
    group.share.max.heartbeat.interval.ms group.share.max.partition.max.record.locks
    group.share.max.record.lock.duration.ms group.share.max.session.timeout.ms
    group.share.max.share.sessions group.share.max.size
    group.share.min.assignment.interval.ms group.share.min.delivery.count.limit
    group.share.min.heartbeat.interval.ms group.share.min.partition.max.record.locks
    group.share.min.record.lock.duration.ms group.share.min.session.timeout.ms
    group.share.partition.max.record.locks group.share.persister.class.name
    group.share.record.lock.duration.ms group.share.session.timeout.ms
    group.streams.heartbeat.interval.ms group.streams.initial.rebalance.delay.ms
    group.streams.max.assignment.interval.ms group.streams.max.heartbeat.interval.ms
    group.streams.max.session.timeout.ms group.streams.max.size
    group.streams.max.standby.replicas group.streams.min.assignment.interval.ms
    group.streams.min.heartbeat.interval.ms group.streams.min.session.timeout.ms
    group.streams.num.standby.replicas group.streams.session.timeout.ms
    initial.broker.registration.timeout.ms inter.broker.listener.name
    internal.metadata.delete.delay.millis internal.metadata.log.segment.bytes
    internal.metadata.max.batch.size.in.bytes kafka.metrics.polling.interval.secs
    kafka.metrics.reporters leader.imbalance.check.interval.seconds log.cleaner.enable
    log.dir log.dir.failure.timeout.ms log.dirs log.flush.offset.checkpoint.interval.ms
    log.flush.scheduler.interval.ms log.flush.start.offset.checkpoint.interval.ms
    log.initial.task.delay.ms log.retention.check.interval.ms log.retention.hours
    log.retention.minutes log.roll.hours log.roll.jitter.hours
    max.incremental.fetch.session.cache.slots max.request.partition.size.limit
    metadata.log.dir metadata.log.max.record.bytes.between.snapshots
    metadata.log.max.snapshot.interval.ms metadata.log.segment.bytes metadata.log.segment.ms
    metadata.max.idle.interval.ms metadata.max.retention.bytes metadata.max.retention.ms
    metrics.num.samples metrics.recording.level metrics.sample.window.ms node.id
    num.partitions num.replica.alter.log.dirs.threads offset.metadata.max.bytes
    offsets.commit.timeout.ms offsets.load.buffer.size offsets.retention.check.interval.ms
    offsets.retention.minutes offsets.topic.compression.codec offsets.topic.num.partitions
    offsets.topic.replication.factor offsets.topic.segment.bytes process.roles
    producer.id.expiration.check.interval.ms producer.purgatory.purge.interval.requests
    queued.max.request.bytes queued.max.requests quota.window.num quota.window.size.seconds
    remote.log.index.file.cache.ttl.ms remote.log.manager.copy.quota.window.num
    remote.log.manager.copy.quota.window.size.seconds
    remote.log.manager.fetch.quota.window.num
    remote.log.manager.fetch.quota.window.size.seconds remote.log.manager.task.interval.ms
    remote.log.manager.task.retry.backoff.max.ms remote.log.manager.task.retry.backoff.ms
    remote.log.manager.task.retry.jitter remote.log.manager.thread.pool.size
    remote.log.metadata.custom.metadata.max.bytes remote.log.metadata.manager.class.name
    remote.log.metadata.manager.class.path remote.log.metadata.manager.impl.prefix
    remote.log.metadata.manager.listener.name remote.log.reader.max.pending.tasks
    remote.log.storage.manager.class.name remote.log.storage.manager.class.path
    remote.log.storage.manager.impl.prefix remote.log.storage.system.enable
    replica.fetch.backoff.ms replica.fetch.max.bytes replica.fetch.min.bytes
    replica.fetch.response.max.bytes replica.fetch.wait.max.ms
    replica.high.watermark.checkpoint.interval.ms replica.lag.time.max.ms
    replica.selector.class replica.socket.receive.buffer.bytes replica.socket.timeout.ms
    replication.quota.window.num replication.quota.window.size.seconds request.timeout.ms
    sasl.client.callback.handler.class sasl.login.callback.handler.class sasl.login.class
    sasl.login.connect.timeout.ms sasl.login.read.timeout.ms sasl.login.retry.backoff.max.ms
    sasl.login.retry.backoff.ms sasl.mechanism.controller.protocol
    sasl.oauthbearer.assertion.algorithm sasl.oauthbearer.assertion.claim.aud
    sasl.oauthbearer.assertion.claim.exp.seconds sasl.oauthbearer.assertion.claim.iss
    sasl.oauthbearer.assertion.claim.jti.include
    sasl.oauthbearer.assertion.claim.nbf.seconds sasl.oauthbearer.assertion.claim.sub
    sasl.oauthbearer.assertion.file sasl.oauthbearer.assertion.private.key.file
    sasl.oauthbearer.assertion.private.key.passphrase
    sasl.oauthbearer.assertion.template.file sasl.oauthbearer.client.credentials.client.id
    sasl.oauthbearer.client.credentials.client.secret sasl.oauthbearer.clock.skew.seconds
    sasl.oauthbearer.expected.audience sasl.oauthbearer.expected.issuer
    sasl.oauthbearer.jwks.endpoint.refresh.ms
    sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms
    sasl.oauthbearer.jwks.endpoint.retry.backoff.ms sasl.oauthbearer.jwks.endpoint.url
    sasl.oauthbearer.jwt.retriever.class sasl.oauthbearer.jwt.validator.class
    sasl.oauthbearer.scope sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name
    sasl.oauthbearer.token.endpoint.url sasl.server.callback.handler.class
    sasl.server.max.receive.size security.inter.broker.protocol security.providers
    server.max.startup.time.ms share.coordinator.append.linger.ms
    share.coordinator.cold.partition.snapshot.interval.ms share.coordinator.load.buffer.size
    share.coordinator.snapshot.update.records.per.snapshot
    share.coordinator.state.topic.compression.codec share.coordinator.state.topic.min.isr
    share.coordinator.state.topic.num.partitions
    share.coordinator.state.topic.prune.interval.ms
    share.coordinator.state.topic.replication.factor
    share.coordinator.state.topic.segment.bytes share.coordinator.threads
    share.coordinator.write.timeout.ms share.fetch.purgatory.purge.interval.requests
    socket.connection.setup.timeout.max.ms socket.connection.setup.timeout.ms
    socket.listen.backlog.size socket.receive.buffer.bytes socket.request.max.bytes
    socket.send.buffer.bytes ssl.allow.dn.changes ssl.allow.san.changes
    ssl.principal.mapping.rules telemetry.max.bytes
    transaction.abort.timed.out.transaction.cleanup.interval.ms transaction.max.timeout.ms
    transaction.remove.expired.transaction.cleanup.interval.ms
    transaction.state.log.load.buffer.size transaction.state.log.min.isr
    transaction.state.log.num.partitions transaction.state.log.replication.factor
    transaction.state.log.segment.bytes transaction.two.phase.commit.enable
    transactional.id.expiration.ms unclean.leader.election.interval.ms
    unstable.api.versions.enable unstable.feature.versions.enable
    """.split()
)
