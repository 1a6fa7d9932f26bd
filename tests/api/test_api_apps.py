"""The editor API over real HTTP, on SQLite and PostgreSQL: apps, versions (saved only when
valid, with every problem listed), diff, publish, validation, the block registry, and
export/import."""

from __future__ import annotations

import copy

import pytest

from support.server import Api, edge, error_of, example, flow, node


def version_count(api: Api, slug: str) -> int:
    response = api.http.get(f"/api/v1/apps/{slug}/versions")
    assert response.status_code == 200, response.text
    total: int = response.json()["total"]
    return total


# -- apps -------------------------------------------------------------------------------------


def test_create_get_rename_delete(api: Api) -> None:
    created = api.http.post(
        "/api/v1/apps", json={"slug": "crud-one", "name": "One", "description": "first"}
    )
    assert created.status_code == 201
    app = created.json()
    assert (app["slug"], app["name"], app["description"]) == ("crud-one", "One", "first")
    assert app["published_version_id"] is None

    by_slug = api.http.get("/api/v1/apps/crud-one").json()
    by_id = api.http.get(f"/api/v1/apps/{app['id']}").json()
    assert by_slug == by_id == app

    renamed = api.http.patch("/api/v1/apps/crud-one", json={"name": "Uno"})
    assert renamed.status_code == 200
    assert renamed.json()["name"] == "Uno"
    assert renamed.json()["description"] == "first"
    assert api.http.get(f"/api/v1/apps/{app['id']}").json()["name"] == "Uno"

    deleted = api.http.delete("/api/v1/apps/crud-one")
    assert deleted.status_code == 204
    assert error_of(api.http.get("/api/v1/apps/crud-one"), 404)["code"] == "app_not_found"
    assert error_of(api.http.delete("/api/v1/apps/crud-one"), 404)["code"] == "app_not_found"


def test_duplicate_slug_is_a_conflict(api: Api) -> None:
    api.create_app("dup-slug")
    again = api.http.post("/api/v1/apps", json={"slug": "dup-slug", "name": "Other"})
    assert error_of(again, 409)["code"] == "slug_taken"


def test_bad_app_bodies_are_422(api: Api) -> None:
    bad_slug = api.http.post("/api/v1/apps", json={"slug": "Not A Slug", "name": "x"})
    assert error_of(bad_slug, 422)["code"] == "invalid_input"
    missing = api.http.post("/api/v1/apps", json={"slug": "no-name"})
    error = error_of(missing, 422)
    assert error["code"] == "invalid_request"
    assert [p["field"] for p in error["problems"]] == ["name"]
    extra = api.http.post("/api/v1/apps", json={"slug": "extra-field", "name": "x", "x": 1})
    assert error_of(extra, 422)["code"] == "invalid_request"
    malformed = api.http.post(
        "/api/v1/apps", content=b'{"slug": "broken', headers={"content-type": "application/json"}
    )
    assert error_of(malformed, 422)["code"] == "invalid_request"
    assert api.http.get("/api/v1/apps/no-name").status_code == 404


def test_list_apps_pages(api: Api) -> None:
    slugs = [f"page-{i}" for i in range(5)]
    for slug in slugs:
        api.create_app(slug)
    first = api.http.get("/api/v1/apps", params={"limit": 2}).json()
    assert first["limit"] == 2
    assert first["offset"] == 0
    assert len(first["items"]) == 2
    total = first["total"]
    assert total >= 5
    seen: list[str] = []
    offset = 0
    while offset < total:
        page = api.http.get("/api/v1/apps", params={"offset": offset, "limit": 2}).json()
        assert page["total"] == total
        seen.extend(item["slug"] for item in page["items"])
        offset += 2
    assert len(seen) == len(set(seen)) == total  # every app once, none twice
    assert set(slugs) <= set(seen)
    # Newest first: the last created comes before the first.
    assert seen.index("page-4") < seen.index("page-0")
    bad = api.http.get("/api/v1/apps", params={"limit": 0})
    assert error_of(bad, 422)["code"] == "invalid_request"
    assert api.http.get("/api/v1/apps", params={"limit": 500}).status_code == 422


def test_unknown_app_is_404_everywhere(api: Api) -> None:
    for method, path, body in [
        ("GET", "/api/v1/apps/no-such-app", None),
        ("PATCH", "/api/v1/apps/no-such-app", {"name": "x"}),
        ("GET", "/api/v1/apps/no-such-app/versions", None),
        ("GET", "/api/v1/apps/no-such-app/versions/1", None),
        ("GET", "/api/v1/apps/no-such-app/versions/published", None),
        ("POST", "/api/v1/apps/no-such-app/versions", {"flow": example("hello")}),
        ("POST", "/api/v1/apps/no-such-app/publish", {"version_id": "x"}),
        ("GET", "/api/v1/apps/no-such-app/export", None),
        ("GET", "/api/v1/apps/no-such-app/diff?a=1&b=2", None),
        ("GET", "/api/v1/apps/no-such-app/keys", None),
    ]:
        response = api.http.request(method, path, json=body)
        assert error_of(response, 404)["code"] == "app_not_found", (method, path)
    no_route = api.http.get("/api/v1/no-such-route")
    assert error_of(no_route, 404)["code"] == "not_found"
    wrong_method = api.http.put("/api/v1/apps", json={})
    assert error_of(wrong_method, 405)["code"] == "method_not_allowed"


# -- versions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["hello", "answer_question", "triage_by_length", "language_switch", "orders_summary"]
)
def test_every_example_saves_and_reads_back(api: Api, name: str) -> None:
    slug = f"ex-{name.replace('_', '-')}"
    api.create_app(slug)
    document = example(name)
    saved = api.save(slug, document, note=f"the {name} example")
    assert saved["number"] == 1
    assert saved["note"] == f"the {name} example"
    read = api.http.get(f"/api/v1/apps/{slug}/versions/1").json()
    assert read["id"] == saved["id"]
    assert [n["id"] for n in read["flow"]["nodes"]] == [n["id"] for n in document["nodes"]]
    # Positions are stored apart (layout) and merged back.
    assert [n.get("position") for n in read["flow"]["nodes"]] == [
        n.get("position") for n in document["nodes"]
    ]
    assert read["flow"]["edges"] == document["edges"]


def test_invalid_flow_lists_every_problem_and_writes_nothing(api: Api) -> None:
    api.create_app("invalid-flow")
    api.save("invalid-flow", example("hello"))
    before = version_count(api, "invalid-flow")
    broken = flow(
        [
            node("name", "text_input", name="name"),
            node("ghost", "no_such_block"),
            node("greet", "template", template="Hello {{ name }}"),
            node("sum", "t_nothing"),
            node("count", "number_input", name="count"),
            node("join", "text_join"),
            node("lonely", "template", template="{{ x }}"),
            node("out", "output", name="greeting"),
            node("joined", "output", name="joined"),
        ],
        [
            edge("name", "greet.name"),
            edge("greet", "out.nope"),
            edge("missing", "out"),
            edge("count", "join.texts"),
            edge("join", "joined"),
        ],
    )
    response = api.http.post("/api/v1/apps/invalid-flow/versions", json={"flow": broken})
    error = error_of(response, 422)
    assert error["code"] == "flow_invalid"
    found = {(p["node"], p["port"], p["code"]) for p in error["problems"]}
    assert ("ghost", None, "unknown_block") in found
    assert ("sum", None, "unknown_block") in found
    assert ("out", "nope", "unknown_port") in found
    assert any(code == "unknown_node" for _, _, code in found)
    assert ("lonely", "x", "missing_required_input") in found
    assert ("join", "texts", "type_mismatch") in found
    assert all(p["message"] for p in error["problems"])
    assert version_count(api, "invalid-flow") == before  # nothing written

    not_a_flow = api.http.post(
        "/api/v1/apps/invalid-flow/versions", json={"flow": {"format": "something else"}}
    )
    assert error_of(not_a_flow, 422)["code"] == "flow_format"
    no_flow = api.http.post("/api/v1/apps/invalid-flow/versions", json={"note": "x"})
    assert error_of(no_flow, 422)["code"] == "invalid_request"
    malformed = api.http.post(
        "/api/v1/apps/invalid-flow/versions",
        content=b'{"flow": {"nodes": [',
        headers={"content-type": "application/json"},
    )
    assert error_of(malformed, 422)["code"] == "invalid_request"
    assert version_count(api, "invalid-flow") == before


def test_versions_numbers_published_and_not_found(api: Api) -> None:
    api.create_app("versions")
    one = api.save("versions", example("hello"))
    changed = example("hello")
    changed["nodes"][1]["config"]["template"] = "Hi, {{ name }}."
    two = api.save("versions", changed)
    assert (one["number"], two["number"]) == (1, 2)

    listed = api.http.get("/api/v1/apps/versions/versions").json()
    assert listed["total"] == 2
    assert [v["number"] for v in listed["items"]] == [2, 1]  # newest first
    paged = api.http.get("/api/v1/apps/versions/versions", params={"offset": 1, "limit": 1})
    assert [v["number"] for v in paged.json()["items"]] == [1]

    by_id = api.http.get(f"/api/v1/apps/versions/versions/{two['id']}").json()
    assert by_id["number"] == 2
    assert by_id["flow"]["nodes"][1]["config"]["template"] == "Hi, {{ name }}."

    not_published = api.http.get("/api/v1/apps/versions/versions/published")
    assert error_of(not_published, 404)["code"] == "not_published"
    for ref in ("3", "0", "not-a-version"):
        missing = api.http.get(f"/api/v1/apps/versions/versions/{ref}")
        assert error_of(missing, 404)["code"] == "version_not_found"

    published = api.publish("versions", one["id"])
    assert published["published_version_id"] == one["id"]
    now = api.http.get("/api/v1/apps/versions/versions/published").json()
    assert now["id"] == one["id"]
    assert now["flow"]["nodes"][1]["config"]["template"] == "Hello, {{ name }}!"

    missing_version = api.http.post("/api/v1/apps/versions/publish", json={"version_id": "nope"})
    assert error_of(missing_version, 404)["code"] == "version_not_found"


def test_publish_a_version_of_another_app_is_a_conflict(api: Api) -> None:
    api.create_app("owner-a")
    api.create_app("owner-b")
    of_a = api.save("owner-a", example("hello"))
    response = api.http.post("/api/v1/apps/owner-b/publish", json={"version_id": of_a["id"]})
    assert error_of(response, 409)["code"] == "version_of_another_app"
    assert api.http.get("/api/v1/apps/owner-b").json()["published_version_id"] is None
    parent_elsewhere = api.http.post(
        "/api/v1/apps/owner-b/versions", json={"flow": example("hello"), "parent_id": of_a["id"]}
    )
    assert error_of(parent_elsewhere, 409)["code"] == "version_of_another_app"
    assert version_count(api, "owner-b") == 0


def test_diff_counts_graph_changes_not_layout(api: Api) -> None:
    api.create_app("diffs")
    base = example("hello")
    v1 = api.save("diffs", base)
    moved = copy.deepcopy(base)
    for item in moved["nodes"]:
        item["position"] = {"x": item["position"]["x"] + 40, "y": item["position"]["y"] + 90}
    v2 = api.save("diffs", moved, note="moved only")
    layout_only = api.http.get("/api/v1/apps/diffs/diff", params={"a": "1", "b": "2"}).json()
    assert layout_only == {
        "nodes": {"added": [], "removed": [], "changed": []},
        "edges": {"added": [], "removed": []},
        "meta": {},
    }

    grown = copy.deepcopy(moved)
    grown["nodes"][1]["config"]["template"] = "Hey {{ name }}"
    grown["nodes"].append(node("copy", "output", name="copy"))
    grown["edges"].append(edge("greet", "copy"))
    v3 = api.save("diffs", grown)
    diff = api.http.get("/api/v1/apps/diffs/diff", params={"a": v1["id"], "b": "3"}).json()
    assert diff["nodes"] == {
        "added": ["copy"],
        "removed": [],
        "changed": [{"id": "greet", "fields": ["config"]}],
    }
    assert diff["edges"] == {"added": [edge("greet", "copy")], "removed": []}
    backwards = api.http.get("/api/v1/apps/diffs/diff", params={"a": v3["id"], "b": v2["id"]})
    assert backwards.json()["nodes"]["removed"] == ["copy"]
    missing = api.http.get("/api/v1/apps/diffs/diff", params={"a": "1", "b": "9"})
    assert error_of(missing, 404)["code"] == "version_not_found"


# -- validation and blocks --------------------------------------------------------------------


def test_validate_without_saving(api: Api) -> None:
    good = api.http.post("/api/v1/validate", json={"flow": example("triage_by_length")})
    assert good.status_code == 200
    assert good.json()["ok"] is True
    assert all(p["severity"] != "error" for p in good.json()["problems"])

    cyclic = flow(
        [
            node("inp", "text_input", name="text"),
            node("a", "text_join"),
            node("b", "text_join"),
            node("out", "output", name="out"),
        ],
        [edge("inp", "a.texts"), edge("a", "b.texts"), edge("b", "a.texts"), edge("b", "out")],
    )
    bad = api.http.post("/api/v1/validate", json={"flow": cyclic})
    assert bad.status_code == 200
    body = bad.json()
    assert body["ok"] is False
    assert "cycle" in {p["code"] for p in body["problems"]}
    format_error = api.http.post("/api/v1/validate", json={"flow": {"version": 1}})
    assert error_of(format_error, 422)["code"] == "flow_format"


def test_block_registry_and_dynamic_ports(api: Api) -> None:
    registry = api.http.get("/api/v1/blocks")
    assert registry.status_code == 200
    text = registry.text
    for name in ("text_input", "template", "chat", "invoke_app", "http_request", "slow_echo"):
        assert f'"{name}"' in text, name

    ports = api.http.post("/api/v1/blocks/template/ports", json={"template": "{{ a }} {{ b }}"})
    assert ports.status_code == 200
    body = ports.json()
    assert sorted(p["name"] for p in body["inputs"]) == ["a", "b"]
    assert [p["name"] for p in body["outputs"]] == ["output"]
    assert body["branches"] == []

    unknown = api.http.post("/api/v1/blocks/no_such_block/ports", json={})
    assert error_of(unknown, 404)["code"] == "unknown_block"
    bad_config = api.http.post("/api/v1/blocks/template/ports", json={"template": "{{ a"})
    assert error_of(bad_config, 422)["code"] == "invalid_config"


def test_port_type_compatibility_matrix(api: Api) -> None:
    body = api.http.get("/api/v1/types").json()
    matrix = body["compatibility"]
    registry = api.http.get("/api/v1/blocks").json()["blocks"]
    port_types = {p["type"] for b in registry for p in (*b["inputs"], *b["outputs"])}
    assert port_types <= set(body["types"])  # every static port type has a row
    assert set(matrix) == set(body["types"])
    assert matrix["str"]["str"] == "yes"
    assert matrix["str"]["list[str]"] == "no"  # what the editor refuses while dragging
    assert matrix["Any"]["str"] == "check"  # allowed, checked on the value at run time
    assert matrix["int"]["float"] in {"yes", "check"}


# -- export and import ------------------------------------------------------------------------


def test_export_then_import_under_another_slug(api: Api) -> None:
    api.create_app("exported")
    v1 = api.save("exported", example("hello"), note="first")
    changed = example("hello")
    changed["nodes"][1]["config"]["template"] = "Bonjour {{ name }}"
    api.save("exported", changed, note="second")
    api.publish("exported", v1["id"])

    document = api.http.get("/api/v1/apps/exported/export")
    assert document.status_code == 200
    doc = document.json()
    assert doc["format"] == "dagwright.app"
    assert doc["published"] == 1
    assert [v["number"] for v in doc["versions"]] == [1, 2]

    imported = api.http.post("/api/v1/apps/import", params={"slug": "exported-copy"}, json=doc)
    assert imported.status_code == 201, imported.text
    copy_app = imported.json()
    assert copy_app["slug"] == "exported-copy"
    assert copy_app["name"] == "exported"
    versions = api.http.get("/api/v1/apps/exported-copy/versions").json()
    assert [(v["number"], v["note"]) for v in versions["items"]] == [(2, "second"), (1, "first")]
    published = api.http.get("/api/v1/apps/exported-copy/versions/published").json()
    assert published["number"] == 1
    assert published["id"] == copy_app["published_version_id"]
    second = api.http.get("/api/v1/apps/exported-copy/versions/2").json()
    assert second["flow"] == changed
    again = api.http.get("/api/v1/apps/exported-copy/export").json()
    assert again["versions"] == [
        {**version, "created_at": again_version["created_at"]}
        for version, again_version in zip(doc["versions"], again["versions"], strict=True)
    ]

    taken = api.http.post("/api/v1/apps/import", json=doc)  # its own slug: taken
    assert error_of(taken, 409)["code"] == "slug_taken"
    not_an_export = api.http.post("/api/v1/apps/import", json={"format": "x"})
    assert error_of(not_an_export, 422)["code"] == "invalid_input"
    broken = copy.deepcopy(doc)
    broken["versions"][1]["flow"]["nodes"][1]["block"] = "no_such_block"
    invalid = api.http.post("/api/v1/apps/import", params={"slug": "exported-bad"}, json=broken)
    error = error_of(invalid, 422)
    assert error["code"] == "flow_invalid"
    assert error["message"].startswith("versions[1].flow: ")
    assert ("greet", "unknown_block") in {(p["node"], p["code"]) for p in error["problems"]}
    assert api.http.get("/api/v1/apps/exported-bad").status_code == 404  # all or nothing


def test_the_ports_of_many_nodes_in_one_call(api: Api) -> None:
    # What the editor asks when a flow opens: every dynamic node's ports at once, each
    # node's refusal apart so one bad node does not hide the others' ports.
    body = {
        "nodes": {
            "greet": {"block": "template", "config": {"template": "{{ who }} and {{ b.c }}"}},
            "route": {"block": "switch", "config": {"cases": ["yes", "no"]}},
            "broken": {"block": "template", "config": {"template": "{{ a"}},
            "ghost": {"block": "no_such_block", "config": {}},
        }
    }
    answer = api.http.post("/api/v1/blocks/ports", json=body)
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert set(found["ports"]) == {"greet", "route"}
    assert sorted(p["name"] for p in found["ports"]["greet"]["inputs"]) == ["b", "who"]
    alone = api.http.post("/api/v1/blocks/switch/ports", json={"cases": ["yes", "no"]}).json()
    assert found["ports"]["route"] == alone  # the same answer as asking for it alone
    assert found["errors"]["broken"]["code"] == "invalid_config"
    assert found["errors"]["ghost"]["code"] == "unknown_block"
    assert "no_such_block" in found["errors"]["ghost"]["message"]

    too_many = {"nodes": {f"n{i}": {"block": "template"} for i in range(1001)}}
    refused = error_of(api.http.post("/api/v1/blocks/ports", json=too_many), 422)
    assert [p["field"] for p in refused["problems"]] == ["nodes"]
