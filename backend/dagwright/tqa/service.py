"""The AutoTQA service: the orchestrator wired to this process's apps, runs, data, TQA
profiles, hints, examples and tools; conversations run in the foreground (sync, streamed) or
in the background (polled): in this process (the embedded default), or, in queue mode, as a
job a `dagwright worker` runs and resumes (tqa/durable.py). A conversation a server process
runs names its replica lease: if the process dies, another server (or this one restarted)
resumes a background one and ends a foreground one, whose caller died with the process
(tqa/recovery.py). The AutoTQA apps are published lazily, on the first question
(or by `dagwright tqa publish`)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

from dagwright.data.scope import SourceScope
from dagwright.tqa.admission import DEFAULT_MAX_CONVERSATIONS, ConversationAdmission
from dagwright.tqa.agents import AgentCaller, InProcessAgentCaller
from dagwright.tqa.approvals import ApprovalDesk
from dagwright.tqa.conversation import AskRequest, Conversation
from dagwright.tqa.durable import ConversationRunner
from dagwright.tqa.failures import ConversationCancelled
from dagwright.tqa.hints import HintStore
from dagwright.tqa.knowledge import StoredKnowledge
from dagwright.tqa.orchestrator import Orchestrator, TurnCallback
from dagwright.tqa.profiles import Profile, ProfileError, ProfileStore, check_settings
from dagwright.tqa.publish import publish_agents
from dagwright.tqa.recording import ConversationStore, Deferral
from dagwright.tqa.recovery import ConversationRecovery
from dagwright.tqa.tools import Tool, ToolRegistry

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from dagwright.embedding.service import ExampleStore
    from dagwright.services.apps import AppService
    from dagwright.services.runs.service import RunService
    from dagwright.tabular import TableAccess

log = logging.getLogger(__name__)
STOPPED: Final = "the server process answering it stopped"


class ConversationQueue(Protocol):
    """Queue mode's side for conversations (services/queue/submit.py): the job that runs
    one, written by the caller in its transaction."""

    def conversation_job(self, conversation_id: str) -> Deferral: ...


class TqaService:
    def __init__(
        self,
        engine: Engine,
        apps: AppService,
        runs: RunService,
        tables: TableAccess | None,
        caller: AgentCaller | None = None,
        examples: ExampleStore | None = None,
        queue: ConversationQueue | None = None,
        max_conversations: int = DEFAULT_MAX_CONVERSATIONS,
    ) -> None:
        self.apps = apps
        self.hints = HintStore(engine)
        self.profiles = ProfileStore(engine)
        self.tools = ToolRegistry(engine)
        self.conversations = ConversationStore(engine)
        self.approvals = ApprovalDesk(engine)
        self.admission = ConversationAdmission(self.conversations, max_conversations)
        self._examples = examples
        self._tables = tables
        self.orchestrator = Orchestrator(
            caller or InProcessAgentCaller(apps, runs),
            tools=self.tools.list,
            knowledge=StoredKnowledge(self.profiles, self.hints, examples),
            tables=tables,
            store=self.conversations,
            approvals=self.approvals,
        )
        self.runner = ConversationRunner(self.orchestrator, self.conversations)
        self._runs = runs
        self._queue = queue
        # Started by a server (`start_recovery`): the conversations of dead server processes.
        self.recovery = ConversationRecovery(
            self.conversations,
            lambda: runs.lease_id,
            runs.stale_after,
            self._resume,
            None if queue is None else queue.conversation_job,
        )
        self._published = False
        self._publish_lock = asyncio.Lock()
        self._background: set[asyncio.Task[str]] = set()
        self._foreground: set[asyncio.Task[Conversation]] = set()
        # A server's (start_recovery): its foreground conversations name its lease too.
        self._serving = False

    def publish(self) -> list[dict[str, Any]]:
        done = publish_agents(self.apps, self.tools)
        self._published = True
        return done

    async def ensure_published(self) -> None:
        if self._published:
            return
        async with self._publish_lock:
            if not self._published:
                await asyncio.to_thread(self.publish)

    def register_tool(
        self,
        name: str,
        app: str,
        description: str,
        role: str | None,
        requires_approval: bool | None = None,
    ) -> Tool:
        """A published app (it must exist) as a tool, playing `role` (None: the Engineer's
        input only), its calls approved by a person first or not (None: as it was)."""
        self.apps.get_app(app)
        return self.tools.put(name, app, description, role, requires_approval)

    def check_namespaces(self, namespaces: Mapping[str, str] | None) -> None:
        """Each namespace a profile names must exist in the embedding service (raises
        `namespace_not_found`), so a typo is refused when saved, not found at a question."""
        if not namespaces:
            return
        if self._examples is None:
            raise ProfileError("this process has no embedding service for example namespaces")
        for namespace in namespaces.values():
            self._examples.get_namespace(namespace)

    def create_profile(self, name: str, **settings: Any) -> Profile:
        self._check(settings)
        return self.profiles.create(name, **settings)

    def update_profile(self, name: str, **settings: Any) -> Profile:
        self._check(settings)
        return self.profiles.update(name, **settings)

    def _check(self, settings: Mapping[str, Any]) -> None:
        check_settings(
            settings.get("sources"),
            settings.get("namespaces"),
            settings.get("examples_k"),
            settings.get("hints_k"),
        )
        self.check_namespaces(settings.get("namespaces"))
        self.check_sources(settings.get("sources"), "sources")

    def check_sources(self, sources: list[str] | None, field: str) -> None:
        """A scope naming a source or schema the catalog does not have is refused
        (ScopeError, 422, naming them), when given: a typo would otherwise be a question
        every table is refused to. Without a catalog (no table service) only its form is
        checked."""
        scope = SourceScope.parse(sources, field=field)
        if scope is not None and self._tables is not None:
            scope.validate(self._tables.engine().catalog, field=field)

    async def begin(self, request: AskRequest) -> Conversation:
        """A foreground conversation (its caller waits for the answer), recorded before it
        runs: a stream sends its id first. In a server, under this process's lease: if the
        process dies, the servers' sweeps end it (`server_lost`); elsewhere (the command
        line) under none."""
        await asyncio.to_thread(self.check_sources, request.sources, "sources")
        replica = self._runs.lease_id if self._serving else None
        return await self.orchestrator.begin(request, replica=replica, foreground=True)

    async def ask(
        self,
        request: AskRequest,
        on_turn: TurnCallback | None = None,
        conversation: Conversation | None = None,
    ) -> Conversation:
        """The whole conversation (ConversationsFullError, nothing recorded, when the limit
        of conversations is running); `conversation`: one `begin` recorded, the limit
        checked before it. A task of this service, which a clean stop ends (`close`).
        A cancel asked through any process (`cancel`) ends it within a second: the
        conversation is returned ended (failed, `cancelled`), as it is recorded."""
        await self.ensure_published()
        if conversation is None:
            await self.admission.check()
            conversation = await self.begin(request)
        task = asyncio.create_task(
            self.runner.watched(conversation, self.orchestrator.ask(request, on_turn, conversation))
        )
        self._foreground.add(task)
        task.add_done_callback(self._foreground.discard)
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise  # its caller was cancelled (it went away, or its run was)
            if conversation.cancel_requested:
                return conversation
            raise ConversationCancelled(
                f"conversation {conversation.id} was cancelled: {STOPPED}"
            ) from None

    async def ask_background(self, request: AskRequest) -> str:
        """Starts the conversation and returns its id at once (it is recorded as it goes):
        queued for a worker in queue mode, else run by this process. ConversationsFullError,
        nothing recorded, when the limit of conversations is running."""
        await self.ensure_published()
        await self.admission.check()
        await asyncio.to_thread(self.check_sources, request.sources, "sources")
        if self._queue is not None:
            # Its job is written in the transaction that records it: queued exactly when
            # it exists.
            conversation_id = uuid.uuid4().hex
            job = self._queue.conversation_job(conversation_id)
            await self.orchestrator.begin(request, conversation_id, defer=job)
            return conversation_id
        # Recorded under this process's lease: if it dies, another server resumes it.
        conversation = await self.orchestrator.begin(request, replica=self._runs.lease_id)
        self._start(conversation.id)
        return conversation.id

    def _start(self, conversation_id: str) -> None:
        # Handed over when this process stops (left running under its lease, which it
        # releases): another server, or this one restarted, resumes it.
        task = asyncio.create_task(self.runner.run(conversation_id, hand_over=True))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _resume(self, conversation_id: str) -> None:
        """A conversation of a dead server process, taken up by this one."""
        await self.ensure_published()
        self._start(conversation_id)

    def start_recovery(self) -> None:
        """Resume, now and every `stale_after` seconds, the background conversations of
        server processes that stopped, and end their foreground ones (tqa/recovery.py). A
        server's, on its event loop: from now on its own foreground conversations name its
        lease too, for the sweeps of the others (or of this one restarted) to end if it
        dies."""
        self._serving = True
        self.recovery.start()

    async def go_on(self, conversation_id: str) -> bool:
        """Continue a waiting conversation (its approval was answered), if this caller is
        the one that claims it (waiting -> running): its job in queue mode (written in the
        claim's transaction), else a task of this process. False when another did. Never
        refused by the conversation limit: it exists already, and a person let it go on."""
        job, replica = self._job_or_lease(conversation_id)
        claimed = await asyncio.to_thread(
            self.conversations.claim, conversation_id, "waiting", job, replica
        )
        if claimed and self._queue is None:
            self._start(conversation_id)
        return claimed

    def _job_or_lease(self, conversation_id: str) -> tuple[Deferral | None, str | None]:
        """Who runs a conversation that goes on: its job (queue mode), or this process."""
        if self._queue is not None:
            return self._queue.conversation_job(conversation_id), None
        return None, self._runs.lease_id

    async def cancel(self, conversation_id: str) -> str:
        """Asks whichever process runs the conversation to cancel it (seen within a second,
        on any replica or worker); one waiting for an approval, which no process runs, is
        ended here and its request closed. Returns its status when asked (NotFoundError)."""
        status = await asyncio.to_thread(self.conversations.request_cancel, conversation_id)
        if status == "waiting" and await asyncio.to_thread(
            self.conversations.claim, conversation_id, "waiting", None, self._runs.lease_id
        ):
            await asyncio.to_thread(self.approvals.close, conversation_id)
            await self.runner.run(conversation_id)  # sees the cancel: recorded as cancelled
        return status

    async def ask_question(self, request: Mapping[str, Any]) -> dict[str, Any]:
        conversation = await self.ask(AskRequest.model_validate(dict(request)))
        return conversation.to_dict()

    async def close(self) -> None:
        """Stops the recovery; ends this process's foreground conversations cancelled (their
        callers' requests end with it, as its runs in flight are cancelled), recorded before
        the database closes; then hands its background conversations over (left running for
        another server to resume: a clean stop, which does not count toward their
        MAX_ATTEMPTS)."""
        await self.recovery.close()
        answering = list(self._foreground)
        for asked in answering:
            asked.cancel()  # each records its end as it stops (the orchestrator)
        await asyncio.gather(*answering, return_exceptions=True)
        if self._serving:
            try:  # one begun whose task never ran, or whose end could not be recorded
                await asyncio.to_thread(
                    self.conversations.end_foreground,
                    self._runs.lease_id,
                    ConversationCancelled.code,
                    f"the conversation was cancelled: {STOPPED}",
                )
            except Exception:  # the sweeps end them once the lease is gone
                log.warning("ending foreground conversations failed", exc_info=True)
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
            try:
                await asyncio.to_thread(self.conversations.hand_over, self._runs.lease_id)
            except Exception:  # counted as a death instead
                log.warning("marking conversations handed over failed", exc_info=True)
