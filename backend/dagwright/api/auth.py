"""Who may call what: the admin token for the editor API (when the server is reachable beyond
loopback), per-app API keys for published endpoints, and a rate limit per key."""

from __future__ import annotations

import hmac
import time
from dataclasses import dataclass

from fastapi import Request

from dagwright.api.errors import RateLimitedError
from dagwright.errors import AuthError, ForbiddenError


def bearer_token(request: Request) -> str | None:
    header = request.headers.get("authorization")
    if header:
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return request.headers.get("x-api-key") or None


def check_admin(request: Request, admin_token: str | None, required: bool) -> None:
    if not required:
        return
    token = bearer_token(request)
    if token is None:
        raise AuthError(
            "this API needs the admin token: send 'Authorization: Bearer <token>'",
            code="admin_token_required",
        )
    # As bytes: compare_digest refuses text that is not ASCII (a header of any bytes is).
    if admin_token is None or not hmac.compare_digest(token.encode(), admin_token.encode()):
        raise ForbiddenError("the admin token is wrong", code="admin_token_invalid")


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """A token bucket per key: `rate` requests per second, bursts of two seconds' worth.
    Per process: with N replicas a key gets up to N times the rate."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.capacity = max(1.0, rate * 2)
        self._buckets: dict[str, _Bucket] = {}

    def take(self, key: str) -> None:
        now = time.monotonic()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(self.capacity, now)
        bucket.tokens = min(self.capacity, bucket.tokens + (now - bucket.updated) * self.rate)
        bucket.updated = now
        if bucket.tokens < 1:
            wait = (1 - bucket.tokens) / self.rate
            raise RateLimitedError(
                f"rate limit of {self.rate:g} requests/s for this API key exceeded", wait
            )
        bucket.tokens -= 1
