"""The database tables. Changing one means adding a migration (store/migrations/versions).

- An app has immutable versions (a tree through `parent_id`) and a pointer to the published one.
- A version keeps the graph (the flow document without editor positions) apart from the
  layout (positions by node id), so moving a node is not a change of the graph.
- A run is written before it starts; its node results are written as they finish.
- Every server process holds a replica lease (a `replicas` row it keeps fresh); a run names
  the lease of the process that runs it, so the runs of a process that died can be closed.
- API keys are stored as hashes; secrets as ciphertext.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlmodel import Field, SQLModel

RUN_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled", "interrupted")
FINAL_STATUSES = ("succeeded", "failed", "cancelled", "interrupted")


def new_id() -> str:
    return uuid.uuid4().hex


def utcnow() -> datetime:
    return datetime.now(UTC)


def _json(nullable: bool = True) -> Any:
    return Field(default=None, sa_column=Column(JSON, nullable=nullable))


class App(SQLModel, table=True):
    __tablename__ = "apps"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    slug: str = Field(index=True, unique=True, max_length=64)
    name: str = Field(max_length=200)
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    # How the published endpoint runs ({"run_timeout_s": ...}); None: the server's defaults.
    settings: dict[str, Any] | None = _json()
    # apps and versions point at each other: this key is added after both tables exist.
    published_version_id: str | None = Field(
        default=None,
        sa_column=Column(
            String(32),
            ForeignKey("versions.id", use_alter=True, name="fk_apps_published_version"),
            nullable=True,
        ),
    )
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class Version(SQLModel, table=True):
    __tablename__ = "versions"
    __table_args__ = (UniqueConstraint("app_id", "number", name="uq_versions_app_number"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    app_id: str = Field(foreign_key="apps.id", index=True, max_length=32)
    number: int  # 1, 2, 3... per app, in order of creation
    parent_id: str | None = Field(default=None, foreign_key="versions.id", max_length=32)
    graph: dict[str, Any] = _json(nullable=False)  # the flow document, positions removed
    layout: dict[str, Any] = _json(nullable=False)  # node id -> {"x": .., "y": ..}
    note: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    author: str = Field(default="", max_length=200)
    created_at: datetime = Field(default_factory=utcnow)


class Run(SQLModel, table=True):
    __tablename__ = "runs"
    __table_args__ = (Index("ix_runs_app_created", "app_id", "created_at"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    app_id: str | None = Field(default=None, foreign_key="apps.id", max_length=32)
    version_id: str | None = Field(default=None, foreign_key="versions.id", max_length=32)
    parent_run_id: str | None = Field(default=None, index=True, max_length=32)
    parent_node: str | None = Field(default=None, max_length=64)
    mode: str = Field(default="debug", max_length=16)  # debug | published | invoke
    status: str = Field(default="queued", index=True, max_length=16)
    inputs: dict[str, Any] = _json(nullable=False)
    outputs: dict[str, Any] | None = _json()
    error: dict[str, Any] | None = _json()  # {code, message, node}
    usage: dict[str, Any] | None = _json()  # {prompt_tokens, completion_tokens, cost, calls}
    replica: str = Field(default="", max_length=64)  # the lease id (replicas.id) of its process
    cancel_requested_at: datetime | None = None  # set by any replica; the owner cancels
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    finished_at: datetime | None = None
    duration: float | None = None  # seconds
    # The queue job running it (queue mode, services/queue): the queue resumes such a run
    # when its worker dies, so the recovery of dead processes' runs leaves it alone.
    job_id: int | None = Field(default=None, sa_column=Column(BigInteger, nullable=True))


class RunNode(SQLModel, table=True):
    """One node's result in a run: the per-node trace the debug panel shows."""

    __tablename__ = "run_nodes"

    run_id: str = Field(foreign_key="runs.id", primary_key=True, max_length=32)
    # The node's id, or its path inside sub-flows/maps/repeats (`refine[2]/sql_check`), which
    # nesting makes arbitrarily long (migration 0013).
    node: str = Field(sa_column=Column(Text, primary_key=True))
    block: str = Field(default="", max_length=64)
    # succeeded | reused | skipped | failed | cancelled; "running" only for a not-retryable
    # block begun in a durable run (services/queue), until it settles.
    status: str = Field(max_length=16)
    inputs: dict[str, Any] | None = _json()
    output: Any = _json()
    branch: str | None = Field(default=None, max_length=64)
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    started: float | None = None  # seconds since the run started
    duration: float | None = None
    usage: dict[str, Any] | None = _json()


class Replica(SQLModel, table=True):
    """A server process's lease: inserted at start, its heartbeat refreshed every few seconds,
    deleted at a clean shut-down. A process whose heartbeat is stale is taken for dead."""

    __tablename__ = "replicas"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)  # one per process
    name: str = Field(max_length=255)  # the configured replica name (DAGWRIGHT_REPLICA)
    pid: int
    host: str = Field(max_length=255)
    # Where `pid` means something: the kernel's boot id and the PID namespace (Linux), so that
    # a process on another machine or in another container is never looked up by its pid.
    pid_namespace: str | None = Field(default=None, max_length=128)
    started_at: datetime = Field(default_factory=utcnow)
    heartbeat_at: datetime = Field(default_factory=utcnow, index=True)


class ApiKey(SQLModel, table=True):
    __tablename__ = "api_keys"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    app_id: str = Field(foreign_key="apps.id", index=True, max_length=32)
    name: str = Field(max_length=100)
    prefix: str = Field(max_length=16)  # the key's first characters, to recognise it
    hash: str = Field(index=True, unique=True, max_length=64)  # sha256 hex of the key
    created_at: datetime = Field(default_factory=utcnow)
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None


class Secret(SQLModel, table=True):
    __tablename__ = "secrets"

    name: str = Field(primary_key=True, max_length=64)
    ciphertext: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class DataSource(SQLModel, table=True):
    """A registered data source: its connector kind and configuration. Credentials are never
    here: the configuration names secrets (e.g. `password_secret`), resolved when connecting."""

    __tablename__ = "data_sources"

    name: str = Field(primary_key=True, max_length=64)
    kind: str = Field(max_length=32)
    config: dict[str, Any] = Field(sa_column=Column(JSON, nullable=False))
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    # The stored catalogue's TTL of this source's tables (None: DAGWRIGHT_CATALOGUE_TTL_S).
    # Beside the connector's settings, not in them: the connectors refuse keys they do not use.
    catalogue_ttl_s: float | None = Field(default=None)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class TqaConversation(SQLModel, table=True):
    """An AutoTQA conversation: the question, how it was scheduled, how it ended and its
    answer (with evidence). Its turns are `tqa_turns` rows."""

    __tablename__ = "tqa_conversations"
    __table_args__ = (
        Index("ix_tqa_conversations_created", "created_at"),
        # Counting the running ones (the conversation limit, tqa/admission.py), listing
        # those of one status, newest first, and the sweep's look for running ones of dead
        # server processes (tqa/recovery.py).
        Index("ix_tqa_conversations_status", "status", "created_at"),
    )

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    question: str = Field(sa_column=Column(Text, nullable=False))
    dataset: str | None = Field(default=None, max_length=64)
    sop: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    scheduler: str = Field(max_length=16)  # fsm | llm | rolling
    max_rounds: int
    answer_format: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    # The TQA profile as this conversation used it: SOP version, namespaces, hints retrieved.
    profile: dict[str, Any] | None = _json()
    # running | waiting (a tool call awaits a person's approval) | completed | round_limit |
    # failed
    status: str = Field(max_length=16)
    rounds: int = 0
    answer: dict[str, Any] | None = _json()
    error: dict[str, Any] | None = _json()
    usage: dict[str, Any] | None = _json()
    created_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    # The AskRequest and the knowledge `begin` gathered (tqa/knowledge.py): what a process
    # resuming the conversation from its turns needs (None: recorded before 0016).
    request: dict[str, Any] | None = _json()
    knowledge: dict[str, Any] | None = _json()
    cancel_requested_at: datetime | None = None  # set by any replica, seen by the runner
    # The token of the process running it: the latest to take it up. Turns are written only
    # under it, so a worker taken for dead that still runs stops at its next turn.
    runner: str | None = Field(default=None, max_length=32)
    # The replica lease of the server process running it in-process (embedded mode): when
    # that lease is missing or stale, another server resumes it, or ends it if `foreground`
    # (tqa/recovery.py). None when a queue worker runs it, for a foreground conversation of a
    # process that is no server (the command line), or one recorded before 0020.
    replica: str | None = Field(default=None, max_length=32)
    # Its caller waits for the answer (a sync or streamed ask, the `autotqa_ask` block): if
    # its server process dies, the caller's request died too and nobody would read a resumed
    # answer, so the sweep ends it failed (`server_lost`) instead.
    foreground: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    # The server process running it in-process plus those that died running it, since it
    # started or went on after an approval (a clean stop's hand-over is no death): one
    # whose processes keep dying ends failed (`server_lost`).
    attempts: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))


class TqaTurn(SQLModel, table=True):
    """One turn of a conversation: who spoke, what (text and parsed content), the scheduler's
    choice that led to it, the tool call it made (SQL and rows), tokens and timing."""

    __tablename__ = "tqa_turns"

    conversation_id: str = Field(
        sa_column=Column(
            String(32), ForeignKey("tqa_conversations.id"), primary_key=True, nullable=False
        )
    )
    seq: int = Field(primary_key=True)
    agent: str = Field(max_length=16)
    text: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    content: Any = _json()
    scheduler: dict[str, Any] | None = _json()
    tool_call: dict[str, Any] | None = _json()
    usage: dict[str, Any] | None = _json()
    run_id: str | None = Field(default=None, max_length=32)
    error: dict[str, Any] | None = _json()
    started: float | None = None  # seconds since the conversation started
    duration: float | None = None


class TqaHint(SQLModel, table=True):
    """A piece of "common knowledge" about a dataset, given to the Engineer after a tool error
    or an empty result (AutoTQA section 4.4)."""

    __tablename__ = "tqa_hints"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    dataset: str = Field(index=True, max_length=64)
    text: str = Field(sa_column=Column(Text, nullable=False))
    # confirmed | candidate (learned, not yet reviewed) | dropped (kept so it is not relearned)
    status: str = Field(default="confirmed", max_length=16)
    source: str = Field(default="manual", max_length=16)  # manual | learned
    # A learned hint: the question it was learned on (what similarity is measured against),
    # the conversation, and what happened (error, failed and fixed SQL, tables).
    question: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    conversation_id: str | None = Field(default=None, max_length=32)
    details: dict[str, Any] | None = _json()
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class TqaDataset(SQLModel, table=True):
    """An AutoTQA profile ("TQA dataset"): a named set of data sources with its SOP (current
    version; the versions are `tqa_dataset_sops`), the example namespaces of each agent and
    tool, and how many examples and learned hints to retrieve per question."""

    __tablename__ = "tqa_datasets"

    name: str = Field(primary_key=True, max_length=64)
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    sources: list[str] | None = _json()
    # {"planner"|"engineer"|"critic"|"text_to_sql"|"python": namespace}
    namespaces: dict[str, str] | None = _json()
    examples_k: int = 3
    hints_k: int = 3
    sop_version: int = 0  # 0: no SOP yet
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class TqaDatasetSop(SQLModel, table=True):
    """One version of a TQA profile's standard operating procedure (never changed: an edit
    is a new version)."""

    __tablename__ = "tqa_dataset_sops"

    dataset: str = Field(
        sa_column=Column(
            String(64), ForeignKey("tqa_datasets.name"), primary_key=True, nullable=False
        )
    )
    version: int = Field(primary_key=True)
    text: str = Field(sa_column=Column(Text, nullable=False))
    note: str = Field(default="", max_length=500)
    created_at: datetime = Field(default_factory=utcnow)


class TqaTool(SQLModel, table=True):
    """A published app registered as a tool the Executor may call for the Engineer."""

    __tablename__ = "tqa_tools"

    name: str = Field(primary_key=True, max_length=64)
    app: str = Field(max_length=64)  # the app's slug
    description: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    # What the Executor gives it from the conversation (dagwright.tqa.executor.TOOL_ROLES);
    # None: the Engineer's input only.
    role: str | None = Field(default=None, max_length=32)
    # A person approves each call before it runs (the conversation waits: tqa/approvals.py).
    requires_approval: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
