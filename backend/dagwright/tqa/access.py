"""What the `autotqa_ask` block asks a run for: the AutoTQA service. A plain base class in a
light module (as `invocation.AppInvoker` is), implemented by `tqa.service.TqaService`, so
blocks never import the services."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class TqaAccess:
    """Answers a question with the AutoTQA agents; looked up with `ctx.service(TqaAccess)`."""

    async def ask_question(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The finished conversation as a dict: `id`, `status` (completed | round_limit |
        failed), `answer` (with its evidence), `turns`, `usage`."""
        raise NotImplementedError
