"""A sasl.jaas.config value, read as Kafka's JaasConfig reads it.

`LoginModuleClass flag key="value" key2=value2;`: Kafka tokenizes it with
java.io.StreamTokenizer (comments `//` and `/* */`, quoted strings with Java's
escapes, words of letters, digits, `.`, `-`, `_` and `$`; a bare value starting
with a digit is a number, which Kafka refuses as a value). Kafka's broker takes
exactly one login module per listener and mechanism. PLAIN users are the
`user_NAME="password"` options of PlainLoginModule (Kafka's
PlainServerCallbackHandler).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
FLAGS = ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL")
_USER_PREFIX = "user_"

# StreamTokenizer's token kinds: a word, a quoted string, a number (no text), or one char.
_WORD, _QUOTED, _NUMBER, _CHAR = "word", "quoted", "number", "char"
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


@dataclass(frozen=True, slots=True)
class JaasConfig:
    login_module: str
    flag: str  # REQUIRED, REQUISITE, SUFFICIENT or OPTIONAL
    options: Mapping[str, str] = field(default_factory=dict)

    @property
    def plain_users(self) -> Mapping[str, str]:
        """user name -> password, from PlainLoginModule's `user_NAME` options."""
        if self.login_module != PLAIN_LOGIN_MODULE:
            return MappingProxyType({})
        return MappingProxyType(
            {
                k[len(_USER_PREFIX) :]: v
                for k, v in self.options.items()
                if k.startswith(_USER_PREFIX) and len(k) > len(_USER_PREFIX)
            }
        )


def _is_word_char(c: str) -> bool:
    # StreamTokenizer's defaults plus Kafka's wordChars('-'), ('_'), ('$'); chars above
    # 255 are word chars too; digits and '.' continue a word (they are "numeric").
    return c.isascii() and (c.isalpha() or c in "-_$") or "\u00a0" <= c <= "\u00ff" or c > "\u00ff"


def _tokens(text: str) -> Iterator[tuple[str, str | None]]:
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c <= " ":
            i += 1
        elif c == "/":
            if text.startswith("/*", i):
                end = text.find("*/", i + 2)
                i = n if end < 0 else end + 2
            else:  # `//` and a lone `/` (StreamTokenizer's comment char) end the line
                while i < n and text[i] not in "\r\n":
                    i += 1
        elif c.isdigit() or c == "." or (c == "-" and i + 1 < n and text[i + 1] in ".0123456789"):
            i += 1
            while i < n and (text[i].isdigit() or text[i] == "."):
                i += 1
            yield _NUMBER, None
        elif c != "-" and _is_word_char(c):  # a lone '-' is a char token, as in Java
            start = i
            i += 1
            while i < n and (_is_word_char(text[i]) or text[i].isdigit() or text[i] == "."):
                i += 1
            yield _WORD, text[start:i]
        elif c in "\"'":
            i, value = _quoted(text, i + 1, c)
            yield _QUOTED, value
        else:
            i += 1
            yield _CHAR, c


def _quoted(text: str, i: int, quote: str) -> tuple[int, str]:
    """A quoted string ends at its quote, a line end or the text's end (StreamTokenizer)."""
    out: list[str] = []
    n = len(text)
    while i < n and text[i] != quote and text[i] not in "\r\n":
        c = text[i]
        if c == "\\" and i + 1 < n:
            nxt = text[i + 1]
            if nxt in "01234567":
                j = i + 1
                limit = i + (4 if nxt <= "3" else 3)
                while j < n and j < limit and text[j] in "01234567":
                    j += 1
                out.append(chr(int(text[i + 1 : j], 8)))
                i = j
                continue
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    if i < n and text[i] == quote:
        i += 1
    return i, "".join(out)


def parse_jaas_entries(text: str) -> list[JaasConfig]:
    """Every login module of the text (a JAAS file section may have several)."""
    tokens = list(_tokens(text))
    entries: list[JaasConfig] = []
    i = 0
    while i < len(tokens):
        kind, module = tokens[i]
        if kind == _CHAR or module is None:
            raise ValueError("Login module not specified in JAAS config")
        i += 1
        if i >= len(tokens):
            raise ValueError("Login module control flag not specified in JAAS config")
        flag = tokens[i][1]
        if flag is None or tokens[i][0] == _CHAR:
            raise ValueError("Login module control flag is not available in the JAAS config")
        if flag.upper() not in FLAGS:
            raise ValueError(f"Invalid login module control flag '{flag}' in JAAS config")
        i += 1
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != (_CHAR, ";"):
            key = tokens[i][1]
            if tokens[i][0] == _CHAR or key is None:
                raise ValueError(f"Invalid option name in JAAS config: {tokens[i][1]}")
            value = tokens[i + 2] if i + 2 < len(tokens) else None
            if (
                tokens[i + 1 : i + 2] != [(_CHAR, "=")]
                or value is None
                or value[0]
                not in (
                    _WORD,
                    _QUOTED,
                )
            ):
                raise ValueError(f"Value not specified for key '{key}' in JAAS config")
            options[key] = value[1] or ""
            i += 3
        if i >= len(tokens):
            raise ValueError("JAAS config entry not terminated by semi-colon")
        i += 1
        entries.append(JaasConfig(module, flag.upper(), MappingProxyType(options)))
    if not entries:
        raise ValueError("Login module not specified in JAAS config")
    return entries


def parse_jaas(text: str) -> JaasConfig:
    """The one login module of a sasl.jaas.config value; ValueError with Kafka's message."""
    entries = parse_jaas_entries(text)
    if len(entries) != 1:
        raise ValueError(
            f"JAAS config property contains {len(entries)} login modules, should be 1 module"
        )
    return entries[0]
