"""`dagwright eval`: score prediction files with the benchmarks' official metrics, import
datasets, run an app over a dataset, and report or compare evaluations.

`eval score` imports only the metric it uses, so scoring a file starts in a fraction of a
second; the other commands open the database like `dagwright serve` (the data directory).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from dagwright.errors import DagwrightError

if TYPE_CHECKING:
    from dagwright.evaluation.batch import Progress
    from dagwright.evaluation.metrics.base import ScoreReport
    from dagwright.services.evaluation_gates import GateService
    from dagwright.services.evaluations import EvaluationService
    from dagwright.services.feedback import FeedbackService
    from dagwright.services.runs.service import RunService
    from dagwright.store.paging import Page

T = TypeVar("T")

eval_app = typer.Typer(
    help="Evaluation: official metrics, datasets, batch runs, reports.", no_args_is_help=True
)

METRIC_HELP = "wikitq | tabfact | fetaqa | spider | bird | numeric | finqa"


def _fail(exc: DagwrightError) -> typer.Exit:
    typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
    return typer.Exit(2)


def _databases(dataset: Path, db_root: Path | None, dialect: str) -> Any:
    from dagwright.evaluation.sql_databases import DatabaseRoot
    from dagwright.settings import load_settings

    # The Spider pack keeps its databases beside its question file.
    root = db_root or dataset.parent / "databases"
    cache = load_settings().data_dir / "eval-cache" / "sqlite"
    return DatabaseRoot(root, cache, dialect)


@eval_app.command()
def score(
    metric: Annotated[str, typer.Option(help=METRIC_HELP)],
    dataset: Annotated[Path, typer.Option(help="The gold file, in the benchmark's format.")],
    predictions: Annotated[Path, typer.Option(help="Predictions, in the official format.")],
    per_example: Annotated[
        bool, typer.Option("--per-example", help="Print `id<TAB>True|False` per example.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    db_root: Annotated[
        Path | None,
        typer.Option(help="Spider/BIRD: folder of databases (<db>/<db>.sqlite or DDL + CSV)."),
    ] = None,
    dialect: Annotated[
        str,
        typer.Option(help="Spider/BIRD: the SQL dialect of the queries (translated to SQLite)."),
    ] = "sqlite",
    keep_distinct: Annotated[
        bool, typer.Option(help="Spider: keep DISTINCT (the evaluator removes it by default).")
    ] = False,
    ves: Annotated[
        int, typer.Option(help="BIRD: time each correct pair this many times for VES (0: off).")
    ] = 0,
) -> None:
    """Score a predictions file with a benchmark's official metric; nothing is run."""
    from dagwright.evaluation import official

    try:
        if metric == "wikitq":
            report = official.score_wikitq(dataset, predictions)
        elif metric == "tabfact":
            report = official.score_tabfact(dataset, predictions)
        elif metric == "fetaqa":
            report = official.score_fetaqa(dataset, predictions)
        elif metric == "spider":
            databases = _databases(dataset, db_root, dialect)
            report = official.score_spider(dataset, predictions, databases, keep_distinct)
        elif metric == "bird":
            report = official.score_bird(
                dataset, predictions, _databases(dataset, db_root, dialect), ves
            )
        elif metric == "numeric":
            report = official.score_numeric(dataset, predictions)
        elif metric == "finqa":
            from dagwright.evaluation.metrics import finqa

            report = finqa.score_files(dataset, predictions)
        else:
            typer.echo(f"error: unknown metric {metric!r} ({METRIC_HELP})", err=True)
            raise typer.Exit(2)
    except DagwrightError as exc:
        raise _fail(exc) from None
    _print_score(report, per_example, as_json)


def _print_score(report: ScoreReport, per_example: bool, as_json: bool) -> None:
    from dagwright.evaluation.official import per_example_lines

    if as_json:
        typer.echo(json.dumps(report.to_dict(per_example=per_example), indent=2))
        return
    for note in report.notes:
        typer.echo(note, err=True)
    if per_example:
        for line in per_example_lines(report):
            typer.echo(line)
    typer.echo(f"Examples: {len(report.examples)}")
    for name, value in report.aggregate.items():
        if name == "examples":
            continue
        shown = f"{int(value)}" if name == "correct" else f"{value:.4f}"
        typer.echo(f"{name[0].upper()}{name[1:]}: {shown}")


# -- commands that use the database ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Local:
    """The services of one command."""

    evaluations: EvaluationService
    gates: GateService
    feedback: FeedbackService
    runs: RunService


@asynccontextmanager
async def _local(
    record: Path | None = None, replay: Path | None = None, *, models: bool = False
) -> AsyncIterator[Local]:
    """The services `dagwright serve` would use (same data directory, database, sources,
    model providers), for the time of one command. The model gateway (and the scripted model
    server standing in when no provider is configured) only for commands that run apps."""
    from dagwright.composition import Composition
    from dagwright.services.evaluation_gates import GateService
    from dagwright.services.feedback import FeedbackService
    from dagwright.settings import load_settings

    process = Composition(
        load_settings(), notice=_note, record=record, replay=replay, replica="cli-eval"
    )
    try:
        if models:
            process.gateway()  # its notice (scripted model?) before the work starts
        engine, apps = process.database(), process.apps()
        yield Local(
            process.evaluations(),
            GateService(engine, apps),
            FeedbackService(engine, apps, process.examples()),
            process.runs(),
        )
    finally:
        await process.aclose()


def _note(message: str) -> None:
    typer.echo(f"note: {message}", err=True)


def _with(
    work: Callable[[Local], Awaitable[T]],
    record: Path | None = None,
    replay: Path | None = None,
    *,
    models: bool = False,
) -> T:
    async def main() -> T:
        async with _local(record, replay, models=models) as local:
            return await work(local)

    try:
        return asyncio.run(main())
    except DagwrightError as exc:
        raise _fail(exc) from None
    except KeyboardInterrupt:
        typer.echo("\ninterrupted: what finished is kept; the same command resumes", err=True)
        raise typer.Exit(130) from None


def _echo_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, default=str, ensure_ascii=False))


datasets_app = typer.Typer(
    help="Evaluation datasets: import, list, examples.", no_args_is_help=True
)
eval_app.add_typer(datasets_app, name="datasets")


@datasets_app.command("import")
def datasets_import(
    name: Annotated[str, typer.Argument(help="The dataset's name (a-z, 0-9, _).")],
    path: Annotated[
        Path, typer.Argument(help="The file: a pack's native format, JSONL, CSV, TSV.")
    ],
    kind: Annotated[str, typer.Option(help="wikitq | tabfact | fetaqa | spider | generic")],
    split: Annotated[str, typer.Option(help="The split these examples are.")] = "dev",
    metric: Annotated[str | None, typer.Option(help=f"Default: the kind's. {METRIC_HELP}")] = None,
    mapping: Annotated[
        str | None,
        typer.Option(help='generic: JSON {"id","question","answer","table","sql"} -> field.'),
    ] = None,
    limit: Annotated[int | None, typer.Option(help="Only the first N examples.")] = None,
    few_shot: Annotated[
        str | None, typer.Option(help="Also load this split into a few-shot namespace.")
    ] = None,
    embedder: Annotated[str, typer.Option(help="The few-shot namespace's embedder.")] = "hashing",
    server_url: Annotated[
        str | None,
        typer.Option(help="spider: load the databases into this PostgreSQL (a schema each)."),
    ] = None,
) -> None:
    """Import a dataset file; its tables become data sources the flows can query."""
    fields = json.loads(mapping) if mapping else None

    async def work(local: Local) -> None:
        summary = await asyncio.to_thread(
            local.evaluations.datasets.import_file,
            name,
            kind,
            path,
            split=split,
            metric=metric,
            mapping=fields,
            limit=limit,
            server_url=server_url,
        )
        typer.echo(
            f"{summary.name}: {summary.splits.get(split, 0)} examples in {split} "
            f"(metric {summary.metric}; tables in {summary.source or 'one source per database'})"
        )
        if few_shot:
            count = await local.evaluations.datasets.load_few_shot(name, split, few_shot, embedder)
            typer.echo(f"{count} examples loaded into the few-shot namespace {few_shot}")

    _with(work)


@datasets_app.command("list")
def datasets_list(
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """The datasets, their splits and sizes."""

    async def work(local: Local) -> None:
        found = local.evaluations.datasets.list()
        if as_json:
            _echo_json([d.to_dict() for d in found])
            return
        for d in found:
            splits = ", ".join(f"{k}: {v}" for k, v in d.splits.items())
            typer.echo(f"{d.name:<20} {d.kind:<8} {d.metric:<8} {splits}")

    _with(work)


def _progress_line(progress: Progress) -> None:
    eta = f"{progress.eta:.0f}s" if progress.eta is not None else "?"
    percent = 100 * progress.done / progress.total if progress.total else 100.0
    typer.echo(
        f"\r{progress.done}/{progress.total} {percent:5.1f}% {progress.rate:6.1f} ex/s "
        f"ETA {eta:>6} tokens {progress.tokens} cost {progress.cost:.4f} "
        f"errors {progress.errors}   ",
        err=True,
        nl=False,
    )


@eval_app.command()
def run(
    target: Annotated[str, typer.Argument(help="APP or APP@VERSION (default: the published).")],
    dataset: Annotated[str, typer.Option(help="The dataset's name.")],
    split: Annotated[str, typer.Option(help="The split.")] = "dev",
    limit: Annotated[int | None, typer.Option(help="Only the first N examples.")] = None,
    concurrency: Annotated[int, typer.Option(help="Examples run at once.")] = 4,
    fresh: Annotated[
        bool, typer.Option("--fresh", help="Start anew instead of resuming an unfinished run.")
    ] = False,
    inputs: Annotated[
        str | None, typer.Option(help="JSON {app input: example field} (default: same names).")
    ] = None,
    output: Annotated[str | None, typer.Option(help="The app output holding the answer.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    record: Annotated[
        Path | None, typer.Option(help="Record every model exchange to this JSONL file.")
    ] = None,
    replay: Annotated[
        Path | None,
        typer.Option(help="Answer model calls from a recording: the evaluation offline, again."),
    ] = None,
) -> None:
    """Run an app over a dataset split and score it. Interrupted (Ctrl-C, a crash), the same
    command resumes: examples with a result are not run again. With --record, then --replay
    of the recording (and --fresh), an evaluation is repeated offline with the same answers."""
    app, _, version = target.partition("@")
    settings: dict[str, Any] = {"inputs": json.loads(inputs) if inputs else None}
    if output:
        settings["output"] = output
    if record is not None:
        settings["recorded_to"] = str(record)
    if replay is not None:
        settings["replayed_from"] = str(replay)

    async def work(local: Local) -> dict[str, Any]:
        row = await asyncio.to_thread(
            local.evaluations.create,
            app,
            version or None,
            dataset,
            split=split,
            limit=limit,
            settings=settings,
            resume=not fresh,
        )
        done = len(local.evaluations.done_ids(row.id))
        typer.echo(
            f"evaluation {row.id} ({row.label} on {dataset}/{split}, {row.total} examples"
            + (f", {done} already done" if done else "")
            + ")",
            err=True,
        )
        await local.evaluations.run(row.id, concurrency=concurrency, on_progress=_progress_line)
        typer.echo("", err=True)
        return local.evaluations.report(row.id)

    report = _with(work, record, replay, models=True)
    _print_report(report, as_json)


def _error_codes(counts: dict[str, int]) -> str:
    """` (no_answer 2, agent_timeout 1)`: what the errors were, when there were any."""
    if not counts:
        return ""
    return " (" + ", ".join(f"{code} {n}" for code, n in sorted(counts.items())) + ")"


def _print_report(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        _echo_json(report)
        return
    evaluation = report["evaluation"]
    ci = report["ci"]
    typer.echo(f"evaluation {evaluation['id']} {evaluation['label']} ({evaluation['status']})")
    typer.echo(
        f"{report['metric']} {report['primary']}: {report['value']:.4f} over {report['examples']}"
        f" examples (mean example score {report['mean_example_score']:.4f}, "
        f"{ci['confidence']:.0%} CI {ci['low']:.4f}-{ci['high']:.4f})"
    )
    for name, value in report["aggregate"].items():
        if name not in (report["primary"], "correct", "examples"):
            typer.echo(f"  {name}: {value:.4f}")
    for key, groups in report["breakdowns"].items():
        typer.echo(f"by {key}:")
        for group in groups:
            bar = "#" * round(20 * group["mean"])
            typer.echo(f"  {group['value']:<16} {group['mean']:.3f} {bar:<20} n={group['count']}")
    cost, latency = report["cost"], report["latency"]
    mean = f"{latency['mean']:.3f}s" if latency["mean"] is not None else "-"
    typer.echo(
        f"per example: {cost['tokens_per_example']:.0f} tokens, "
        f"cost {cost['cost_per_example']:.5f}, latency mean {mean}; errors {report['errors']}"
        + _error_codes(report.get("errors_by_code") or {})
    )
    failures = report["failures"]
    if failures:
        typer.echo(f"failures ({len(failures)}, first 10):")
        for failure in failures[:10]:
            error = f" error: {failure['error'].get('message')}" if failure["error"] else ""
            typer.echo(
                f"  {failure['id']}: {failure['question'][:60]!r} -> {failure['prediction']!r}"
                f" (run {failure['run_id']}){error}"
            )


@eval_app.command()
def report(
    evaluation_id: Annotated[str, typer.Argument(help="The evaluation's id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """An evaluation's report: score with its CI, breakdowns, cost, latency, failures."""

    async def work(local: Local) -> dict[str, Any]:
        return local.evaluations.report(evaluation_id)

    _print_report(_with(work), as_json)


@eval_app.command()
def compare(
    a: Annotated[str, typer.Argument(help="The first evaluation's id.")],
    b: Annotated[str, typer.Argument(help="The second evaluation's id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Two evaluations side by side: difference, paired test, flipped examples."""

    async def work(local: Local) -> dict[str, Any]:
        return local.evaluations.compare(a, b)

    result = _with(work)
    if as_json:
        _echo_json(result)
        return
    ci, test = result["ci"], result["test"]
    typer.echo(f"A {result['a']['label']} ({result['a']['id']}): {result['mean_a']:.4f}")
    typer.echo(f"B {result['b']['label']} ({result['b']['id']}): {result['mean_b']:.4f}")
    typer.echo(
        f"B - A = {result['difference']:+.4f} ({ci['confidence']:.0%} CI {ci['low']:+.4f} to "
        f"{ci['high']:+.4f}) over {result['examples']} examples; {test['name']} p = "
        f"{test['p_value']:.4g}"
    )
    typer.echo(f"better in B ({len(result['gained'])}): {', '.join(result['gained'][:20])}")
    typer.echo(f"better in A ({len(result['lost'])}): {', '.join(result['lost'][:20])}")


@eval_app.command("list")
def list_(
    app: Annotated[str | None, typer.Option(help="Only this app's evaluations.")] = None,
    offset: Annotated[int, typer.Option(min=0, help="Evaluations to skip.")] = 0,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Evaluations per page (default 50, at most 200).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the page as JSON.")] = False,
) -> None:
    """One page of evaluations, newest first; the count and the next page's --offset go to
    stderr (with --json the page says them: items, total, offset, limit)."""
    # Imported here: `eval score` must not import the store (paging's numbers are its).
    from dagwright.services.evaluations import evaluation_dict
    from dagwright.store.paging import DEFAULT_LIMIT

    async def work(local: Local) -> Page[dict[str, Any]]:
        return local.evaluations.list(app, offset, limit or DEFAULT_LIMIT).map(evaluation_dict)

    page = _with(work)
    if as_json:
        _echo_json(asdict(page))
        return
    for row in page.items:
        aggregate = row["aggregate"] or {}
        value = aggregate.get(aggregate.get("primary", ""), None)
        shown = f"{value:.4f}" if isinstance(value, float) else "-"
        typer.echo(
            f"{row['id']}  {row['label']:<20} {row['metric']:<8} {row['status']:<11} {shown}"
        )
    count = len(page.items)
    more = f"; next page: --offset {offset + count}" if offset + count < page.total else ""
    typer.echo(f"{count} of {page.total} evaluations{more}", err=True)


gate_app = typer.Typer(help="An app's publish gate: set, show, check, waive.", no_args_is_help=True)
eval_app.add_typer(gate_app, name="gate")


@gate_app.command("set")
def gate_set(
    app: Annotated[str, typer.Argument(help="The app's slug or id.")],
    dataset: Annotated[str, typer.Option(help="The dataset a version must be evaluated on.")],
    split: Annotated[str, typer.Option(help="Its split (evaluated whole).")] = "dev",
    metric: Annotated[str | None, typer.Option(help="Default: the dataset's metric.")] = None,
    tolerance: Annotated[
        float, typer.Option(help="How far below the published version's score is allowed.")
    ] = 0.0,
) -> None:
    """Gate publishing the app's versions on an evaluation score."""

    async def work(local: Local) -> dict[str, Any]:
        return local.gates.set(app, dataset, metric=metric, split=split, tolerance=tolerance)

    _echo_json(_with(work))


@gate_app.command("show")
def gate_show(app: Annotated[str, typer.Argument(help="The app's slug or id.")]) -> None:
    """The app's gate, if any."""

    async def work(local: Local) -> dict[str, Any] | None:
        return local.gates.get(app)

    _echo_json(_with(work))


@gate_app.command("check")
def gate_check(
    target: Annotated[str, typer.Argument(help="APP@VERSION: would publishing it pass?")],
) -> None:
    """What publishing a version would meet: allowed or refused, with the numbers."""
    app, _, version = target.partition("@")

    async def work(local: Local) -> dict[str, Any]:
        found = local.evaluations.apps.get_version(app, version or "published")
        decision, gate = local.gates.check(app, found.id)
        if decision is None:
            return {"gate": None, "allowed": True, "reason": "the app has no evaluation gate"}
        return {"gate": gate, **decision.to_dict()}

    result = _with(work)
    _echo_json(result)
    if not result["allowed"]:
        raise typer.Exit(1)


@gate_app.command("waive")
def gate_waive(
    target: Annotated[str, typer.Argument(help="APP@VERSION that may be published anyway.")],
    reason: Annotated[str, typer.Option(help="Why (recorded).")],
    author: Annotated[str, typer.Option(help="Who decided.")] = "",
) -> None:
    """Record a waiver: this version may be published whatever its evaluation says."""
    app, _, version = target.partition("@")
    if not version:
        typer.echo("error: give the version, APP@VERSION", err=True)
        raise typer.Exit(2)

    async def work(local: Local) -> dict[str, Any]:
        return local.gates.waive(app, version, reason, author)

    _echo_json(_with(work))


@eval_app.command()
def feedback(
    run_id: Annotated[str, typer.Argument(help="The run the feedback is about.")],
    score: Annotated[float, typer.Option(help="0 (wrong) to 1 (right).")],
    correction: Annotated[
        str | None, typer.Option(help="The right answer: kept as a few-shot example of the app.")
    ] = None,
    comment: Annotated[str, typer.Option(help="A note.")] = "",
) -> None:
    """Score a run and, with a correction, add it to the app's feedback few-shot namespace."""

    async def work(local: Local) -> dict[str, Any]:
        record = local.runs.get(run_id)
        return await local.feedback.record(
            record, score, correction=correction, comment=comment, given_by="admin"
        )

    _echo_json(_with(work))
