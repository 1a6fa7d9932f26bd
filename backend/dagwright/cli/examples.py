"""`dagwright examples`: load, query, list and delete few-shot examples from the terminal.

The store is the local folder `<data dir>/qdrant`, or the Qdrant server at
DAGWRIGHT_QDRANT_URL. Local mode allows one process per folder: stop `dagwright serve` first,
or point both at a server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from dagwright.cli.inputs import fail
from dagwright.embedding.service import ExampleStore, Hit, read_examples
from dagwright.errors import DagwrightError

examples_app = typer.Typer(
    help="Few-shot example namespaces (embedded, searched by meaning).",
    no_args_is_help=True,
)

T = TypeVar("T")


def _run(work: Callable[[ExampleStore], Awaitable[T]]) -> T:
    """Open the store (composition.py: a model gateway only for embedders that call a
    provider), run `work` on one event loop, close everything; errors -> exit 2."""
    from dagwright.composition import Composition
    from dagwright.settings import load_settings

    async def main() -> T:
        process = Composition(
            load_settings(),
            kind="standalone",
            notice=lambda text: typer.echo(text, err=True),
        )
        try:
            return await work(process.examples())
        finally:
            await process.aclose()

    try:
        return asyncio.run(main())
    except DagwrightError as exc:
        raise fail(exc.message) from None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _filter_value(text: str) -> Any:
    # Numbers and booleans are matched as such ("year=2024"); quote to match a string
    # ('id="100"', as CSV files load every value as a string).
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return value if isinstance(value, str | int | bool) else text


def _parse_filter(pairs: list[str]) -> dict[str, Any] | None:
    where: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise fail(f"--filter {pair!r}: expected field=value")
        where[key] = _filter_value(value)
    return where or None


@examples_app.command()
def load(
    namespace: Annotated[str, typer.Argument(help="The namespace (made if missing).")],
    file: Annotated[Path, typer.Argument(help="A .jsonl or .csv file, one example per row.")],
    embedder: Annotated[
        str | None,
        typer.Option(help="For a new namespace: hashing[:dim], minilm or openai[:...]."),
    ] = None,
    key: Annotated[
        list[str] | None, typer.Option(help="Key field(s) of a new namespace (default: id).")
    ] = None,
    text: Annotated[
        str | None, typer.Option(help="The field to embed, for a new namespace.")
    ] = None,
    batch_size: Annotated[int, typer.Option(min=1)] = 256,
) -> None:
    """Upsert every row of FILE into NAMESPACE (rows with the same key replace each other)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    async def work(store: ExampleStore) -> tuple[int, bool]:
        created = False
        existing = {n.name: n for n in store.list_namespaces()}
        if namespace in existing:
            current = existing[namespace]
            wanted = store.embedder(embedder).spec if embedder else current.embedder
            if wanted != current.embedder:
                raise fail(
                    f"namespace {namespace!r} uses the embedder {current.embedder!r}, "
                    f"not {wanted!r}: delete it to change embedders"
                )
        else:
            if text is None:
                raise fail(f"namespace {namespace!r} is new: say which field to embed (--text)")
            store.create_namespace(namespace, embedder or "hashing", key or ["id"], text)
            created = True
        # Read once here as well, so a bad file fails before the bar appears.
        read_examples(file)
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            transient=True,
        ) as bar:
            task = bar.add_task(f"loading {file.name}", total=None)

            def advance(done: int, total: int) -> None:
                bar.update(task, completed=done, total=total)

            count = await store.load_file(namespace, file, batch_size, advance)
        return count, created

    count, created = _run(work)
    made = " (new namespace)" if created else ""
    typer.echo(f"upserted {count} examples into {namespace!r}{made}")


@examples_app.command()
def query(
    namespace: str,
    text: str,
    k: Annotated[int, typer.Option("-k", min=1, help="How many examples.")] = 5,
    filter: Annotated[
        list[str] | None, typer.Option("--filter", help="field=value, exact match; repeatable.")
    ] = None,
    min_score: Annotated[float | None, typer.Option(help="Drop hits scoring below.")] = None,
) -> None:
    """The K examples nearest to TEXT, best first: score, id and the example as JSON."""
    where = _parse_filter(filter or [])

    async def work(store: ExampleStore) -> list[Hit]:
        return await store.query(namespace, text, k, where, min_score)

    for hit in _run(work):
        typer.echo(f"{hit.score:.4f}  {hit.id}  {_json(hit.payload)}")


@examples_app.command()
def delete(
    namespace: str,
    ids: Annotated[list[str], typer.Argument(help="Example ids (as `list` shows them).")],
) -> None:
    """Delete examples by id."""

    async def work(store: ExampleStore) -> int:
        return store.delete(namespace, ids)

    deleted = _run(work)
    typer.echo(f"deleted {deleted} of {len(ids)} examples")
    if deleted < len(ids):
        raise typer.Exit(1)


@examples_app.command("list")
def list_(
    namespace: str,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 20,
    offset: Annotated[str | None, typer.Option(help="The next offset a page printed.")] = None,
) -> None:
    """One page of a namespace's examples: id and the example as JSON."""

    async def work(store: ExampleStore) -> tuple[int, list[Hit], str | None]:
        page = store.list(namespace, offset, limit)
        return store.count(namespace), page.items, page.next_offset

    total, items, next_offset = _run(work)
    for item in items:
        typer.echo(f"{item.id}  {_json(item.payload)}")
    more = f"; next page: --offset {next_offset}" if next_offset else ""
    typer.echo(f"{len(items)} of {total} examples{more}", err=True)
