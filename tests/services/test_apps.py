"""AppService on SQLite and PostgreSQL: apps, versions (validated, numbered, split into graph
and layout), diff, publish, delete."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC
from typing import Any

import pytest
from sqlalchemy import Engine, text

from dagwright.errors import ConflictError, FlowFormatError, InputError, NotFoundError
from dagwright.runtime import FlowInvalidError, parse_flow
from dagwright.services.apps import AppService
from dagwright.services.keys import KeyService
from dagwright.store.db import session
from dagwright.store.models import Run, RunNode
from support.database import clear
from support.flows import edge, flow_doc, node, registry


@pytest.fixture
def apps(engine: Engine) -> Iterator[AppService]:
    yield AppService(engine, registry())
    clear(engine)


def at(x: float, y: float, data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "position": {"x": x, "y": y}}


def adder(value: int = 1, name: str = "adder", label: str | None = None) -> dict[str, Any]:
    """c (a constant) -> a (t_add) -> out, with positions."""
    add = node("a", "t_add")
    if label is not None:
        add["label"] = label
    doc = flow_doc(
        [
            at(0, 0, node("c", "t_const", value=value)),
            at(200, 0, add),
            at(400, 0, node("out", "output", name="result")),
        ],
        [edge("c", "a.a"), edge("a", "out")],
    )
    doc["name"] = name
    return doc


# -- apps ------------------------------------------------------------------------------------


def test_create_and_get_an_app_by_slug_or_id(apps: AppService) -> None:
    app = apps.create_app("sales-bot", "Sales bot", "Answers sales questions.")
    assert (app.slug, app.name, app.description, app.published_version_id) == (
        "sales-bot",
        "Sales bot",
        "Answers sales questions.",
        None,
    )
    assert len(app.id) == 32
    by_slug, by_id = apps.get_app("sales-bot"), apps.get_app(app.id)
    assert by_slug.id == by_id.id == app.id
    assert by_slug.created_at == app.created_at
    assert by_slug.created_at.tzinfo is not None
    assert by_slug.created_at.utcoffset() == UTC.utcoffset(None)


@pytest.mark.parametrize("slug", ["a", "-ab", "Ab", "ab_c", "ab c", "a" * 64, "", "ab\n"])
def test_invalid_slugs_are_refused_naming_the_field(apps: AppService, slug: str) -> None:
    with pytest.raises(InputError, match=r"^slug: ") as info:
        apps.create_app(slug, "Name")
    assert info.value.code == "invalid_input"
    assert apps.list_apps().total == 0


@pytest.mark.parametrize("slug", ["ab", "0-a", "a" * 63, "x-1-y"])
def test_valid_slugs(apps: AppService, slug: str) -> None:
    assert apps.create_app(slug, "Name").slug == slug


def test_empty_or_long_names_are_refused(apps: AppService) -> None:
    with pytest.raises(InputError, match="name: must not be empty"):
        apps.create_app("ok-slug", "  ")
    with pytest.raises(InputError, match="name: at most 200 characters"):
        apps.create_app("ok-slug", "n" * 201)


def test_a_taken_slug_is_a_conflict(apps: AppService) -> None:
    apps.create_app("taken", "First")
    with pytest.raises(ConflictError) as info:
        apps.create_app("taken", "Second")
    assert info.value.code == "slug_taken"
    assert "'taken'" in info.value.message
    assert [a.name for a in apps.list_apps().items] == ["First"]


def test_unknown_app_names_the_ref(apps: AppService) -> None:
    with pytest.raises(NotFoundError) as info:
        apps.get_app("nope")
    assert info.value.code == "app_not_found"
    assert "'nope'" in info.value.message


def test_list_apps_pages_newest_first(apps: AppService) -> None:
    for slug in ("one", "two", "three"):
        apps.create_app(slug, slug.title())
    first = apps.list_apps(offset=0, limit=2)
    assert ([a.slug for a in first.items], first.total, first.offset, first.limit) == (
        ["three", "two"],
        3,
        0,
        2,
    )
    rest = apps.list_apps(offset=2, limit=2)
    assert [a.slug for a in rest.items] == ["one"]
    assert apps.list_apps(limit=10_000).limit == 200
    with pytest.raises(InputError, match="limit"):
        apps.list_apps(limit=0)


def test_update_app(apps: AppService) -> None:
    app = apps.create_app("upd", "Before", "old")
    updated = apps.update_app("upd", name="After")
    assert (updated.name, updated.description) == ("After", "old")
    assert updated.updated_at >= app.updated_at
    again = apps.update_app(app.id, description="new")
    assert (again.name, again.description) == ("After", "new")
    assert apps.get_app("upd").description == "new"
    with pytest.raises(InputError, match="name"):
        apps.update_app("upd", name="")


# -- versions --------------------------------------------------------------------------------


def test_a_version_keeps_graph_and_layout_apart(apps: AppService) -> None:
    apps.create_app("split", "Split")
    version = apps.create_version("split", adder(), note="first", author="ann")
    assert (version.number, version.note, version.author, version.parent_id) == (
        1,
        "first",
        "ann",
        None,
    )
    stored = apps.get_version("split", "1")
    assert all("position" not in n for n in stored.graph["nodes"])
    assert stored.layout == {
        "c": {"x": 0.0, "y": 0.0},
        "a": {"x": 200.0, "y": 0.0},
        "out": {"x": 400.0, "y": 0.0},
    }
    assert stored.graph["nodes"][0] == {"id": "c", "block": "t_const", "config": {"value": 1}}
    # The editor gets back the document it saved (normalised: defaults written out).
    assert apps.flow_of(stored) == parse_flow(adder()).model_dump(mode="json", exclude_none=True)
    assert apps.flow_of(stored)["nodes"][1]["position"] == {"x": 200.0, "y": 0.0}


def test_versions_are_numbered_per_app(apps: AppService) -> None:
    apps.create_app("first-app", "A")
    apps.create_app("second-app", "B")
    numbers = [
        apps.create_version("first-app", adder()).number,
        apps.create_version("first-app", adder()).number,
        apps.create_version("second-app", adder()).number,
        apps.create_version("first-app", adder()).number,
    ]
    assert numbers == [1, 2, 1, 3]


def test_an_invalid_flow_is_refused_with_every_problem_and_nothing_written(
    apps: AppService,
) -> None:
    apps.create_app("bad", "Bad")
    broken = flow_doc(
        [node("x", "no_such_block"), node("out", "output", name="r")],
        [edge("ghost", "out")],
    )
    with pytest.raises(FlowInvalidError) as info:
        apps.create_version("bad", broken)
    codes = {(p.code, p.node) for p in info.value.problems if p.severity == "error"}
    assert {("unknown_block", "x"), ("unknown_node", "ghost")} <= codes
    assert apps.list_versions("bad").total == 0


def test_a_malformed_document_is_a_format_error(apps: AppService) -> None:
    apps.create_app("fmt", "Fmt")
    with pytest.raises(FlowFormatError, match=r"'format' must be 'dagwright\.flow'"):
        apps.create_version("fmt", {"nodes": []})
    assert apps.list_versions("fmt").total == 0


def test_parent_must_be_a_version_of_the_same_app(apps: AppService) -> None:
    apps.create_app("mine", "Mine")
    apps.create_app("theirs", "Theirs")
    base = apps.create_version("mine", adder())
    child = apps.create_version("mine", adder(2), parent_id=base.id)
    assert child.parent_id == base.id
    foreign = apps.create_version("theirs", adder())
    with pytest.raises(ConflictError) as info:
        apps.create_version("mine", adder(), parent_id=foreign.id)
    assert info.value.code == "version_of_another_app"
    with pytest.raises(NotFoundError) as missing:
        apps.create_version("mine", adder(), parent_id="0" * 32)
    assert missing.value.code == "version_not_found"
    assert apps.list_versions("mine").total == 2


def test_concurrent_saves_get_distinct_numbers(apps: AppService) -> None:
    apps.create_app("busy", "Busy")
    numbers: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def save() -> None:
        try:
            barrier.wait()
            for _ in range(3):
                numbers.append(apps.create_version("busy", adder()).number)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=save) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(numbers) == list(range(1, 19))


def test_list_versions_newest_first(apps: AppService) -> None:
    apps.create_app("hist", "Hist")
    for value in range(5):
        apps.create_version("hist", adder(value), note=f"v{value + 1}")
    page = apps.list_versions("hist", offset=1, limit=2)
    assert ([v.number for v in page.items], [v.note for v in page.items], page.total) == (
        [4, 3],
        ["v4", "v3"],
        5,
    )


def test_get_version_by_id_number_or_published(apps: AppService) -> None:
    apps.create_app("refs", "Refs")
    apps.create_app("other", "Other")
    first = apps.create_version("refs", adder(1))
    second = apps.create_version("refs", adder(2))
    assert apps.get_version("refs", first.id).number == 1
    assert apps.get_version("refs", "2").id == second.id
    with pytest.raises(NotFoundError) as unpublished:
        apps.get_version("refs", "published")
    assert unpublished.value.code == "not_published"
    apps.publish("refs", first.id)
    assert apps.get_version("refs", "published").id == first.id
    for ref in ("3", "0" * 32, "\u00b2", "-1"):
        with pytest.raises(NotFoundError) as info:
            apps.get_version("refs", ref)
        assert info.value.code == "version_not_found"
        assert repr(ref) in info.value.message
    # Another app's version is not found through this app.
    with pytest.raises(NotFoundError):
        apps.get_version("other", first.id)


def test_compiled_flows_are_cached_per_version(apps: AppService) -> None:
    apps.create_app("cache", "Cache")
    one = apps.create_version("cache", adder(1))
    two = apps.create_version("cache", adder(2))
    plan = apps.compiled(one)
    assert plan.blocks() == {"c": "t_const", "a": "t_add", "out": "output"}
    assert list(plan.outputs) == ["result"]
    assert apps.compiled(apps.get_version("cache", "1")) is plan
    assert apps.compiled(two) is not plan


# -- diff ------------------------------------------------------------------------------------


def test_diff_names_added_removed_and_changed(apps: AppService) -> None:
    apps.create_app("diff", "Diff")
    apps.create_version("diff", adder(1))
    changed = adder(5, name="adder v2", label="Add")
    changed["nodes"].append(node("d", "t_const", value=3))
    changed["edges"].append(edge("d", "a.b"))
    changed["nodes"][1]["timeout"] = 3
    apps.create_version("diff", changed)
    assert apps.diff("diff", "1", "2") == {
        "nodes": {
            "added": ["d"],
            "removed": [],
            "changed": [
                {"id": "c", "fields": ["config"]},
                {"id": "a", "fields": ["label", "timeout"]},
            ],
        },
        "edges": {
            "added": [
                {"source": {"node": "d", "port": "output"}, "target": {"node": "a", "port": "b"}}
            ],
            "removed": [],
        },
        "meta": {"name": {"from": "adder", "to": "adder v2"}},
    }
    back = apps.diff("diff", "2", "1")
    assert (back["nodes"]["added"], back["nodes"]["removed"]) == ([], ["d"])
    assert back["edges"]["removed"][0]["source"]["node"] == "d"


def test_moving_nodes_is_not_a_change(apps: AppService) -> None:
    apps.create_app("moves", "Moves")
    apps.create_version("moves", adder())
    moved = adder()
    for index, item in enumerate(moved["nodes"]):
        item["position"] = {"x": 1000 + index, "y": -50}
    apps.create_version("moves", moved)
    assert apps.diff("moves", "1", "2") == {
        "nodes": {"added": [], "removed": [], "changed": []},
        "edges": {"added": [], "removed": []},
        "meta": {},
    }
    assert apps.get_version("moves", "2").layout["a"] == {"x": 1001.0, "y": -50.0}


# -- publish and delete ----------------------------------------------------------------------


def test_publish(apps: AppService) -> None:
    apps.create_app("pub", "Pub")
    apps.create_app("elsewhere", "Elsewhere")
    version = apps.create_version("pub", adder())
    foreign = apps.create_version("elsewhere", adder())
    published = apps.publish("pub", version.id)
    assert published.published_version_id == version.id
    assert apps.get_app("pub").published_version_id == version.id
    with pytest.raises(ConflictError) as conflict:
        apps.publish("pub", foreign.id)
    assert conflict.value.code == "version_of_another_app"
    with pytest.raises(NotFoundError) as missing:
        apps.publish("pub", "f" * 32)
    assert missing.value.code == "version_not_found"
    assert apps.get_app("pub").published_version_id == version.id


def test_delete_app_removes_everything_it_owns(apps: AppService, engine: Engine) -> None:
    app = apps.create_app("doomed", "Doomed")
    kept = apps.create_app("kept", "Kept")
    first = apps.create_version("doomed", adder())
    second = apps.create_version("doomed", adder(2), parent_id=first.id)
    apps.publish("doomed", second.id)
    kept_version = apps.create_version("kept", adder())
    keys = KeyService(engine)
    keys.create(app.id, "ci")
    keys.create(kept.id, "ci")
    with session(engine) as db:
        for owner, version_id in ((app.id, second.id), (kept.id, kept_version.id)):
            run = Run(app_id=owner, version_id=version_id, inputs={})
            db.add(run)
            db.flush()
            db.add(RunNode(run_id=run.id, node="a", status="succeeded"))
        db.commit()

    apps.delete_app("doomed")

    with pytest.raises(NotFoundError):
        apps.get_app("doomed")
    with engine.connect() as connection:
        counts = {
            table: connection.execute(text(f"SELECT count(*) FROM {table}")).scalar()
            for table in ("apps", "versions", "runs", "run_nodes", "api_keys")
        }
    assert counts == {"apps": 1, "versions": 1, "runs": 1, "run_nodes": 1, "api_keys": 1}
    assert apps.get_version("kept", "1").id == kept_version.id
