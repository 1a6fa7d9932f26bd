"""`dagwright tqa`: AutoTQA from the terminal — publish the agents, ask a question and watch
the conversation turn by turn, list and replay conversations, edit the TQA datasets (sources,
versioned SOP, example namespaces), their hints (confirm, edit or drop learned ones) and the
tools. It uses the same database, sources and model providers as `dagwright serve` (the data
directory), so what one command stores the next one (or the server) uses."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, get_args

import typer

from dagwright.errors import DagwrightError

if TYPE_CHECKING:
    from dagwright.store.paging import Page
    from dagwright.tqa.service import TqaService

tqa_app = typer.Typer(help="AutoTQA: agents answering questions over tables.", no_args_is_help=True)
hints_app = typer.Typer(
    help="Common knowledge per dataset, given to the Engineer: written, or learned from "
    "retries (candidates to confirm, edit or drop).",
    no_args_is_help=True,
)
tools_app = typer.Typer(help="Published apps the Executor may call.", no_args_is_help=True)
datasets_app = typer.Typer(
    help="TQA datasets (profiles): sources, SOP (versioned), example namespaces per agent.",
    no_args_is_help=True,
)
tqa_app.add_typer(hints_app, name="hints")
tqa_app.add_typer(tools_app, name="tools")
tqa_app.add_typer(datasets_app, name="datasets")

T = TypeVar("T")


def _note(message: str) -> None:
    typer.echo(f"note: {message}", err=True)


def _with_tqa(work: Callable[[TqaService], Awaitable[T]], **overrides: Any) -> T:
    """Run `work` with the local AutoTQA, over the process's settings with `overrides`."""
    from dagwright.composition import local_tqa
    from dagwright.settings import load_settings

    async def main() -> T:
        async with local_tqa(_note, load_settings(**overrides)) as tqa:
            return await work(tqa)

    try:
        return asyncio.run(main())
    except DagwrightError as exc:
        typer.echo(f"error [{exc.code}]: {exc.message}", err=True)
        raise typer.Exit(2) from None


def _table(columns: list[str], rows: list[Mapping[str, Any]], limit: int = 10) -> list[str]:
    names = columns or list(dict.fromkeys(k for row in rows for k in row))
    cells = [[str(row.get(n, "")) for n in names] for row in rows[:limit]]
    widths = [max([len(n), *(len(c[i]) for c in cells)]) for i, n in enumerate(names)]
    lines = [" | ".join(n.ljust(w) for n, w in zip(names, widths, strict=True))]
    lines.append("-+-".join("-" * w for w in widths))
    lines += [" | ".join(c.ljust(w) for c, w in zip(cell, widths, strict=True)) for cell in cells]
    if len(rows) > limit:
        lines.append(f"... {len(rows) - limit} more rows")
    return lines


def format_turn(turn: Mapping[str, Any]) -> str:
    """One turn for the terminal: who, chosen how, at what cost; its text; its tool call."""
    usage = turn.get("usage") or {}
    scheduler = turn.get("scheduler") or {}
    head = f"[{turn['seq']}] {turn['agent']}"
    if scheduler:
        fallback = " (fallback)" if scheduler.get("fallback") else ""
        head += f"  <- {scheduler.get('by')}{fallback}: {scheduler.get('reason')}"
        choice_tokens = (scheduler.get("usage") or {}).get("total_tokens")
        if choice_tokens:
            head += f" [{choice_tokens} tokens to choose]"
    scripted = ", scripted model" if usage.get("scripted") else ""
    head += (
        f"  ({usage.get('total_tokens', 0)} tokens{scripted}, "
        f"{float(turn.get('duration') or 0):.2f} s)"
    )
    lines = [typer.style(head, bold=True)]
    call = turn.get("tool_call")
    if call:
        lines.append(f"  tool {call['tool']} ({call.get('app')})")
        if call.get("sql"):
            lines.append(f"  SQL: {call['sql']}")
        if call.get("error"):
            lines.append(f"  ERROR {call['error'].get('code')}: {call['error'].get('message')}")
        elif call.get("sql") is not None:
            lines.append(f"  {call.get('row_count', 0)} row(s)")
            if call.get("rows"):
                lines += ["    " + line for line in _table(call.get("columns") or [], call["rows"])]
        for hint in call.get("hints") or []:
            lines.append(f"  hint: {hint}")
    else:
        for line in str(turn.get("text", "")).splitlines() or [""]:
            lines.append(f"  {line}")
    if turn.get("error") and not call:
        lines.append(f"  FAILED {turn['error'].get('code')}: {turn['error'].get('message')}")
    return "\n".join(lines)


def format_outcome(conversation: Mapping[str, Any]) -> str:
    usage = conversation.get("usage") or {}
    cost = f"{usage.get('total_tokens', 0)} tokens, ${float(usage.get('cost') or 0):.4f}"
    status = conversation.get("status")
    if status == "completed":
        answer = conversation.get("answer") or {}
        lines = [typer.style(f"answer ({answer.get('form')}): {answer.get('text')}", bold=True)]
        if answer.get("table"):
            table = answer["table"]
            lines += ["  " + line for line in _table(table["columns"], table["rows"])]
        for evidence in answer.get("evidence") or []:
            lines.append(f"evidence: {evidence.get('sql')} -> {evidence.get('row_count')} row(s)")
        if not answer.get("grounded"):
            lines.append("note: the answer's value does not appear in the rows the tools returned")
    elif status == "waiting":
        lines = [
            typer.style("waiting: a tool call needs a person's approval", bold=True),
            "answer it with `dagwright human list` and `dagwright human answer ID --choice "
            "approve` (or reject) on a running server: the conversation goes on there",
        ]
    else:
        error = conversation.get("error") or {}
        lines = [typer.style(f"no answer: {status}: {error.get('message')}", bold=True)]
    profile = conversation.get("profile")
    if profile:
        used = len(profile.get("learned_hints") or [])
        lines.append(
            f"dataset {profile['name']}: SOP v{profile.get('sop_version', 0)}, "
            f"{used} learned hint(s) given"
        )
        if profile.get("learned"):
            lines.append(
                f"learned {len(profile['learned'])} candidate hint(s): "
                f"dagwright tqa hints list {profile['name']} --status candidate"
            )
    lines.append(f"{conversation.get('rounds')} rounds, {cost}; conversation {conversation['id']}")
    if usage.get("scripted"):
        lines.append("note: dagwright's scripted model played the agents: scripted, not a model's")
    return "\n".join(lines)


@tqa_app.command("publish")
def publish() -> None:
    """Create or update and publish the AutoTQA apps from flows/autotqa (the same for every
    dataset; examples and SOPs are set per dataset: `dagwright tqa datasets`)."""

    async def work(tqa: TqaService) -> list[dict[str, Any]]:
        return await asyncio.to_thread(tqa.publish)

    for item in _with_tqa(work):
        state = "published" if item["changed"] else "unchanged"
        typer.echo(f"{item['app']:<24} version {item['version']:<4} {state}")


@tqa_app.command("ask")
def ask(
    question: Annotated[str, typer.Argument(help="The question, in natural language.")],
    sources: Annotated[
        str, typer.Option(help="demo: the Figure 1 demo sources on; all: as configured.")
    ] = "demo",
    scheduler: Annotated[str, typer.Option(help="fsm, llm or rolling.")] = "fsm",
    max_rounds: Annotated[
        int, typer.Option(help="Agent turns before giving up (the paper's 50).")
    ] = 50,
    dataset: Annotated[
        str | None, typer.Option(help="The TQA dataset: its SOP, examples and hints.")
    ] = None,
    source: Annotated[
        list[str] | None,
        typer.Option(
            "--source",
            help="A data source the question may use ('source' or 'source.schema'; repeat it"
            " for several): the SQL engine refuses any other table. None: the dataset's.",
        ),
    ] = None,
    sop: Annotated[str, typer.Option(help="Added to the dataset's SOP.")] = "",
    answer_format: Annotated[str | None, typer.Option(help="A format to fill.")] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the conversation as JSON.")
    ] = False,
    server: Annotated[
        str | None,
        typer.Option(help="Ask a running server (its API) instead, e.g. http://127.0.0.1:8000."),
    ] = None,
    token: Annotated[
        str | None, typer.Option(envvar="DAGWRIGHT_ADMIN_TOKEN", help="The server's admin token.")
    ] = None,
) -> None:
    """Ask the agents; each turn is printed as it happens."""
    from dagwright.tqa.conversation import AskRequest, Turn

    try:
        request = AskRequest(
            question=question,
            scheduler=scheduler,
            max_rounds=max_rounds,
            dataset=dataset,
            sources=source or None,
            sop=sop,
            answer_format=answer_format,
        )
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None

    if server is not None:
        body = request.model_dump(exclude_none=True)
        _finish(_ask_server(server, token, body, as_json), as_json)
        return

    def show(turn: Turn) -> None:
        if not as_json:
            typer.echo(format_turn(turn.to_dict()))

    async def work(tqa: TqaService) -> dict[str, Any]:
        return (await tqa.ask(request, on_turn=show)).to_dict()

    overrides = {"demo_sources": True} if sources == "demo" else {}
    _finish(_with_tqa(work, **overrides), as_json)


def _finish(conversation: dict[str, Any], as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps(conversation, indent=2, default=str))
    else:
        typer.echo(format_outcome(conversation))
    if conversation["status"] != "completed":
        raise typer.Exit(1)


def _ask_server(
    server: str, token: str | None, body: dict[str, Any], as_json: bool
) -> dict[str, Any]:
    """POST /api/v1/tqa/ask with `stream: true`: each `turn` event printed as it arrives."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    turns: list[dict[str, Any]] = []
    result: dict[str, Any] | None = None
    try:
        with (
            httpx.Client(base_url=server.rstrip("/"), timeout=None) as client,
            client.stream(
                "POST", "/api/v1/tqa/ask", json={**body, "stream": True}, headers=headers
            ) as response,
        ):
            if response.status_code != 200:
                response.read()
                typer.echo(f"error: HTTP {response.status_code}: {response.text}", err=True)
                raise typer.Exit(2)
            event = ""
            for line in response.iter_lines():
                if line.startswith("event:"):
                    event = line.partition(":")[2].strip()
                elif line.startswith("data:"):
                    data = json.loads(line.partition(":")[2])
                    if event == "turn":
                        turns.append(data)
                        if not as_json:
                            typer.echo(format_turn(data))
                    elif event == "result":
                        result = data
    except httpx.HTTPError as exc:
        typer.echo(f"error: {server}: {exc}", err=True)
        raise typer.Exit(2) from None
    if result is None:
        typer.echo("error: the stream ended without a result", err=True)
        raise typer.Exit(2)
    return {**result, "turns": turns}


@tqa_app.command("conversations")
def conversations(
    status: Annotated[str | None, typer.Option(help="completed, round_limit, failed...")] = None,
    limit: Annotated[int, typer.Option(help="How many, newest first.")] = 20,
) -> None:
    """List conversations, newest first."""
    from dagwright.tqa.recording import ConversationStatus

    known = get_args(ConversationStatus)
    if status is not None and status not in known:  # refused, not listed as none
        raise typer.BadParameter(f"one of {', '.join(known)}", param_hint="--status")

    async def work(tqa: TqaService) -> Page[dict[str, Any]]:
        return await asyncio.to_thread(tqa.conversations.list, 0, limit, status)

    for item in _with_tqa(work).items:
        answer = (item.get("answer") or {}).get("text") or ""
        typer.echo(
            f"{item['id']}  {item['created_at'][:19]}  {item['status']:<11} "
            f"{item['scheduler']:<7} {item['question'][:60]!r}  {answer[:40]}"
        )


@tqa_app.command("show")
def show_conversation(
    conversation_id: Annotated[str, typer.Argument(help="The conversation's id.")],
    delay: Annotated[float, typer.Option(help="Seconds between turns (a replay).")] = 0.0,
) -> None:
    """Replay a recorded conversation turn by turn."""

    async def work(tqa: TqaService) -> dict[str, Any]:
        return await asyncio.to_thread(tqa.conversations.get, conversation_id)

    conversation = _with_tqa(work)
    typer.echo(f"question: {conversation['question']}  (scheduler {conversation['scheduler']})")
    for turn in conversation["turns"]:
        typer.echo(format_turn(turn))
        if delay:
            time.sleep(delay)
    typer.echo(format_outcome(conversation))


@hints_app.command("list")
def hints_list(
    dataset: Annotated[str | None, typer.Argument()] = None,
    status: Annotated[
        str | None, typer.Option(help="confirmed, candidate (learned) or dropped.")
    ] = None,
) -> None:
    """The hints (of one dataset, or all): id, dataset, status, source, text."""

    async def work(tqa: TqaService) -> list[Any]:
        return await asyncio.to_thread(tqa.hints.list, dataset, status)

    for hint in _with_tqa(work):
        typer.echo(f"{hint.id}  {hint.dataset:<16} {hint.status:<9} {hint.source:<7} {hint.text}")


@hints_app.command("add")
def hints_add(dataset: str, text: str) -> None:
    """Add a hint to a dataset."""

    async def work(tqa: TqaService) -> Any:
        return await asyncio.to_thread(tqa.hints.add, dataset, text)

    typer.echo(_with_tqa(work).id)


@hints_app.command("edit")
def hints_edit(hint_id: str, text: str) -> None:
    """Change a hint's text."""

    async def work(tqa: TqaService) -> Any:
        return await asyncio.to_thread(tqa.hints.update, hint_id, text)

    _with_tqa(work)


def _set_status(hint_id: str, status: str) -> None:
    async def work(tqa: TqaService) -> Any:
        return await asyncio.to_thread(tqa.hints.update, hint_id, None, status)

    _with_tqa(work)


@hints_app.command("confirm")
def hints_confirm(hint_id: str) -> None:
    """Confirm a learned candidate."""
    _set_status(hint_id, "confirmed")


@hints_app.command("drop")
def hints_drop(hint_id: str) -> None:
    """Drop a hint: kept (so the lesson is not learned again) but never given."""
    _set_status(hint_id, "dropped")


@hints_app.command("remove")
def hints_remove(hint_id: str) -> None:
    """Delete a hint."""

    async def work(tqa: TqaService) -> None:
        await asyncio.to_thread(tqa.hints.delete, hint_id)

    _with_tqa(work)


@tools_app.command("list")
def tools_list() -> None:
    """The registered tools (the built-in ones once a question or `tqa publish` installed
    them: listing writes nothing)."""

    async def work(tqa: TqaService) -> list[Any]:
        return await asyncio.to_thread(tqa.tools.list)

    for tool in _with_tqa(work):
        role = tool.role or "-"
        approval = "approval" if tool.requires_approval else "-"
        typer.echo(
            f"{tool.name:<20} {tool.app:<24} {role:<12} {approval:<9} {tool.description[:60]}"
        )


@tools_app.command("add")
def tools_add(
    name: str,
    app: Annotated[str, typer.Argument(help="The published app (slug) the tool runs.")],
    description: Annotated[str, typer.Option(help="What the Engineer reads.")] = "",
    role: Annotated[
        str | None,
        typer.Option(
            help="What the Executor gives it from the conversation: text_to_sql, python or "
            "question (default: the Engineer's input only)."
        ),
    ] = None,
    requires_approval: Annotated[
        bool | None,
        typer.Option(
            "--requires-approval/--no-approval",
            help="A person approves each call before it runs (default: as it was; none).",
        ),
    ] = None,
) -> None:
    """Register a published app as a tool."""

    async def work(tqa: TqaService) -> None:
        await asyncio.to_thread(tqa.register_tool, name, app, description, role, requires_approval)

    _with_tqa(work)


@tools_app.command("approval")
def tools_approval(
    name: str,
    required: Annotated[
        bool,
        typer.Option(
            "--required/--not-required",
            help="Whether each call of the tool waits for a person's approval (dagwright "
            "human list shows the waiting calls).",
        ),
    ] = True,
) -> None:
    """Set whether a tool's calls need a person's approval before they run."""

    async def work(tqa: TqaService) -> Any:
        await tqa.ensure_published()  # a built-in tool may be marked before any question
        return await asyncio.to_thread(tqa.tools.require_approval, name, required)

    tool = _with_tqa(work)
    needs = "needs approval" if tool.requires_approval else "runs without approval"
    typer.echo(f"{tool.name}: each call {needs}")


@tools_app.command("remove")
def tools_remove(name: str) -> None:
    """Unregister a tool."""

    async def work(tqa: TqaService) -> None:
        await asyncio.to_thread(tqa.tools.delete, name)

    _with_tqa(work)


def _namespaces(values: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for value in values:
        role, sep, namespace = value.partition("=")
        if not sep:
            typer.echo(f"error: --examples {value!r}: ROLE=NAMESPACE", err=True)
            raise typer.Exit(2)
        found[role.strip()] = namespace.strip()
    return found


def _sop_text(sop: str | None, sop_file: Path | None) -> str | None:
    return sop_file.read_text(encoding="utf-8") if sop_file is not None else sop


def _show_profile(profile: Mapping[str, Any]) -> None:
    typer.echo(f"{profile['name']}  {profile['description']}")
    typer.echo(f"  sources: {', '.join(profile['sources']) or '(all)'}")
    for role, namespace in sorted(profile["namespaces"].items()):
        typer.echo(f"  examples of {role}: {namespace}")
    typer.echo(
        f"  examples per question: {profile['examples_k']}, learned hints: {profile['hints_k']}"
    )
    typer.echo(f"  SOP version {profile['sop_version']}:")
    for line in str(profile["sop"]).splitlines():
        typer.echo(f"    {line}")


SourcesOption = Annotated[
    str | None, typer.Option(help="The data sources it covers, comma-separated.")
]
ExamplesOption = Annotated[
    list[str],
    typer.Option(
        "--examples",
        help="ROLE=NAMESPACE (planner, engineer, critic, text_to_sql, python); repeat.",
    ),
]
SopOption = Annotated[str | None, typer.Option(help="The SOP's text (a new version).")]
SopFileOption = Annotated[
    Path | None, typer.Option(help="Read the SOP from this file.", exists=True, dir_okay=False)
]


@datasets_app.command("list")
def datasets_list() -> None:
    """The TQA datasets."""

    async def work(tqa: TqaService) -> list[Any]:
        return await asyncio.to_thread(tqa.profiles.all)

    for profile in _with_tqa(work):
        roles = ",".join(sorted(profile.namespaces)) or "-"
        typer.echo(
            f"{profile.name:<20} SOP v{profile.sop_version:<3} examples: {roles:<30} "
            f"{profile.description[:40]}"
        )


@datasets_app.command("show")
def datasets_show(name: str) -> None:
    """One dataset with its current SOP."""

    async def work(tqa: TqaService) -> Any:
        return await asyncio.to_thread(tqa.profiles.get, name)

    _show_profile(_with_tqa(work).to_dict())


@datasets_app.command("create")
def datasets_create(
    name: str,
    description: Annotated[str, typer.Option(help="What it covers.")] = "",
    sources: SourcesOption = None,
    examples: ExamplesOption = [],  # noqa: B006 (typer reads the default, never mutates it)
    examples_k: Annotated[int, typer.Option(help="Examples per question.")] = 3,
    hints_k: Annotated[int, typer.Option(help="Learned hints per question.")] = 3,
    sop: SopOption = None,
    sop_file: SopFileOption = None,
) -> None:
    """Create a TQA dataset."""
    settings: dict[str, Any] = {
        "description": description,
        "sources": [s.strip() for s in sources.split(",") if s.strip()] if sources else [],
        "namespaces": _namespaces(examples),
        "examples_k": examples_k,
        "hints_k": hints_k,
        "sop": _sop_text(sop, sop_file),
    }

    async def work(tqa: TqaService) -> Any:
        return await asyncio.to_thread(lambda: tqa.create_profile(name, **settings))

    _show_profile(_with_tqa(work).to_dict())


@datasets_app.command("update")
def datasets_update(
    name: str,
    description: Annotated[str | None, typer.Option(help="What it covers.")] = None,
    sources: SourcesOption = None,
    examples: ExamplesOption = [],  # noqa: B006 (typer reads the default, never mutates it)
    examples_k: Annotated[int | None, typer.Option(help="Examples per question.")] = None,
    hints_k: Annotated[int | None, typer.Option(help="Learned hints per question.")] = None,
    sop: SopOption = None,
    sop_file: SopFileOption = None,
    note: Annotated[str, typer.Option(help="What the new SOP version changes.")] = "",
) -> None:
    """Change a TQA dataset; a different SOP becomes its next version."""
    settings: dict[str, Any] = {
        "description": description,
        "sources": [s.strip() for s in sources.split(",") if s.strip()] if sources else None,
        "namespaces": _namespaces(examples) if examples else None,
        "examples_k": examples_k,
        "hints_k": hints_k,
        "sop": _sop_text(sop, sop_file),
        "sop_note": note,
    }

    async def work(tqa: TqaService) -> Any:
        return await asyncio.to_thread(lambda: tqa.update_profile(name, **settings))

    _show_profile(_with_tqa(work).to_dict())


@datasets_app.command("sops")
def datasets_sops(name: str) -> None:
    """Every version of the dataset's SOP, newest first."""

    async def work(tqa: TqaService) -> list[dict[str, Any]]:
        return await asyncio.to_thread(tqa.profiles.sops, name)

    for version in _with_tqa(work):
        typer.echo(f"v{version['version']}  {version['created_at'][:19]}  {version['note']}")
        for line in str(version["text"]).splitlines():
            typer.echo(f"    {line}")


@datasets_app.command("delete")
def datasets_delete(name: str) -> None:
    """Delete a TQA dataset, its SOP versions and its hints."""

    async def work(tqa: TqaService) -> None:
        await asyncio.to_thread(tqa.profiles.delete, name)

    _with_tqa(work)
