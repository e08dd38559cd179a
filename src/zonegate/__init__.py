"""zonegate: a Kafka-compatible broker whose producers never pay for cross-zone traffic."""

__version__ = "0.1.0"
