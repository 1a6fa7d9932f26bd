"""Feedback on runs: a score and an optional corrected answer, from the editor (admin) or a
published app's caller (its API key). A correction becomes a few-shot example in the app's
feedback namespace (`feedback-<slug>`, created with the hashing embedder when missing; create
it beforehand with another embedder to choose), keyed by its source run so a second
correction of the same run replaces the first."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from dagwright.errors import InputError, NotFoundError
from dagwright.store.db import session
from dagwright.store.evaluation_models import RunFeedback
from dagwright.store.evaluations import FeedbackRepository

if TYPE_CHECKING:
    from dagwright.embedding.service import ExampleStore
    from dagwright.services.apps import AppService
    from dagwright.services.runs.records import RunRecord

FEEDBACK_EMBEDDER = "hashing"


def feedback_namespace(slug: str) -> str:
    return f"feedback-{slug}"


def _question(inputs: dict[str, Any]) -> str:
    """The text a correction is found by: the run's `question` input, else its inputs."""
    if isinstance(inputs.get("question"), str):
        return str(inputs["question"])
    return "; ".join(f"{k}: {v}" for k, v in sorted(inputs.items()))


def feedback_dict(row: RunFeedback) -> dict[str, Any]:
    return {
        "id": row.id,
        "run_id": row.run_id,
        "app_id": row.app_id,
        "score": row.score,
        "correction": row.correction,
        "comment": row.comment,
        "given_by": row.given_by,
        "example_namespace": row.example_namespace,
        "created_at": row.created_at,
    }


class FeedbackService:
    def __init__(self, engine: Engine, apps: AppService, examples: ExampleStore | None) -> None:
        self._db = engine
        self._apps = apps
        self._examples = examples

    async def record(
        self,
        run: RunRecord,
        score: float,
        *,
        correction: Any = None,
        comment: str = "",
        given_by: str = "admin",
    ) -> dict[str, Any]:
        if not 0.0 <= score <= 1.0:
            raise InputError("score is between 0 (wrong) and 1 (right)")
        namespace = None
        if correction is not None:
            if run.app_id is None:
                raise InputError("a correction needs a run of an app (its few-shot namespace)")
            if self._examples is None:
                raise InputError("no example store here to keep the correction in")
            slug = self._apps.get_app(run.app_id).slug
            namespace = feedback_namespace(slug)
            try:
                self._examples.get_namespace(namespace)
            except NotFoundError:
                self._examples.create_namespace(
                    namespace, FEEDBACK_EMBEDDER, ["source_run"], "question"
                )
            example = {
                "question": _question(run.inputs),
                "answer": correction,
                "source_run": run.id,
                "source": "feedback",
                "app": slug,
                "version_id": run.version_id,
            }
            await self._examples.upsert(namespace, [example])
        row = RunFeedback(
            run_id=run.id,
            app_id=run.app_id,
            score=score,
            correction=correction,
            comment=comment,
            given_by=given_by,
            example_namespace=namespace,
        )
        with session(self._db) as db:
            FeedbackRepository(db).add(row)
            db.commit()
        return feedback_dict(row)

    def list(self, run_id: str) -> list[dict[str, Any]]:
        with session(self._db) as db:
            rows = FeedbackRepository(db).of_run(run_id)
        return [feedback_dict(r) for r in rows]
