"""The transaction coordinator role: the shards of transactional ids this node owns, their
persistence, timers and markers, over the pure core in transactions/
(docs/transactions.md)."""
