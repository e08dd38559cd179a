"""Kafka transactions, the pure core: the coordinator's state machine and the partition rules.

Nothing here does I/O or keeps time of its own: times come in as arguments,
decisions go out as values. The coordinator role (persistence, timers, markers
sent through the leader contract) and the leader's use of the partition rules
are built on top; docs/transactions.md has the design.
"""
