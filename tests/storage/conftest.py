"""Fixtures for object-store tests: a moto S3 server over HTTP for the session."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from tests.s3_server import FAKE_AWS_ENV, MotoS3Server

_bucket_numbers = itertools.count()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[MotoS3Server]:
    with pytest.MonkeyPatch.context() as mp:
        for name, value in FAKE_AWS_ENV.items():
            mp.setenv(name, value)
        # An endpoint from the developer's shell must not leak into tests.
        mp.delenv("ZONEGATE_S3_ENDPOINT", raising=False)
        mp.delenv("AWS_ENDPOINT_URL", raising=False)
        with MotoS3Server() as server:
            yield server


@pytest.fixture(scope="session")
def s3_endpoint(s3_server: MotoS3Server) -> str:
    """Endpoint URL of a moto S3 server (bucket `zonegate-test` exists); fake AWS env set."""
    return s3_server.endpoint_url


@pytest.fixture
def s3_bucket(s3_server: MotoS3Server) -> str:
    """A fresh, empty bucket for one test."""
    name = f"zg-test-{next(_bucket_numbers)}"
    s3_server.create_bucket(name)
    return name
