"""The storage layer: object stores and their backends, partitions' streams, reading them.

- `objects`: the one object-store protocol; `store_url.open_object_store(url)`
  picks the backend (`local_store`, `s3_store`) and wraps it in `instrumented`
  (retries, timeouts, counters, fault injection).
- `index`: index entries, a partition's `StreamIndex` and its lookups, and the
  `StreamStore` protocol the metadata store implements.
- `log_cache` and `reader`: serving reads from recently written objects, then
  ranged GETs, bounded per read.
"""
