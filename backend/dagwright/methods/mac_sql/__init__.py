"""MAC-SQL (Wang et al., 2023) as its official implementation (wbbeyourself/MAC-SQL,
core/agents.py) runs it: the Selector's schema description and pruning, the Decomposer's
parsing, the Refiner's execution check and repair, as pure functions over a database
description so that blocks and tests share them. The prompts follow the official templates'
structure, markers and parsing (core/const.py); their demonstrations are the paper's."""
