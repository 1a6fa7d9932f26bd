"""Human-in-the-loop: runs that pause at a `human_input` node until someone answers.

The pause is durable because nothing of it lives in a process. The block writes a
`human_requests` row (one per node of a run: a node run again finds it) and stops the run with
`waiting_for_human` (runtime/pause.py); the run is recorded as `waiting`. A `human_input`
inside a map item, a repeat round or a sub-flow pauses the run the same way, under its path
(`loop[2]/approve`); a map pauses once every item has run, so a run may wait on several
requests. Answers (API, editor, signed link) on any replica, or timeouts (every replica
sweeps; conditional updates decide which one acts), claim requests; once none of the run's
requests is waiting, claiming the run itself (`waiting` -> `resumed`) decides which replica
starts the continuation: the same app version and inputs, every node that had finished passed
on unrun (nested ones too: each iteration hands its own on; a result stored truncated is run
again), and each answer as its paused node's output down the branch chosen. The continuation
is a run of its own (mode `resume`, its parent the waiting run), in the same trace.

A continuation that cannot start (the canvas lost a node the run had passed, a database
error) puts the run back to `waiting` and, for an answer, the request too, so it can be
answered again; the answer fails with the reason. The sweep resumes runs whose last answer
came while the run was still being recorded, and runs claimed a while ago with no
continuation (the claiming replica stopped, or could not start it): it tries again every
SWEEP_GRACE, unless the failure was a lasting one (a typed error: the recorded inputs or
the version do not fit), which fails the run (`resume_failed`) when no answer can be given
again (the sweep's or a timeout's resume). A cancelled paused run's open requests are
closed (`cancelled`) by the sweep.

An AutoTQA conversation whose Engineer asked for a tool that requires approval waits the same
way (tqa/approvals.py writes the request: `conversation_id` set, no run). Answering it claims
the conversation back from `waiting` and lets it go on (`Conversations`, the TQA service): its
job in queue mode, else a task of the answering process; the orchestrator reads the answer
(approve: the tool runs; reject: the Engineer reads why). The sweep lets go on a conversation
whose answering replica stopped before doing so.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets as token_source
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal, Protocol, TypeVar

from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from dagwright.errors import ConflictError, DagwrightError, InputError, RetryLaterError
from dagwright.periodic import PeriodicSweep
from dagwright.runtime.executor import ReusedOutput
from dagwright.runtime.plan import CompiledFlow
from dagwright.services.apps import AppService
from dagwright.services.runs.recorder import LiveRun
from dagwright.services.runs.records import reusable
from dagwright.services.runs.service import CANCEL_REASON, RunService
from dagwright.store.db import session
from dagwright.store.human import HumanRequestRepository
from dagwright.store.human_models import HumanRequest
from dagwright.store.models import utcnow
from dagwright.store.paging import DEFAULT_LIMIT, Page, window
from dagwright.telemetry.context import TraceParent, span_id_for, trace_id_for

log = logging.getLogger(__name__)

T = TypeVar("T")

TIMEOUT_BRANCH: Final = "timeout"
ANSWERED_BRANCH: Final = "answered"  # the one branch of a form without choices
SWEEP: Final = 1.0  # seconds between looks for requests past their timeout
# The sweep leaves a settled (or claimed) run alone for this long: the answer that settled it
# is still starting its continuation (and is the one to report it). A continuation that
# could not start is tried again as often.
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
CANCELLED: Final = "cancelled"  # a request whose run was cancelled while it waited
# What a request list may be filtered by: a request's statuses, or all of them ("all", or
# empty as before).
RequestFilter = Literal["waiting", "answered", "expired", "cancelled", "all", ""]


def _read(engine: Engine, use: Callable[[HumanRequestRepository], T]) -> T:
    with session(engine) as db:
        return use(HumanRequestRepository(db))


def _write(engine: Engine, use: Callable[[HumanRequestRepository], T]) -> T:
    with session(engine) as db:
        done = use(HumanRequestRepository(db))
        db.commit()
        return done


@dataclass(frozen=True, slots=True)
class Answered:
    """What an answer (or a timeout) did: started the continuation `run_id`, or left the run
    waiting for `waiting_for` more answers (run_id None). With neither, the run was still
    being recorded: the sweep resumes it within a second. An approval's answer names the
    conversation that goes on (`conversation_id`; no run)."""

    waiting_run_id: str | None
    run_id: str | None
    waiting_for: int
    conversation_id: str | None = None


class Conversations(Protocol):
    """What lets an AutoTQA conversation go on once its approval is answered (TqaService):
    True for the caller that claimed it back from waiting."""

    async def go_on(self, conversation_id: str) -> bool: ...


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
        """`node` is the node's path in the run (`loop[2]/approve` inside a map item). The
        run's request for `node` when it has one already (the node ran again: a durable run
        resumed after its worker died), whatever its state: one node, one request."""
        with session(self.engine) as db:
            store = HumanRequestRepository(db)
            asked = store.of_node(run_id, node)
            if asked is not None:
                return asked
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
            try:
                db.commit()
            except IntegrityError:  # the same node of the same run asked a moment ago
                db.rollback()
                asked = store.of_node(run_id, node)
                if asked is None:
                    raise
                return asked
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


def _aware(value: datetime) -> datetime:
    """A stored instant as UTC (SQLite and MariaDB give it back without its zone)."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def answerable(request: HumanRequest, now: datetime) -> bool:
    """A request (and its signed link) may be answered strictly before its expiry instant,
    compared at the clock's full precision: at the instant itself it belongs to the timeout,
    whether or not the sweep has settled it yet (it looks once a second)."""
    return request.expires_at is None or now < _aware(request.expires_at)


def _expired(request: HumanRequest) -> ConflictError:
    assert request.expires_at is not None
    when = _aware(request.expires_at).isoformat()
    return ConflictError(f"this request expired at {when}: it takes its timeout", "human_expired")


def _lasting(exc: Exception) -> bool:
    """A failure to start a continuation that trying again will not mend: a typed one (the
    inputs or the version no longer fit), not one of the moment (the database, a limit)."""
    return isinstance(exc, DagwrightError) and not isinstance(exc, RetryLaterError)


def _top_node(path: str) -> str:
    """The flow's own node a nested path is under (`check` for `check/each[2]/approve`)."""
    return re.split(r"[/\[]", path, maxsplit=1)[0]


class HumanService:
    def __init__(
        self,
        engine: Engine,
        apps: AppService,
        runs: RunService,
        conversations: Conversations | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.engine = engine
        self.apps = apps
        self.runs = runs
        self.conversations = conversations
        # The one clock answers and timeouts are judged by (a seam for tests at the instant).
        self.clock = clock
        self._sweep = PeriodicSweep(
            self._sweep_round, SWEEP, name="dagwright-human-timeouts", what="human request sweep"
        )

    async def _read(self, use: Callable[[HumanRequestRepository], T]) -> T:
        return await asyncio.to_thread(_read, self.engine, use)

    async def _write(self, use: Callable[[HumanRequestRepository], T]) -> T:
        return await asyncio.to_thread(_write, self.engine, use)

    # -- reading ------------------------------------------------------------------------------

    def requests(
        self,
        status: str | None = "waiting",
        app_id: str | None = None,
        run_id: str | None = None,
        offset: int = 0,
        limit: int = DEFAULT_LIMIT,
        conversation_id: str | None = None,
    ) -> Page[HumanRequest]:
        """Oldest first, one page (store/paging.py's policy)."""
        at = window(offset, limit)
        return _read(
            self.engine,
            lambda store: store.listing(status, app_id, run_id, at, conversation_id),
        )

    def get(self, request_id: str) -> HumanRequest:
        return _read(self.engine, lambda store: store.find(request_id))

    def by_link(self, token: str) -> HumanRequest:
        return _read(self.engine, lambda store: store.by_token(token))

    # -- answering ----------------------------------------------------------------------------

    async def _run_state(self, run_id: str) -> tuple[str, str | None]:
        state = await self._read(lambda store: store.run_state(run_id))
        return state or ("deleted", None)

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
        (or timed out) already, its run was cancelled or ended without waiting (another node
        failed meanwhile), or it needs a draft and has none; InputError for an answer that
        does not fit the form. When the continuation cannot start, the run and the request
        wait again and the error says why: InputError for a draft that no longer fits the
        run (naming the node), RetryLaterError for a failure of the moment."""
        request = await asyncio.to_thread(self.get, request_id)
        if request.status == CANCELLED:
            what = f"run {request.run_id}" if request.run_id else "its conversation"
            raise ConflictError(f"{what} was cancelled: this request is closed", "run_cancelled")
        if request.status != "waiting":
            raise ConflictError(f"this request is {request.status} already", "human_answered")
        now = self.clock()
        if not answerable(request, now):
            raise _expired(request)
        check_answer(request.form, answer, choice)
        if request.conversation_id is not None:
            return await self._approve(request, answer, choice)
        assert request.run_id is not None  # a request names its run or its conversation
        run_status, version_id = await self._run_state(request.run_id)
        if run_status == "cancelled":
            raise ConflictError(
                f"run {request.run_id} was cancelled: this request is closed", "run_cancelled"
            )
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
        claimed = await self._write(
            lambda store: store.claim(request.id, "answered", values, branch, open_at=now)
        )
        if not claimed:
            raise ConflictError("this request was answered a moment ago", "human_answered")
        return await self._resume_if_ready(request.run_id, request.node, draft, request.id)

    async def _resume_if_ready(
        self,
        run_id: str,
        node: str,
        draft: CompiledFlow | None = None,
        reopen: str | None = None,
    ) -> Answered:
        """Start the continuation of `run_id` if none of its requests still waits and this
        caller claims the run; `node` (the request just settled) is where its trace hangs.
        A run of an unsaved flow goes on only with a `draft` (the timeout of one settles
        its request and leaves the run waiting for the editor). When the continuation
        cannot start, the run waits again, and so does request `reopen` (the answer that
        tried), and the error is raised (see `answer`)."""
        waiting_for = await self._read(lambda store: store.waiting_count(run_id))
        if waiting_for:
            return Answered(run_id, None, waiting_for)
        _, version_id = await self._run_state(run_id)
        if version_id is None and draft is None:
            return Answered(run_id, None, 0)
        if not await self._write(lambda store: store.claim_run(run_id, utcnow())):
            if (await self._run_state(run_id))[0] == "cancelled":
                raise ConflictError(f"run {run_id} was cancelled meanwhile", "run_cancelled")
            return Answered(run_id, None, 0)
        try:
            live = await self._resume(run_id, node, draft)
        except Exception as exc:
            if reopen is None and _lasting(exc):
                # No answer to give again (a timeout, the sweep) and a saved version that
                # will not fit any better later: the run fails, saying why.
                await self._give_up(run_id, node, exc)
                raise
            await self._release(run_id, reopen)
            if isinstance(exc, DagwrightError):
                raise
            raise RetryLaterError(
                f"run {run_id} could not go on ({type(exc).__name__}: {exc}); it waits "
                "again: try again",
                SWEEP_GRACE.total_seconds(),
            ) from exc
        return Answered(run_id, live.run_id, 0)

    async def _release(self, run_id: str, reopen: str | None) -> None:
        """After a continuation failed to start: the run waits again (unless one started
        after all), and request `reopen` too, so its answer can be given again. When this
        fails as well, the sweep takes the claim over after SWEEP_GRACE."""
        try:
            released = await self._write(lambda store: store.release_run(run_id))
            if released and reopen is not None:
                await self._write(lambda store: store.reopen(reopen))
        except Exception:
            log.warning("run %s could not be put back to waiting", run_id, exc_info=True)
        else:
            log.warning("run %s could not go on: it waits again", run_id, exc_info=True)

    async def _give_up(self, run_id: str, node: str, exc: Exception) -> None:
        error = {
            "code": "resume_failed",
            "message": f"the run could not go on from its pause: {exc}",
            "node": _top_node(node),
        }
        try:
            await self._write(lambda store: store.fail_run(run_id, error, utcnow()))
        except Exception:  # the sweep tries again after SWEEP_GRACE
            log.warning("run %s could not be marked failed", run_id, exc_info=True)
        else:
            log.warning("run %s could not go on: it failed (%s)", run_id, exc)

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
        # paused runs again, and each of its iterations passes on what it had done. A result
        # stored truncated is not passed on: its node runs again.
        reuse = reusable(waiting.nodes, nested=True)
        for answered in await self._read(lambda store: store.settled(run_id)):
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
        try:
            await self._write(lambda store: store.mark_resumed(waiting.id, live.run_id))
        except Exception:  # the continuation runs: its row (parent_run_id) says it started
            log.warning("run %s went on as %s, unrecorded", waiting.id, live.run_id, exc_info=True)
        return live

    # -- timeouts and the sweep ---------------------------------------------------------------

    async def _approve(
        self, request: HumanRequest, answer: dict[str, Any], choice: str | None
    ) -> Answered:
        """An approval's answer: the request settled, its conversation goes on."""
        conversation_id = request.conversation_id
        assert conversation_id is not None
        if self.conversations is None:
            raise ConflictError("this process runs no AutoTQA conversations", "not_resumable")
        values, branch = _filled(request.form, answer), choice or ANSWERED_BRANCH
        if not await self._write(lambda store: store.claim(request.id, "answered", values, branch)):
            raise ConflictError("this request was answered a moment ago", "human_answered")
        await self.conversations.go_on(conversation_id)
        return Answered(None, None, 0, conversation_id)

    async def expire_due(self) -> list[Answered]:
        """Settle, as `timeout` with the fields' defaults, the requests past their timeout
        that this replica claims, resuming their runs when nothing else is awaited. A request
        that fails is logged and left for the next sweep; the others go on."""
        settled: list[Answered] = []
        for request in await self._read(lambda store: store.due(self.clock())):
            try:
                settled.append(await self._expire(request))
            except Exception:
                log.warning("human request %s: its timeout failed", request.id, exc_info=True)
        return settled

    async def _expire(self, request: HumanRequest) -> Answered:
        values = _filled(request.form, {})
        if await self._write(
            lambda store: store.claim(request.id, "expired", values, TIMEOUT_BRANCH)
        ):
            if request.run_id is None:  # an approval has no timeout: never due
                return Answered(None, None, 0, request.conversation_id)
            return await self._resume_if_ready(request.run_id, request.node)
        return Answered(request.run_id, None, 0)

    async def resume_settled(self) -> list[Answered]:
        """Resume paused runs with every request settled a while ago and none gone on: the
        last answer came while the run was still being recorded, or the replica that claimed
        the run stopped or could not start its continuation. A run that fails is logged and
        tried again after SWEEP_GRACE; the others go on."""
        cutoff = utcnow() - SWEEP_GRACE
        resumed: list[Answered] = []
        for run_id, node in dict(await self._read(lambda store: store.unresumed(cutoff))).items():
            try:
                resumed.append(await self._take_over(run_id, node, cutoff))
            except Exception:
                log.warning("paused run %s could not be resumed", run_id, exc_info=True)
        if self.conversations is not None:
            found = await self._read(lambda store: store.unresumed_conversations(cutoff))
            for conversation_id in found:
                if await self.conversations.go_on(conversation_id):
                    resumed.append(Answered(None, None, 0, conversation_id))
        return resumed

    async def _take_over(self, run_id: str, node: str, claimed_before: datetime) -> Answered:
        # A claim made before `claimed_before` that started nothing is given up first.
        await self._write(lambda store: store.release_stale(run_id, claimed_before))
        return await self._resume_if_ready(run_id, node)

    async def close_cancelled(self) -> int:
        """Close (`cancelled`) the waiting requests of cancelled runs; how many. A run that
        paused after a cancel was asked of it (it ran on another replica, which lost it from
        sight when it paused) is cancelled first."""
        error = {"code": "cancelled", "message": CANCEL_REASON, "node": None}
        await self._write(lambda store: store.cancel_paused(error, utcnow()))
        return await self._write(lambda store: store.close_cancelled(CANCELLED))

    def start(self) -> None:
        self._sweep.start()

    async def _sweep_round(self) -> None:
        for step in (self.close_cancelled, self.expire_due, self.resume_settled):
            try:  # each step on its own: one failing does not hold the others back
                await step()
            except Exception:  # the database went away a moment, say: the next sweep
                log.warning("human request sweep failed", exc_info=True)

    async def close(self) -> None:
        await self._sweep.close()
