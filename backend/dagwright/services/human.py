"""Human-in-the-loop: runs that pause at a `human_input` node until someone answers.

The pause is durable because nothing of it lives in a process. The block writes a
`human_requests` row and stops the run with `waiting_for_human` (runtime/pause.py); the run
is recorded as `waiting`. A `human_input` inside a map item, a repeat round or a sub-flow
pauses the run the same way, under its path (`loop[2]/approve`); a map pauses once every item
has run, so a run may wait on several requests. Answers (API, editor, signed link) on any
replica, or timeouts (every replica sweeps; conditional updates decide which one acts), claim
requests; once none of the run's requests is waiting, claiming the run itself (`waiting` ->
`resumed`) decides which replica starts the continuation: the same app version and inputs,
every node that had finished passed on unrun (nested ones too: each iteration hands its own
on), and each answer as its paused node's output down the branch chosen. The continuation is
a run of its own (mode `resume`, its parent the waiting run), in the same trace. The sweep
also resumes runs whose last answer came before the run was recorded as waiting, or whose
answering replica stopped before starting the continuation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets as token_source
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

from sqlalchemy import Engine
from sqlmodel import Session

from dagwright.errors import ConflictError, InputError
from dagwright.runtime.executor import ReusedOutput
from dagwright.runtime.plan import CompiledFlow
from dagwright.services.apps import AppService
from dagwright.services.runs.recorder import LiveRun
from dagwright.services.runs.service import RunService
from dagwright.store.human import HumanRequestRepository
from dagwright.store.human_models import HumanRequest
from dagwright.store.models import utcnow
from dagwright.store.paging import DEFAULT_LIMIT, Page, window
from dagwright.telemetry.context import TraceParent, span_id_for, trace_id_for

log = logging.getLogger(__name__)

TIMEOUT_BRANCH: Final = "timeout"
ANSWERED_BRANCH: Final = "answered"  # the one branch of a form without choices
SWEEP: Final = 1.0  # seconds between looks for requests past their timeout
# The sweep leaves a settled run alone for this long: the answer that settled it is still
# starting its continuation (and is the one to report it).
SWEEP_GRACE: Final = timedelta(seconds=10)
FIELD_TYPES: Final[dict[str, type | tuple[type, ...]]] = {
    "text": str,
    "number": (int, float),
    "integer": int,
    "boolean": bool,
}
# A run still being recorded ("running") may yet become "waiting"; one that ended otherwise
# (another node failed while a map item waited, say) has nothing to resume.
RESUMABLE: Final = ("waiting", "running")


@dataclass(frozen=True, slots=True)
class Answered:
    """What an answer (or a timeout) did: started the continuation `run_id`, or left the run
    waiting for `waiting_for` more answers (run_id None). With neither, the run was still
    being recorded: the sweep resumes it within a second."""

    waiting_run_id: str
    run_id: str | None
    waiting_for: int


class HumanInbox:
    """What a `human_input` block asks for its run: write the request."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def ask(
        self,
        run_id: str,
        node: str,
        message: str,
        form: dict[str, Any],
        timeout_s: float | None,
    ) -> HumanRequest:
        """`node` is the node's path in the run (`loop[2]/approve` inside a map item)."""
        with Session(self.engine) as db:
            store = HumanRequestRepository(db)
            request = HumanRequest(
                run_id=run_id,
                app_id=store.app_of_run(run_id),
                node=node,
                message=message,
                form=form,
                link_token=token_source.token_urlsafe(32),
                expires_at=utcnow() + timedelta(seconds=timeout_s) if timeout_s else None,
            )
            store.add(request)
            db.commit()
            db.refresh(request)
            return request


def check_answer(form: dict[str, Any], answer: dict[str, Any], choice: str | None) -> None:
    """InputError naming every field that is missing or of the wrong type, or a choice the
    form does not offer."""
    problems: list[str] = []
    for spec in form.get("fields", []):
        name = spec["name"]
        if name not in answer:
            if spec.get("required", True) and spec.get("default") is None:
                problems.append(f"{name!r} is required")
            continue
        kind = spec.get("type", "text")
        value = answer[name]
        # bool is an int to Python, not to a form: True is no answer to "how many?".
        is_bool = isinstance(value, bool)
        if not isinstance(value, FIELD_TYPES[kind]) or (is_bool and kind != "boolean"):
            problems.append(f"{name!r} must be {kind}")
    unknown = sorted(set(answer) - {spec["name"] for spec in form.get("fields", [])})
    if unknown:
        problems.append(f"the form has no field {', '.join(map(repr, unknown))}")
    choices = form.get("choices") or []
    if choices and choice not in choices:
        problems.append(f"choose one of {', '.join(map(repr, choices))}")
    if not choices and choice not in (None, ANSWERED_BRANCH):
        problems.append("this form offers no choices")
    if problems:
        raise InputError("; ".join(problems))


def _filled(form: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    values = {spec["name"]: spec.get("default") for spec in form.get("fields", [])}
    values.update(answer)
    return values


def _top_node(path: str) -> str:
    """The flow's own node a nested path is under (`check` for `check/each[2]/approve`)."""
    return re.split(r"[/\[]", path, maxsplit=1)[0]


class HumanService:
    def __init__(self, engine: Engine, apps: AppService, runs: RunService) -> None:
        self.engine = engine
        self.apps = apps
        self.runs = runs
        self._sweeper: asyncio.Task[None] | None = None

    # -- reading ------------------------------------------------------------------------------

    def requests(
        self,
        status: str | None = "waiting",
        app_id: str | None = None,
        run_id: str | None = None,
        offset: int = 0,
        limit: int = DEFAULT_LIMIT,
    ) -> Page[HumanRequest]:
        """Oldest first, one page (store/paging.py's policy)."""
        at = window(offset, limit)
        with Session(self.engine) as db:
            return HumanRequestRepository(db).listing(status, app_id, run_id, at)

    def get(self, request_id: str) -> HumanRequest:
        with Session(self.engine) as db:
            return HumanRequestRepository(db).find(request_id)

    def by_link(self, token: str) -> HumanRequest:
        with Session(self.engine) as db:
            return HumanRequestRepository(db).by_token(token)

    # -- answering ----------------------------------------------------------------------------

    def _claim(self, request_id: str, status: str, answer: dict[str, Any], choice: str) -> bool:
        with Session(self.engine) as db:
            claimed = HumanRequestRepository(db).claim(request_id, status, answer, choice)
            db.commit()
            return claimed

    def _run_state(self, run_id: str) -> tuple[str, str | None]:
        with Session(self.engine) as db:
            return HumanRequestRepository(db).run_state(run_id) or ("deleted", None)

    async def answer(
        self,
        request_id: str,
        answer: dict[str, Any],
        choice: str | None = None,
        draft: CompiledFlow | None = None,
    ) -> Answered:
        """Answer a waiting request, and resume its run unless it waits for other answers.
        A run of an unsaved flow (the editor's debug run) resumes with `draft`, the flow as
        it is on the canvas now, as a debug re-run does. ConflictError when it was answered
        (or timed out) already, its run ended without waiting (another node failed
        meanwhile), or it needs a draft and has none; InputError for an answer that does not
        fit the form."""
        request = await asyncio.to_thread(self.get, request_id)
        if request.status != "waiting":
            raise ConflictError(f"this request is {request.status} already", "human_answered")
        check_answer(request.form, answer, choice)
        run_status, version_id = await asyncio.to_thread(self._run_state, request.run_id)
        if run_status not in RESUMABLE:
            raise ConflictError(
                f"run {request.run_id} is {run_status}: there is nothing to resume",
                "not_resumable",
            )
        if version_id is None and draft is None:
            raise ConflictError(
                "this run is of an unsaved flow: answer it from the editor's debug panel, "
                "which sends the flow to go on with",
                "not_resumable",
            )
        branch = choice or ANSWERED_BRANCH
        values = _filled(request.form, answer)
        if not await asyncio.to_thread(self._claim, request.id, "answered", values, branch):
            raise ConflictError("this request was answered a moment ago", "human_answered")
        return await self._resume_if_ready(request.run_id, request.node, draft)

    def _waiting_count(self, run_id: str) -> int:
        with Session(self.engine) as db:
            return HumanRequestRepository(db).waiting_count(run_id)

    def _claim_run(self, run_id: str) -> bool:
        """The one caller this succeeds for starts the paused run's continuation."""
        with Session(self.engine) as db:
            claimed = HumanRequestRepository(db).claim_run(run_id)
            db.commit()
            return claimed

    async def _resume_if_ready(
        self, run_id: str, node: str, draft: CompiledFlow | None = None
    ) -> Answered:
        """Start the continuation of `run_id` if none of its requests still waits and this
        caller claims the run; `node` (the request just settled) is where its trace hangs.
        A run of an unsaved flow goes on only with a `draft` (the timeout of one settles
        its request and leaves the run waiting for the editor)."""
        waiting_for = await asyncio.to_thread(self._waiting_count, run_id)
        if waiting_for:
            return Answered(run_id, None, waiting_for)
        _, version_id = await asyncio.to_thread(self._run_state, run_id)
        if version_id is None and draft is None:
            return Answered(run_id, None, 0)
        if not await asyncio.to_thread(self._claim_run, run_id):
            return Answered(run_id, None, 0)
        live = await self._resume(run_id, node, draft)
        return Answered(run_id, live.run_id, 0)

    def _answers(self, run_id: str) -> list[HumanRequest]:
        with Session(self.engine) as db:
            return HumanRequestRepository(db).settled(run_id)

    async def _resume(self, run_id: str, node: str, draft: CompiledFlow | None) -> LiveRun:
        waiting = await asyncio.to_thread(self.runs.get, run_id)
        if waiting.app_id is not None and waiting.version_id is not None:
            version = await asyncio.to_thread(
                self.apps.get_version, waiting.app_id, waiting.version_id
            )
            plan = await asyncio.to_thread(self.apps.compiled, version)
        else:
            assert draft is not None  # _resume_if_ready resumes no unsaved flow without one
            plan = draft
        # Every node that finished, nested ones too (`loop[0]/check`): a map or repeat that
        # paused runs again, and each of its iterations passes on what it had done.
        reuse = {
            done.node: ReusedOutput(done.output, done.branch)
            for done in waiting.nodes
            if done.status in ("succeeded", "reused")
        }
        for answered in await asyncio.to_thread(self._answers, run_id):
            branch = answered.choice or ANSWERED_BRANCH
            output = {**(answered.answer or {}), "choice": branch}
            reuse[answered.node] = ReusedOutput(output, branch)
        # The continuation hangs under the human node's span of the waiting run's trace: its
        # ids are derived from the run id, so any replica can name them after any restart.
        parent = TraceParent(trace_id_for(waiting.id), span_id_for(waiting.id, f"node:{node}"))
        live = await self.runs.start(
            plan,
            waiting.inputs,
            app_id=waiting.app_id,
            version_id=waiting.version_id,
            mode="resume",
            parent_run_id=waiting.id,
            parent_node=_top_node(node),
            reuse=reuse,
            traceparent=parent.header(),
        )
        await asyncio.to_thread(self._resumed, waiting.id, live.run_id)
        return live

    def _resumed(self, waiting_run_id: str, run_id: str) -> None:
        with Session(self.engine) as db:
            HumanRequestRepository(db).mark_resumed(waiting_run_id, run_id)
            db.commit()

    # -- timeouts and the sweep ---------------------------------------------------------------

    async def expire_due(self) -> list[Answered]:
        """Settle, as `timeout` with the fields' defaults, the requests past their timeout
        that this replica claims, resuming their runs when nothing else is awaited."""

        def due() -> list[HumanRequest]:
            with Session(self.engine) as db:
                return HumanRequestRepository(db).due(utcnow())

        settled: list[Answered] = []
        for request in await asyncio.to_thread(due):
            values = _filled(request.form, {})
            claimed = await asyncio.to_thread(
                self._claim, request.id, "expired", values, TIMEOUT_BRANCH
            )
            if claimed:
                settled.append(await self._resume_if_ready(request.run_id, request.node))
        return settled

    def _unresumed(self) -> list[tuple[str, str]]:
        """(run, node) of paused runs with every request settled a while ago and none gone
        on: the last answer came while the run was still being recorded, or its replica
        stopped."""
        with Session(self.engine) as db:
            return HumanRequestRepository(db).unresumed(utcnow() - SWEEP_GRACE)

    async def resume_settled(self) -> list[Answered]:
        resumed: list[Answered] = []
        for run_id, node in dict(await asyncio.to_thread(self._unresumed)).items():
            resumed.append(await self._resume_if_ready(run_id, node))
        return resumed

    def start(self) -> None:
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(
                self._sweep(), name="dagwright-human-timeouts"
            )

    async def _sweep(self) -> None:
        while True:
            try:
                await self.expire_due()
                await self.resume_settled()
            except Exception:  # one bad request must not stop the others' timeouts
                log.warning("human request sweep failed", exc_info=True)
            await asyncio.sleep(SWEEP)

    async def close(self) -> None:
        task, self._sweeper = self._sweeper, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
