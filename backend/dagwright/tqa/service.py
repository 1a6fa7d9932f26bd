"""The AutoTQA service: the orchestrator wired to this process's apps, runs, data, TQA
profiles, hints, examples and tools; conversations run in the foreground (sync, streamed) or
in the background (polled): in this process (the embedded default), or, in queue mode, as a
job a `dagwright worker` runs and resumes (tqa/durable.py). The AutoTQA apps are published
lazily, on the first question (or by `dagwright tqa publish`)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from dagwright.tqa.admission import DEFAULT_MAX_CONVERSATIONS, ConversationAdmission
from dagwright.tqa.agents import AgentCaller, InProcessAgentCaller
from dagwright.tqa.approvals import ApprovalDesk
from dagwright.tqa.conversation import AskRequest, Conversation
from dagwright.tqa.durable import ConversationRunner
from dagwright.tqa.hints import HintStore
from dagwright.tqa.knowledge import StoredKnowledge
from dagwright.tqa.orchestrator import Orchestrator, TurnCallback
from dagwright.tqa.profiles import Profile, ProfileError, ProfileStore, check_settings
from dagwright.tqa.publish import publish_agents
from dagwright.tqa.recording import ConversationStore, Deferral
from dagwright.tqa.tools import Tool, ToolRegistry

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from dagwright.embedding.service import ExampleStore
    from dagwright.services.apps import AppService
    from dagwright.services.runs.service import RunService
    from dagwright.tabular import TableAccess


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
        self.orchestrator = Orchestrator(
            caller or InProcessAgentCaller(apps, runs),
            tools=self.tools.list,
            knowledge=StoredKnowledge(self.profiles, self.hints, examples),
            tables=tables,
            store=self.conversations,
            approvals=self.approvals,
        )
        self.runner = ConversationRunner(self.orchestrator, self.conversations)
        self._queue = queue
        self._published = False
        self._publish_lock = asyncio.Lock()
        self._background: set[asyncio.Task[str]] = set()

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

    async def ask(self, request: AskRequest, on_turn: TurnCallback | None = None) -> Conversation:
        """The whole conversation (ConversationsFullError, nothing recorded, when the limit
        of conversations is running)."""
        await self.ensure_published()
        await self.admission.check()
        return await self.orchestrator.ask(request, on_turn)

    async def ask_background(self, request: AskRequest) -> str:
        """Starts the conversation and returns its id at once (it is recorded as it goes):
        queued for a worker in queue mode, else run by this process. ConversationsFullError,
        nothing recorded, when the limit of conversations is running."""
        await self.ensure_published()
        await self.admission.check()
        if self._queue is not None:
            # Its job is written in the transaction that records it: queued exactly when
            # it exists.
            conversation_id = uuid.uuid4().hex
            job = self._queue.conversation_job(conversation_id)
            await self.orchestrator.begin(request, conversation_id, defer=job)
            return conversation_id
        conversation = await self.orchestrator.begin(request)
        self._start(conversation.id)
        return conversation.id

    def _start(self, conversation_id: str) -> None:
        task = asyncio.create_task(self.runner.run(conversation_id))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def go_on(self, conversation_id: str) -> bool:
        """Continue a waiting conversation (its approval was answered), if this caller is
        the one that claims it (waiting -> running): its job in queue mode (written in the
        claim's transaction), else a task of this process. False when another did. Never
        refused by the conversation limit: it exists already, and a person let it go on."""
        job = None if self._queue is None else self._queue.conversation_job(conversation_id)
        claimed = await asyncio.to_thread(self.conversations.claim, conversation_id, "waiting", job)
        if claimed and self._queue is None:
            self._start(conversation_id)
        return claimed

    async def cancel(self, conversation_id: str) -> str:
        """Asks whichever process runs the conversation to cancel it (seen within a second,
        on any replica or worker); one waiting for an approval, which no process runs, is
        ended here and its request closed. Returns its status when asked (NotFoundError)."""
        status = await asyncio.to_thread(self.conversations.request_cancel, conversation_id)
        if status == "waiting" and await asyncio.to_thread(
            self.conversations.claim, conversation_id, "waiting"
        ):
            await asyncio.to_thread(self.approvals.close, conversation_id)
            await self.runner.run(conversation_id)  # sees the cancel: recorded as cancelled
        return status

    async def ask_question(self, request: Mapping[str, Any]) -> dict[str, Any]:
        conversation = await self.ask(AskRequest.model_validate(dict(request)))
        return conversation.to_dict()

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
