"""Evaluations: an app version run over a dataset split (each example a recorded run),
scored by the dataset's metric; resumable (an example with a result is not run again),
reported and compared.

An example reaches the app as inputs named after its fields: `question`, `table` (its first
table, `source.table`), `tables` (all of them), `db_id`, `id` — each given to the app input of
the same name when the app has one, or as `settings["inputs"]` maps them (`{input: field}`).
The prediction is the app's `answer` output (or its only output, or `settings["output"]`);
an output holding `{"answer": ...}` gives that answer.
"""

from __future__ import annotations

import asyncio
import builtins
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from dagwright.errors import ConflictError, InputError, NotFoundError
from dagwright.evaluation.batch import NO_ANSWER, Outcome, Progress, Task, is_blank, run_batch
from dagwright.evaluation.compare import Scored, compare
from dagwright.evaluation.metrics.base import Item
from dagwright.evaluation.report import ResultRow, build_report
from dagwright.registry import Usage
from dagwright.registry.services import HeavyWork
from dagwright.services.datasets import DatasetService
from dagwright.store.db import session
from dagwright.store.evaluation_holds import EvaluationHolds, OrphanedEvaluation
from dagwright.store.evaluation_models import EvalExample, EvalResult, Evaluation
from dagwright.store.evaluations import DatasetRepository, EvaluationRepository
from dagwright.store.models import utcnow
from dagwright.store.paging import DEFAULT_LIMIT, Page, window

if TYPE_CHECKING:
    from dagwright.runtime import CompiledFlow
    from dagwright.services.apps import AppService
    from dagwright.services.runs.service import RunService
    from dagwright.store.models import Version

log = logging.getLogger(__name__)

EXAMPLE_FIELDS = ("question", "table", "tables", "db_id", "id")
DEFAULT_PREDICTED_DIALECT = "duckdb"  # the SQL apps write runs on the DuckDB engine


def example_fields(example: EvalExample) -> dict[str, Any]:
    return {
        "question": example.question,
        "table": example.tables[0] if example.tables else None,
        "tables": example.tables,
        "db_id": example.gold.get("db_id"),
        "id": example.example_id,
    }


def input_mapping(
    plan_inputs: Mapping[str, Any], given: Mapping[str, str] | None
) -> dict[str, str]:
    """app input -> example field: the given mapping, else each input named like a field."""
    if given:
        unknown = sorted(set(given.values()) - set(EXAMPLE_FIELDS))
        if unknown:
            raise InputError(f"unknown example field(s) {unknown}; fields: {EXAMPLE_FIELDS}")
        return dict(given)
    return {name: name for name in plan_inputs if name in EXAMPLE_FIELDS}


def prediction_of(outputs: Mapping[str, Any] | None, output: str | None) -> Any:
    if not outputs:
        return None
    if output is not None:
        value = outputs.get(output)
    elif "answer" in outputs:
        value = outputs["answer"]
    elif len(outputs) == 1:
        value = next(iter(outputs.values()))
    else:
        return None
    if isinstance(value, dict) and "answer" in value:
        return value["answer"]
    return value


@dataclass(slots=True)
class AppTarget:
    """Runs one example as a recorded run of the app version (mode `eval`)."""

    runs: RunService
    plan: CompiledFlow
    app_id: str
    version_id: str
    output: str | None

    async def __call__(self, task: Task) -> Outcome:
        start = time.perf_counter()
        live = await self.runs.start(
            self.plan, task.inputs, app_id=self.app_id, version_id=self.version_id, mode="eval"
        )
        try:
            record = await live.wait()
        except asyncio.CancelledError:
            # The evaluation stopped (cancelled, or its worker handing its job over): its
            # example's run stops with it rather than go on with nobody to keep its result.
            live.run.cancel("the evaluation running it stopped")
            raise
        usage = Usage.from_dict(record.usage or {})
        prediction = prediction_of(record.outputs, self.output)
        error = None
        if record.status != "succeeded":
            error = record.error or {"code": record.status, "message": record.status}
        elif is_blank(prediction):
            # An app that ended well without an answer (AutoTQA out of rounds, say) failed
            # on the example: an error, not an answer that happens to be wrong.
            error = {
                "code": NO_ANSWER,
                "message": f"run {record.id} succeeded but gave no answer "
                f"({prediction!r} on output {self.output or 'answer'!r})",
            }
        return Outcome(
            task.example_id,
            prediction=prediction,
            run_id=record.id,
            error=error,
            latency=time.perf_counter() - start,
            tokens=usage.total_tokens,
            cost=usage.cost,
        )


def evaluation_dict(row: Evaluation) -> dict[str, Any]:
    return {
        "id": row.id,
        "app_id": row.app_id,
        "version_id": row.version_id,
        "label": row.label,
        "dataset_id": row.dataset_id,
        "split": row.split,
        "metric": row.metric,
        "settings": row.settings,
        "status": row.status,
        "error": row.error,
        "total": row.total,
        "aggregate": row.aggregate,
        "created_at": row.created_at,
        "finished_at": row.finished_at,
    }


class EvaluationService:
    def __init__(
        self, engine: Engine, apps: AppService, runs: RunService, datasets: DatasetService
    ) -> None:
        self._db = engine
        self._apps = apps
        self._runs = runs
        self.datasets = datasets
        # Where the scoring runs (the process's evaluation pool; composition.py): not the
        # API's threads. None: a thread of the loop's default executor (tests, one-off tools).
        self.work: HeavyWork | None = None
        # Examples one in-process evaluation runs at once, whatever its caller asks for.
        self.max_concurrency: int | None = None

    @property
    def apps(self) -> AppService:
        return self._apps

    # -- creating and running ----------------------------------------------------------------

    def create(
        self,
        app: str,
        version: str | None,
        dataset: str,
        *,
        split: str = "dev",
        limit: int | None = None,
        settings: Mapping[str, Any] | None = None,
        resume: bool = True,
    ) -> Evaluation:
        """A new evaluation of the app's `version` (default: the published one), or (with
        `resume`) the unfinished one of the same version, dataset, split and limit."""
        target = self._apps.get_version(app, version or "published")
        data = self.datasets.row(dataset)
        examples = self.datasets.examples(dataset, split, limit=limit)
        plan = self._apps.compiled(target)
        options = dict(settings or {})
        options["inputs"] = input_mapping(plan.inputs, options.get("inputs"))
        options["limit"] = limit
        if resume:
            with session(self._db) as db:
                unfinished = EvaluationRepository(db).unfinished(target.id, data.id, split)
            for row in unfinished:
                if row.settings.get("limit") == limit:
                    return row
        row = Evaluation(
            app_id=target.app_id,
            version_id=target.id,
            label=f"{self._apps.get_app(target.app_id).slug}@{target.number}",
            dataset_id=data.id,
            split=split,
            metric=str(options.get("metric") or data.metric),
            settings=options,
            total=len(examples),
        )
        with session(self._db) as db:
            EvaluationRepository(db).add(row)
            db.commit()
        return row

    def get(self, evaluation_id: str) -> Evaluation:
        with session(self._db) as db:
            return EvaluationRepository(db).find(evaluation_id)

    def list(
        self, app: str | None = None, offset: int = 0, limit: int = DEFAULT_LIMIT
    ) -> Page[Evaluation]:
        """Newest first."""
        at = window(offset, limit)
        app_id = None if app is None else self._apps.get_app(app).id
        with session(self._db) as db:
            return EvaluationRepository(db).recent(app_id, at)

    def _dataset_name(self, row: Evaluation) -> str:
        with session(self._db) as db:
            dataset = DatasetRepository(db).get(row.dataset_id)
        if dataset is not None:
            return dataset.name
        raise NotFoundError(f"the dataset of evaluation {row.id} is gone", "dataset_not_found")

    def _examples(self, row: Evaluation) -> builtins.list[EvalExample]:
        return self.datasets.examples(
            self._dataset_name(row), row.split, limit=row.settings.get("limit")
        )

    def done_ids(self, evaluation_id: str) -> set[str]:
        with session(self._db) as db:
            return EvaluationRepository(db).done_ids(evaluation_id)

    def _sink(
        self, evaluation_id: str, lease: str | None = None
    ) -> Callable[[builtins.list[Outcome]], None]:
        """Writes results (a result already there is kept). With `lease`, the holder's: once
        another process took the evaluation over (this one was taken for dead: frozen past
        the lease's limit), it stops here rather than run the examples twice."""

        def write(outcomes: builtins.list[Outcome]) -> None:
            rows = [
                {
                    "evaluation_id": evaluation_id,
                    "example_id": o.example_id,
                    "run_id": o.run_id,
                    "prediction": o.prediction,
                    "error": o.error,
                    "latency": o.latency,
                    "tokens": o.tokens,
                    "cost": o.cost,
                }
                for o in outcomes
            ]
            with session(self._db) as db:
                EvaluationRepository(db).add_results(rows)
                db.commit()
                if lease is not None and not EvaluationHolds(db).holds(evaluation_id, lease):
                    raise ConflictError(
                        f"evaluation {evaluation_id} was taken over by another process: "
                        "this one stops",
                        "evaluation_taken_over",
                    )

        return write

    def _target(self, row: Evaluation, version: Version) -> AppTarget:
        return AppTarget(
            self._runs,
            self._apps.compiled(version),
            version.app_id,
            version.id,
            row.settings.get("output"),
        )

    @staticmethod
    def _tasks(row: Evaluation, examples: builtins.list[EvalExample]) -> Iterator[Task]:
        mapping: dict[str, str] = row.settings["inputs"]
        for e in examples:
            yield Task(e.example_id, {name: example_fields(e)[f] for name, f in mapping.items()})

    async def run(
        self,
        evaluation_id: str,
        *,
        concurrency: int = 4,
        on_progress: Callable[[Progress], None] | None = None,
        resumable: bool = False,
    ) -> Evaluation:
        """Runs the examples without a result, then scores them all, holding the evaluation
        under this process's replica lease (`hold`: ConflictError `evaluation_held` while
        another live process runs it). `resumable`: a server runs it, and a server resumes
        it if this process dies. The database reads and the scoring (Spider's runs queries)
        go to a thread: a server's loop keeps answering."""
        # The preparation marks the evaluation running in its thread, which a cancellation
        # cannot stop: one that comes meanwhile waits for it, then marks it interrupted.
        preparing = asyncio.ensure_future(
            asyncio.to_thread(self._prepare_run, evaluation_id, resumable)
        )
        try:
            row, version, examples, done = await asyncio.shield(preparing)
        except asyncio.CancelledError:
            await asyncio.wait([preparing])
            if not preparing.cancelled() and preparing.exception() is None:
                self._let_go(preparing.result()[0].id, "interrupted")
            raise
        if self.max_concurrency is not None:
            concurrency = min(concurrency, self.max_concurrency)
        try:
            target = self._target(row, version)
            todo = [e for e in examples if e.example_id not in done]
            await run_batch(
                self._tasks(row, todo),
                len(todo),
                target,
                self._sink(row.id, self.lease),
                concurrency=concurrency,
                on_progress=on_progress,
                # Each result written as its example finishes: one lost with this process
                # would be run again by the process taking the evaluation over.
                flush_size=1,
            )
        except BaseException:
            self._let_go(row.id, "interrupted")
            raise
        try:
            if self.work is not None:  # waits its turn: the examples' results are in
                return await self.work.run_queued(self.score, row.id)
            return await asyncio.to_thread(self.score, row.id)
        finally:
            await asyncio.to_thread(self._let_go, row.id)

    def _prepare_run(
        self, evaluation_id: str, resumable: bool | None = None
    ) -> tuple[Evaluation, Version, builtins.list[EvalExample], set[str]]:
        """Marks the evaluation running: held by this process (`hold`), or with `resumable`
        None for the queue's workers (they hold none: the queue's jobs are their lease)."""
        row = self.get(evaluation_id)
        if row.status == "completed":
            raise ConflictError(f"evaluation {row.id} is complete", "evaluation_complete")
        if row.app_id is None or row.version_id is None:
            raise ConflictError(f"evaluation {row.id} has no app version to run")
        version = self._apps.get_version(row.app_id, row.version_id)
        if resumable is None:
            self._set_status(row.id, "running")
        else:
            self.hold(row.id, resumable=resumable)
        return row, version, self._examples(row), self.done_ids(row.id)

    # -- which process runs it: a lease (store/evaluation_holds.py) ----------------------------

    @property
    def lease(self) -> str:
        """This process's replica lease (services/runs/replicas.py): its heartbeat keeps the
        evaluations this process holds held."""
        return self._runs.lease_id

    def _cutoff(self) -> datetime:
        return utcnow() - timedelta(seconds=self._runs.stale_after)

    def hold(self, evaluation_id: str, *, resumable: bool = False) -> Evaluation:
        """Marks the evaluation running under this process's lease. ConflictError
        `evaluation_held`, naming the process, when another live one runs it (a second
        `eval run` is refused, never run twice); `evaluation_complete` when it is complete.
        The one of a process that died (its lease missing or stale) is taken over."""
        for _ in range(2):  # its holder may let go between the claim and the look
            with session(self._db) as db:
                holds = EvaluationHolds(db)
                if holds.claim(evaluation_id, self.lease, self._cutoff(), resumable):
                    db.commit()
                    return self.get(evaluation_id)
                holder = holds.holder(evaluation_id, self._cutoff())
            if holder is not None:
                age = (utcnow() - holder.heartbeat_at).total_seconds()
                raise ConflictError(
                    f"evaluation {evaluation_id} is running in another process "
                    f"({holder.name!r}, pid {holder.pid} on {holder.host}, alive {age:.0f} s "
                    "ago): it is not run twice. Wait for it to end, or cancel it there; if "
                    f"that process died, it is taken over {self._runs.stale_after:g} s after",
                    "evaluation_held",
                )
            if self.get(evaluation_id).status == "completed":
                raise ConflictError(
                    f"evaluation {evaluation_id} is complete", "evaluation_complete"
                )
        raise ConflictError(f"evaluation {evaluation_id} could not be held", "evaluation_held")

    def _let_go(self, evaluation_id: str, status: str | None = None) -> None:
        """This process holds the evaluation no more (and it becomes `status`): nothing
        changes when another process took it over meanwhile."""
        with session(self._db) as db:
            EvaluationHolds(db).release(evaluation_id, self.lease, status)
            db.commit()

    def orphaned(self) -> builtins.list[OrphanedEvaluation]:
        """The running evaluations whose holder's lease is missing or stale."""
        with session(self._db) as db:
            return EvaluationHolds(db).orphaned(self.lease, self._cutoff())

    def take_over(self, evaluation_id: str, dead: str) -> bool:
        """The evaluation of dead lease `dead` is this process's (one more attempt); False
        when another process took it first or it ended."""
        with session(self._db) as db:
            taken = EvaluationHolds(db).take_over(evaluation_id, dead, self.lease)
            db.commit()
        return taken

    def give_up(self, evaluation_id: str, dead: str, status: str, code: str, message: str) -> bool:
        """The evaluation of dead lease `dead` ends `status` with why (results kept)."""
        with session(self._db) as db:
            ended = EvaluationHolds(db).give_up(
                evaluation_id, dead, status, {"code": code, "message": message}
            )
            db.commit()
        if ended:
            log.warning("evaluation %s %s: %s", evaluation_id, status, message)
        return ended

    # -- queue mode: an evaluation's examples spread over workers (services/queue) -----------

    def plan(self, evaluation_id: str) -> tuple[builtins.list[str], set[str]]:
        """Marks the evaluation running; returns its examples' ids in the dataset's order and
        those that have a result. ConflictError `evaluation_complete` when it is complete."""
        _row, _version, examples, done = self._prepare_run(evaluation_id, None)
        return [e.example_id for e in examples], done

    async def run_examples(self, evaluation_id: str, example_ids: Sequence[str]) -> bool:
        """Runs those of `example_ids` that have no result yet, one after the other, each
        result recorded as it comes (once: a result already there is kept), while the
        evaluation is running: none once it is complete, none after it was cancelled
        (cancel_queued; the one running then finishes). Returns True when every example of
        the evaluation has a result."""
        row, version, todo = await asyncio.to_thread(
            self._examples_to_run, evaluation_id, example_ids
        )
        target, sink = self._target(row, version), self._sink(row.id)
        for task in self._tasks(row, todo):
            if (await asyncio.to_thread(self.get, row.id)).status != "running":
                break
            await run_batch([task], 1, target, sink, concurrency=1)
        return len(await asyncio.to_thread(self.done_ids, row.id)) >= row.total

    def _examples_to_run(
        self, evaluation_id: str, example_ids: Sequence[str]
    ) -> tuple[Evaluation, Version, builtins.list[EvalExample]]:
        row = self.get(evaluation_id)
        if row.app_id is None or row.version_id is None:
            raise ConflictError(f"evaluation {row.id} has no app version to run")
        version = self._apps.get_version(row.app_id, row.version_id)
        if row.status != "running":  # complete, or cancelled (cancel_queued)
            return row, version, []
        done = self.done_ids(row.id)
        wanted = [key for key in example_ids if key not in done]
        with session(self._db) as db:
            examples = DatasetRepository(db).examples_by_id(row.dataset_id, row.split, wanted)
        return row, version, examples

    def stored_progress(self, evaluation_id: str, window: float = 60.0) -> dict[str, Any]:
        """Progress as the stored results tell it, wherever the examples run (queue mode: on
        the workers): of the whole evaluation, with the rate of the last `window` seconds
        and the ETA at that rate. The same keys as a run in this process reports."""
        row = self.get(evaluation_id)
        since = utcnow() - timedelta(seconds=window)
        with session(self._db) as db:
            done, errors, tokens, cost, lately = EvaluationRepository(db).tally(row.id, since)
        rate = lately / window
        return {
            "total": row.total,
            "done": done,
            "errors": errors,
            "tokens": tokens,
            "cost": cost,
            "elapsed": None,
            "rate": rate,
            "eta": (row.total - done) / rate if rate else None,
        }

    def cancel_queued(self, evaluation_id: str) -> Evaluation:
        """Stop an evaluation run by the queue's workers: "interrupted", so its chunks run no
        further example (each finishes the one it is running); its results are kept, and
        starting it again goes on with the examples left. ConflictError when it is not
        running."""
        with session(self._db) as db:
            stopped = EvaluationRepository(db).stop(evaluation_id)
            db.commit()
        if not stopped:
            row = self.get(evaluation_id)  # NotFoundError for an unknown one
            raise ConflictError(
                f"evaluation {row.id} is not running ({row.status})", "evaluation_not_running"
            )
        return self.get(evaluation_id)

    def fail(self, evaluation_id: str, code: str, message: str) -> None:
        """The evaluation ends "failed" with why (unless it is complete): its results are
        kept, and starting it again goes on with the examples left."""
        with session(self._db) as db:
            failed = EvaluationRepository(db).fail(
                evaluation_id, {"code": code, "message": message}
            )
            db.commit()
        if failed:
            log.warning("evaluation %s failed: %s", evaluation_id, message)

    def finish(self, evaluation_id: str) -> Evaluation:
        """Scores the evaluation unless it is complete already (scored then, by another)."""
        row = self.get(evaluation_id)
        if row.status == "completed":
            return row
        scored = self.score(row.id)
        log.info("evaluation %s scored: %s", row.id, scored.status)
        return scored

    def _set_status(self, evaluation_id: str, status: str) -> None:
        with session(self._db) as db:
            EvaluationRepository(db).set_status(evaluation_id, status)
            db.commit()

    # -- scoring and reading -----------------------------------------------------------------

    def _results(self, evaluation_id: str) -> dict[str, EvalResult]:
        with session(self._db) as db:
            return EvaluationRepository(db).results(evaluation_id)

    def score(self, evaluation_id: str) -> Evaluation:
        """Scores every result with the evaluation's metric; complete when every example
        of the evaluation has one."""
        from dagwright.evaluation.scoring import score_items

        row = self.get(evaluation_id)
        examples = {e.example_id: e for e in self._examples(row)}
        results = self._results(row.id)
        # An example the system failed on scores as wrong, whatever it left on its output.
        items = [
            Item(key, examples[key].gold, None if r.error else r.prediction)
            for key, r in results.items()
            if key in examples
        ]
        databases = gold_databases = None
        if row.metric in ("spider", "bird"):
            from dagwright.evaluation.sql_databases import FolderDatabases

            folder = Path(self.datasets.row(self._dataset_name(row)).folder)
            dialect = row.settings.get("dialect", DEFAULT_PREDICTED_DIALECT)
            databases = FolderDatabases(folder, dialect)
            gold_databases = FolderDatabases(folder, "mysql")
        report = score_items(row.metric, items, databases, gold_databases)
        complete = len(results) >= len(examples)
        with session(self._db) as db:
            store = EvaluationRepository(db)
            store.score_results(
                row.id,
                [
                    {"example": e.id, "score": e.score, "correct": e.correct, "detail": e.detail}
                    for e in report.examples
                ],
            )
            aggregate = {"primary": report.primary, **report.aggregate}
            store.finish(row.id, aggregate, utcnow() if complete else None)
            db.commit()
        return self.get(row.id)

    def rows(self, evaluation_id: str) -> builtins.list[ResultRow]:
        row = self.get(evaluation_id)
        examples = {e.example_id: e for e in self._examples(row)}
        results = self._results(row.id)
        return [
            ResultRow(
                example_id=key,
                score=r.score,
                correct=r.correct,
                question=examples[key].question,
                prediction=r.prediction,
                gold=examples[key].gold,
                meta=examples[key].meta,
                run_id=r.run_id,
                error=r.error,
                latency=r.latency,
                tokens=r.tokens,
                cost=r.cost,
                detail=r.detail or {},
            )
            for key, r in results.items()
            if key in examples
        ]

    def results(
        self, evaluation_id: str, offset: int = 0, limit: int = DEFAULT_LIMIT, failed: bool = False
    ) -> Page[dict[str, Any]]:
        """Per example, in the dataset's order: prediction, score, its run; `failed`: only
        the wrong and the failed ones. One page, read as such from the database."""
        at = window(offset, limit)
        row = self.get(evaluation_id)
        with session(self._db) as db:
            page = EvaluationRepository(db).result_page(row, at, failed=failed)
        return page.map(
            lambda pair: {
                "id": pair[0].example_id,
                "question": pair[1].question,
                "prediction": pair[0].prediction,
                "gold": pair[1].gold,
                "score": pair[0].score,
                "correct": pair[0].correct,
                "error": pair[0].error,
                "run_id": pair[0].run_id,
                "latency": pair[0].latency,
                "tokens": pair[0].tokens,
                "cost": pair[0].cost,
                "meta": pair[1].meta,
            }
        )

    def report(self, evaluation_id: str) -> dict[str, Any]:
        row = self.get(evaluation_id)
        if row.aggregate is None:
            raise ConflictError(f"evaluation {row.id} is not scored yet", "evaluation_not_scored")
        aggregate = dict(row.aggregate)
        primary = str(aggregate.pop("primary"))
        report = build_report(row.metric, primary, aggregate, self.rows(row.id))
        return {"evaluation": evaluation_dict(row), **report}

    def compare(self, a_id: str, b_id: str) -> dict[str, Any]:
        a, b = self.get(a_id), self.get(b_id)
        if a.dataset_id != b.dataset_id or a.metric != b.metric:
            raise ConflictError(
                "only evaluations of one dataset with one metric compare", "not_comparable"
            )

        def scored(evaluation_id: str) -> dict[str, Scored]:
            return {
                r.example_id: Scored(r.score or 0.0, r.correct)
                for r in self.rows(evaluation_id)
                if r.score is not None
            }

        result = compare(scored(a.id), scored(b.id))
        return {"a": evaluation_dict(a), "b": evaluation_dict(b), "metric": a.metric, **result}
