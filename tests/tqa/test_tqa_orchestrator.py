"""The orchestrator with agents played by plain functions (no model, no database): the
loop, its bounds and how failures become turns; and the hints checked against the demo
data."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from dagwright.data.connectors.common import SourcePaths
from dagwright.data.scope import SourceScope
from dagwright.errors import DagwrightError
from dagwright.secrets import EnvSecrets
from dagwright.services.data_sources import demo_sources, engine_over, fixed_sources
from dagwright.tabular import TableAccess
from dagwright.tqa.agents import AgentCaller, AgentCallError, AgentReply, normal_usage
from dagwright.tqa.conversation import AskRequest, Conversation, Turn
from dagwright.tqa.executor import choose_tool
from dagwright.tqa.hints import empty_result_hints, error_hints
from dagwright.tqa.knowledge import Knowledge, KnowledgeSource
from dagwright.tqa.orchestrator import Orchestrator
from dagwright.tqa.ports import ExecutorInputs, ToolContext, ToolEntry, ToolRequest
from dagwright.tqa.tools import Tool

Agent = Callable[[Mapping[str, Any]], dict[str, Any]]
TOOLS = [
    Tool(
        "text_to_sql",
        "autotqa-text-to-sql",
        "SQL",
        datetime.now(UTC),
        datetime.now(UTC),
        "text_to_sql",
    )
]


class Scripted(AgentCaller):
    """Each app answered by a function of its inputs (these tests' own script)."""

    def __init__(self, **agents: Agent) -> None:
        self.agents = {name.replace("_", "-"): fn for name, fn in agents.items()}
        self.calls: list[str] = []

    async def call(
        self, app: str, inputs: Mapping[str, Any], *, time_limit: float | None = None
    ) -> AgentReply:
        self.calls.append(app)
        if app == "autotqa-executor":
            return AgentReply(self.execute(inputs), None, None, 0.0)
        outputs = self.agents[app.removeprefix("autotqa-")](inputs)
        usage = normal_usage({"prompt_tokens": 3, "completion_tokens": 2})
        return AgentReply(outputs, usage, None, 0.0)

    def execute(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The Executor flow's work: the shared choice, then the tool app's function."""
        try:
            given = ExecutorInputs.read(inputs["request"], inputs["tools"], inputs["context"])
            choice = choose_tool(given.request, given.tools, given.context)
        except DagwrightError as exc:
            return {"tool": None, "inputs": {}, "outputs": {}, "error": exc.to_dict()}
        outputs = self.agents[choice.app.removeprefix("autotqa-")](choice.inputs)
        return {
            "tool": choice.tool,
            "app": choice.app,
            "inputs": choice.inputs,
            "outputs": outputs,
            "error": None,
        }


class Known(KnowledgeSource):
    """A dataset's knowledge without a database: a hint and an example per role."""

    def __init__(self) -> None:
        self.learned: list[str] = []

    async def gather(self, request: AskRequest) -> Knowledge:
        hints = [f"hint of {request.dataset}"] if request.dataset else []
        return Knowledge(sop=f"SOP of {request.dataset}", hints=hints)

    async def examples(self, knowledge: Knowledge, role: str, query: str) -> str:
        return f"{role} example for {query}"

    async def learn(self, conversation: Conversation) -> list[dict[str, Any]]:
        self.learned.append(conversation.id)
        return []


def plan(_: Mapping[str, Any]) -> dict[str, Any]:
    return {"plan": "1. query"}


def tool_request(_: Mapping[str, Any]) -> dict[str, Any]:
    return {"decision": {"action": "tool", "tool": "text_to_sql", "input": "the bonus"}}


def rows(_: Mapping[str, Any]) -> dict[str, Any]:
    return {"rows": [{"Bonus": 1569}], "columns": ["Bonus"], "row_count": 1, "sql": "SELECT 1"}


def never_done(_: Mapping[str, Any]) -> dict[str, Any]:
    return {"verdict": {"complete": False, "gaps": ["more"]}}


def orchestrator(caller: AgentCaller, tables: TableAccess | None = None) -> Orchestrator:
    return Orchestrator(caller, tools=lambda: TOOLS, knowledge=Known(), tables=tables)


async def test_the_round_limit_is_reported_never_answered() -> None:
    caller = Scripted(planner=plan, engineer=tool_request, text_to_sql=rows, critic=never_done)
    seen: list[Turn] = []
    done = await orchestrator(caller).ask(
        AskRequest(question="q", max_rounds=9), on_turn=seen.append
    )
    assert done.status == "round_limit"
    assert done.answer is None
    assert done.rounds == 9
    assert [t.agent for t in seen] == [t.agent for t in done.turns]
    assert len(done.turns) == 10
    # the Engineer's text input became the tool's question
    assert done.turns[3].tool_call is not None
    assert done.turns[3].tool_call.input["question"] == "the bonus"
    # every model turn (these Executor turns report no usage of their own)
    assert done.usage["total_tokens"] == 5 * sum(t.agent != "Executor" for t in done.turns[1:])
    assert done.timing["orchestrator_s"] >= 0


async def test_three_failing_turns_in_a_row_end_the_conversation() -> None:
    def down(_: Mapping[str, Any]) -> dict[str, Any]:
        raise AgentCallError("provider unreachable", "provider_error")

    caller = Scripted(planner=down, engineer=down, critic=down)
    done = await orchestrator(caller).ask(AskRequest(question="q", max_rounds=20))
    assert done.status == "failed"
    assert done.error is not None
    assert done.error["code"] == "agents_failing"
    assert [t.agent for t in done.turns] == ["User", "Planner", "Engineer", "Critic"]
    assert all(
        t.error == {"code": "provider_error", "message": "provider unreachable"}
        for t in done.turns[1:]
    )


async def test_rolling_executor_without_a_request_says_so() -> None:
    report = {"decision": {"action": "report", "report": "done"}}
    caller = Scripted(planner=plan, engineer=lambda _: report, critic=never_done)
    done = await orchestrator(caller).ask(
        AskRequest(question="q", scheduler="rolling", max_rounds=3)
    )
    executor = done.turns[3]
    assert executor.agent == "Executor"
    assert executor.tool_call is None
    assert "No tool call was asked for" in executor.text


async def test_an_unknown_tool_is_an_engineer_output_error() -> None:
    wrong = {"decision": {"action": "tool", "tool": "shell", "input": {}}}
    caller = Scripted(planner=plan, engineer=lambda _: wrong, critic=never_done)
    done = await orchestrator(caller).ask(AskRequest(question="q", max_rounds=3))
    engineer = done.turns[2]
    assert engineer.error is not None
    assert engineer.error["code"] == "agent_output"
    assert "the tools are: text_to_sql" in engineer.error["message"]
    assert done.turns[3].agent == "Critic"  # FSM: no tool asked


async def test_a_cancelled_conversation_is_closed() -> None:
    def slow(_: Mapping[str, Any]) -> dict[str, Any]:
        raise AssertionError("not reached")

    class Hanging(Scripted):
        async def call(
            self, app: str, inputs: Mapping[str, Any], *, time_limit: float | None = None
        ) -> AgentReply:
            await asyncio.sleep(60)
            raise AssertionError

    task = asyncio.create_task(orchestrator(Hanging(planner=slow)).ask(AskRequest(question="q")))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.fixture(scope="module")
def figure1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TableAccess]:
    folder = tmp_path_factory.mktemp("demo")
    assert set(demo_sources(folder)) == {"hr", "payroll"}
    paths = SourcePaths.for_data_dir(folder.parent)
    access = TableAccess(lambda: engine_over(fixed_sources({}, folder), EnvSecrets(), None, paths))
    yield access
    access.close()


def test_hints_checked_against_the_data(figure1: TableAccess) -> None:
    engine = figure1.engine()
    sql = "SELECT Depno FROM hr.main.Employee e WHERE e.Name = 'tom'"
    assert empty_result_hints(engine, sql) == [
        "values are case-sensitive: Name in hr.main.Employee has 'Tom', not 'tom'"
    ]
    assert empty_result_hints(engine, "SELECT * FROM hr.main.Employee WHERE Name = 'Zed'") == [
        "Name in hr.main.Employee has no value like 'Zed'"
    ]
    assert empty_result_hints(engine, "not sql at all (") == []
    wrong = "SELECT s.YearEndBonus FROM payroll.main.salary s"
    assert error_hints(engine, wrong, 'Binder Error: ... "YearEndBonus"') == [
        "payroll.main.salary has the columns: ID, Bonus"
    ]
    assert error_hints(engine, wrong, "query_timeout") == []


def test_hints_read_only_the_questions_scope(figure1: TableAccess) -> None:
    """The hints read the data themselves: under a scope of hr they must not describe the
    payroll table the engine refused, nor list its tables, nor sample its values."""
    engine = figure1.engine()
    hr = SourceScope.parse(["hr"])
    wrong = "SELECT s.YearEndBonus FROM hr.main.Nope e JOIN payroll.main.salary s ON s.ID = e.ID"
    unscoped = error_hints(engine, wrong, "table hr.main.Nope does not exist")
    assert "payroll.main.salary has the columns: ID, Bonus" in unscoped
    scoped = error_hints(engine, wrong, "table hr.main.Nope does not exist", hr)
    assert scoped
    assert not [hint for hint in scoped if "payroll" in hint], scoped
    probe = (
        "SELECT * FROM payroll.main.salary s JOIN hr.main.Employee e USING (ID) WHERE Name = 'tom'"
    )
    assert empty_result_hints(engine, probe, 5, hr) == [
        "values are case-sensitive: Name in hr.main.Employee has 'Tom', not 'tom'"
    ]
    bonus = "SELECT * FROM payroll.main.salary WHERE Bonus = '156'"
    assert empty_result_hints(engine, bonus) != []  # unscoped, payroll's values are read
    assert empty_result_hints(engine, bonus, 5, hr) == []


async def test_an_empty_result_brings_hints_to_the_engineer(figure1: TableAccess) -> None:
    seen_hints: list[str] = []

    def engineer(inputs: Mapping[str, Any]) -> dict[str, Any]:
        seen_hints.append(str(inputs["hints"]))
        return tool_request(inputs)

    def empty(_: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "rows": [],
            "columns": ["Depno"],
            "row_count": 0,
            "sql": "SELECT Depno FROM hr.main.Employee WHERE Name = 'tom'",
        }

    caller = Scripted(planner=plan, engineer=engineer, text_to_sql=empty, critic=never_done)
    done = await orchestrator(caller, figure1).ask(
        AskRequest(question="q", dataset="figure1", max_rounds=4)
    )
    call = done.turns[3].tool_call
    assert call is not None
    assert call.empty
    assert (
        call.hints[0] == "values are case-sensitive: Name in hr.main.Employee has 'Tom', not 'tom'"
    )
    assert "hint of figure1" in call.hints
    assert "has 'Tom'" in seen_hints[-1]
    assert "EMPTY" in done.turns[3].text


async def test_knowledge_reaches_each_agent_and_tool_and_the_critic_terminates() -> None:
    seen: dict[str, Mapping[str, Any]] = {}

    def keep(name: str, answer: dict[str, Any]) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
        def agent(inputs: Mapping[str, Any]) -> dict[str, Any]:
            seen[name] = inputs
            return answer

        return agent

    reported = {"decision": {"action": "report", "report": "The bonus is 1569."}}
    engineer_turns = iter([tool_request({}), reported])

    def engineer(inputs: Mapping[str, Any]) -> dict[str, Any]:
        seen["engineer"] = inputs
        return next(engineer_turns)

    done_verdict = {"verdict": {"complete": True, "answer": 1569}}
    caller = Scripted(
        planner=keep("planner", {"plan": "1. query"}),
        engineer=engineer,
        text_to_sql=keep("text_to_sql", rows({})),
        critic=keep("critic", done_verdict),
    )
    knowledge = Known()
    done = await Orchestrator(caller, tools=lambda: TOOLS, knowledge=knowledge).ask(
        AskRequest(question="bonus of Tom?", dataset="d1")
    )
    assert done.status == "completed"
    assert seen["planner"]["sop"] == "SOP of d1"
    assert seen["planner"]["examples"] == "planner example for bonus of Tom?"
    assert seen["engineer"]["examples"] == "engineer example for bonus of Tom?"
    assert seen["text_to_sql"]["examples"] == "text_to_sql example for the bonus"
    assert seen["text_to_sql"]["hints"] == "- hint of d1"
    # the Critic's examples are looked up by the report it judges
    assert seen["critic"]["examples"] == "critic example for The bonus is 1569."
    critic = done.turns[-1]
    assert critic.text == "The bonus is 1569.\nTERMINATE"  # the report, reiterated
    assert done.answer is not None
    assert done.answer["text"] == "The bonus is 1569."
    assert knowledge.learned == [done.id]
    assert "SOP:\nSOP of d1" in done.turns[0].text


async def test_gaps_go_to_the_planner_in_the_papers_form() -> None:
    report = {"decision": {"action": "report", "report": "nothing yet"}}
    caller = Scripted(planner=plan, engineer=lambda _: report, critic=never_done)
    done = await orchestrator(caller).ask(AskRequest(question="q", max_rounds=6))
    critic = next(t for t in done.turns if t.agent == "Critic")
    assert critic.text == "GAPS for the Planner:\n- more"
    after = done.turns[critic.seq + 1]
    assert after.agent == "Planner"
    assert after.scheduler is not None
    assert after.scheduler.reason == "Critic -> Planner: gaps to plan for"


def test_the_default_round_limit_is_the_papers() -> None:
    assert AskRequest(question="q").max_rounds == 50


def test_the_engineer_cannot_widen_the_datasets_sources() -> None:
    tools = {"text_to_sql": ToolEntry(app="autotqa-text-to-sql", role="text_to_sql")}
    request = ToolRequest(tool="text_to_sql", input={"question": "q", "sources": ["payroll"]})
    given = choose_tool(request, tools, ToolContext(question="q", sources=["hr"])).inputs
    assert given["sources"] == ["hr"]
    # other context inputs are the Engineer's to choose
    request = ToolRequest(tool="text_to_sql", input={"question": "mine", "hints": "mine"})
    context = ToolContext(question="q", hints="h", sources=[])
    given = choose_tool(request, tools, context).inputs
    assert (given["question"], given["hints"], given["sources"]) == ("mine", "mine", [])
