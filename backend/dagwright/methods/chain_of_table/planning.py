"""DynamicPlan: which operations may come next (the official acyclic state machine), the
planning prompt, and the choice of the next operation from the model's proposed chain
(utils/chain.py generate_prompt_for_next_step, strategy "top")."""

from __future__ import annotations

import re

from dagwright.methods.chain_of_table import demos
from dagwright.methods.chain_of_table.table import Table, table2string

END = "<END>"
INIT = "<init>"
# The official names: f_group_column is the paper's f_group_by, f_sort_column its f_sort_by.
OPERATIONS = ("add_column", "select_row", "select_column", "group_column", "sort_column")
# Each operation at most once, in this order; <END> ends the chain.
NEXT: dict[str, tuple[str, ...]] = {
    INIT: OPERATIONS,
    "add_column": ("select_row", "select_column", "group_column", "sort_column", END),
    "select_row": ("select_column", "group_column", "sort_column", END),
    "select_column": ("group_column", "sort_column", END),
    "group_column": ("sort_column", END),
    "sort_column": (END,),
}
_NAME = re.compile(r"f_(.*?)\(.*\)")


def operation_name(step: str) -> str:
    """`f_select_row(row 1)` -> `select_row`."""
    return str(_NAME.findall(step)[0])


def kept_chain(act_chain: list[str]) -> list[str]:
    return [step for step in act_chain if not step.startswith("skip")]


def candidates(act_chain: list[str]) -> list[str]:
    """The operations that may follow the chain so far: those after the last kept one, less
    any that was tried and skipped (an invalid operation is not offered again)."""
    kept = kept_chain(act_chain)
    skipped = {
        operation_name(step[len("skip ") :]) for step in act_chain if step.startswith("skip")
    }
    last = INIT if not kept else operation_name(kept[-1])
    return [op for op in NEXT[last] if op not in skipped]


def plan_prompt(
    table: Table, question: str, act_chain: list[str], n_demos: int | None = None
) -> str:
    """The official planning prompt: a demo per possible operation, the chain demos, the
    current table, the statement, the allowed operations, and the chain so far to continue."""
    possible = candidates(act_chain)
    prompt = ""
    for operation in possible:
        if operation != END:
            prompt += demos.text(f"plan_{operation}_demo") + "\n\n"
    prompt += demos.text("plan_full_demo_simple", n_demos) + "\n\n"
    prompt += "/*\n" + table2string(table) + "\n*/\n"
    prompt += "Statement: " + question + "\n"
    allowed = " or ".join(f"f_{op}()" if op != END else op for op in possible)
    if len(possible) > 1:
        prompt += f"The next operation must be one of {allowed}.\n"
    else:
        prompt += f"The next operation must be {allowed}.\n"
    kept = " -> ".join(kept_chain(act_chain))
    prompt += "Function Chain: " + (kept + " ->" if kept else "")
    return prompt


def proposed_operations(response: str) -> list[str]:
    """The operation names of a proposed chain, in order (`<END>` included)."""
    names = []
    for part in response.split("->"):
        part = part.strip()
        if part == END:
            names.append(END)
            continue
        found = _NAME.findall(part)
        if found:
            names.append(found[0])
    return names


def choose(response: str, possible: list[str]) -> str:
    """Only the first proposed operation that is allowed is kept; none: <END>."""
    for name in proposed_operations(response):
        if name in possible:
            return name
    return END
