"""`dagwright methods`: install the seed papers' methods (Chain-of-Table, MAC-SQL) as
published apps and AutoTQA tools; list them."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from dagwright.errors import DagwrightError

methods_app = typer.Typer(
    help="The papers' methods as apps: Chain-of-Table, MAC-SQL.", no_args_is_help=True
)


@methods_app.command("install")
def install(
    tools: Annotated[
        bool, typer.Option("--tools/--no-tools", help="Also register them as AutoTQA tools.")
    ] = True,
) -> None:
    """Import and publish every method flow of flows/methods (a new version only when a flow
    changed); register `mac_sql` and `chain_of_table` as AutoTQA tools."""
    from dagwright.composition import local_tqa
    from dagwright.methods.publish import publish_methods

    async def main() -> list[dict[str, object]]:
        async with local_tqa(lambda message: typer.echo(f"note: {message}", err=True)) as tqa:
            registry = tqa.tools if tools else None
            return await asyncio.to_thread(publish_methods, tqa.apps, registry)

    try:
        done = asyncio.run(main())
    except DagwrightError as exc:
        typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
        raise typer.Exit(2) from None
    for row in done:
        state = "published" if row["changed"] else "unchanged"
        typer.echo(f"{row['app']:<24} v{row['version']} {state}")


@methods_app.command("list")
def list_() -> None:
    """The method apps and the flow each comes from."""
    from dagwright.methods.publish import METHOD_FLOWS

    for slug, file in METHOD_FLOWS.items():
        typer.echo(f"{slug:<24} flows/methods/{file}")


@methods_app.command("interfaces")
def interfaces(
    source: Annotated[str, typer.Argument(help="The library (data source) name, e.g. billing.")],
    delete: Annotated[str | None, typer.Option(help="Delete this interface.")] = None,
    uncovered: Annotated[
        bool, typer.Option("--uncovered", help="List the requests no interface covered.")
    ] = False,
) -> None:
    """Data-Copilot: review a source's interfaces (signature, version, origin), delete one, or
    list the uncovered requests waiting for the next design round."""
    from dagwright.composition import Composition
    from dagwright.settings import load_settings

    process = Composition(load_settings())
    try:
        library = process.interfaces()
        if delete is not None:
            library.delete(source, delete)
            typer.echo(f"deleted {delete}")
        elif uncovered:
            for row in library.uncovered(source):
                typer.echo(f"{row['request']}  ({row['reason']})")
        else:
            for row in library.listing(source):
                typer.echo(f"v{row['version']:<3} {row['origin']:<8} {row['signature']}")
    except DagwrightError as exc:
        typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
        raise typer.Exit(2) from None
    finally:
        asyncio.run(process.aclose())
