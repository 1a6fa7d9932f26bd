"""The evaluations this process is running: their tasks and last progress. An evaluation
runs as a task of the server's loop; the API starts, follows, awaits and cancels it here."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from dagwright.errors import NotFoundError

if TYPE_CHECKING:
    from dagwright.evaluation.batch import Progress
    from dagwright.services.evaluations import EvaluationService


class RunningEvaluations:
    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        self._progress: dict[str, dict[str, Any]] = {}

    def start(self, evaluations: EvaluationService, evaluation_id: str, concurrency: int) -> None:
        """Runs the evaluation in the background, unless this process already runs it."""
        if evaluation_id in self._tasks:
            return

        def progress(p: Progress) -> None:
            self._progress[evaluation_id] = p.to_dict()

        task = asyncio.get_running_loop().create_task(
            # Resumable: a server runs it, so the next server resumes it if this one dies.
            evaluations.run(
                evaluation_id, concurrency=concurrency, on_progress=progress, resumable=True
            ),
            name=f"dagwright-evaluation-{evaluation_id}",
        )
        self._tasks[evaluation_id] = task

        def finished(done: asyncio.Task[Any]) -> None:
            self._tasks.pop(evaluation_id, None)
            # A failure is kept on the evaluation (interrupted) and read by a waiting caller;
            # retrieving it here keeps asyncio from reporting it as never retrieved.
            if not done.cancelled():
                done.exception()

        task.add_done_callback(finished)

    async def wait(self, evaluation_id: str) -> None:
        """Until the evaluation's run here ends, however it ends (at once when it does not
        run here); the run goes on if the waiting caller goes away, and a cancelled run ends
        the wait without cancelling the caller."""
        task = self._tasks.get(evaluation_id)
        if task is not None:
            await asyncio.wait({task})

    def runs_here(self, evaluation_id: str) -> bool:
        return evaluation_id in self._tasks

    def progress(self, evaluation_id: str) -> dict[str, Any] | None:
        """The last progress of a run here: rate, ETA, tokens, cost."""
        return self._progress.get(evaluation_id)

    def cancel(self, evaluation_id: str) -> None:
        """Stops the run here (its finished examples are kept: starting it again resumes)."""
        task = self._tasks.get(evaluation_id)
        if task is None:
            raise NotFoundError(
                f"evaluation {evaluation_id!r} is not running here", "evaluation_not_running"
            )
        task.cancel()
