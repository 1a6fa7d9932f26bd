"""GenerateArgs: the official prompt of each operation and how its sampled answers are parsed
and voted on (operations/*.py, the `*_func` functions). A vote adds exp(score) per answer,
score being the answer's log-probability (`answer_scores`)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from dagwright.methods.chain_of_table import demos
from dagwright.methods.chain_of_table.table import Table, table2string

Scored = list[tuple[str, float]]  # (answer, log-probability)
Ranked = list[list[Any]]  # [[argument, confidence], ...], best first


def answer_scores(texts: list[str], logprobs: list[float | None]) -> Scored:
    """Each sample with its log-probability; when the provider gives none, the official
    ChatGPT wrapper's stand-in: log((n - i) / n) for the i-th of n samples."""
    n = len(texts)
    return [
        (text, logprob if logprob is not None else math.log((n - i) / n))
        for i, (text, logprob) in enumerate(zip(texts, logprobs, strict=True))
    ]


def _ranked(votes: dict[str, float]) -> list[tuple[str, float]]:
    # Stable: equal votes keep the order their arguments first appeared in.
    return sorted(votes.items(), key=lambda item: item[1], reverse=True)


def _columns_line(table: Table) -> str:
    return "The existing columns are: " + ", ".join(table[0]) + ".\n"


# -- f_add_column --------------------------------------------------------------------------------


def add_column_prompt(
    table: Table, question: str, caption: str | None, n_demos: int | None = None
) -> str:
    # The official prompt hides numbers (cleaned_statement with digits as "_").
    statement = re.sub(r"\d+", "_", question)
    prompt = demos.text("add_column_demo", n_demos).rstrip() + "\n\n"
    prompt += "/*\n" + table2string(table, caption=caption, num_rows=3) + "\n*/\n"
    prompt += "Statement: " + statement + "\n" + _columns_line(table) + "Explanation:"
    return prompt


def add_column_first(answer: str) -> tuple[str, list[str]] | None:
    """The new column's name and its first three values, or None when the answer lacks them."""
    found = re.findall(r"f_add_column\(.*\)", answer, re.S)
    if not found:
        return None
    call = found[0].strip()
    name = call[call.index("(") + 1 : call.index(")")].strip()
    values = [v.strip() for v in answer.split("The value:")[-1].strip().split("|")]
    if len(values) != 3:
        return None
    return name, values


def add_column_row_prompts(table: Table, caption: str | None, answer: str) -> list[str] | None:
    """One prompt per row after the third: the model fills the new column row by row,
    continuing its own explanation (None: the answer has no explanation to continue)."""
    try:
        left = answer.index("We extract the value from")
        right = answer.index("The value:")
    except ValueError:
        return None
    beginning = answer[left:right] + "The value:"

    def header(part: Table, num_rows: int = 100) -> str:
        return (
            "/*\n" + table2string(part, caption=caption, num_rows=num_rows) + "\n*/\nExplanation: "
        )

    lead = header(table, 3) + answer[left:]
    return [lead + "\n\n" + header([table[0], row]) + beginning for row in table[1:][3:]]


def add_column_value(answer: str) -> str:
    value = answer.strip()
    return value.split("|")[0].strip() if "|" in value else value


# -- f_select_row / f_select_column ----------------------------------------------------------------


def select_row_prompt(
    table: Table, question: str, caption: str | None, n_demos: int | None = None
) -> str:
    prompt = demos.text("select_row_demo", n_demos).rstrip() + "\n\n"
    prompt += "/*\n" + table2string(table, caption=caption).strip() + "\n*/\n"
    return prompt + "statement : " + question + "\n" + "explain :"


def select_row_vote(answers: Scored) -> Ranked:
    """Answers `f_row([row 1, row 4])` voted on as sorted row-number lists."""
    votes: dict[str, float] = {}
    for answer, score in answers:
        found = re.findall(r"f_row\(\[(.*?)\]\)", answer, re.S)
        if not found:
            continue
        rows = sorted(part.strip().split(" ")[-1] for part in found[0].strip().split(", "))
        key = json.dumps(rows)
        votes[key] = votes.get(key, 0.0) + math.exp(score)
    return [[json.loads(key), conf] for key, conf in _ranked(votes)]


def _pipe_json(value: Any, indent: int = 2) -> str:
    # The official MyEncoder: the dict indented, each list inside it on one line (json.dumps
    # with its defaults, so non-ASCII cells are \u-escaped there but not in the caption).
    marks: dict[str, str] = {}

    def mark(inner: list[Any]) -> str:
        key = f"@@{len(marks)}@@"
        marks[key] = json.dumps(inner)
        return key

    shaped = {
        key: ([mark(v) for v in val] if key == "table_column_priority" else mark(val))
        if isinstance(val, list)
        else val
        for key, val in value.items()
    }
    text = json.dumps(shaped, ensure_ascii=False, indent=indent)
    for key, dumped in marks.items():
        text = text.replace(f'"{key}"', dumped)
    return text


def select_column_prompt(
    table: Table, question: str, caption: str | None, n_demos: int | None = None
) -> str:
    rows = table[1:101]
    columns = [[table[0][j]] + [row[j] for row in rows] for j in range(len(table[0]))]
    shown: dict[str, Any] = {}
    if caption is not None:
        shown["table_caption"] = caption
    shown["columns"] = list(table[0])
    shown["table_column_priority"] = columns
    prompt = demos.text("select_column_demo", n_demos).rstrip() + "\n\n"
    prompt += "/*\ntable = " + _pipe_json(shown) + "\n*/\n"
    return prompt + "statement : " + question + ".\n" + "similar words link to columns :\n"


def select_column_vote(answers: Scored) -> Ranked:
    """Answers `f_col([a, b])` voted on as sorted column lists."""
    votes: dict[str, float] = {}
    for answer, score in answers:
        found = re.findall(r"f_col\(\[(.*?)\]\)", answer, re.S)
        if not found:
            continue
        names = sorted(part.strip() for part in found[0].strip().split(", "))
        key = json.dumps(names)
        votes[key] = votes.get(key, 0.0) + math.exp(score)
    return [[json.loads(key), conf] for key, conf in _ranked(votes)]


# -- f_group_by ------------------------------------------------------------------------------------


def group_column_prompt(
    table: Table, question: str, caption: str | None, n_demos: int | None = None
) -> str:
    prompt = demos.text("group_column_demo", n_demos).rstrip() + "\n\n"
    prompt += "/*\n" + table2string(table, caption=caption, num_rows=5).strip() + "\n*/\n"
    return prompt + "Statement: " + question + "\n" + _columns_line(table) + "Explanation:"


GROUP_MAX_DISTINCT_RATIO = 0.8  # a column is grouped only if values repeat this much


def groupable(values: list[str]) -> bool:
    """Distinct non-empty values / non-empty values <= 0.8 (an all-empty column: no)."""
    filled = [v for v in values if v.strip()]
    return bool(filled) and len(set(filled)) / len(filled) <= GROUP_MAX_DISTINCT_RATIO


def group_column_vote(answers: Scored, table: Table) -> Ranked:
    """Answers `f_group(column)` for an existing, groupable column, each with its groups
    [[value, count], ...] (most rows first, then by value)."""
    votes: dict[str, float] = {}
    headers = table[0]
    for answer, score in answers:
        found = re.findall(r"f_group\(([^\)]*)\)", answer, re.S)
        if not found or found[0].strip() not in headers:
            continue
        votes[found[0].strip()] = votes.get(found[0].strip(), 0.0) + math.exp(score)
    ranked: Ranked = []
    for column, conf in votes.items():
        index = headers.index(column)
        values = [row[index] for row in table[1:]]
        if not groupable(values):
            continue
        groups = sorted(((v, values.count(v)) for v in sorted(set(values))), key=lambda g: -g[1])
        ranked.append([[column, [list(g) for g in groups]], conf])
    return sorted(ranked, key=lambda item: item[1], reverse=True)


# -- f_sort_by -------------------------------------------------------------------------------------


def sort_column_prompt(table: Table, question: str, n_demos: int | None = None) -> str:
    prompt = demos.text("sort_column_demo", n_demos).rstrip() + "\n\n"
    prompt += "/*\n" + table2string(table, num_rows=3).strip() + "\n*/\n"
    return prompt + "Statement: " + question + "\n" + _columns_line(table) + "Explanation:"


def number_text(cell: str) -> str:
    """The official only_keep_num_and_first_dot: digits and the first dot, a leading minus
    kept; '' when nothing numeric is left."""
    minus = bool(cell.strip()) and cell.strip()[0] == "-"
    kept, dot = "", False
    for char in cell:
        if char in "0123456789":
            kept += char
        elif char == "." and not dot:
            kept += char
            dot = True
    if kept in ("", "."):
        return ""
    return "-" + kept if minus else kept


def sort_column_vote(answers: Scored, table: Table) -> list[list[Any]]:
    """Answers `f_sort(column)` with a datatype and an order; each candidate gives the row
    order (numbers parsed for Numerical; empty cells last). A column already in order is no
    candidate. As the official code, the list is sorted by confidence ascending."""
    votes: dict[tuple[str, str, str], float] = {}
    headers = table[0]
    for answer, score in answers:
        types = re.findall(r"The datatype is (\w*).", answer, re.S)
        orders = re.findall(r'the order is "(.*)"\.', answer, re.S)
        columns = re.findall(r"f_sort\((.*)\)", answer, re.S)
        if not (types and orders and columns):
            continue
        key = (str(columns[0]).strip(), str(orders[0]).strip(), str(types[0]).strip())
        if key[1] not in ("small to large", "large to small") or key[0] not in headers:
            continue
        votes[key] = votes.get(key, 0.0) + math.exp(score)
    candidates: list[list[Any]] = []
    for (column, order, datatype), conf in votes.items():
        index = headers.index(column)
        keyed: list[tuple[Any, int]] = []
        empty: list[int] = []
        for i, row in enumerate(table[1:]):
            cell = row[index]
            text = number_text(cell) if datatype == "Numerical" else cell.strip()
            if text == "":
                empty.append(i)
            else:
                keyed.append((float(text) if datatype == "Numerical" else text, i))
        plain = [value for value, _ in keyed]
        if sorted(plain) == plain or sorted(plain, reverse=True) == plain:
            continue
        keyed.sort(key=lambda item: item[0], reverse=order == "large to small")
        order_rows = [i for _, i in keyed] + empty
        candidates.append([column, order, datatype, order_rows, max(plain), min(plain), conf])
    return sorted(candidates, key=lambda item: item[-1])
