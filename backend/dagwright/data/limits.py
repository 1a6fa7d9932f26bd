"""A query's limits, in a module of their own: the server reads them from its settings at
start-up without importing the engine (DuckDB, Arrow, sqlglot), which loads on first query."""

from __future__ import annotations

import re
from dataclasses import dataclass

# Rule 0: measured with sqlglot 30 (pure Python). 32 KiB costs up to ~3 s of CPU to check and
# plan (an IN list of 16,000 numbers) and is far above any query a person or a model writes;
# 32 levels of brackets parse within Python's default recursion limit with room to spare
# (the parser fails near 40).
MAX_SQL_BYTES = 32_768
MAX_SQL_DEPTH = 32


@dataclass(frozen=True)
class QueryLimits:
    """``memory_limit`` is DuckDB's (its buffer manager); ``max_memory_growth`` how much the
    whole process may grow while a query runs before the watchdog stops it (None: 1.25 x
    ``memory_limit``). ``temp_directory``: where DuckDB may spill what does not fit in memory,
    at most ``max_temp_directory_size`` (None: it never spills). ``grace_s``: how long past
    its deadline a query may take to stop before the caller is answered anyway;
    ``max_overruns``: queries allowed to go on running past their deadline at once."""

    max_rows: int = 10_000
    timeout_s: float = 30.0
    memory_limit: str = "2GB"
    threads: int = 2
    max_sql_bytes: int = MAX_SQL_BYTES
    max_sql_depth: int = MAX_SQL_DEPTH
    max_result_bytes: int = 64 * 2**20
    max_memory_growth: str | None = None
    temp_directory: str | None = None
    max_temp_directory_size: str = "1GB"
    grace_s: float = 0.2
    max_overruns: int = 2

    def memory_growth_bytes(self) -> int:
        if self.max_memory_growth is not None:
            return parse_size(self.max_memory_growth)
        return parse_size(self.memory_limit) * 5 // 4


_UNITS = {"": 1, "b": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4}


def parse_size(text: str) -> int:
    """Bytes in a size as DuckDB writes it: "2GB", "512MiB", "1.5 GB", "1000"."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(i?)b?\s*", text.lower())
    if match is None:
        raise ValueError(f"{text!r} is not a size (e.g. 2GB, 512MiB)")
    number, unit, binary = match.groups()
    scale = 1024 ** "bkmgt".index(unit or "b") if binary or unit == "" else _UNITS[unit]
    return int(float(number) * scale)
