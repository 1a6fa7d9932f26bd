"""The gateway every LLM block calls through: one `openai` async client per provider, a
concurrency limit per provider, retries with backoff, accounting, and recording.

The client runs over aiohttp (`openai.DefaultAioHttpClient`), its connection pool sized to the
provider's concurrency: under 200 calls in flight httpx's pool cost several ms of CPU per call.
Requests go through the client's generic POST as the API's JSON and answers are read as JSON,
not through its typed resources: checking each request against the typed parameters and
building typed models from the answer were the other large share of that CPU.

Retries (429, 5xx, timeouts, dropped connections) are ours rather than the openai client's so
that every attempt is counted and a streamed answer is never retried once tokens have been
shown: the client is built with max_retries=0.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import email.utils
import importlib
import json
import os
import random
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from dagwright.errors import DagwrightError
from dagwright.llm.providers import ProviderConfig, ProviderSettings
from dagwright.llm.recording import Recorder
from dagwright.registry.budget import RetryBudgetSpent, current_budget
from dagwright.registry.context import ModelCall, Usage
from dagwright.registry.services import Secrets

if TYPE_CHECKING:
    import openai

# The openai package takes ~0.5 s to import: it is imported where first needed (the first
# model call), not when the gateway is built, so a server starts faster.

T = TypeVar("T")

# The client's modules (openai with aiohttp, whose import builds a TLS context: ~0.3 s).
_CLIENT_MODULES = ("httpx2", "openai")
_client_ready = threading.Event()
_client_import: concurrent.futures.Future[None] | None = None
_client_import_lock = threading.Lock()


async def _client_imported() -> None:
    """The client's modules imported before the first call uses them, once, by a thread of
    their own: imported on the event loop they froze every request of a server for that long
    (a 335 ms health probe when an evaluation started), and imported with `to_thread` by the
    first calls at once they held the API's threads (the ones its handlers wait on). Not a
    `sys.modules` check: a module is there while another thread is still importing it."""
    global _client_import
    if _client_ready.is_set():
        return
    with _client_import_lock:
        if _client_import is None:
            _client_import = concurrent.futures.Future()
            threading.Thread(
                target=_import_client,
                args=(_client_import,),
                name="dagwright-client-import",
                daemon=True,
            ).start()
        importing = _client_import
    await asyncio.wrap_future(importing)


def _import_client(done: concurrent.futures.Future[None]) -> None:
    try:
        for name in _CLIENT_MODULES:
            importlib.import_module(name)
    except BaseException as exc:  # given to every call waiting (and to the next ones)
        done.set_exception(exc)
        return
    _client_ready.set()
    done.set_result(None)


DeltaFn = Callable[[int, str], None]  # (choice index, text delta)
EventFn = Callable[[dict[str, Any]], None]

# Marks the project's scripted server in its answers (system_fingerprint).
SCRIPTED_FINGERPRINT = "dagwright-scripted"


class LLMError(DagwrightError):
    """A model call failed for good: the provider's own message, and how many attempts."""

    code = "llm_error"


class MissingKeyError(DagwrightError):
    code = "missing_api_key"


class _StreamError(Exception):
    """The provider reported an error inside a stream it had begun with 200."""


class _MalformedAnswer(Exception):
    """The answer is not the API's JSON: not JSON at all, or missing what it must hold."""


def _choice_index(choice: dict[str, Any], n: int) -> int:
    """A choice's index, one of the `n` asked for (a provider's answer is not trusted)."""
    index = choice["index"]
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
        raise _MalformedAnswer(f"a choice index {index!r} (asked for {n})")
    return index


@dataclass(slots=True)
class ChatRequest:
    messages: list[dict[str, Any]]
    model: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    stop: list[str] | None = None
    n: int = 1
    seed: int | None = None
    response_format: dict[str, Any] | None = None
    logprobs: bool = False  # ask for each answer's token log-probabilities
    top_logprobs: int | None = None  # and this many alternatives per token (0-20)

    def parameters(self) -> dict[str, Any]:
        """The optional parameters that were set, as the API names them."""
        params = {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "stop": self.stop,
            "seed": self.seed,
            "response_format": self.response_format,
            "top_logprobs": self.top_logprobs,
        }
        if self.logprobs or self.top_logprobs is not None:
            params["logprobs"] = True
        if self.n != 1:
            params["n"] = self.n
        return {key: value for key, value in params.items() if value is not None}


@dataclass(slots=True)
class CallResult:
    """One model call, retries included."""

    provider: str
    model: str
    choices: list[str]
    finish_reasons: list[str | None]
    prompt_tokens: int
    completion_tokens: int
    latency: float  # seconds from the first attempt to the answer
    attempts: int
    cost: float
    scripted: bool  # answered by the project's scripted server, not a model
    tokens_estimated: bool = False  # the provider reported no usage; counted as chars / 4
    vectors: list[list[float]] = field(default_factory=list)  # embeddings
    # Per choice, when asked for: the answer's log-probability (the sum over its tokens; None
    # when the provider sent none) and its tokens ({token, logprob, top_logprobs}).
    logprobs: list[float | None] = field(default_factory=list)
    token_logprobs: list[list[dict[str, Any]]] = field(default_factory=list)

    @property
    def usage(self) -> Usage:
        return Usage(self.prompt_tokens, self.completion_tokens, self.cost, 1)

    @property
    def call(self) -> ModelCall:
        """What a usage event says of the call besides the counts."""
        return ModelCall(
            self.provider,
            self.model,
            round(self.latency, 6),
            self.attempts,
            self.scripted,
            self.tokens_estimated,
        )


def _token_dict(item: dict[str, Any]) -> dict[str, Any]:
    alternatives = item.get("top_logprobs") or []
    return {
        "token": item["token"],
        "logprob": item["logprob"],
        "top_logprobs": [{"token": a["token"], "logprob": a["logprob"]} for a in alternatives],
    }


def _estimate_tokens(text: str) -> int:
    return max(1, -(-len(text) // 4)) if text else 0


def _retry_after(exc: openai.APIStatusError) -> float | None:
    """Seconds the provider asked us to wait (Retry-After, or OpenAI's retry-after-ms)."""
    headers = exc.response.headers
    try:
        if "retry-after-ms" in headers:
            return float(headers["retry-after-ms"]) / 1000
        if "retry-after" in headers:
            value = headers["retry-after"]
            try:
                return float(value)
            except ValueError:
                when = email.utils.parsedate_to_datetime(value)
                return max(0.0, when.timestamp() - time.time())
    except (ValueError, TypeError):
        return None
    return None


def _provider_message(exc: Exception) -> str:
    import openai

    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        message = body.get("message") if isinstance(body, dict) else None
        return f"HTTP {exc.status_code}: {message or exc.message}"
    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__
        return f"connection failed: {cause or exc.message}"
    return str(exc)


def _json_object(body: bytes | str) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        raise _MalformedAnswer("JSONDecodeError") from None
    if not isinstance(data, dict):
        raise _MalformedAnswer(f"a JSON {type(data).__name__}, not an object")
    return data


async def _sse_data(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The `data:` fields of a server-sent event stream, as bytes. Split here rather than by
    the response's aiter_lines, whose text decoding and line splitting cost about a fifth
    of a streamed call's CPU (the charset looked up in the headers for every chunk); JSON
    reads the UTF-8 bytes itself. Lines end with LF, CRLF or CR, as the SSE format has it."""
    rest = b""
    async for chunk in chunks:
        if b"\r" in chunk:  # a CRLF split between two chunks makes an empty line: skipped
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            if line.startswith(b"data:"):
                yield line[5:].strip()
    if rest.startswith(b"data:"):
        yield rest[5:].strip()


@dataclass(slots=True)
class _Connection:
    loop: asyncio.AbstractEventLoop
    client: openai.AsyncOpenAI
    slots: asyncio.Semaphore
    in_flight: int = 0


class LLMGateway:
    """Model calls for a process. Clients are made lazily per event loop."""

    def __init__(
        self,
        settings: ProviderSettings,
        secrets: Secrets | None = None,
        recorder: Recorder | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        plays_default_script: bool = False,
    ) -> None:
        self.settings = settings
        # No provider configured: the project's own demo script answers (model_access says so).
        self.plays_default_script = plays_default_script
        self._secrets = secrets
        self._recorder = recorder
        self._sleep = sleep
        self._connections: dict[str, _Connection] = {}
        self.max_in_flight: dict[str, int] = {}  # per provider, for tests and monitoring

    # -- connections ---------------------------------------------------------------------

    def _api_key(self, provider: ProviderConfig) -> str:
        if provider.api_key_env:
            key = os.environ.get(provider.api_key_env)
            if not key:
                raise MissingKeyError(
                    f"provider {provider.name!r} reads its API key from the environment "
                    f"variable {provider.api_key_env}, which is not set"
                )
            return key
        if provider.api_key_secret:
            if self._secrets is None:
                raise MissingKeyError(
                    f"provider {provider.name!r} reads its API key from secret "
                    f"{provider.api_key_secret!r}, but no secret store was given"
                )
            return self._secrets.get(provider.api_key_secret)
        # Local servers (vLLM, Ollama, LM Studio, the scripted one) take any key.
        return "not-needed"

    def _connection(self, provider: ProviderConfig) -> _Connection:
        import httpx2
        import openai

        loop = asyncio.get_running_loop()
        known = self._connections.get(provider.name)
        if known is not None and known.loop is loop:
            return known
        key = self._api_key(provider)
        # A pool as large as the calls the provider may have in flight, so a call that holds a
        # slot never waits for a connection; HTTPS_PROXY and the like are honoured (trust_env).
        pool = provider.max_concurrency
        http_client = openai.DefaultAioHttpClient(
            timeout=provider.timeout,
            limits=httpx2.Limits(max_connections=pool, max_keepalive_connections=pool),
            trust_env=True,
        )
        client: openai.AsyncOpenAI
        if provider.kind == "azure":
            assert provider.base_url is not None  # checked by ProviderConfig
            client = openai.AsyncAzureOpenAI(
                azure_endpoint=provider.base_url,
                api_version=provider.api_version,
                api_key=key,
                timeout=provider.timeout,
                max_retries=0,
                http_client=http_client,
            )
        else:
            client = openai.AsyncOpenAI(
                base_url=provider.base_url,
                api_key=key,
                timeout=provider.timeout,
                max_retries=0,
                http_client=http_client,
            )
        connection = _Connection(loop, client, asyncio.Semaphore(provider.max_concurrency))
        self._connections[provider.name] = connection
        return connection

    async def aclose(self) -> None:
        for connection in self._connections.values():
            await connection.client.close()
        self._connections.clear()

    # -- the retry loop ------------------------------------------------------------------

    async def _attempts(
        self,
        provider: ProviderConfig,
        call: Callable[[openai.AsyncOpenAI], Awaitable[T]],
        shown: Callable[[], bool] = lambda: False,
    ) -> tuple[T, int]:
        """Run `call` until it succeeds, retrying what may pass on its own; (result, attempts).
        `shown` tells whether a streamed answer has reached the user, which rules out a
        retry that would show it twice."""
        await _client_imported()
        import openai

        retryable = (
            openai.RateLimitError,
            openai.InternalServerError,
            openai.APIConnectionError,
        )
        connection = self._connection(provider)
        # The run's retry budget (registry/budget.py), shared with the node's error policy:
        # retries here may cost only what is left of it, so the levels do not multiply.
        budget = current_budget()

        async def once() -> T:
            async with connection.slots:
                connection.in_flight += 1
                peak = self.max_in_flight.get(provider.name, 0)
                self.max_in_flight[provider.name] = max(peak, connection.in_flight)
                try:
                    return await call(connection.client)
                finally:
                    connection.in_flight -= 1

        attempt = 0
        while True:
            attempt += 1
            try:
                if attempt == 1 or budget is None:
                    return await once(), attempt
                return await budget.retried(once, f"provider {provider.name!r}"), attempt
            except retryable as exc:
                if attempt >= provider.max_attempts or shown():
                    raise LLMError(
                        f"provider {provider.name!r} failed after {attempt} attempt(s): "
                        f"{_provider_message(exc)}"
                    ) from None
                delay = self._delay(provider, attempt, exc)
                if budget is not None and not budget.grants(delay):
                    raise RetryBudgetSpent(
                        f"provider {provider.name!r} failed after {attempt} attempt(s), not "
                        f"retried: the run's retry budget ({budget.seconds:g}s) is spent: "
                        f"{_provider_message(exc)}"
                    ) from None
                await self._sleep(delay)
                if budget is not None:
                    budget.charge(delay)
            except openai.APIStatusError as exc:
                raise LLMError(
                    f"provider {provider.name!r} refused the request: {_provider_message(exc)}"
                ) from None
            except _StreamError as exc:
                # The answer began with 200 and then reported an error: not retried.
                raise LLMError(
                    f"provider {provider.name!r} refused the request: HTTP 200: {exc}"
                ) from None
            except _MalformedAnswer as exc:
                raise LLMError(
                    f"provider {provider.name!r} sent a response that is not valid JSON "
                    f"for the API ({exc})"
                ) from None

    @staticmethod
    def _delay(provider: ProviderConfig, attempt: int, exc: Exception) -> float:
        """Exponential backoff with jitter; at least what Retry-After asks, within backoff_max."""
        import openai

        ceiling = min(provider.backoff_max, provider.backoff_base * 2.0 ** (attempt - 1))
        delay = ceiling / 2 + random.uniform(0, ceiling / 2)
        if isinstance(exc, openai.APIStatusError):
            asked = _retry_after(exc)
            if asked is not None:
                delay = max(delay, min(asked, provider.backoff_max))
        return delay

    # -- one exchange --------------------------------------------------------------------

    # The client's generic POST, not its typed resources (client.chat.completions...): those
    # walk every request against its TypedDicts before sending (~1 ms of CPU per call under
    # load) and build typed models from the answer. Azure's client still puts the deployment
    # in the path of these endpoints, from the body's model.

    @staticmethod
    async def _post(
        client: openai.AsyncOpenAI, endpoint: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """POST and the answer's JSON object, as sent."""
        import httpx2

        response = await client.post(endpoint, cast_to=httpx2.Response, body=payload)
        return _json_object(response.content)

    @staticmethod
    async def _post_streamed(
        client: openai.AsyncOpenAI, endpoint: str, payload: dict[str, Any], on_event: EventFn
    ) -> None:
        """POST asking for a stream; each server-sent event's JSON to `on_event` as it comes.
        (OpenAI-compatible servers put each event on one `data:` line.) The client hands the
        answer over unread, as `with_streaming_response` has it do, rather than as its
        AsyncStream, which rebuilds every event's JSON through its model constructor."""
        import httpx2
        import openai
        from openai._constants import RAW_RESPONSE_HEADER

        body = payload | {"stream": True, "stream_options": {"include_usage": True}}
        response = await client.post(
            endpoint,
            cast_to=httpx2.Response,
            body=body,
            options={"headers": {RAW_RESPONSE_HEADER: "stream"}},
        )
        try:
            async for data in _sse_data(response.aiter_bytes()):
                if data == b"[DONE]":
                    continue
                event = _json_object(data)
                if "error" in event:
                    error = event["error"]
                    message = error.get("message") if isinstance(error, dict) else error
                    raise _StreamError(f"in the stream: {message}")
                on_event(event)
        except httpx2.TimeoutException as exc:
            raise openai.APITimeoutError(request=response.request) from exc
        except httpx2.TransportError as exc:
            raise openai.APIConnectionError(request=response.request) from exc
        finally:
            await response.aclose()

    # -- calls ---------------------------------------------------------------------------

    async def chat(  # noqa: C901, PLR0915
        self, provider_name: str | None, request: ChatRequest, on_delta: DeltaFn | None = None
    ) -> CallResult:
        provider = self.settings.get(provider_name)
        model = request.model or provider.default_model
        params = request.parameters()
        started = time.perf_counter()
        texts = [""] * request.n
        finish: list[str | None] = [None] * request.n
        fingerprint: list[str | None] = [None]
        usage: list[dict[str, Any] | None] = [None]
        shown = [False]
        tokens: list[list[dict[str, Any]]] = [[] for _ in range(request.n)]

        def keep_tokens(index: int, logprobs: dict[str, Any] | None) -> None:
            if logprobs is not None and logprobs.get("content"):
                tokens[index].extend(_token_dict(item) for item in logprobs["content"])

        async def plain(client: openai.AsyncOpenAI) -> None:
            payload = {"model": model, "messages": request.messages, **params}
            response = await self._post(client, "/chat/completions", payload)
            try:
                for choice in response["choices"]:
                    index = _choice_index(choice, request.n)
                    texts[index] = choice["message"].get("content") or ""
                    finish[index] = choice.get("finish_reason")
                    keep_tokens(index, choice.get("logprobs"))
            except (KeyError, TypeError, IndexError, AttributeError) as exc:
                raise _MalformedAnswer(f"no {exc}") from None
            fingerprint[0], usage[0] = response.get("system_fingerprint"), response.get("usage")

        def chunk(event: dict[str, Any]) -> None:
            fingerprint[0] = event.get("system_fingerprint") or fingerprint[0]
            if event.get("usage") is not None:
                usage[0] = event["usage"]
            try:
                choices = [
                    (
                        _choice_index(c, request.n),
                        c.get("delta", {}).get("content"),
                        c.get("finish_reason"),
                        c,
                    )
                    for c in event.get("choices") or ()
                ]
            except (KeyError, TypeError, AttributeError) as exc:
                raise _MalformedAnswer(f"no {exc}") from None
            for index, delta, finish_reason, choice in choices:
                keep_tokens(index, choice.get("logprobs"))
                if delta:
                    texts[index] += delta
                    shown[0] = True
                    assert on_delta is not None
                    on_delta(index, delta)
                if finish_reason:
                    finish[index] = finish_reason

        async def streamed(client: openai.AsyncOpenAI) -> None:
            texts[:] = [""] * request.n
            tokens[:] = [[] for _ in range(request.n)]
            payload = {"model": model, "messages": request.messages, **params}
            await self._post_streamed(client, "/chat/completions", payload, chunk)

        call = streamed if on_delta is not None else plain
        _, attempts = await self._attempts(provider, call, lambda: shown[0])
        prompt_text = "".join(str(m.get("content", "")) for m in request.messages)
        result = self._result(
            provider,
            model,
            texts,
            finish,
            usage[0],
            fingerprint[0],
            prompt_text,
            started,
            attempts,
        )
        if request.logprobs or request.top_logprobs is not None:
            result.token_logprobs = tokens
            result.logprobs = [
                sum(t["logprob"] for t in choice) if choice else None for choice in tokens
            ]
        self._record("chat", model, {"messages": request.messages, **params}, result)
        return result

    async def complete(
        self,
        provider_name: str | None,
        prompt: str,
        *,
        model: str | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        stop: list[str] | None = None,
        on_delta: DeltaFn | None = None,
    ) -> CallResult:
        """A text completion (/v1/completions), for providers that still offer it."""
        provider = self.settings.get(provider_name)
        chosen = model or provider.default_model
        params: dict[str, Any] = {
            key: value
            for key, value in {
                "temperature": temperature,
                "max_tokens": max_tokens,
                "stop": stop,
            }.items()
            if value is not None
        }
        started = time.perf_counter()
        text = [""]
        finish: list[str | None] = [None]
        fingerprint: list[str | None] = [None]
        usage: list[dict[str, Any] | None] = [None]
        shown = [False]

        def chunk(event: dict[str, Any]) -> None:
            fingerprint[0] = event.get("system_fingerprint") or fingerprint[0]
            if event.get("usage") is not None:
                usage[0] = event["usage"]
            for choice in event.get("choices") or ():
                delta = choice.get("text") if isinstance(choice, dict) else None
                if delta:
                    text[0] += delta
                    shown[0] = True
                    assert on_delta is not None
                    on_delta(0, delta)
                if isinstance(choice, dict) and choice.get("finish_reason"):
                    finish[0] = choice["finish_reason"]

        async def call(client: openai.AsyncOpenAI) -> None:
            text[0] = ""
            payload = {"model": chosen, "prompt": prompt, **params}
            if on_delta is not None:
                await self._post_streamed(client, "/completions", payload, chunk)
                return
            response = await self._post(client, "/completions", payload)
            try:
                first = response["choices"][0]
                text[0], finish[0] = first["text"], first.get("finish_reason")
            except (KeyError, TypeError, IndexError) as exc:
                raise _MalformedAnswer(f"no {exc}") from None
            fingerprint[0], usage[0] = response.get("system_fingerprint"), response.get("usage")

        _, attempts = await self._attempts(provider, call, lambda: shown[0])
        result = self._result(
            provider, chosen, text, finish, usage[0], fingerprint[0], prompt, started, attempts
        )
        self._record("completions", chosen, {"prompt": prompt, **params}, result)
        return result

    async def embed(
        self,
        provider_name: str | None,
        texts: list[str],
        *,
        model: str | None = None,
        dimensions: int | None = None,
    ) -> CallResult:
        provider = self.settings.get(provider_name)
        chosen = model or provider.default_model
        started = time.perf_counter()
        extra: dict[str, Any] = {"dimensions": dimensions} if dimensions is not None else {}

        async def call(client: openai.AsyncOpenAI) -> tuple[list[list[float]], int]:
            payload = {"model": chosen, "input": texts, **extra}
            response = await self._post(client, "/embeddings", payload)
            try:
                items = sorted(response["data"], key=lambda item: item["index"])
                vectors = [item["embedding"] for item in items]
                used = response.get("usage") or {}
                return vectors, int(used.get("prompt_tokens", 0))
            except (KeyError, TypeError, ValueError) as exc:
                raise _MalformedAnswer(f"no {exc}") from None

        (vectors, prompt_tokens), attempts = await self._attempts(provider, call)
        result = CallResult(
            provider=provider.name,
            model=chosen,
            choices=[],
            finish_reasons=[],
            prompt_tokens=prompt_tokens,
            completion_tokens=0,
            latency=time.perf_counter() - started,
            attempts=attempts,
            cost=provider.cost(prompt_tokens, 0),
            scripted=provider.scripted,
            vectors=vectors,
        )
        self._record("embeddings", chosen, {"input": texts, **extra}, result)
        return result

    # -- accounting ----------------------------------------------------------------------

    def _result(
        self,
        provider: ProviderConfig,
        model: str,
        texts: list[str],
        finish: list[str | None],
        usage: dict[str, Any] | None,
        fingerprint: str | None,
        prompt_text: str,
        started: float,
        attempts: int,
    ) -> CallResult:
        if usage is not None:
            prompt_tokens = int(usage.get("prompt_tokens", 0))
            completion_tokens = int(usage.get("completion_tokens", 0))
        else:
            prompt_tokens = _estimate_tokens(prompt_text)
            completion_tokens = sum(_estimate_tokens(t) for t in texts)
        return CallResult(
            provider=provider.name,
            model=model,
            choices=list(texts),
            finish_reasons=list(finish),
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency=time.perf_counter() - started,
            attempts=attempts,
            cost=provider.cost(prompt_tokens, completion_tokens),
            scripted=provider.scripted or fingerprint == SCRIPTED_FINGERPRINT,
            tokens_estimated=usage is None,
        )

    def _record(
        self, endpoint: str, model: str, request: dict[str, Any], result: CallResult
    ) -> None:
        if self._recorder is not None:
            self._recorder.write(
                endpoint,
                model,
                request,
                result.choices,
                result.vectors,
                result.prompt_tokens,
                result.completion_tokens,
            )
