"""The storage core's background work: retention, compaction, key-based cleaning, object GC.

Each job is a pure policy (what to expire, rewrite, clean or delete, given the
state and the time) and an executor doing the I/O. The leader's fenced
changes (leader_forwarder/log_changes.py) and storage's pure formats
(storage/segments.py, stream_objects.py, cleaner.py) are below; the catalog's
topic configs reach it through the `TopicCatalog` protocol (targets.py).
jobs.py builds and schedules them for a node. docs/storage.md has the design.
"""
