"""Any bytes a client sends as a SASL token get an answer, never an exception: a
malformed token is the client's fault and fails its authentication as Kafka's would."""

from __future__ import annotations

import pytest
import scramp
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode

from tests.proxy.auth.sasl_clients import ScramUsers, TokenIssuer, oauth_settings
from zonegate.proxy.auth import ConnectionAuth, JwksKeys, ListenerSecurity
from zonegate.runtime.clock import ManualClock

pytestmark = pytest.mark.unit

MECHS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_CLOCK = ManualClock()
_USERS = ScramUsers()
_USERS.add("alice", "alice-pw", "SCRAM-SHA-256")
_USERS.add("alice", "alice-pw", "SCRAM-SHA-512")
_SECURITY = ListenerSecurity("SASL_SSL", "SASL_SSL", MECHS, {"alice": "pw"}, oauth=oauth_settings())
_KEYS = JwksKeys(oauth_settings(), _CLOCK)
_KEYS.load(TokenIssuer().jwks())

# Tokens shaped like each mechanism's messages, then mangled, besides raw bytes.
_SHAPED = st.sampled_from(
    [
        b"n,,n=alice,r=",
        b"n,a=alice,n=alice,r=abc",
        b"n,,\x01auth=Bearer ",
        b"n,,\x01auth=Bearer a.b.c\x01\x01",
        b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.e30.\x01\x01",
        b"c=biws,r=abc,p=",
        b"\x00alice\x00",
        b"\x01",
    ]
)
_TOKENS = st.one_of(st.binary(max_size=300), st.tuples(_SHAPED, st.binary(max_size=40)).map(
    lambda t: t[0] + t[1]
))  # fmt: skip


def _conn(mechanism: str) -> ConnectionAuth:
    auth = ConnectionAuth(_SECURITY, _USERS, _KEYS, _CLOCK)
    assert auth.handshake(1, mechanism)[0] == ErrorCode.none.value
    return auth


@settings(max_examples=150, deadline=None)
@given(mechanism=st.sampled_from(MECHS), first=_TOKENS, second=_TOKENS)
def test_garbage_is_answered_never_raised(mechanism: str, first: bytes, second: bytes) -> None:
    auth = _conn(mechanism)
    for token in (first, second):
        step = auth.authenticate(token)
        assert step.error_code in (
            ErrorCode.none.value,
            ErrorCode.sasl_authentication_failed.value,
            ErrorCode.illegal_sasl_state.value,
        )
        if step.failed:
            assert auth.failed and auth.principal == "User:ANONYMOUS"
            break


@settings(max_examples=60, deadline=None)
@given(final=_TOKENS)
def test_garbage_scram_final_after_a_real_first_message(final: bytes) -> None:
    auth = _conn("SCRAM-SHA-256")
    client = scramp.ScramClient(["SCRAM-SHA-256"], "alice", "alice-pw")
    assert auth.authenticate(client.get_client_first().encode()).error_code == 0
    step = auth.authenticate(final)
    assert step.failed and step.error_code == ErrorCode.sasl_authentication_failed.value
