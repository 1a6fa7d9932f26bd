"""The final Query(T, Q) over the last table: TabFact's as the official simple_query writes it
(with its four demos), WikiTQ's and FeTaQA's as the paper's Figure 15 shows it, and reading
the answer."""

from __future__ import annotations

from typing import Literal

from dagwright.methods.chain_of_table import demos
from dagwright.methods.chain_of_table.actions import State
from dagwright.methods.chain_of_table.table import table2string

Task = Literal["tabfact", "wikitq", "fetaqa"]

_TABFACT_TASK = (
    "Here are the statement about the table and the task is to tell whether the statement "
    "is True or False.\nIf the statement is true, answer YES, and otherwise answer NO.\n"
)
_QA_TASK = (
    "Here is the table to answer this question. Please understand the table and answer the "
    "question:\n"
)
_FETAQA_TASK = (
    "Here is the table to answer this question. Please understand the table and answer the "
    "question with a complete sentence:\n"
)
# Figure 15's demonstration (WikiTQ uses one demo in Query, Table 7).
_QA_DEMO = """/*
col : Rank | City | Passengers Number | Ranking | Airline
row 1 : 1 | United States, Los Angeles | 14749 | 2 | Alaska Airlines
row 2 : 2 | United States, Houston | 5465 | 8 | United Express
row 3 : 3 | Canada, Calgary | 3761 | 5 | Air Transat, WestJet
row 4 : 4 | Canada, Saskatoon | 2282 | 4 |
row 5 : 5 | Canada, Vancouver | 2103 | 2 | Air Transat
row 6 : 6 | United States, Phoenix | 1829 | 1 | US Airways
row 7 : 7 | Canada, Toronto | 1202 | 1 | Air Transat, CanJet
row 8 : 8 | Canada, Edmonton | 110 | 2 |
row 9 : 9 | United States, Oakland | 107 | 5 |
*/
Question: how many more passengers flew to los angeles than to saskatoon from manzanillo \
airport in 2013?
The anwser is: 12467"""


def _group_block(state: State, quoted: bool) -> str:
    group = state["group_sub_table"]
    if group is None:
        return ""
    column, groups = group
    if quoted:  # Figure 15
        text = f'Group the rows according to column "{column}":\n/*\nGroup ID | {column} | Count\n'
        for i, (value, count) in enumerate(groups):
            text += f"{i + 1} | {value.strip() or '[Empty Cell]'} | {count}\n"
        return text + "*/\n"
    text = "/*\n" + f"Group the rows according to column: {column}.\n"
    text += " | ".join(["Group ID", column, "Count"]) + "\n"
    for i, (value, count) in enumerate(groups):
        value = value if value.strip() else "[Empty Cell]"
        text += " | ".join([f"Group {i + 1}", value, str(count)]) + "\n"
    return text + "*/\n"


def query_prompt(task: Task, state: State, question: str, n_demos: int | None = None) -> str:
    table = "/*\n" + table2string(state["table"], caption=state["caption"]) + "\n*/\n"
    if task == "tabfact":
        prompt = _TABFACT_TASK
        if n_demos != 0:
            prompt += "\n" + demos.text("general_demo", n_demos) + "\n\n" + _TABFACT_TASK + "\n"
        return (
            prompt
            + table
            + _group_block(state, False)
            + "Statement: "
            + question
            + "\n"
            + ("The answer is:")
        )
    task_line = _QA_TASK if task == "wikitq" else _FETAQA_TASK
    prompt = ""
    if n_demos != 0:
        prompt += _QA_TASK + _QA_DEMO + "\n"
    prompt += task_line + table + _group_block(state, True)
    return prompt + "Question: " + question + "\nThe answer is:"


def read_answer(task: Task, text: str) -> str:
    """TabFact: 'yes' or 'no' as the official tabfact_match_func reads it (true/false are
    yes/no); otherwise the answer without a closing period."""
    answer = text.strip()
    if task == "tabfact":
        lowered = answer.lower()
        return {"true": "yes", "false": "no"}.get(lowered, lowered)
    return answer[:-1].rstrip() if answer.endswith(".") else answer
