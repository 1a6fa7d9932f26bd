"""Export and import of an app with its versions, on SQLite and PostgreSQL: a round trip
keeps flows, history and the published version; a bad document leaves nothing behind."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy import Engine

from dagwright.errors import ConflictError, InputError, NotFoundError
from dagwright.runtime import FlowInvalidError
from dagwright.services.apps import AppService
from dagwright.services.keys import KeyService
from dagwright.services.porting import export_app, import_app
from support.database import clear
from support.flows import edge, flow_doc, node, registry


@pytest.fixture
def apps(engine: Engine) -> Iterator[AppService]:
    yield AppService(engine, registry())
    clear(engine)


def constant(value: int) -> dict[str, Any]:
    return flow_doc(
        [
            {**node("c", "t_const", value=value), "position": {"x": 10.0, "y": value}},
            node("out", "output", name="result"),
        ],
        [edge("c", "out")],
    )


@pytest.fixture
def source(apps: AppService, engine: Engine) -> str:
    """An app with a history: 1 -> 2, 1 -> 3 (a branch), 2 published, and an API key."""
    app = apps.create_app("source", "Source", "The original.")
    one = apps.create_version("source", constant(1), note="start", author="ann")
    two = apps.create_version("source", constant(2), note="tweak", parent_id=one.id)
    apps.create_version("source", constant(3), note="branch", author="bob", parent_id=one.id)
    apps.publish("source", two.id)
    KeyService(engine).create(app.id, "ci")
    return "source"


def test_export(apps: AppService, source: str) -> None:
    doc = export_app(apps, source)
    assert (doc["format"], doc["version"], doc["published"]) == ("dagwright.app", 1, 2)
    assert doc["app"] == {"slug": "source", "name": "Source", "description": "The original."}
    assert [(v["number"], v["parent"], v["note"], v["author"]) for v in doc["versions"]] == [
        (1, None, "start", "ann"),
        (2, 1, "tweak", ""),
        (3, 1, "branch", "bob"),
    ]
    # Positions are merged back; the document is plain JSON.
    assert doc["versions"][2]["flow"]["nodes"][0]["position"] == {"x": 10.0, "y": 3.0}
    assert datetime.fromisoformat(doc["versions"][0]["created_at"]).tzinfo is not None
    text = json.dumps(doc)
    assert "dw_" not in text
    assert set(doc) == {"format", "version", "app", "versions", "published"}


def test_round_trip_under_another_slug(apps: AppService, source: str) -> None:
    doc = export_app(apps, source)
    imported = import_app(apps, doc, slug="copy")
    assert (imported.slug, imported.name, imported.description) == (
        "copy",
        "Source",
        "The original.",
    )
    again = export_app(apps, "copy")
    assert again["app"]["slug"] == "copy"
    assert again["published"] == 2
    strip = [{k: v for k, v in item.items() if k != "created_at"} for item in doc["versions"]]
    assert [{k: v for k, v in item.items() if k != "created_at"} for item in again["versions"]] == (
        strip
    )
    published = apps.get_version("copy", "published")
    assert (published.number, published.app_id) == (2, imported.id)
    assert apps.get_version("copy", "3").parent_id == apps.get_version("copy", "1").id


def test_import_into_a_fresh_database_keeps_the_slug(apps: AppService, source: str) -> None:
    doc = export_app(apps, source)
    apps.delete_app(source)
    imported = import_app(apps, doc)
    assert imported.slug == "source"
    assert apps.list_versions("source").total == 3


def test_a_taken_slug_is_a_conflict_and_nothing_is_added(apps: AppService, source: str) -> None:
    doc = export_app(apps, source)
    with pytest.raises(ConflictError) as info:
        import_app(apps, doc)
    assert info.value.code == "slug_taken"
    assert apps.list_apps().total == 1
    assert apps.list_versions(source).total == 3


def test_an_invalid_version_leaves_nothing_behind(apps: AppService, source: str) -> None:
    doc = export_app(apps, source)
    broken = copy.deepcopy(doc)
    broken["versions"][2]["flow"]["nodes"][0]["block"] = "no_such_block"
    with pytest.raises(FlowInvalidError) as info:
        import_app(apps, broken, slug="broken")
    assert info.value.message.startswith("versions[2].flow: the flow has")
    assert [p.code for p in info.value.problems if p.severity == "error"] == ["unknown_block"]
    with pytest.raises(NotFoundError):
        apps.get_app("broken")
    assert apps.list_apps().total == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(format="dagwright.flow"), "format: not a dagwright app export"),
        (lambda d: d.update(version=2), "version: app document version 2 is not supported"),
        (lambda d: d["app"].pop("name"), "app.name: Field required"),
        (lambda d: d["versions"][1].update(number="2"), "versions[1].number: Input should be"),
        (lambda d: d["versions"][1].pop("flow"), "versions[1].flow: Field required"),
        (lambda d: d["versions"][1].update(parent=3), "versions[1].parent: 3 is not the number"),
        (lambda d: d["versions"][2].update(number=1), "versions[2].number: 1 appears twice"),
        (lambda d: d.update(published=9), "published: there is no version 9"),
    ],
)
def test_bad_documents_name_the_field(
    apps: AppService, source: str, change: Any, message: str
) -> None:
    doc = export_app(apps, source)
    change(doc)
    with pytest.raises(InputError) as info:
        import_app(apps, doc, slug="never")
    assert message in info.value.message
    with pytest.raises(NotFoundError):
        apps.get_app("never")


def test_a_document_must_be_an_object(apps: AppService) -> None:
    with pytest.raises(InputError, match="a JSON object, not list"):
        import_app(apps, [])


def test_an_app_without_versions(apps: AppService) -> None:
    apps.create_app("empty", "Empty")
    doc = export_app(apps, "empty")
    assert (doc["versions"], doc["published"]) == ([], None)
    assert import_app(apps, doc, slug="empty-copy").published_version_id is None
