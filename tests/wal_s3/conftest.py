"""The WAL tests use the storage tests' S3 fixtures (a moto S3 server over HTTP)."""

from tests.storage.conftest import s3_bucket, s3_endpoint, s3_server

__all__ = ["s3_bucket", "s3_endpoint", "s3_server"]
