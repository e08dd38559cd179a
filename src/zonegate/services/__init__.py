"""The narrow services the Kafka handlers call: cluster view, topics, the write path, the
read path, groups. Handlers see only `api`; the rest implements it over the lower layers."""
