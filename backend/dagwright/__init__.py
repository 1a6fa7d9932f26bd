"""dagwright: LLM applications as typed DAG flows.

Layers, imports pointing downward only: cli/api -> services -> runtime -> registry.
"""

__version__ = "0.1.0"
