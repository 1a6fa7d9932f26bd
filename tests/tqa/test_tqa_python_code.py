"""The Python tool's program block reports a failure typed, `{code, message}`, whether the
program failed or the query before it did (given as sql_query's text)."""

from __future__ import annotations

from dagwright.blocks.tqa import PythonCodeConfig, python_code
from dagwright.data.isolation import SandboxSettings
from dagwright.registry import SANDBOX, BlockServices, NodeContext

CTX = NodeContext(
    "run", "node", lambda *_: None, lambda *_: None, BlockServices({SANDBOX: SandboxSettings()})
)


async def test_a_failing_program_is_a_typed_failure() -> None:
    rows = [{"Bonus": 2100}, {"Bonus": 1569}]
    done = await python_code(PythonCodeConfig(), CTX, "result = int(df.Bonus.sum())", rows)
    assert (done["result"], done["error"]) == (3669, None)
    failed = await python_code(PythonCodeConfig(), CTX, "result = df.bonus.sum()", rows)
    assert failed["error"] is not None
    assert failed["error"]["code"] == "python_failed"
    assert "bonus" in failed["error"]["message"]


async def test_the_querys_failure_comes_through_typed() -> None:
    given = await python_code(PythonCodeConfig(), CTX, "result = 1", [], "query_failed: no table t")
    assert given["error"] == {"code": "query_failed", "message": "no table t"}
    assert given["result"] is None
