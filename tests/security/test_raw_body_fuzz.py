"""A fuzzer for what schemathesis never reaches (test_api_fuzz.py generates from the OpenAPI
document, which has no raw bodies and no hostile headers): the routes that read the raw body
or headers, against a `dagwright serve` process with an admin token. Webhooks (signed right
or not, so hostile bodies reach the inputs too), a published call (its fast path reads the
raw body, the content type and `traceparent`), chat completions, and the admin API's bearer
header; with headers that are non-ASCII, huge, duplicated or malformed, and bodies of every
content type holding NUL, surrogates, bad UTF-8, deep nesting, numbers JSON cannot carry.

Seeded (a failure names its case and repeats), bounded in count and time. Asserts no answer
is a 5xx, and nothing is half-written: every firing has its run or its error, each accepted
webhook call has exactly one firing and one remembered signature, and no run was recorded
for a refused call."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from dagwright.services.webhook_signing import SIGNATURE_HEADER, TIMESTAMP_HEADER, signature
from dagwright.store.db import database_url
from support.probe import health_probe
from support.server import Api, ServerProcess, echo_flow, key_headers

SEED = 29
CASES = 1000
BUDGET_S = 90.0  # on a busy machine the run stops early, having sent at least MIN_CASES
MIN_CASES = 60
ADMIN = "fuzz-admin-token"
SECRET = "fuzz-secret-value"

Headers = list[tuple[bytes, bytes]]


@dataclass(frozen=True)
class Target:
    name: str
    method: str
    path: str
    auth: Headers  # the credentials a well-formed call carries


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Api]]:
    data_dir: Path = tmp_path_factory.mktemp("raw-fuzz")
    env = {"DAGWRIGHT_ADMIN_TOKEN": ADMIN, "DAGWRIGHT_WEBHOOK_RATE_LIMIT": "100000"}
    server = ServerProcess(data_dir=data_dir, replica="raw-fuzz", env=env).start()
    api = server.api(ADMIN)
    try:
        yield server, api
    finally:
        api.close()
        server.stop()


# -- what is sent -------------------------------------------------------------------------


def _bodies(rng: random.Random) -> list[bytes]:
    deep = rng.choice([70, 1000, 20000])
    return [
        b"",
        b'{"question": "fine"}',
        b'{"question": "a\\u0000b"}',
        b'{"question": "\\udc00"}',
        b'{"question": "\xed\xa0\x80"}',  # a surrogate as UTF-8 bytes
        b'{"question": "\xff\xfe"}',  # not UTF-8
        b'{"question": NaN}',
        b'{"question": -Infinity}',
        b'{"question": 1e999}',
        b'{"question": ' + b"9" * 5000 + b"}",  # past Python's digit limit
        b'{"question": ' + b"1" * 400 + b".0}",
        b'{"question": ' + b"[" * deep + b"]" * deep + b"}",
        b"[" * deep,
        b'{"question": "' + b"x" * rng.choice([10, 100_000]) + b'"}',
        b'{"question": "unterminated',
        b"question=form&a=b",
        b"--x\r\nContent-Disposition: form-data; name=q\r\n\r\nv\r\n--x--\r\n",
        bytes(rng.randrange(256) for _ in range(rng.choice([1, 64, 4096]))),
        b'{"inputs": {"question": "\\u0000"}, "stream": true}',
        b'{"inputs": {"question": NaN}, "async": true}',
        b'{"model": "fuzzed", "messages": [{"role": "user", "content": "\\ud800"}]}',
        b'{"model": "fuzzed", "n": 1e999, "messages": []}',
        b'{"question": "dup", "question": "\\u0000"}',
    ]


CONTENT_TYPES: list[bytes | None] = [
    None,
    b"application/json",
    b"application/json; charset=utf-16",
    b"text/plain",
    b"application/octet-stream",
    b"application/x-www-form-urlencoded",
    b"multipart/form-data; boundary=x",
    b"application/vnd.api+json",
    b"text/\xff\xfe",
    b"",
]


def _hostile_value(rng: random.Random) -> bytes:
    return rng.choice(
        [
            b"\xff\xfe\xfd",
            "é€𝄞".encode(),
            b"a" * rng.choice([200, 7000]),
            b"sha256=" + b"g" * 64,
            b"sha256=" + b"0" * 64,
            b"-1",
            b"99999999999999999999999",
            b"Bearer",
            b"Bearer \xc3\xa9",
            b"00-" + b"f" * 32 + b"-" + b"f" * 16 + b"-01",
            b"00-\xff-\xff-01",
            b"x" * 1000,
        ]
    )


HOSTILE_NAMES = [
    SIGNATURE_HEADER.encode(),
    TIMESTAMP_HEADER.encode(),
    b"Authorization",
    b"X-API-Key",
    b"traceparent",
    b"Content-Type",
    b"Content-Encoding",
]


def _case(rng: random.Random, targets: list[Target]) -> tuple[Target, Headers, bytes, bool]:
    """One request: (target, headers, body, whether the webhook signature is valid)."""
    target = rng.choice(targets)
    body = rng.choice(_bodies(rng))
    headers: Headers = list(target.auth) if rng.random() < 0.8 else []
    kind = rng.choice(CONTENT_TYPES)
    if kind is not None:
        headers.append((b"Content-Type", kind))
    signed = target.name == "webhook" and rng.random() < 0.6
    if signed:
        at = int(time.time())
        headers.append((TIMESTAMP_HEADER.encode(), str(at).encode()))
        headers.append((SIGNATURE_HEADER.encode(), signature(SECRET, at, body).encode()))
    for _ in range(rng.choice([0, 0, 1, 2, 3])):  # hostile, duplicated or replacing ones
        name = rng.choice(HOSTILE_NAMES)
        if rng.random() < 0.5:
            headers = [(k, v) for k, v in headers if k.lower() != name.lower()]
            signed = signed and name not in (SIGNATURE_HEADER.encode(), TIMESTAMP_HEADER.encode())
        headers.append((name, _hostile_value(rng)))
    return target, headers, body, signed


# -- checking -------------------------------------------------------------------------------


def _one_value(data_dir: Path, sql: str) -> int:
    engine = create_engine(database_url(data_dir), poolclass=NullPool)
    try:
        with engine.connect() as conn:
            return int(conn.execute(text(sql)).scalar_one())
    finally:
        engine.dispose()


def test_raw_bodies_and_hostile_headers_never_5xx_nor_half_write(
    fuzzed: tuple[ServerProcess, Api],
) -> None:
    server, api = fuzzed
    key = api.published_app("fuzzed", echo_flow())
    assert api.http.put("/api/v1/secrets/fuzz_key", json={"value": SECRET}).status_code == 204
    hook = api.http.post(
        "/api/v1/apps/fuzzed/triggers",
        json={"kind": "webhook", "name": "fuzz", "secret_name": "fuzz_key"},
    ).json()
    admin = [(b"Authorization", f"Bearer {ADMIN}".encode())]
    keyed = [(k.encode(), v.encode()) for k, v in key_headers(key).items()]
    targets = [
        Target("webhook", "POST", hook["url"], []),
        Target("published", "POST", "/api/v1/apps/fuzzed/run", keyed),
        Target("chat", "POST", "/v1/chat/completions", keyed),
        Target("admin", "POST", "/api/v1/apps", admin),
        Target("admin-read", "GET", "/api/v1/apps", admin),
        # Dataset uploads read the raw body too; their own hardening (issue 29, item 10) is
        # another change's, which adds them here.
    ]
    rng = random.Random(SEED)
    failures: list[str] = []
    accepted_hooks = 0
    sent = 0
    deadline = time.monotonic() + BUDGET_S
    with (
        httpx.Client(base_url=server.base_url, timeout=60.0) as client,
        health_probe(server.base_url, limit_s=2.0),
    ):
        for number in range(CASES):
            if time.monotonic() > deadline:
                break
            target, headers, body, signed = _case(rng, targets)
            try:
                answer = client.request(target.method, target.path, content=body, headers=headers)
            except httpx.LocalProtocolError:
                continue  # not sendable over HTTP/1.1 at all: no server sees it
            except httpx.TransportError as exc:
                failures.append(
                    f"case {number} ({target.name}, {headers!r}, {body[:80]!r}): {exc!r}"
                )
                continue
            sent += 1
            if answer.status_code >= 500:
                failures.append(
                    f"case {number} ({target.name}, {headers!r}, {body[:80]!r}): "
                    f"{answer.status_code} {answer.text[:200]}"
                )
            if target.name == "webhook" and answer.status_code == 202:
                accepted_hooks += 1
                assert signed, f"case {number}: an unsigned call fired"
    assert not failures, "\n".join(failures[:10])
    assert sent >= MIN_CASES, f"only {sent} requests in {BUDGET_S}s"
    assert accepted_hooks > 0  # some hostile bodies did reach the inputs

    database = server.data_dir
    firings = _one_value(database, "SELECT count(*) FROM trigger_firings")
    assert firings == accepted_hooks  # a refused call wrote no firing
    half_written = _one_value(
        database,
        "SELECT count(*) FROM trigger_firings WHERE run_id IS NULL AND error IS NULL",
    )
    assert half_written == 0
    assert _one_value(database, "SELECT count(*) FROM webhook_deliveries") == accepted_hooks
