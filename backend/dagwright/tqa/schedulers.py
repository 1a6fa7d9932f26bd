"""The three schedulers of AutoTQA (section 4.3): who speaks next.

- circular rolling (Algorithm 1): Planner, Engineer, Executor, Critic, round and round; the
  User only starts the conversation;
- LLM-chosen (Algorithm 2): a model, given every agent's function and the conversation,
  names the next agent; an answer naming no agent (or the User) falls back to the FSM's
  choice, and the fallback is recorded;
- finite-state machine (Algorithm 3, the default): User -> Planner -> Engineer ->
  {Executor if the Engineer asked for a tool | Critic}; Executor -> Engineer;
  Critic -> {the end if its message ends with TERMINATE | Planner with the gaps}.

The transition rules are pure functions of the conversation so far; only the LLM scheduler
calls anything. The round limit is the orchestrator's; so is ending the conversation when
`terminated` says the Critic's turn is the final state (for every scheduler).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from dagwright.tqa.agents import AGENT_APPS, AgentCaller, AgentCallError
from dagwright.tqa.conversation import (
    CRITIC,
    DESCRIPTIONS,
    ENGINEER,
    EXECUTOR,
    PLANNER,
    SCHEDULABLE,
    USER,
    Conversation,
    SchedulerChoice,
    Turn,
)

ROLLING_QUEUE = (PLANNER, ENGINEER, EXECUTOR, CRITIC)


def wants_tool(turn: Turn | None) -> bool:
    """Whether this turn is the Engineer asking the Executor for a tool call."""
    return (
        turn is not None
        and turn.agent == ENGINEER
        and turn.error is None
        and isinstance(turn.content, dict)
        and turn.content.get("action") == "tool"
    )


TERMINATE = "TERMINATE"


def terminated(turn: Turn | None) -> bool:
    """Whether this turn is the final state: the Critic's message ending with TERMINATE (the
    paper's form: the report reiterated, then TERMINATE) over a complete verdict."""
    return (
        turn is not None
        and turn.agent == CRITIC
        and turn.error is None
        and turn.text.rstrip().endswith(TERMINATE)
        and isinstance(turn.content, dict)
        and turn.content.get("complete") is True
    )


def rolling_next(previous: str) -> SchedulerChoice:
    """Algorithm 1: the next agent of the circular queue (the User is not in it)."""
    if previous not in ROLLING_QUEUE:
        return SchedulerChoice(PLANNER, "the queue starts with the Planner", "rolling")
    following = ROLLING_QUEUE[(ROLLING_QUEUE.index(previous) + 1) % len(ROLLING_QUEUE)]
    return SchedulerChoice(
        following, f"{previous} is followed by {following} in the queue", "rolling"
    )


def fsm_next(previous: Turn | None) -> SchedulerChoice:
    """Algorithm 3: the transition out of the previous agent's state."""
    agent = previous.agent if previous is not None else USER
    if agent == USER:
        return SchedulerChoice(PLANNER, "User -> Planner: a question to plan", "fsm")
    if agent == PLANNER:
        return SchedulerChoice(ENGINEER, "Planner -> Engineer: a plan to carry out", "fsm")
    if agent == ENGINEER:
        if wants_tool(previous):
            return SchedulerChoice(EXECUTOR, "Engineer -> Executor: it asked for a tool", "fsm")
        return SchedulerChoice(CRITIC, "Engineer -> Critic: it reported, no tool asked", "fsm")
    if agent == EXECUTOR:
        return SchedulerChoice(ENGINEER, "Executor -> Engineer: results to read", "fsm")
    # A Critic that said TERMINATE ended the conversation: only gaps come here.
    return SchedulerChoice(PLANNER, "Critic -> Planner: gaps to plan for", "fsm")


_NAMES = re.compile(r"\b(" + "|".join(AGENT for AGENT in (*SCHEDULABLE, USER)) + r")\b", re.I)


def parse_agent(answer: str, allowed: Sequence[str] = SCHEDULABLE) -> str | None:
    """The agent a scheduling answer names: the whole answer, else the only agent named in
    it, else the first named on its first line that names any; None when no allowed agent
    is clearly named."""
    by_lower = {name.lower(): name for name in allowed}
    stripped = answer.strip().strip(".:*\"'` ").lower()
    if stripped in by_lower:
        return by_lower[stripped]
    named = [m.group(1).lower() for m in _NAMES.finditer(answer)]
    distinct = list(dict.fromkeys(named))
    if len(distinct) == 1:
        return by_lower.get(distinct[0])
    for line in answer.strip().splitlines():
        on_line = [m.group(1).lower() for m in _NAMES.finditer(line)]
        if on_line:
            return by_lower.get(on_line[0]) if len(set(on_line)) == 1 else None
    return None


class Scheduler:
    name = ""

    async def choose(self, conversation: Conversation) -> SchedulerChoice:
        raise NotImplementedError


class RollingScheduler(Scheduler):
    name = "rolling"

    async def choose(self, conversation: Conversation) -> SchedulerChoice:
        last = conversation.last()
        return rolling_next(last.agent if last is not None else USER)


class FsmScheduler(Scheduler):
    name = "fsm"

    async def choose(self, conversation: Conversation) -> SchedulerChoice:
        return fsm_next(conversation.last())


class LlmScheduler(Scheduler):
    """Asks the `autotqa-scheduler` app; `render` writes the conversation for its prompt."""

    name = "llm"

    def __init__(
        self, caller: AgentCaller, render: Callable[[Conversation], str], timeout: float = 120
    ) -> None:
        self._caller = caller
        self._render = render
        self._timeout = timeout

    async def choose(self, conversation: Conversation) -> SchedulerChoice:
        last = conversation.last()
        if last is None or last.agent == USER:
            # Nothing to choose from yet: the question goes to the Planner, as in every
            # scheduler (no model call spent on it).
            return SchedulerChoice(PLANNER, "the question goes to the Planner first", "llm")
        agents = "\n".join(f"- {name}: {DESCRIPTIONS[name]}" for name in SCHEDULABLE)
        try:
            reply = await self._caller.call(
                AGENT_APPS["scheduler"],
                {
                    "agents": agents,
                    "choices": ", ".join(SCHEDULABLE),
                    "conversation": self._render(conversation),
                },
                time_limit=self._timeout,
            )
        except AgentCallError as exc:
            fallback = fsm_next(last)
            fallback.by, fallback.fallback = "llm", True
            fallback.reason = (
                f"the scheduler model failed ({exc.code}); FSM rule: {fallback.reason}"
            )
            return fallback
        answer = str(reply.outputs.get("agent", ""))
        agent = parse_agent(answer)
        if agent is None:
            fallback = fsm_next(last)
            fallback.by, fallback.fallback = "llm", True
            fallback.reason = (
                f"could not read an agent in the scheduler's answer {answer[:80]!r}; "
                f"FSM rule: {fallback.reason}"
            )
            fallback.answer, fallback.usage = answer, reply.usage
            return fallback
        return SchedulerChoice(
            agent, "chosen by the scheduler model", "llm", answer=answer, usage=reply.usage
        )


def make_scheduler(
    name: str, caller: AgentCaller, render: Callable[[Conversation], str]
) -> Scheduler:
    if name == "rolling":
        return RollingScheduler()
    if name == "llm":
        return LlmScheduler(caller, render)
    return FsmScheduler()
