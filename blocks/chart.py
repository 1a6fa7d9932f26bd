"""Charts as a first-class output: the `chart` block turns a table into a chart value (a
Vega-Lite spec with its data inline, dagwright.charts), which the editor's debug panel and the
AutoTQA conversation view draw, and POST /api/v1/charts/render turns into SVG or PNG."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dagwright.charts import Mark
from dagwright.registry import block


class ChartConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mark: Mark = Field("bar", description="bar, line, point, area or arc (a pie).")
    x: str = Field(description="The column along x (for an arc: the categories).")
    y: str = Field(description="The column along y (for an arc: the angle).")
    color: str | None = Field(None, description="A column that colours the marks.")
    title: str = ""


@block(
    "chart",
    category="data_process",
    description="Make a chart (a Vega-Lite spec) of a table: bar, line, point, area or arc.",
    example="records [{month, cost}] with x month, y cost, mark line -> a line chart",
    inline=True,
)
def chart(config: ChartConfig, records: list[dict[str, Any]]) -> dict[str, Any]:
    """A chart of the records (a list of row objects, as table blocks give them): `x` against
    `y`, coloured by `color`. Field types are read from the values (numbers, ISO dates, text).
    The value is an ordinary JSON object, so a run keeps it and a published call returns it;
    render it with POST /api/v1/charts/render."""
    from dagwright.charts import chart as make

    return make(records, config.mark, config.x, config.y, config.color, config.title or None)
