"""Scripts for the scripted model server: what it answers, to which requests, and how.

A script is a YAML (``.yaml``/``.yml``) or JSON (``.json``) file. Every field is optional::

    latency_ms: 0              # delay before each reply (before the first chunk when streaming)
    embedding_dimensions: 64   # size of the hashed embedding vectors (a request's
                               # `dimensions` wins)
    api_key: null              # if set, /v1 requests must send it as `Authorization: Bearer ...`
                               # (GET /_scripted/stats and POST /_scripted/reset stay open)
    models: [scripted]         # listed by GET /v1/models, with every exact model name in rules
    default_reply: null        # the reply when no rule matches (a reply, as below);
                               # null: such a request gets a 400 error saying nothing matched
    rules:
      - name: bonus            # optional; defaults to "rule-<index>" (0-based). Names are unique.
        endpoint: chat         # chat | completions | embeddings | any
                               # (default: chat and completions)
        model: "planner*"      # optional; an exact model name or an fnmatch glob
        match: "(?i)year-end bonus"  # optional regex, searched (re.search) in the last message's
                               # text (chat), the prompt (completions; the first one if several)
                               # or the first input (embeddings)
        reply: "text"          # shorthand for `replies: ["text"]`; give reply or replies
        replies:               # a sequence: the k-th request this rule answers gets replies[k];
                               # after the last, the last repeats (with `cycle: true`, the
                               # sequence starts over)
          - "plain text"       # a string is {content: "plain text"}
          - content: "text"
            choices: ["a", "b"]  # for n samples: choice i gets choices[i % len];
                                 # without it every choice gets `content`
            latency_ms: 100      # overrides the script's latency_ms for this reply
            finish_reason: stop  # stop | length | content_filter | tool_calls
            usage: {prompt_tokens: 10, completion_tokens: 3}  # overrides the estimate
            vectors: [[0.1, 0.2]]  # embeddings only: one vector per input, returned as given
            logprobs: [-0.1, -2.3]  # chat: choice i's log-probability (logprobs[i % len]), sent
                                    # only when the request asks for logprobs, as token
                                    # log-probabilities that sum to it; without it: 0.0
            fault: rate_limit    # rate_limit | server_error | hang | malformed | bad_request
            retry_after: 1       # seconds (float allowed) for rate_limit; default 1
            hang_seconds: 600    # for hang: wait this long, then answer normally
            message: "..."       # the error message of a fault
        cycle: false

Rules are tried in order; the first whose endpoint, model and match all fit the request
answers it. A field left out of a rule fits every request (but without `endpoint`, embeddings
requests are not answered). A request no rule fits gets `default_reply`, or, without one, a
400 error naming its model and last message.

Replies are echoed as written, also in JSON mode (`response_format`): write JSON replies for
requests that ask for JSON. Token usage is estimated as one token per four characters (at least
one per text) unless the reply gives `usage`. Embeddings are deterministic: the lowercased
words of the text hashed into signed buckets, normalised to length 1, unless the reply gives
`vectors`.

Faults:

- ``rate_limit``: HTTP 429 with ``Retry-After`` (whole seconds, rounded up) and
  ``retry-after-ms`` headers.
- ``server_error``: HTTP 500. ``bad_request``: HTTP 400.
- ``hang``: waits ``hang_seconds`` without blocking other requests, then answers normally
  (a client's timeout usually fires first). The wait ends early when the client leaves
  (logged with status 499) or the server is stopping (503).
- ``malformed``: HTTP 200 whose body is truncated JSON (for a streaming request, a
  server-sent event carrying truncated JSON).

Every answer says it is scripted: the ``x-dagwright-scripted: 1`` header, ids starting with
``scripted-`` and ``"system_fingerprint": "dagwright-scripted"``.
"""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from dagwright.errors import DagwrightError, describe_validation_error

Endpoint = Literal["chat", "completions", "embeddings"]
RuleEndpoint = Literal["chat", "completions", "embeddings", "any"]
Fault = Literal["rate_limit", "server_error", "hang", "malformed", "bad_request"]
FinishReason = Literal["stop", "length", "content_filter", "tool_calls"]

# The name under which replies from `default_reply` are counted and logged.
DEFAULT_REPLY_NAME = "default_reply"
DEFAULT_RETRY_AFTER = 1.0
_GLOB_CHARS = frozenset("*?[")


class ScriptError(DagwrightError):
    """A script (or a recording to replay) cannot be read or is not valid."""

    code = "invalid_script"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReplyUsage(_Strict):
    """Token counts to report instead of the estimate; a count left out is estimated."""

    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)


class Reply(_Strict):
    """One scripted answer (or fault). A plain string stands for ``{content: string}``."""

    content: str = ""
    choices: list[str] | None = Field(default=None, min_length=1)
    latency_ms: float | None = Field(default=None, ge=0)
    finish_reason: FinishReason = "stop"
    usage: ReplyUsage | None = None
    vectors: list[list[float]] | None = Field(default=None, min_length=1)
    logprobs: list[float] | None = Field(default=None, min_length=1)
    fault: Fault | None = None
    retry_after: float | None = Field(default=None, ge=0)
    hang_seconds: float = Field(default=600.0, ge=0)
    message: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, data: Any) -> Any:
        return {"content": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _fault_options(self) -> Reply:
        # Options of another fault are almost always a typo in the script: say so.
        if self.retry_after is not None and self.fault != "rate_limit":
            raise ValueError("retry_after applies only to fault: rate_limit")
        if "hang_seconds" in self.model_fields_set and self.fault != "hang":
            raise ValueError("hang_seconds applies only to fault: hang")
        return self

    def logprob(self, index: int) -> float:
        """The scripted log-probability of choice ``index`` (0.0 when none is scripted)."""
        return self.logprobs[index % len(self.logprobs)] if self.logprobs else 0.0

    def choice(self, index: int) -> str:
        """The text of choice ``index`` (of n samples)."""
        if self.choices:
            return self.choices[index % len(self.choices)]
        return self.content


class Rule(_Strict):
    """Which requests a rule answers, and its replies."""

    name: str = ""
    endpoint: RuleEndpoint | None = None
    model: str | None = None
    match: str | None = None
    reply: Reply | None = None
    replies: list[Reply] | None = Field(default=None, min_length=1)
    cycle: bool = False

    _pattern: re.Pattern[str] | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _check(self) -> Rule:
        label = f"rule {self.name!r}" if self.name else "rule"
        if (self.reply is None) == (self.replies is None):
            raise ValueError(f"{label}: give either reply or replies (exactly one)")
        if self.match is not None:
            try:
                self._pattern = re.compile(self.match)
            except re.error as exc:
                raise ValueError(f"{label}: invalid regex {self.match!r} in match: {exc}") from None
        return self

    @property
    def sequence(self) -> list[Reply]:
        """The replies in order (``reply`` is a sequence of one)."""
        if self.replies is not None:
            return self.replies
        assert self.reply is not None
        return [self.reply]

    def fits(self, endpoint: Endpoint, model: str, text: str) -> bool:
        """Whether this rule answers a request to ``endpoint`` for ``model`` about ``text``."""
        if self.endpoint is None:
            if endpoint == "embeddings":
                return False
        elif self.endpoint not in ("any", endpoint):
            return False
        if self.model is not None and not fnmatch.fnmatchcase(model, self.model):
            return False
        return self._pattern is None or self._pattern.search(text) is not None


class Script(_Strict):
    """A whole script: settings, rules and the default reply."""

    latency_ms: float = Field(default=0.0, ge=0)
    embedding_dimensions: int = Field(default=64, ge=1, le=65536)
    api_key: str | None = None
    models: list[str] = Field(default_factory=lambda: ["scripted"])
    default_reply: Reply | None = None
    rules: list[Rule] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _name_rules(cls, data: Any) -> Any:
        # Names are given before the rules are validated so that a rule's own errors
        # (a bad regex) can name it.
        if isinstance(data, dict) and isinstance(data.get("rules"), list):
            rules = [
                {**rule, "name": f"rule-{index}"}
                if isinstance(rule, dict) and not rule.get("name")
                else rule
                for index, rule in enumerate(data["rules"])
            ]
            data = {**data, "rules": rules}
        return data

    @model_validator(mode="after")
    def _unique_names(self) -> Script:
        seen: dict[str, int] = {}
        for index, rule in enumerate(self.rules):
            if rule.name == DEFAULT_REPLY_NAME:
                raise ValueError(f"rules[{index}]: the name {DEFAULT_REPLY_NAME!r} is reserved")
            if rule.name in seen:
                raise ValueError(
                    f"rules[{index}]: duplicate rule name {rule.name!r} "
                    f"(also rules[{seen[rule.name]}])"
                )
            seen[rule.name] = index
        return self

    def find_rule(self, endpoint: Endpoint, model: str, text: str) -> tuple[int, Rule] | None:
        """The first rule (with its index) that answers the request, if any."""
        for index, rule in enumerate(self.rules):
            if rule.fits(endpoint, model, text):
                return index, rule
        return None

    def model_names(self) -> list[str]:
        """The models to list: ``models`` plus every exact (non-glob) model name in rules."""
        exact = [
            rule.model
            for rule in self.rules
            if rule.model is not None and not _GLOB_CHARS & set(rule.model)
        ]
        return list(dict.fromkeys([*self.models, *exact]))


def parse_script(data: Any, source: str = "<script>") -> Script:
    """Validate already-parsed script data; errors are `ScriptError`s naming ``source``."""
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        raise ScriptError(f"{source}: a script must be a mapping of settings, not {kind}")
    try:
        return Script.model_validate(data)
    except ValidationError as exc:
        raise ScriptError(f"{source}: invalid script: {describe_validation_error(exc)}") from None


def default_script_path() -> Path:
    """The packaged script of the offline demo (``default.yaml`` beside this module)."""
    return Path(__file__).with_name("default.yaml")


def default_script() -> Script:
    """The offline demo's script: a plainly labelled default reply and a few example rules."""
    return load_script(default_script_path())


def load_script(path: Path | str) -> Script:
    """Read a script from a YAML (.yaml, .yml) or JSON (.json) file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".yaml", ".yml", ".json"):
        raise ScriptError(f"{path}: a script must be a .yaml, .yml or .json file")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScriptError(f"{path}: cannot read the script: {exc.strerror}") from None
    try:
        data = json.loads(text) if suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        kind = "JSON" if suffix == ".json" else "YAML"
        raise ScriptError(f"{path}: not valid {kind}: {exc}") from None
    return parse_script(data, str(path))
