"""The write-ahead log: produce data of all partitions mixed into WAL objects.

`wal_writer.WalWriter` seals WAL objects by size or age and uploads each with
one PUT through the storage layer's object store (storage/objects.py);
`wal_format` defines their layout (docs/wal-format.md).
"""
