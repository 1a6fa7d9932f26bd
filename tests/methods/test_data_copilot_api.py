"""Charts and interface libraries over real HTTP: a published flow returns a chart value,
its caller renders it to SVG and PNG with the app's key; a data source's interfaces are
reviewed, edited (a new version) and deleted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dagwright.methods.data_copilot.interface import Interface
from dagwright.methods.data_copilot.library import InterfaceLibrary
from dagwright.store.db import database_url, make_engine, migrate
from support.server import LiveServer, key_headers, live_server

TOKEN = "admin-secret"
CHART_FLOW = {
    "format": "dagwright.flow",
    "version": 1,
    "name": "cost-chart",
    "nodes": [
        {"id": "rows", "block": "json_input", "config": {"name": "rows"}},
        {"id": "plot", "block": "chart", "config": {"mark": "line", "x": "day", "y": "cost"}},
        {"id": "out", "block": "output", "config": {"name": "chart"}},
    ],
    "edges": [
        {"source": {"node": "rows"}, "target": {"node": "plot", "port": "records"}},
        {"source": {"node": "plot"}, "target": {"node": "out", "port": "value"}},
    ],
}
ROWS = [{"day": "2024-01-01", "cost": 10.5}, {"day": "2024-01-02", "cost": 12.0}]


SHOP_INTERFACE = {
    "name": "top_products",
    "description": "The best-selling products",
    "inputs": [{"name": "limit", "type": "int", "default": 10}],
    "tables": ["shop.main.orders"],
    "code": "def top_products(orders, limit):\n    return orders.head(limit)\n",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    folder: Path = tmp_path_factory.mktemp("server")
    # A library designed before the server starts: its interface joins the palette.
    engine = make_engine(database_url(folder))
    migrate(engine)
    InterfaceLibrary(engine).save("shop", Interface.model_validate(SHOP_INTERFACE))
    engine.dispose()
    with live_server("sqlite", folder, admin_token=TOKEN) as running:
        yield running


def test_designed_interfaces_are_in_the_palette_and_the_blocks_read_the_library(
    server: LiveServer,
) -> None:
    blocks = {b["name"]: b for b in server.api.http.get("/api/v1/blocks").json()["blocks"]}
    palette = blocks["dc_shop_top_products"]
    assert palette["category"] == "tool"
    assert palette["description"] == "shop: The best-selling products"
    assert "top_products(limit: int = 10) -> table" in palette["doc"]
    flow = {
        "format": "dagwright.flow",
        "version": 1,
        "nodes": [
            {"id": "today", "block": "text_input", "config": {"name": "today"}},
            {"id": "lib", "block": "dc_library", "config": {"source": "shop"}},
            {"id": "out", "block": "output", "config": {"name": "catalogue"}},
        ],
        "edges": [
            {"source": {"node": "today"}, "target": {"node": "lib", "port": "today"}},
            {
                "source": {"node": "lib", "port": "catalogue"},
                "target": {"node": "out", "port": "value"},
            },
        ],
    }
    key = server.api.published_app("shop-library", flow)
    response = server.api.run("shop-library", key, {"today": "2024-01-15"})
    assert response.status_code == 200, response.text
    assert response.json()["outputs"]["catalogue"].startswith(
        "- top_products(limit: int = 10) -> table: The best-selling products"
    )


def test_a_published_chart_is_rendered_for_its_caller(server: LiveServer) -> None:
    key = server.api.published_app("cost-chart", CHART_FLOW)
    response = server.api.run("cost-chart", key, {"rows": ROWS})
    assert response.status_code == 200, response.text
    spec = response.json()["outputs"]["chart"]
    assert spec["$schema"].endswith("vega-lite/v6.json")
    assert spec["encoding"]["x"] == {"field": "day", "type": "temporal"}
    anonymous = server.client()
    try:
        refused = anonymous.http.post("/api/v1/charts/render", json={"spec": spec})
        assert refused.status_code == 401
        svg = anonymous.http.post(
            "/api/v1/charts/render", json={"spec": spec}, headers=key_headers(key)
        )
        assert svg.status_code == 200, svg.text
        assert svg.headers["content-type"] == "image/svg+xml"
        assert svg.text.startswith("<svg")
        png = anonymous.http.post(
            "/api/v1/charts/render",
            json={"spec": spec, "format": "png", "scale": 2},
            headers=key_headers(key),
        )
        assert png.headers["content-type"] == "image/png"
        assert png.content.startswith(b"\x89PNG")
    finally:
        anonymous.close()
    bad = server.api.http.post("/api/v1/charts/render", json={"spec": {"mark": "bar"}})
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "chart_invalid"


def test_interfaces_are_reviewed_edited_and_deleted(server: LiveServer) -> None:
    http = server.api.http
    interface = {
        "name": "daily_cost",
        "description": "Daily cost of a tenant",
        "inputs": [{"name": "tenant_id", "type": "int"}],
        "tables": ["billing_pg.billing.daily_billing"],
        "code": "def daily_cost(daily_billing, tenant_id):\n    return daily_billing\n",
    }
    assert (
        http.put("/api/v1/data-copilot/billing/interfaces/daily_cost", json=interface).json()[
            "version"
        ]
        == 1
    )
    edited = {**interface, "description": "Daily cost of one tenant, all services"}
    answer = http.put("/api/v1/data-copilot/billing/interfaces/daily_cost", json=edited).json()
    assert answer == {
        "name": "daily_cost",
        "version": 2,
        "signature": "daily_cost(tenant_id: int) -> table",
    }
    listing = http.get("/api/v1/data-copilot/billing/interfaces").json()
    assert [(i["name"], i["version"], i["origin"]) for i in listing] == [
        ("daily_cost", 2, "edited")
    ]
    assert listing[0]["interface"]["description"] == "Daily cost of one tenant, all services"
    mismatch = http.put("/api/v1/data-copilot/billing/interfaces/other", json=interface)
    assert mismatch.status_code == 422
    assert http.delete("/api/v1/data-copilot/billing/interfaces/daily_cost").status_code == 204
    assert http.get("/api/v1/data-copilot/billing/interfaces").json() == []
    gone = http.delete("/api/v1/data-copilot/billing/interfaces/daily_cost")
    assert gone.status_code == 404
    anonymous = server.client()
    try:
        assert anonymous.http.get("/api/v1/data-copilot/billing/interfaces").status_code == 401
    finally:
        anonymous.close()
