"""Evaluation: datasets (import from a file on the server or an upload, examples, few-shot
pools), evaluations of an app version over a dataset (run in the background, progress,
report, results, comparison), scoring predictions without running anything, and an app's
publish gate (its waivers, and what publishing a version would meet)."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from dagwright.api.routes.access import Admin, may_read_app
from dagwright.api.schemas import Paging
from dagwright.api.state import Services, services
from dagwright.errors import InputError, NotFoundError
from dagwright.evaluation.metrics import METRICS
from dagwright.services.evaluation_runs import RunningEvaluations
from dagwright.store.paging import Page

if TYPE_CHECKING:
    from dagwright.services.evaluation_gates import GateService
    from dagwright.services.evaluations import EvaluationService

router = APIRouter(prefix="/api/v1", tags=["evaluations"])
# Everything but feedback is the editor's (admin); feedback also takes an app's API key.
admin = APIRouter(dependencies=[Admin])
Deps = Annotated[Services, Depends(services)]
MAX_UPLOAD_EXAMPLES = 100_000
# How long POST /evaluations?wait=true waits for the report before answering 202 with the
# evaluation as it stands (it goes on; GET it, or its report, later).
DEFAULT_WAIT = 300.0
MAX_WAIT = 3600.0


def _running(request: Request) -> RunningEvaluations:
    state = request.app.state
    if not hasattr(state, "evaluations_running"):
        state.evaluations_running = RunningEvaluations()
    found: RunningEvaluations = state.evaluations_running
    return found


# -- datasets -------------------------------------------------------------------------------------


class DatasetImportIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="a-z, 0-9 and _, up to 31 characters")
    kind: str = Field(description="wikitq, tabfact, fetaqa, spider or generic")
    path: str = Field(
        description="The file on the server (absolute, under a source root), in the kind's "
        "native format; tables are read beside it as the packs lay them out."
    )
    split: str = "dev"
    metric: str | None = Field(None, description=f"Default: the kind's; one of {METRICS}")
    mapping: dict[str, str] | None = Field(
        None, description="generic: {id, question, answer, table, sql} -> the file's field"
    )
    limit: int | None = Field(None, ge=1)
    server_url: str | None = Field(
        None, description="spider: load the databases into this PostgreSQL (a schema each)"
    )


@admin.get("/datasets")
async def list_datasets(s: Deps) -> list[dict[str, Any]]:
    found = await asyncio.to_thread(s.evaluations.datasets.list)
    return [d.to_dict() for d in found]


@admin.post("/datasets", status_code=201)
async def import_dataset(body: DatasetImportIn, s: Deps) -> dict[str, Any]:
    """Import a file on the server; its tables become data sources the flows can query."""
    # The same rule as a file source: only files under the source roots may be read.
    path = s.data.source_paths().check(body.path, "dataset import")
    summary = await s.pools.data.run(
        s.evaluations.datasets.import_file,
        body.name,
        body.kind,
        path,
        split=body.split,
        metric=body.metric,
        mapping=body.mapping,
        limit=body.limit,
        server_url=body.server_url,
    )
    return summary.to_dict()


@admin.post("/datasets/{name}/upload", status_code=201)
async def upload_dataset(
    name: str,
    request: Request,
    s: Deps,
    kind: Annotated[str, Query(description="fetaqa or generic (tables inline or none)")],
    fmt: Annotated[str, Query(alias="format", description="jsonl, csv or tsv")] = "jsonl",
    split: str = "dev",
    metric: str | None = None,
) -> dict[str, Any]:
    """Import a file sent as the request body. Only formats whose tables travel inside the
    file (FeTaQA's `table_array`) or that have none (generic) can be uploaded."""
    if kind not in ("fetaqa", "generic"):
        raise InputError("an upload carries no table files: import wikitq, tabfact, spider by path")
    if fmt not in ("jsonl", "csv", "tsv"):
        raise InputError("format is jsonl, csv or tsv")
    body = await request.body()

    def work() -> dict[str, Any]:
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / f"upload.{fmt}"
            path.write_bytes(body)
            # The upload's folder is a scratch one: it may name no table file.
            summary = s.evaluations.datasets.import_file(
                name,
                kind,
                path,
                split=split,
                metric=metric,
                limit=MAX_UPLOAD_EXAMPLES,
                tables_beside=False,
            )
        return summary.to_dict()

    return await s.pools.data.run(work)


@admin.get("/datasets/{name}")
async def get_dataset(name: str, s: Deps) -> dict[str, Any]:
    summary = await asyncio.to_thread(s.evaluations.datasets.get, name)
    return summary.to_dict()


@admin.get("/datasets/{name}/examples")
async def dataset_examples(
    name: str,
    s: Deps,
    page: Paging,
    split: str = "dev",
) -> Page[dict[str, Any]]:
    """In the order of the dataset's file."""
    from dagwright.services.datasets import example_dict

    datasets = s.evaluations.datasets
    found = await asyncio.to_thread(datasets.example_page, name, split, page.offset, page.limit)
    return found.map(example_dict)


class FewShotIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    split: str = "train"
    namespace: str
    embedder: str = "hashing"


@admin.post("/datasets/{name}/few-shot")
async def load_few_shot(name: str, body: FewShotIn, s: Deps) -> dict[str, Any]:
    """A split's examples into a few-shot namespace (idempotent)."""
    count = await s.evaluations.datasets.load_few_shot(
        name, body.split, body.namespace, body.embedder
    )
    return {"namespace": body.namespace, "loaded": count}


# -- evaluations ----------------------------------------------------------------------------------


class EvaluationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    app: str = Field(description="The app's slug or id.")
    version: str | None = Field(None, description="Number or id; default: the published one.")
    dataset: str
    split: str = "dev"
    limit: int | None = Field(None, ge=1)
    concurrency: int = Field(4, ge=1, le=64)
    inputs: dict[str, str] | None = Field(None, description="app input -> example field")
    output: str | None = Field(None, description="The app output holding the answer.")
    resume: bool = Field(True, description="Continue an unfinished one of the same version.")
    wait: bool = Field(
        False,
        description="Answer with the report when done, within the `timeout` query parameter "
        "(on expiry, 202 with the evaluation as it stands; ended unscored, e.g. cancelled or "
        "failed, 200 with the evaluation as it ended).",
    )


@admin.post("/evaluations", status_code=202)
async def start_evaluation(
    body: EvaluationIn,
    request: Request,
    response: Response,
    s: Deps,
    within: Annotated[
        float,
        Query(
            alias="timeout",
            gt=0,
            le=MAX_WAIT,
            description="With wait: seconds to wait for the report.",
        ),
    ] = DEFAULT_WAIT,
) -> dict[str, Any]:
    """Run an app version over a dataset split; each example becomes a recorded run."""
    from dagwright.services.evaluations import evaluation_dict

    evaluations = s.evaluations
    settings: dict[str, Any] = {"inputs": body.inputs}
    if body.output:
        settings["output"] = body.output
    settings["concurrency"] = body.concurrency  # a server resuming it runs it so
    row = await asyncio.to_thread(
        evaluations.create,
        body.app,
        body.version,
        body.dataset,
        split=body.split,
        limit=body.limit,
        settings=settings,
        resume=body.resume,
    )
    running = _running(request)
    if s.queue is not None:
        # Queue mode: a worker runs it, and another goes on with it if that one dies.
        await s.queue.submit_evaluation(row.id, body.concurrency)
    else:
        if not running.runs_here(row.id):
            # Held under this process's lease before it starts: 409 `evaluation_held` while
            # another live process runs it (it is never run twice).
            await asyncio.to_thread(evaluations.hold, row.id, resumable=True)
        running.start(evaluations, row.id, body.concurrency)
    if not body.wait:
        return evaluation_dict(row)
    try:
        async with asyncio.timeout(within):
            if s.queue is not None:
                await _until_finished(evaluations, row.id)
            else:  # shielded: a wait that ends does not stop the evaluation
                await running.wait(row.id)
    except TimeoutError:
        return evaluation_dict(await asyncio.to_thread(evaluations.get, row.id))
    response.status_code = 200
    ended = await asyncio.to_thread(evaluations.get, row.id)
    if ended.aggregate is None:
        # It ended unscored (cancelled, failed): the evaluation as it ended, with its error.
        return evaluation_dict(ended)
    return await asyncio.to_thread(evaluations.report, row.id)


async def _until_finished(evaluations: EvaluationService, evaluation_id: str) -> None:
    """Until a worker has finished the evaluation (its status is no longer running)."""
    while True:  # in the database: the worker is another process, maybe another machine
        row = await asyncio.to_thread(evaluations.get, evaluation_id)
        if row.status != "running":
            return
        await asyncio.sleep(0.5)


@admin.get("/evaluations")
async def list_evaluations(s: Deps, page: Paging, app: str | None = None) -> Page[dict[str, Any]]:
    """Newest first."""
    from dagwright.services.evaluations import evaluation_dict

    found = await asyncio.to_thread(s.evaluations.list, app, page.offset, page.limit)
    return found.map(evaluation_dict)


@admin.get("/evaluations/compare")
async def compare_evaluations(a: str, b: str, s: Deps) -> dict[str, Any]:
    """B against A: difference with a paired interval and test, and the flipped examples."""
    return await asyncio.to_thread(s.evaluations.compare, a, b)


@admin.get("/evaluations/{evaluation_id}")
async def get_evaluation(evaluation_id: str, request: Request, s: Deps) -> dict[str, Any]:
    """The evaluation, how many examples have a result, and while it runs the live progress:
    rate, ETA, tokens, cost (of this replica's run of it; in queue mode, of the results the
    workers have stored, the rate over the last minute)."""
    from dagwright.services.evaluations import evaluation_dict

    evaluations = s.evaluations
    row = await asyncio.to_thread(evaluations.get, evaluation_id)
    done = await asyncio.to_thread(evaluations.done_ids, evaluation_id)
    running = _running(request)
    progress = running.progress(evaluation_id)
    if s.queue is not None and row.status == "running":
        progress = await asyncio.to_thread(evaluations.stored_progress, evaluation_id)
    return {
        **evaluation_dict(row),
        "done": len(done),
        "running_here": running.runs_here(evaluation_id),
        "progress": progress,
    }


@admin.get("/evaluations/{evaluation_id}/report")
async def evaluation_report(evaluation_id: str, s: Deps) -> dict[str, Any]:
    return await asyncio.to_thread(s.evaluations.report, evaluation_id)


@admin.get("/evaluations/{evaluation_id}/results")
async def evaluation_results(
    evaluation_id: str,
    s: Deps,
    page: Paging,
    failed: bool = False,
) -> Page[dict[str, Any]]:
    """Per example: prediction, score, its run (the trace at /api/v1/runs/{run_id})."""
    return await asyncio.to_thread(
        s.evaluations.results, evaluation_id, page.offset, page.limit, failed=failed
    )


@admin.post("/evaluations/{evaluation_id}/cancel", status_code=202)
async def cancel_evaluation(evaluation_id: str, request: Request, s: Deps) -> dict[str, Any]:
    """Stops a running evaluation (its finished examples are kept: POST it again to resume).
    In queue mode, through any replica: the workers running its examples start no other."""
    if s.queue is not None:
        await asyncio.to_thread(s.evaluations.cancel_queued, evaluation_id)
    else:
        _running(request).cancel(evaluation_id)
    return {"id": evaluation_id, "cancelled": True}


# -- scoring without running --------------------------------------------------------------------


class ScoreItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    gold: dict[str, Any] = Field(
        description="wikitq: targetValue (+ targetCanon); tabfact: label; fetaqa, numeric: answer"
    )
    prediction: Any = None


class ScoreIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metric: str = Field(description="wikitq, tabfact, fetaqa or numeric")
    items: list[ScoreItem] = Field(max_length=100_000)
    per_example: bool = False


@admin.post("/score")
async def score(body: ScoreIn) -> dict[str, Any]:
    """Score predictions with an official metric (the SQL metrics need databases: use
    `dagwright eval score` or a dataset)."""
    from dagwright.evaluation.metrics.base import Item
    from dagwright.evaluation.scoring import score_items

    if body.metric not in ("wikitq", "tabfact", "fetaqa", "numeric"):
        raise InputError(f"metric {body.metric!r}: one of wikitq, tabfact, fetaqa, numeric")
    items = [Item(i.id, i.gold, i.prediction) for i in body.items]
    try:
        report = await asyncio.to_thread(score_items, body.metric, items)
    except (KeyError, ValueError) as exc:
        raise InputError(f"an item does not fit the {body.metric} metric: {exc}") from None
    return report.to_dict(per_example=body.per_example)


# -- the publish gate -----------------------------------------------------------------------------


class GateIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset: str
    split: str = "dev"
    metric: str | None = Field(None, description="Default: the dataset's metric.")
    tolerance: float = Field(0.0, ge=0, description="How far below the published score.")


class WaiverIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str = Field(description="The version (id or number) that may be published.")
    reason: str = Field(min_length=1, max_length=5000)
    author: str = Field("", max_length=200)


def _gates(s: Services) -> GateService:
    from dagwright.services.evaluation_gates import GateService

    return GateService(s.engine, s.apps)


@admin.put("/apps/{app}/eval-gate")
async def set_gate(app: str, body: GateIn, s: Deps) -> dict[str, Any]:
    """Publishing a version then needs an evaluation on the whole split scoring at least the
    published version's score minus the tolerance (or a waiver)."""
    return await asyncio.to_thread(
        _gates(s).set,
        app,
        body.dataset,
        metric=body.metric,
        split=body.split,
        tolerance=body.tolerance,
    )


@admin.get("/apps/{app}/eval-gate")
async def get_gate(app: str, s: Deps) -> dict[str, Any]:
    gate = await asyncio.to_thread(_gates(s).get, app)
    if gate is None:
        raise NotFoundError(f"app {app!r} has no evaluation gate", "gate_not_found")
    return gate


@admin.delete("/apps/{app}/eval-gate", status_code=204)
async def remove_gate(app: str, s: Deps) -> Response:
    await asyncio.to_thread(_gates(s).remove, app)
    return Response(status_code=204)


@admin.post("/apps/{app}/eval-gate/waivers", status_code=201)
async def waive_gate(app: str, body: WaiverIn, s: Deps) -> dict[str, Any]:
    """Record why this version may be published whatever its evaluation says."""
    return await asyncio.to_thread(_gates(s).waive, app, body.version, body.reason, body.author)


@admin.get("/apps/{app}/eval-gate/check")
async def check_gate(app: str, version: str, s: Deps) -> dict[str, Any]:
    """What publishing `version` would meet: allowed or not, with the numbers."""
    target = await asyncio.to_thread(s.apps.get_version, app, version)
    decision, gate = await asyncio.to_thread(_gates(s).check, app, target.id)
    if decision is None:
        return {"gate": None, "allowed": True, "reason": "the app has no evaluation gate"}
    return {"gate": gate, **decision.to_dict()}


# -- feedback on runs -----------------------------------------------------------------------------


class FeedbackIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    score: float = Field(ge=0, le=1, description="0 wrong ... 1 right")
    correction: Any = Field(
        None, description="The right answer: kept as a few-shot example of the app."
    )
    comment: str = Field("", max_length=5000)


@router.post("/runs/{run_id}/feedback", status_code=201)
async def give_feedback(run_id: str, body: FeedbackIn, request: Request, s: Deps) -> dict[str, Any]:
    """A score and an optional corrected answer on a run, from the editor (admin token) or
    the app's caller (its API key). A correction becomes an example in the app's feedback
    namespace (`feedback-<slug>`), tagged with this run."""
    from dagwright.api.auth import bearer_token
    from dagwright.services.feedback import FeedbackService

    record = await asyncio.to_thread(s.runs.get, run_id)
    await may_read_app(request, s, record.app_id)
    token = bearer_token(request)
    key = await s.endpoints.key(token) if token else None
    given_by = "api_key" if key is not None else "admin"
    service = FeedbackService(s.engine, s.apps, s.examples)
    return await service.record(
        record, body.score, correction=body.correction, comment=body.comment, given_by=given_by
    )


@router.get("/runs/{run_id}/feedback")
async def list_feedback(run_id: str, request: Request, s: Deps) -> list[dict[str, Any]]:
    from dagwright.services.feedback import FeedbackService

    record = await asyncio.to_thread(s.runs.get, run_id)
    await may_read_app(request, s, record.app_id)
    return await asyncio.to_thread(FeedbackService(s.engine, s.apps, s.examples).list, run_id)


router.include_router(admin)
