"""Eval-gated publishing: an app may name a gate (a dataset split, a metric, a tolerance);
publishing a version is then refused, with the numbers, unless the version was evaluated on
the whole split and scores at least the published version's score minus the tolerance — or a
waiver with a reason is recorded for it (evaluation/gate.py decides)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from dagwright.errors import ConflictError, InputError, NotFoundError
from dagwright.evaluation.gate import GateDecision, decide
from dagwright.evaluation.metrics import METRICS
from dagwright.store.db import session
from dagwright.store.evaluation_models import EvalGate, EvalWaiver
from dagwright.store.evaluations import DatasetRepository, EvaluationRepository, GateRepository
from dagwright.store.models import utcnow

if TYPE_CHECKING:
    from dagwright.services.apps import AppService
    from dagwright.store.models import App


class GateRefusedError(ConflictError):
    """Publishing refused by the app's evaluation gate (HTTP 409), with the numbers."""

    code = "eval_gate_refused"

    def __init__(self, decision: GateDecision, gate: dict[str, Any]) -> None:
        super().__init__(f"publishing refused by the evaluation gate: {decision.reason}")
        self.decision = decision
        self.gate = gate

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "gate": self.gate, **self.decision.to_dict()}


def _gate_dict(gate: EvalGate, dataset: str) -> dict[str, Any]:
    return {
        "dataset": dataset,
        "split": gate.split,
        "metric": gate.metric,
        "tolerance": gate.tolerance,
        "updated_at": gate.updated_at.isoformat(),
    }


class GateService:
    def __init__(self, engine: Engine, apps: AppService) -> None:
        self._db = engine
        self._apps = apps

    def set(
        self,
        app: str,
        dataset: str,
        *,
        metric: str | None = None,
        split: str = "dev",
        tolerance: float = 0.0,
    ) -> dict[str, Any]:
        if tolerance < 0:
            raise InputError("the tolerance is a score difference, 0 or more")
        app_id = self._apps.get_app(app).id
        with session(self._db) as db:
            found = DatasetRepository(db).find(dataset)
            gates = GateRepository(db)
            chosen = metric or found.metric
            if chosen not in METRICS:
                raise InputError(f"unknown metric {chosen!r} (one of {', '.join(METRICS)})")
            gate = gates.of_app(app_id) or EvalGate(
                app_id=app_id, dataset_id=found.id, split=split, metric=chosen
            )
            gate.dataset_id, gate.split, gate.metric = found.id, split, chosen
            gate.tolerance, gate.updated_at = tolerance, utcnow()
            gates.put(gate)
            db.commit()
            return _gate_dict(gate, found.name)

    def get(self, app: str) -> dict[str, Any] | None:
        app_id = self._apps.get_app(app).id
        with session(self._db) as db:
            gate = GateRepository(db).of_app(app_id)
            if gate is None:
                return None
            dataset = DatasetRepository(db).get(gate.dataset_id)
            return _gate_dict(gate, dataset.name if dataset else gate.dataset_id)

    def remove(self, app: str) -> None:
        app_id = self._apps.get_app(app).id
        with session(self._db) as db:
            gates = GateRepository(db)
            gate = gates.of_app(app_id)
            if gate is None:
                raise NotFoundError(f"app {app!r} has no evaluation gate", "gate_not_found")
            gates.delete(gate)
            db.commit()

    def waive(self, app: str, version: str, reason: str, author: str = "") -> dict[str, Any]:
        if not reason.strip():
            raise InputError("a waiver needs a reason")
        target = self._apps.get_version(app, version)
        waiver = EvalWaiver(
            app_id=target.app_id, version_id=target.id, reason=reason.strip(), author=author
        )
        with session(self._db) as db:
            GateRepository(db).add_waiver(waiver)
            db.commit()
        return {
            "id": waiver.id,
            "version_id": waiver.version_id,
            "reason": waiver.reason,
            "author": waiver.author,
            "created_at": waiver.created_at,
        }

    def _score(self, gate: EvalGate, version_id: str) -> float | None:
        """The latest complete evaluation of the version on the gate's whole split."""
        with session(self._db) as db:
            rows = EvaluationRepository(db).completed(
                version_id, gate.dataset_id, gate.split, gate.metric
            )
        for row in rows:
            if row.settings.get("limit") is None and row.aggregate:
                return float(row.aggregate[row.aggregate["primary"]])
        return None

    def check(self, app: str, version_id: str) -> tuple[GateDecision | None, dict[str, Any]]:
        """The gate's decision for publishing `version_id` (None without a gate)."""
        found = self._apps.get_app(app)
        with session(self._db) as db:
            gates = GateRepository(db)
            gate = gates.of_app(found.id)
            if gate is None:
                return None, {}
            waiver = gates.latest_waiver(found.id, version_id)
            dataset = DatasetRepository(db).get(gate.dataset_id)
        published = (
            self._score(gate, found.published_version_id)
            if found.published_version_id and found.published_version_id != version_id
            else None
        )
        decision = decide(
            self._score(gate, version_id),
            published,
            gate.tolerance,
            waiver.reason if waiver else None,
        )
        return decision, _gate_dict(gate, dataset.name if dataset else gate.dataset_id)

    def enforce(self, app: str, version_id: str) -> None:
        """Raises GateRefusedError when the gate refuses publishing the version."""
        decision, gate = self.check(app, version_id)
        if decision is not None and not decision.allowed:
            raise GateRefusedError(decision, gate)

    def publish(self, app: str, version_id: str) -> App:
        """Publish the version unless the app's gate refuses it (GateRefusedError)."""
        self.enforce(app, version_id)
        return self._apps.publish(app, version_id)
