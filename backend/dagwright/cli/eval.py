"""`dagwright eval`: score prediction files with the benchmarks' official metrics, import
datasets, run an app over a dataset, and report or compare evaluations.

`eval score` imports only the metric it uses, so scoring a file starts in a fraction of a
second; the other commands open the database like `dagwright serve` (the data directory).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dagwright.errors import DagwrightError

if TYPE_CHECKING:
    from dagwright.evaluation.metrics.base import ScoreReport

eval_app = typer.Typer(
    help="Evaluation: official metrics, datasets, batch runs, reports.", no_args_is_help=True
)

METRIC_HELP = "wikitq | tabfact | fetaqa | spider | bird | numeric"


def _fail(exc: DagwrightError) -> typer.Exit:
    typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
    return typer.Exit(2)


def _databases(dataset: Path, db_root: Path | None, dialect: str) -> Any:
    from dagwright.evaluation.sql_databases import DatabaseRoot
    from dagwright.store.db import data_directory

    # The Spider pack keeps its databases beside its question file.
    root = db_root or dataset.parent / "databases"
    return DatabaseRoot(root, data_directory() / "eval-cache" / "sqlite", dialect)


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
