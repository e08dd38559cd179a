"""Object stores (local directory, S3) behind one protocol, and the WAL written to them.

`object_store.open_object_store(url)` picks the backend and wraps it in the one
retry/metrics/fault layer; `wal_writer.WalWriter` mixes produce data into WAL
objects whose layout `wal_format` defines (docs/wal-format.md).
"""
