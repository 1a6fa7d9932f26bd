"""The evaluation tables (migration 0008): datasets and their examples, evaluations (an app
version run over a dataset split, scored by a metric) and one result per example.

Named `eval_*` so they do not collide with AutoTQA's per-dataset profiles (`tqa_datasets`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Column, Index, Integer, Text, false
from sqlmodel import Field, SQLModel

from dagwright.store.models import new_id, utcnow


def _json(nullable: bool = True) -> Any:
    return Field(default=None, sa_column=Column(JSON, nullable=nullable))


class EvalDataset(SQLModel, table=True):
    """A dataset: its kind (the pack format it came from), default metric, the field mapping
    (question, answer, table, gold SQL) and the data source its tables are registered as."""

    __tablename__ = "eval_datasets"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    name: str = Field(index=True, unique=True, max_length=64)
    kind: str = Field(max_length=16)  # wikitq | tabfact | fetaqa | spider | generic
    metric: str = Field(max_length=16)
    mapping: dict[str, Any] = _json(nullable=False)
    source: str | None = Field(default=None, max_length=64)  # the registered data source
    folder: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    created_at: datetime = Field(default_factory=utcnow)


class EvalExample(SQLModel, table=True):
    __tablename__ = "eval_examples"
    __table_args__ = (Index("ix_eval_examples_split", "dataset_id", "split", "seq"),)

    dataset_id: str = Field(foreign_key="eval_datasets.id", primary_key=True, max_length=32)
    split: str = Field(primary_key=True, max_length=32)
    example_id: str = Field(primary_key=True, max_length=128)
    seq: int  # the order of the file
    question: str = Field(sa_column=Column(Text, nullable=False))
    gold: dict[str, Any] = _json(nullable=False)  # what the metric compares against
    tables: list[str] = _json(nullable=False)  # table references in the data source
    meta: dict[str, Any] = _json(nullable=False)  # breakdown keys (hardness, answer type...)


class Evaluation(SQLModel, table=True):
    __tablename__ = "evaluations"
    __table_args__ = (Index("ix_evaluations_app", "app_id", "created_at"),)

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    app_id: str | None = Field(default=None, max_length=32)
    version_id: str | None = Field(default=None, max_length=32)
    label: str = Field(default="", max_length=200)  # e.g. "app@3" or a method's name
    dataset_id: str = Field(foreign_key="eval_datasets.id", index=True, max_length=32)
    split: str = Field(max_length=32)
    metric: str = Field(max_length=16)
    settings: dict[str, Any] = _json(nullable=False)  # limit, inputs/outputs mapping...
    # running | interrupted (cancelled, or stopped: it can go on) | completed | failed
    status: str = Field(default="running", max_length=16)
    error: dict[str, Any] | None = _json()  # {code, message} of a failed one
    total: int = 0
    aggregate: dict[str, Any] | None = _json()
    created_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    # The replica lease (services/runs/replicas.py) of the process running it in-process (a
    # server, or `dagwright eval run`): no other process runs it while that lease is live,
    # and when the lease is missing or stale the next server takes it over
    # (services/evaluation_recovery.py). None when queue workers run it, or when no process
    # does.
    replica: str | None = Field(default=None, max_length=32)
    # A server runs it (started through the API): a server taking it over resumes it. One of
    # the command line is marked interrupted instead (its command resumes it; it may answer
    # model calls from a recording a server does not have).
    resumable: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    # The processes that took it up since it was started: one whose processes keep dying
    # ends failed (`server_lost`).
    attempts: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))


class EvalResult(SQLModel, table=True):
    """One example of an evaluation: the prediction, its recorded run, and once scored its
    score. A row exists only for a finished example, which is what makes a run resumable."""

    __tablename__ = "eval_results"

    evaluation_id: str = Field(foreign_key="evaluations.id", primary_key=True, max_length=32)
    example_id: str = Field(primary_key=True, max_length=128)
    run_id: str | None = Field(default=None, max_length=32)
    prediction: Any = _json()
    error: dict[str, Any] | None = _json()
    latency: float | None = None  # seconds
    tokens: int = 0
    cost: float = 0.0
    score: float | None = None
    correct: bool | None = None
    detail: dict[str, Any] | None = _json()


class EvalGate(SQLModel, table=True):
    """An app's publish gate: a version must be evaluated on this dataset split with this
    metric, and score at least the published version's score minus `tolerance`."""

    __tablename__ = "eval_gates"

    app_id: str = Field(foreign_key="apps.id", primary_key=True, max_length=32)
    dataset_id: str = Field(foreign_key="eval_datasets.id", max_length=32)
    split: str = Field(max_length=32)
    metric: str = Field(max_length=16)
    tolerance: float = 0.0
    updated_at: datetime = Field(default_factory=utcnow)


class EvalWaiver(SQLModel, table=True):
    """A recorded exception: this version may be published whatever the gate says."""

    __tablename__ = "eval_waivers"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    app_id: str = Field(foreign_key="apps.id", index=True, max_length=32)
    version_id: str = Field(foreign_key="versions.id", max_length=32)
    reason: str = Field(sa_column=Column(Text, nullable=False))
    author: str = Field(default="", max_length=200)
    created_at: datetime = Field(default_factory=utcnow)


class RunFeedback(SQLModel, table=True):
    """Feedback on a run: a score and optionally the corrected answer, which also becomes a
    few-shot example of the run's app (`example_namespace`, keyed by the run)."""

    __tablename__ = "eval_feedback"

    id: str = Field(default_factory=new_id, primary_key=True, max_length=32)
    run_id: str = Field(foreign_key="runs.id", index=True, max_length=32)
    app_id: str | None = Field(default=None, max_length=32)
    score: float
    correction: Any = _json()
    comment: str = Field(default="", sa_column=Column(Text, nullable=False, default=""))
    given_by: str = Field(max_length=16)  # admin | api_key
    example_namespace: str | None = Field(default=None, max_length=64)
    created_at: datetime = Field(default_factory=utcnow)
