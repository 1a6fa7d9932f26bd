"""How a webhook call is signed, and checking that it is (docs/security/webhooks.md).

The sender puts the current Unix time in `X-Dagwright-Timestamp` and
`sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" with the trigger's secret>` in
`X-Dagwright-Signature` (the scheme of Stripe's and Slack's webhooks). The timestamp is
signed with the body, so an old call cannot be sent again with a new time: a call whose
timestamp is more than the tolerance away from the server's clock is refused, and one inside
it is refused the second time (services/triggers.py keeps the signatures seen).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from dataclasses import dataclass
from typing import Final

from dagwright.errors import AuthError

SIGNATURE_HEADER: Final = "X-Dagwright-Signature"
TIMESTAMP_HEADER: Final = "X-Dagwright-Timestamp"
FORMAT: Final = (
    f"{TIMESTAMP_HEADER}: <Unix time, seconds> and "
    f'{SIGNATURE_HEADER}: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" with the '
    "trigger's secret>"
)
_SIGNATURE: Final = re.compile(r"sha256=([0-9a-fA-F]{64})")
_TIMESTAMP: Final = re.compile(r"[0-9]{1,12}")


@dataclass(frozen=True)
class Signed:
    """A call whose signature checked out: its timestamp and the HMAC's hex digest."""

    timestamp: int
    digest: str


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """The X-Dagwright-Signature value for a body sent at `timestamp` (Unix seconds)."""
    message = str(timestamp).encode() + b"." + body
    return "sha256=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signed_headers(secret: str, body: bytes, timestamp: int | None = None) -> dict[str, str]:
    """Both headers for a call sent now (or at `timestamp`)."""
    at = int(time.time()) if timestamp is None else timestamp
    return {TIMESTAMP_HEADER: str(at), SIGNATURE_HEADER: signature(secret, at, body)}


def _refused(message: str, code: str = "invalid_signature") -> AuthError:
    return AuthError(f"{message}; a webhook call needs {FORMAT}", code)


def _one(values: list[str], header: str) -> str:
    if not values:
        raise _refused(f"the {header} header is missing")
    if len(values) > 1:
        raise _refused(f"the {header} header is given {len(values)} times")
    return values[0].strip()


def verify(
    secret: str,
    body: bytes,
    signatures: list[str],
    timestamps: list[str],
    *,
    now: float,
    tolerance: float,
) -> Signed:
    """The call's timestamp and digest; AuthError (401) for a missing, repeated, malformed,
    stale or wrong header. Headers are compared only once they are well-formed ASCII, and
    in constant time."""
    given = _one(signatures, SIGNATURE_HEADER)
    stamp = _one(timestamps, TIMESTAMP_HEADER)
    matched = _SIGNATURE.fullmatch(given) if given.isascii() else None
    if matched is None:
        raise _refused(f"the {SIGNATURE_HEADER} header is not sha256=<64 hex digits>")
    if not (stamp.isascii() and _TIMESTAMP.fullmatch(stamp)):
        raise _refused(f"the {TIMESTAMP_HEADER} header is not a Unix time in seconds")
    timestamp = int(stamp)
    if abs(now - timestamp) > tolerance:
        raise _refused(
            f"the call's timestamp is {round(now - timestamp)} s from the server's clock, "
            f"more than the {tolerance:g} s allowed (send it again, signed now)",
            "signature_expired",
        )
    expected = signature(secret, timestamp, body).removeprefix("sha256=")
    digest = matched.group(1).lower()
    if not hmac.compare_digest(digest.encode(), expected.encode()):
        raise _refused(f"the {SIGNATURE_HEADER} header does not match the body")
    return Signed(timestamp, digest)
