"""SCRAM credentials as the authenticator reads them: the salted form RFC 5802 keeps.

The one shape shared by the store that keeps them (AlterUserScramCredentials,
the metadata store) and the Kafka front that checks a client's proof against
them (SASL SCRAM-SHA-256 / SCRAM-SHA-512). The password itself is never kept:
only its salt, the iteration count and the two keys derived from it, as
Kafka's ScramCredential.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: str  # "SCRAM-SHA-256" or "SCRAM-SHA-512"
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


class ScramCredentialSource(Protocol):
    """Looks a user's credential up without waiting (the node keeps them in memory)."""

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None: ...
