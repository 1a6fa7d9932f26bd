"""How a block calls another app (a flow invoking a flow). The service layer implements it;
blocks only see this interface, so they stay below the services in the layering."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class AppInvoker:
    """Runs another app's published (or pinned) version as a child of the calling run.
    A plain base class, looked up with `ctx.service(AppInvoker)`."""

    async def invoke(
        self,
        app: str,
        version: str | None,
        inputs: Mapping[str, Any],
        *,
        parent_run_id: str,
        parent_node: str,
    ) -> dict[str, Any]:
        """The child run's outputs; raises when it does not succeed, naming the child run."""
        raise NotImplementedError
