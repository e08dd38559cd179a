"""sasl.jaas.config values, read as Kafka's JaasConfig (StreamTokenizer) reads them."""

from __future__ import annotations

import pytest

from zonegate.proxy.auth import parse_jaas, parse_jaas_entries
from zonegate.proxy.auth.jaas import PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE

pytestmark = pytest.mark.unit


def test_plain_users_from_the_issues_line() -> None:
    jaas = parse_jaas(
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" user_admin="admin-secret" '
        'user_alice="alice-secret";'
    )
    assert jaas.login_module == PLAIN_LOGIN_MODULE
    assert jaas.flag == "REQUIRED"
    assert jaas.options["username"] == "admin"
    assert dict(jaas.plain_users) == {"admin": "admin-secret", "alice": "alice-secret"}


def test_scram_line_has_no_options_and_no_plain_users() -> None:
    jaas = parse_jaas("org.apache.kafka.common.security.scram.ScramLoginModule required;")
    assert (jaas.login_module, jaas.flag, dict(jaas.options)) == (
        SCRAM_LOGIN_MODULE,
        "REQUIRED",
        {},
    )
    assert dict(jaas.plain_users) == {}


def test_user_options_of_another_module_are_not_plain_users() -> None:
    jaas = parse_jaas('com.example.Login optional user_bob="x";')
    assert jaas.flag == "OPTIONAL" and dict(jaas.plain_users) == {}


def test_quoting_escapes_comments_and_bare_words() -> None:
    jaas = parse_jaas(
        "/* a comment */ org.apache.kafka.common.security.plain.PlainLoginModule Required\n"
        "  // a line comment\n"
        '  user_a="p\\"w;d" user_b=\'single quoted\' user_c=bare-word.v2 user_d="tab\\there"\n'
        '  user_e="back\\\\slash" user_f="\\101";'
    )
    assert jaas.flag == "REQUIRED"
    assert dict(jaas.plain_users) == {
        "a": 'p"w;d',
        "b": "single quoted",
        "c": "bare-word.v2",
        "d": "tab\there",
        "e": "back\\slash",
        "f": "A",
    }


def test_several_modules_are_refused_for_a_listener_as_kafka_does() -> None:
    text = "a.B required; c.D optional;"
    assert [e.login_module for e in parse_jaas_entries(text)] == ["a.B", "c.D"]
    with pytest.raises(ValueError, match="contains 2 login modules, should be 1 module"):
        parse_jaas(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Login module not specified in JAAS config"),
        ("a.B", "Login module control flag not specified in JAAS config"),
        ("a.B mandatory;", "Invalid login module control flag 'mandatory' in JAAS config"),
        ('a.B required user_x="y"', "JAAS config entry not terminated by semi-colon"),
        ("a.B required user_x;", "Value not specified for key 'user_x' in JAAS config"),
        ("a.B required user_x=123;", "Value not specified for key 'user_x' in JAAS config"),
    ],
)
def test_malformed_lines_get_kafkas_messages(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_jaas(text)
