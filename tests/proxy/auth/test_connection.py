"""The connection's authenticator, with real client-side implementations and no sockets:
scramp's SCRAM client, JWTs signed by joserfc, PLAIN messages by hand."""

from __future__ import annotations

import asyncio

import pytest
import scramp
from kio.schema.errors import ErrorCode

from tests.proxy.auth.sasl_clients import ScramUsers, TokenIssuer, oauth_first, oauth_settings
from zonegate.proxy.auth import ConnectionAuth, JwksKeys, ListenerSecurity, State
from zonegate.runtime.clock import ManualClock

pytestmark = pytest.mark.unit

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA, PRODUCE = 18, 17, 36, 3, 0
NONE = ErrorCode.none.value
FAILED = ErrorCode.sasl_authentication_failed.value
ILLEGAL = ErrorCode.illegal_sasl_state.value
MECHS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


def _security(protocol: str = "SASL_SSL", **kw: object) -> ListenerSecurity:
    args: dict[str, object] = {
        "name": protocol,
        "protocol": protocol,
        "mechanisms": MECHS if protocol.startswith("SASL") else (),
        "plain_users": {"admin": "admin-secret", "alice": "alice-secret"},
        "oauth": oauth_settings() if protocol.startswith("SASL") else None,
        "failed_auth_delay_ms": 100,
    }
    args.update(kw)
    return ListenerSecurity(**args)  # type: ignore[arg-type]


class Setup:
    def __init__(self, protocol: str = "SASL_SSL", **kw: object) -> None:
        self.clock = ManualClock()
        self.users = ScramUsers()
        self.users.add("alice", "alice-pw", "SCRAM-SHA-256")
        self.users.add("alice", "alice-pw-512", "SCRAM-SHA-512")
        self.users.add("bob", "bob-pw", "SCRAM-SHA-512")
        self.issuer = TokenIssuer()
        self.security = _security(protocol, **kw)
        self.keys = JwksKeys(self.security.oauth, self.clock) if self.security.oauth else None
        if self.keys is not None:
            self.keys.load(self.issuer.jwks())

    def conn(self, tls_principal: str | None = None) -> ConnectionAuth:
        return ConnectionAuth(self.security, self.users, self.keys, self.clock, tls_principal)


def _advance(clock: ManualClock, seconds: float) -> None:
    asyncio.run(clock.advance(seconds))


def _plain(user: str, password: str, authzid: str = "") -> bytes:
    return f"{authzid}\x00{user}\x00{password}".encode()


def _handshake(auth: ConnectionAuth, mechanism: str, version: int = 1) -> None:
    assert auth.admits(SASL_HANDSHAKE, version).serve
    assert auth.handshake(version, mechanism) == (NONE, MECHS)


def _scram(auth: ConnectionAuth, mechanism: str, user: str, password: str) -> list[int]:
    """Runs scramp's client against the authenticator; the error codes of each step."""
    client = scramp.ScramClient([mechanism], user, password)
    first = auth.authenticate(client.get_client_first().encode())
    if first.error_code != NONE:
        return [first.error_code]
    client.set_server_first(first.reply.decode())
    final = auth.authenticate(client.get_client_final().encode())
    if final.error_code == NONE:
        client.set_server_final(final.reply.decode())  # the server proved it knows the key
    return [first.error_code, final.error_code]


# -- PLAIN ----------------------------------------------------------------------------


def test_plain_success_gives_the_principal() -> None:
    s = Setup()
    auth = s.conn()
    assert auth.principal == "User:ANONYMOUS"
    assert auth.admits(API_VERSIONS, 3).serve
    _handshake(auth, "PLAIN")
    assert auth.admits(SASL_AUTHENTICATE, 2).serve
    step = auth.authenticate(_plain("alice", "alice-secret"))
    assert (step.error_code, step.reply, step.failed, step.session_lifetime_ms) == (
        NONE,
        b"",
        False,
        0,
    )
    assert auth.principal == "User:alice" and auth.authenticated
    assert auth.admits(METADATA, 12).serve and auth.admits(PRODUCE, 9).serve


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (_plain("alice", "wrong"), "Authentication failed: Invalid username or password"),
        (_plain("nobody", "x"), "Authentication failed: Invalid username or password"),
        (_plain("", "x"), "Authentication failed: username not specified"),
        (_plain("alice", ""), "Authentication failed: password not specified"),
        (b"alice\x00alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
        (
            _plain("alice", "alice-secret", authzid="admin"),
            "Authentication failed: Client requested an authorization id that is different "
            "from username",
        ),
    ],
)
def test_plain_failures_have_kafkas_messages(token: bytes, message: str) -> None:
    auth = Setup().conn()
    _handshake(auth, "PLAIN")
    step = auth.authenticate(token)
    assert (step.error_code, step.error_message) == (FAILED, message)
    assert step.failed and step.delay_ms == 100 and auth.failed
    assert auth.principal == "User:ANONYMOUS"
    decision = auth.admits(METADATA, 12)
    assert not decision.serve and decision.delay_ms == 100
    assert auth.failure_log_line("/10.0.0.7:51234") == (
        f"Failed authentication with /10.0.0.7:51234 (SASL mechanism PLAIN: {message})"
    )


# -- SCRAM ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mechanism", "password"), [("SCRAM-SHA-256", "alice-pw"), ("SCRAM-SHA-512", "alice-pw-512")]
)
def test_scram_success_with_scramps_client(mechanism: str, password: str) -> None:
    auth = Setup().conn()
    _handshake(auth, mechanism)
    assert _scram(auth, mechanism, "alice", password) == [NONE, NONE]
    assert auth.principal == "User:alice" and auth.mechanism == mechanism


def _generic(mechanism: str) -> str:
    return (
        "Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {mechanism}"
    )


@pytest.mark.parametrize(
    ("user", "password"),
    [("alice", "wrong"), ("nobody", "x"), ("bob", "bob-pw")],  # bob has no SHA-256 key
)
def test_scram_failures_never_say_whether_the_user_exists(user: str, password: str) -> None:
    auth = Setup().conn()
    _handshake(auth, "SCRAM-SHA-256")
    client = scramp.ScramClient(["SCRAM-SHA-256"], user, password)
    first = auth.authenticate(client.get_client_first().encode())
    if first.error_code == NONE:
        client.set_server_first(first.reply.decode())
        step = auth.authenticate(client.get_client_final().encode())
    else:
        step = first
    assert (step.error_code, step.error_message) == (FAILED, _generic("SCRAM-SHA-256"))
    assert step.failed and auth.principal == "User:ANONYMOUS"


def test_scram_authzid_other_than_the_user_is_refused_with_kafkas_message() -> None:
    auth = Setup().conn()
    _handshake(auth, "SCRAM-SHA-512")
    step = auth.authenticate(b"n,a=admin,n=bob,r=abcdefghijklmnop")
    assert step.error_code == FAILED and step.error_message == (
        "Authentication failed: Client requested an authorization id that is different "
        "from username"
    )


def test_scram_malformed_first_message_gets_the_generic_message() -> None:
    auth = Setup().conn()
    _handshake(auth, "SCRAM-SHA-512")
    step = auth.authenticate(b"p=tls-unique,,n=bob,r=abc")
    assert (step.error_code, step.error_message) == (FAILED, _generic("SCRAM-SHA-512"))


# -- OAUTHBEARER ----------------------------------------------------------------------


def test_oauthbearer_success_and_session_lifetime_from_the_tokens_exp() -> None:
    s = Setup()
    auth = s.conn()
    _handshake(auth, "OAUTHBEARER")
    token = s.issuer.token(s.clock.wall_ms(), lifetime_s=600)
    step = auth.authenticate(oauth_first(token))
    assert (step.error_code, step.reply) == (NONE, b"")
    assert auth.principal == "User:alice"
    assert step.session_lifetime_ms == 600_000  # connections.max.reauth.ms unset: exp rules


@pytest.mark.parametrize(
    "claims",
    [
        {"exp": 1},  # expired long ago
        {"iss": "https://other"},
        {"aud": "not-kafka"},
        {"sub": None},
        {"iat": None},
        {"nbf": 1_700_000_000 + 3600},  # not yet valid
    ],
)
def test_oauthbearer_bad_token_gets_the_json_challenge_then_failure(
    claims: dict[str, object],
) -> None:
    s = Setup()
    auth = s.conn()
    _handshake(auth, "OAUTHBEARER")
    token = s.issuer.token(s.clock.wall_ms(), **claims)
    challenge = auth.authenticate(oauth_first(token))
    assert (challenge.error_code, challenge.reply) == (NONE, b'{"status":"invalid_token"}')
    assert not challenge.failed
    step = auth.authenticate(b"\x01")  # the client's acknowledgement (RFC 7628 3.2.3)
    assert (step.error_code, step.error_message) == (FAILED, '{"status":"invalid_token"}')
    assert step.failed


def test_oauthbearer_token_signed_by_another_key_is_refused() -> None:
    s = Setup()
    auth = s.conn()
    _handshake(auth, "OAUTHBEARER")
    forger = TokenIssuer(kid=s.issuer.kid, generation=1)  # same kid, other key
    challenge = auth.authenticate(oauth_first(forger.token(s.clock.wall_ms())))
    assert challenge.reply == b'{"status":"invalid_token"}'


def test_oauthbearer_skew_tolerates_a_just_expired_token() -> None:
    s = Setup()
    auth = s.conn()
    _handshake(auth, "OAUTHBEARER")
    now = s.clock.wall_ms()
    token = s.issuer.token(now, exp=now // 1000 - 10)  # 10 s ago, within the 30 s skew
    assert auth.authenticate(oauth_first(token)).error_code == NONE


def test_oauthbearer_malformed_message_and_authzid() -> None:
    s = Setup()
    auth = s.conn()
    _handshake(auth, "OAUTHBEARER")
    step = auth.authenticate(b"n,,auth=Bearer x")
    assert (step.error_code, step.error_message) == (FAILED, _generic("OAUTHBEARER"))
    auth = s.conn()
    _handshake(auth, "OAUTHBEARER")
    step = auth.authenticate(b"n,,\x01auth=Basic YWxpY2U6cHc=\x01\x01")  # not a bearer token
    assert (step.error_code, step.error_message) == (FAILED, _generic("OAUTHBEARER"))
    auth = s.conn()
    _handshake(auth, "OAUTHBEARER")
    step = auth.authenticate(oauth_first(s.issuer.token(s.clock.wall_ms()), authzid="bob"))
    assert step.error_message == (
        "Authentication failed: Client requested an authorization id (bob) that is "
        "different from the token's principal name (alice)"
    )


def test_oauthbearer_unknown_kid_refreshes_the_jwks_once() -> None:
    s = Setup()
    rotated = TokenIssuer(kid="key-2")
    served = [s.issuer.jwks(rotated.key)]

    async def fetch(url: str) -> bytes:
        assert url == "file:///jwks.json"
        return served[0]

    keys = JwksKeys(s.security.oauth, s.clock, fetch)  # type: ignore[arg-type]
    keys.load(s.issuer.jwks())
    auth = ConnectionAuth(s.security, s.users, keys, s.clock)
    _handshake(auth, "OAUTHBEARER")
    first = oauth_first(rotated.token(s.clock.wall_ms()))
    asyncio.run(auth.prepare(first))
    assert keys.fetches == 1
    assert auth.authenticate(first).error_code == NONE
    # an unknown kid again within a minute: no second fetch (Kafka's rate limit)
    other = TokenIssuer(kid="key-3")
    auth2 = ConnectionAuth(s.security, s.users, keys, s.clock)
    _handshake(auth2, "OAUTHBEARER")
    msg = oauth_first(other.token(s.clock.wall_ms()))
    asyncio.run(auth2.prepare(msg))
    asyncio.run(auth2.prepare(msg))
    assert keys.fetches == 2
    auth3 = ConnectionAuth(s.security, s.users, keys, s.clock)
    _handshake(auth3, "OAUTHBEARER")
    asyncio.run(auth3.prepare(msg))
    assert keys.fetches == 2
    _advance(s.clock, 61)
    asyncio.run(auth3.prepare(msg))
    assert keys.fetches == 3


def test_jwks_fetch_failure_keeps_the_keys_and_backs_off() -> None:
    s = Setup()
    calls = []

    async def failing(url: str) -> bytes:
        calls.append(url)
        raise OSError("connection refused")

    keys = JwksKeys(s.security.oauth, s.clock, failing)  # type: ignore[arg-type]
    assert keys.refresh_due(None)
    asyncio.run(keys.refresh())
    assert not keys.refresh_due(None)  # 100 ms backoff
    _advance(s.clock, 0.1)
    assert keys.refresh_due(None)
    asyncio.run(keys.refresh())
    _advance(s.clock, 0.1)
    assert not keys.refresh_due(None)  # doubled: 200 ms
    assert len(calls) == 2


# -- the state table ------------------------------------------------------------------


def test_only_api_versions_and_handshake_before_authentication() -> None:
    s = Setup()
    auth = s.conn()
    d = auth.admits(METADATA, 12)
    assert not d.serve and d.delay_ms == 100
    assert d.reason == "Unexpected Kafka request of type METADATA during SASL handshake."
    assert auth.failed


def test_second_api_versions_closes_as_kafka_does() -> None:
    auth = Setup().conn()
    assert auth.admits(API_VERSIONS, 3).serve
    d = auth.admits(API_VERSIONS, 3)
    assert not d.serve and d.delay_ms == 0


def test_api_versions_with_an_unknown_version_may_be_retried() -> None:
    auth = Setup().conn()
    assert auth.admits(API_VERSIONS, 9).serve  # answered UNSUPPORTED_VERSION (KIP-511)
    assert auth.admits(API_VERSIONS, 3).serve
    assert auth.state == State.HANDSHAKE


def test_other_request_during_authentication_is_answered_illegal_state_and_closed() -> None:
    auth = Setup().conn()
    _handshake(auth, "PLAIN")
    d = auth.admits(METADATA, 12)
    assert not d.serve and d.error_code == ILLEGAL and d.delay_ms == 100
    assert d.reason == "Unexpected Kafka request of type METADATA during SASL authentication."


def test_unsupported_mechanism_lists_the_enabled_ones_and_fails() -> None:
    auth = Setup().conn()
    assert auth.handshake(1, "GSSAPI") == (ErrorCode.unsupported_sasl_mechanism.value, MECHS)
    assert auth.failed and auth.failure_delay_ms == 100
    assert auth.failure_log_line("/1.2.3.4:5") == (
        "Failed authentication with /1.2.3.4:5 (Unsupported SASL mechanism GSSAPI)"
    )


def test_plaintext_and_ssl_listeners_answer_illegal_sasl_state() -> None:
    for protocol in ("PLAINTEXT", "SSL"):
        auth = Setup(protocol).conn()
        assert auth.admits(METADATA, 12).serve and auth.authenticated
        assert auth.handshake(1, "PLAIN") == (ILLEGAL, ())
        step = auth.authenticate(_plain("alice", "alice-secret"))
        assert step.error_code == ILLEGAL and not step.failed
        assert (
            step.error_message
            == "SaslAuthenticate request received after successful authentication"
        )
        assert auth.principal == "User:ANONYMOUS"


def test_ssl_principal_is_the_mapped_certificate_name() -> None:
    s = Setup("SSL")
    assert s.conn("duke").principal == "User:duke"
    sasl = Setup("SASL_SSL")
    auth = sasl.conn("duke")
    assert auth.principal == "User:ANONYMOUS"  # SASL decides on SASL_SSL
    _handshake(auth, "PLAIN")
    auth.authenticate(_plain("admin", "admin-secret"))
    assert auth.principal == "User:admin"


def test_authenticate_after_authentication_is_illegal_state_but_keeps_the_connection() -> None:
    auth = Setup().conn()
    _handshake(auth, "PLAIN")
    auth.authenticate(_plain("alice", "alice-secret"))
    step = auth.authenticate(_plain("alice", "alice-secret"))
    assert step.error_code == ILLEGAL and not step.failed and not auth.failed


# -- SaslHandshake v0: raw tokens -------------------------------------------------------


def test_v0_handshake_then_raw_scram_tokens() -> None:
    auth = Setup().conn()
    _handshake(auth, "SCRAM-SHA-512", version=0)
    assert auth.raw_mode
    client = scramp.ScramClient(["SCRAM-SHA-512"], "bob", "bob-pw")
    first = auth.raw_token(client.get_client_first().encode())
    client.set_server_first(first.reply.decode())
    assert auth.raw_mode
    final = auth.raw_token(client.get_client_final().encode())
    client.set_server_final(final.reply.decode())
    assert not auth.raw_mode and auth.principal == "User:bob"
    assert auth.admits(METADATA, 12).serve


def test_v0_raw_plain_failure() -> None:
    auth = Setup().conn()
    _handshake(auth, "PLAIN", version=0)
    step = auth.raw_token(_plain("alice", "nope"))
    assert step.failed and not auth.raw_mode and auth.failed


# -- KIP-368: session lifetime, expiry, re-authentication -------------------------------


def test_session_lifetime_is_the_smaller_of_reauth_ms_and_the_tokens_life() -> None:
    s = Setup(reauth_ms=60_000)
    auth = s.conn()
    _handshake(auth, "OAUTHBEARER")
    step = auth.authenticate(oauth_first(s.issuer.token(s.clock.wall_ms(), lifetime_s=3600)))
    assert step.session_lifetime_ms == 60_000
    auth = s.conn()
    _handshake(auth, "OAUTHBEARER")
    step = auth.authenticate(oauth_first(s.issuer.token(s.clock.wall_ms(), lifetime_s=30)))
    assert step.session_lifetime_ms == 30_000
    auth = s.conn()
    _handshake(auth, "PLAIN")
    assert auth.authenticate(_plain("alice", "alice-secret")).session_lifetime_ms == 60_000


def test_expired_session_is_closed_at_its_next_request() -> None:
    s = Setup(reauth_ms=10_000)
    auth = s.conn()
    _handshake(auth, "PLAIN")
    auth.authenticate(_plain("alice", "alice-secret"), version=0)  # cannot re-authenticate
    _advance(s.clock, 10)
    assert not auth.expired(s.clock.wall_ms()) and auth.admits(METADATA, 12).serve
    _advance(s.clock, 0.001)
    assert auth.expired(s.clock.wall_ms())
    d = auth.admits(METADATA, 12)
    assert not d.serve and "expired" in d.reason
    # a client that never said it re-authenticates (v0) cannot start now
    assert not auth.admits(SASL_HANDSHAKE, 1).serve


def test_reauthentication_renews_the_session() -> None:
    s = Setup(reauth_ms=10_000)
    auth = s.conn()
    _handshake(auth, "SCRAM-SHA-512")
    assert _scram(auth, "SCRAM-SHA-512", "bob", "bob-pw") == [NONE, NONE]
    _advance(s.clock, 11)
    assert auth.expired()
    assert auth.admits(SASL_HANDSHAKE, 1).serve  # re-authentication, though expired
    assert auth.handshake(1, "SCRAM-SHA-512") == (NONE, MECHS)
    assert auth.authenticated and auth.principal == "User:bob"
    assert _scram(auth, "SCRAM-SHA-512", "bob", "bob-pw") == [NONE, NONE]
    assert not auth.expired() and auth.admits(METADATA, 12).serve


def test_reauthentication_may_not_change_the_principal() -> None:
    s = Setup(reauth_ms=10_000)
    auth = s.conn()
    _handshake(auth, "PLAIN")
    auth.authenticate(_plain("alice", "alice-secret"))
    _advance(s.clock, 2)
    _handshake(auth, "PLAIN")
    step = auth.authenticate(_plain("admin", "admin-secret"))
    assert step.failed and step.error_message == (
        "Cannot change principals during re-authentication from User.alice: User.admin"
    )
    assert auth.failure_log_line("p").startswith("Failed re-authentication with p (SASL")


def test_reauthentication_may_not_change_the_mechanism() -> None:
    s = Setup(reauth_ms=10_000)
    auth = s.conn()
    _handshake(auth, "PLAIN")
    auth.authenticate(_plain("alice", "alice-secret"))
    _advance(s.clock, 2)
    _handshake(auth, "SCRAM-SHA-256")  # Kafka accepts the handshake, then fails the token
    step = auth.authenticate(b"n,,n=alice,r=abc")
    assert step.failed and step.error_message == (
        "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for "
        "re-authentication of mechanism 'PLAIN'"
    )


def test_reauthentication_at_most_once_a_second() -> None:
    s = Setup(reauth_ms=10_000)
    auth = s.conn()
    _handshake(auth, "PLAIN")
    auth.authenticate(_plain("alice", "alice-secret"))
    _handshake(auth, "PLAIN")
    auth.authenticate(_plain("alice", "alice-secret"))
    _advance(s.clock, 0.5)
    assert auth.handshake(1, "PLAIN") == (ILLEGAL, ())  # KafkaApis' answer; stays open
    assert not auth.failed


# -- the state table, walked whole ------------------------------------------------------


def _in_state(state: State) -> tuple[ConnectionAuth, Setup]:
    s = Setup(reauth_ms=10_000)
    auth = s.conn()
    if state == State.HANDSHAKE:
        auth.admits(API_VERSIONS, 3)
    elif state != State.HANDSHAKE_OR_VERSIONS:
        _handshake(auth, "PLAIN")
        if state == State.FAILED:
            auth.authenticate(_plain("alice", "wrong"))
        elif state != State.AUTHENTICATE:
            auth.authenticate(_plain("alice", "alice-secret"))
            if state == State.REAUTH_BAD_MECHANISM:
                _advance(s.clock, 2)
                _handshake(auth, "SCRAM-SHA-256")
    assert auth.state == state
    return auth, s


SERVED, CLOSED, DELAYED, ILLEGAL_THEN_CLOSED = "served", "closed", "delayed", "illegal"
_TABLE = {
    # state: outcome for (ApiVersions, SaslHandshake, SaslAuthenticate, Metadata)
    State.HANDSHAKE_OR_VERSIONS: (SERVED, SERVED, DELAYED, DELAYED),
    State.HANDSHAKE: (CLOSED, SERVED, DELAYED, DELAYED),
    State.AUTHENTICATE: (ILLEGAL_THEN_CLOSED, ILLEGAL_THEN_CLOSED, SERVED, ILLEGAL_THEN_CLOSED),
    State.REAUTH_BAD_MECHANISM: (
        ILLEGAL_THEN_CLOSED,
        ILLEGAL_THEN_CLOSED,
        SERVED,
        ILLEGAL_THEN_CLOSED,
    ),
    State.COMPLETE: (SERVED, SERVED, SERVED, SERVED),
    State.FAILED: (DELAYED, DELAYED, DELAYED, DELAYED),
}


@pytest.mark.parametrize("state", list(State))
@pytest.mark.parametrize(
    ("column", "api_key"),
    [(0, API_VERSIONS), (1, SASL_HANDSHAKE), (2, SASL_AUTHENTICATE), (3, METADATA)],
)
def test_every_state_and_request(state: State, column: int, api_key: int) -> None:
    auth, _ = _in_state(state)
    d = auth.admits(api_key, 1)
    outcome = (
        SERVED
        if d.serve
        else ILLEGAL_THEN_CLOSED
        if d.error_code == ILLEGAL and d.delay_ms == 100
        else DELAYED
        if d.delay_ms == 100 and d.error_code is None
        else CLOSED
        if d.delay_ms == 0
        else "?"
    )
    assert outcome == _TABLE[state][column], d
    if not d.serve:
        assert auth.failed and d.reason


def test_per_mechanism_reauth_ms_overrides_the_listeners() -> None:
    s = Setup(reauth_ms=60_000, reauth_ms_by_mechanism={"PLAIN": 5_000})
    auth = s.conn()
    _handshake(auth, "PLAIN")
    assert auth.authenticate(_plain("alice", "alice-secret")).session_lifetime_ms == 5_000
    auth = s.conn()
    _handshake(auth, "SCRAM-SHA-512")
    client = scramp.ScramClient(["SCRAM-SHA-512"], "bob", "bob-pw")
    first = auth.authenticate(client.get_client_first().encode())
    client.set_server_first(first.reply.decode())
    assert auth.authenticate(client.get_client_final().encode()).session_lifetime_ms == 60_000
