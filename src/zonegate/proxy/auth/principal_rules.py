"""ssl.principal.mapping.rules: a client certificate's distinguished name to a user name.

Kafka's SslPrincipalMapper, rule for rule: `RULE:pattern/replacement/[LU]` and
`DEFAULT`, separated by commas; the first rule whose pattern matches the whole
name gives it (the replacement applied as Java's `String.replaceAll` does, `$1`
back references, then lower or upper case), `DEFAULT` gives the name unchanged.
The name is the certificate's subject as Java's X500Principal.getName()
(RFC 2253) prints it; `distinguished_name` prints a DER certificate's so.
Patterns are Java regular expressions; Python's `re` (ASCII classes, as Java's)
reads the ones users write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Kafka's SslPrincipalMapper.RULE_PATTERN and RULE_SPLITTER, unchanged.
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    """No rule gave a name (Kafka: the connection fails to build its principal)."""


@dataclass(frozen=True, slots=True)
class PrincipalRule:
    default: bool
    pattern: str = ""
    replacement: str = ""
    lower: bool = False
    upper: bool = False

    def __str__(self) -> str:  # Kafka's Rule.toString, so its tests read the same
        if self.default:
            return "DEFAULT"
        case = "/L" if self.lower else "/U" if self.upper else ""
        return f"RULE:{self.pattern}/{self.replacement}{case}"

    def apply(self, name: str) -> str | None:
        if self.default:
            return name
        pattern = _compile(self.pattern)
        if pattern.fullmatch(name) is None:
            return None
        replacement = _escape_literal_back_references(self.replacement, pattern.groups)
        result = pattern.sub(lambda m: _java_replacement(replacement, m), name)
        return result.lower() if self.lower else result.upper() if self.upper else result


def _compile(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.ASCII)


def parse_principal_rules(text: str | None) -> tuple[PrincipalRule, ...]:
    """The rules of an ssl.principal.mapping.rules value (None: "DEFAULT").
    Raises ValueError("Invalid rule: ...") as Kafka raises IllegalArgumentException."""
    rules: list[PrincipalRule] = []
    for m in _SPLITTER.finditer((text if text is not None else "DEFAULT").strip()):
        rule = m.group(1)
        p = _PARSER.match(rule)
        if p is None:
            raise ValueError(f"Invalid rule: {rule}")
        if p.end() != len(rule):
            raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[p.end() :]}`")
        if p.group(1) is not None:
            rules.append(PrincipalRule(default=True))
        elif p.group(2) is not None:
            try:
                _compile(p.group(2))
            except re.error as exc:
                raise ValueError(f"Invalid rule: {rule}: {exc}") from None
            rules.append(
                PrincipalRule(False, p.group(2), p.group(4), p.group(6) == "L", p.group(6) == "U")
            )
        # an empty rule is ignored, as Kafka ignores it
    return tuple(rules)


def map_principal(rules: tuple[PrincipalRule, ...], distinguished_name: str) -> str:
    for rule in rules:
        name = rule.apply(distinguished_name)
        if name is not None:
            return name
    shown = "[" + ", ".join(str(r) for r in rules) + "]"
    raise NoMatchingRule(f"No rules apply to {distinguished_name}, rules {shown}")


def _escape_literal_back_references(value: str, groups: int) -> str:
    """Kafka's (NiFi's) escapeLiteralBackReferences: `$4` with three groups is a literal."""
    if groups == 0:
        return value
    for m in list(_BACK_REFERENCE.finditer(value)):
        digits = m.group(1)
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            # Kafka inserts the backslash at the original offset of a string it keeps
            # editing; references are few, so recomputing the offset is equivalent.
            start = value.find("$" + digits, m.start())
            value = value[:start] + "\\" + value[start:]
    return value


def _java_replacement(replacement: str, m: re.Match[str]) -> str:
    """Java's Matcher.appendReplacement: `\\x` is x, `$n` the longest group number
    that exists (at least one digit), `${name}` a named group."""
    out: list[str] = []
    i, n = 0, len(replacement)
    groups = m.re.groups
    while i < n:
        c = replacement[i]
        if c == "\\" and i + 1 < n:
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < n and replacement[i + 1] == "{":
            end = replacement.index("}", i)
            out.append(m.group(replacement[i + 2 : end]) or "")
            i = end + 1
        elif c == "$" and i + 1 < n and replacement[i + 1].isdigit():
            number = int(replacement[i + 1])
            i += 2
            # Java takes more digits while the longer number is still a group
            while i < n and replacement[i].isdigit():
                longer = number * 10 + int(replacement[i])
                if longer > groups:
                    break
                number, i = longer, i + 1
            if number > groups:
                raise IndexError(f"No group {number}")
            out.append(m.group(number) or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)


def distinguished_name(certificate_der: bytes) -> str:
    """The subject of a DER certificate as Java's X500Principal.getName() prints it
    (RFC 2253: most specific RDN first, CN/L/ST/O/OU/C/STREET/DC/UID by keyword,
    other attributes as OID=#hex of their DER value)."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    keywords = {
        NameOID.COMMON_NAME: "CN",
        NameOID.LOCALITY_NAME: "L",
        NameOID.STATE_OR_PROVINCE_NAME: "ST",
        NameOID.ORGANIZATION_NAME: "O",
        NameOID.ORGANIZATIONAL_UNIT_NAME: "OU",
        NameOID.COUNTRY_NAME: "C",
        NameOID.STREET_ADDRESS: "STREET",
        NameOID.DOMAIN_COMPONENT: "DC",
        NameOID.USER_ID: "UID",
    }
    cert = x509.load_der_x509_certificate(certificate_der)
    rdns: list[str] = []
    for rdn in reversed(list(cert.subject.rdns)):
        avas: list[str] = []
        for attr in rdn:
            keyword = keywords.get(attr.oid)
            if keyword is not None and isinstance(attr.value, str):
                avas.append(f"{keyword}={_escape_rfc2253(attr.value)}")
            else:
                avas.append(f"{attr.oid.dotted_string}=#{_der_value(attr).hex()}")
        rdns.append("+".join(avas))
    return ",".join(rdns)


def _escape_rfc2253(value: str) -> str:
    out = []
    for i, c in enumerate(value):
        if c in ',+"\\<>;' or (i == 0 and c in "# ") or (i == len(value) - 1 and c == " "):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def _der_value(attr: object) -> bytes:
    """The DER of an attribute's value: a string type's tag, its length and its bytes."""
    from cryptography.x509 import NameAttribute

    assert isinstance(attr, NameAttribute)
    raw = attr.value if isinstance(attr.value, bytes) else attr.value.encode()
    tag = getattr(attr, "_type", None)
    tag_byte = tag.value if tag is not None else 0x0C  # UTF8String
    size = len(raw)
    if size < 0x80:
        length = bytes([size])
    else:
        encoded = size.to_bytes((size.bit_length() + 7) // 8, "big")
        length = bytes([0x80 | len(encoded)]) + encoded
    return bytes([tag_byte]) + length + raw
