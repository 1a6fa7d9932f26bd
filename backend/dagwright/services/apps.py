"""Apps and their versions: create, list, validate-and-save, diff, publish.

Every method is synchronous and uses its own short session (the API calls them from a thread
pool) and returns detached rows: plain data, readable after the session is gone. A version is
immutable once written, which is what lets `compiled` cache compiled flows by version id.
"""

from __future__ import annotations

import copy
import json
import random
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine

from dagwright.errors import ConflictError, FlowFormatError, InputError
from dagwright.registry import Registry
from dagwright.runtime import (
    CompiledFlow,
    Flow,
    FlowInvalidError,
    analyse,
    compile_flow,
    parse_flow,
)
from dagwright.services.changes import Change, Changes
from dagwright.store.apps import AppRepository
from dagwright.store.db import session
from dagwright.store.models import App, Version, utcnow
from dagwright.store.paging import DEFAULT_LIMIT, Page, window

SLUG_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{1,62}")
MAX_NAME = 200
MAX_AUTHOR = 200
# Concurrent saves of one app race for the next number; the losers retry with a new one.
NUMBER_ATTEMPTS = 20
COMPILED_CACHE_SIZE = 256
NODE_FIELDS = (
    "block",
    "config",
    "label",
    "timeout",
    "on_error",
)  # what makes a node "changed" in a diff


@dataclass(frozen=True, slots=True)
class NewVersion:
    """A version to create together with its app (see `create_app_with_versions`)."""

    flow: dict[str, Any]
    note: str = ""
    author: str = ""
    parent: int | None = None  # index, in the same list, of an earlier version


@dataclass(frozen=True, slots=True)
class SavedFlow:
    """A valid flow split as it is stored: the graph without positions, and the layout."""

    graph: dict[str, Any]
    layout: dict[str, dict[str, float]]


def _check_slug(slug: str) -> str:
    if not isinstance(slug, str) or SLUG_PATTERN.fullmatch(slug) is None:
        raise InputError(
            f"slug: {slug!r} is not a valid slug: use 2 to 63 lowercase letters, digits and "
            "'-', starting with a letter or a digit"
        )
    return slug


def _settings(current: Mapping[str, Any], changes: Mapping[str, Any] | None) -> dict[str, Any]:
    """The app's settings with `changes` applied; keys set to None are dropped (defaults)."""
    merged = {**current, **(changes or {})}
    return {key: value for key, value in merged.items() if value is not None}


def _check_text(field: str, value: str, limit: int | None = None, required: bool = False) -> str:
    if not isinstance(value, str):
        raise InputError(f"{field}: must be text, not {type(value).__name__}")
    if required and not value.strip():
        raise InputError(f"{field}: must not be empty")
    if limit is not None and len(value) > limit:
        raise InputError(f"{field}: at most {limit} characters (got {len(value)})")
    return value


def _located(error: FlowInvalidError, where: str) -> FlowInvalidError:
    """The same problems, with a message that says which flow they are in."""
    located = FlowInvalidError(error.problems)
    located.message = f"{where}: {error.message}"
    located.args = (located.message,)
    return located


def _subflow_changes(old: dict[str, Any], new: dict[str, Any]) -> dict[str, list[str]]:
    """Sub-flows of the document added, removed or changed (any node, edge or field)."""
    return {
        "added": [name for name in new if name not in old],
        "removed": [name for name in old if name not in new],
        "changed": [name for name in new if name in old and old[name] != new[name]],
    }


def _edge_key(edge: dict[str, Any]) -> str:
    return json.dumps(edge, sort_keys=True)


class AppService:
    def __init__(self, engine: Engine, registry: Registry) -> None:
        self._engine = engine
        self._registry = registry
        self._compiled: OrderedDict[str, CompiledFlow] = OrderedDict()
        self._compiled_lock = threading.Lock()
        self.changes = Changes()  # apps and versions created, changed, deleted, published

    # -- apps ------------------------------------------------------------------------------

    def create_app(
        self,
        slug: str,
        name: str,
        description: str = "",
        settings: Mapping[str, Any] | None = None,
    ) -> App:
        app = self._new_app(slug, name, description)
        app.settings = _settings({}, settings)
        with session(self._engine) as db:
            AppRepository(db).add(app)
            db.commit()
        self.changes.announce(Change("app", "created", app.id))
        return app

    def list_apps(self, offset: int = 0, limit: int = DEFAULT_LIMIT) -> Page[App]:
        at = window(offset, limit)
        with session(self._engine) as db:
            return AppRepository(db).page(at)

    def get_app(self, ref: str) -> App:
        with session(self._engine) as db:
            return AppRepository(db).find(ref)

    def update_app(
        self,
        ref: str,
        name: str | None = None,
        description: str | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> App:
        """`settings` changes only the keys it holds (a None value resets one)."""
        with session(self._engine) as db:
            app = AppRepository(db).find(ref)
            if name is not None:
                app.name = _check_text("name", name, MAX_NAME, required=True)
            if description is not None:
                app.description = _check_text("description", description)
            if settings is not None:
                app.settings = _settings(app.settings or {}, settings)
            app.updated_at = utcnow()
            db.commit()
        self.changes.announce(Change("app", "updated", app.id))
        return app

    def delete_app(self, ref: str) -> None:
        """The app with everything that belongs to it, in one transaction."""
        with session(self._engine) as db:
            store = AppRepository(db)
            app = store.find(ref)
            store.delete(app)
            db.commit()
        self.changes.announce(Change("app", "deleted", app.id))

    # -- versions --------------------------------------------------------------------------

    def prepare(self, flow: dict[str, Any], app: str | None = None) -> SavedFlow:
        """Parse and validate a flow document (FlowFormatError, FlowInvalidError listing every
        problem) and split it into the stored graph and layout. `app` is the slug it is
        saved to: references that lead back to that app are named as recursion."""
        parsed = parse_flow(flow)
        analysis = analyse(parsed, self._registry, self, app)
        if not analysis.ok:
            raise FlowInvalidError(analysis.problems)
        graph = parsed.model_dump(mode="json", exclude_none=True)
        layout: dict[str, dict[str, float]] = {}
        for node in graph["nodes"]:
            position = node.pop("position", None)
            if position is not None:
                layout[node["id"]] = {"x": position["x"], "y": position["y"]}
        return SavedFlow(graph, layout)

    def create_version(
        self,
        ref: str,
        flow: dict[str, Any],
        note: str = "",
        author: str = "",
        parent_id: str | None = None,
    ) -> Version:
        """Validate and save a flow as the app's next version; an invalid flow writes
        nothing."""
        _check_text("note", note)
        _check_text("author", author, MAX_AUTHOR)
        saved = self.prepare(flow, self.get_app(ref).slug)
        for attempt in range(NUMBER_ATTEMPTS):
            with session(self._engine) as db:
                store = AppRepository(db)
                app = store.find(ref)
                if parent_id is not None:
                    store.version_of(app, parent_id)
                version = Version(
                    app_id=app.id,
                    number=store.last_number(app) + 1,
                    parent_id=parent_id,
                    graph=saved.graph,
                    layout=saved.layout,
                    note=note,
                    author=author,
                )
                if store.add_numbered_version(version):
                    db.commit()
                    self.changes.announce(Change("version", "created", version.id))
                    return version
            # Another save took this number. Jitter keeps racing writers from colliding again.
            time.sleep(random.uniform(0, 0.005 * (attempt + 1)))
        raise ConflictError(
            f"could not number a new version of {ref!r}: too many concurrent saves",
            code="version_conflict",
        )

    def list_versions(self, ref: str, offset: int = 0, limit: int = DEFAULT_LIMIT) -> Page[Version]:
        """Newest first."""
        at = window(offset, limit)
        with session(self._engine) as db:
            store = AppRepository(db)
            return store.versions(store.find(ref), at)

    def get_version(self, app_ref: str, version_ref: str) -> Version:
        """A version by id, by number ("3") or "published"."""
        with session(self._engine) as db:
            store = AppRepository(db)
            return store.version(store.find(app_ref), version_ref)

    def flow_of(self, version: Version) -> dict[str, Any]:
        """The flow document with the positions put back: what the editor opens."""
        flow = copy.deepcopy(version.graph)
        for node in flow.get("nodes", []):
            position = version.layout.get(node.get("id"))
            if position is not None:
                node["position"] = {"x": position["x"], "y": position["y"]}
        return flow

    def compiled_version(self, app_id: str, version_id: str) -> CompiledFlow:
        """The compiled flow of a version by its id: once compiled, from the cache without
        reading the database (a worker starts every queued run with it)."""
        with self._compiled_lock:
            found = self._compiled.get(version_id)
            if found is not None:
                self._compiled.move_to_end(version_id)
                return found
        return self.compiled(self.get_version(app_id, version_id))

    def compiled(self, version: Version) -> CompiledFlow:
        """The version's compiled flow, compiled once per version (versions never change)."""
        with self._compiled_lock:
            found = self._compiled.get(version.id)
            if found is not None:
                self._compiled.move_to_end(version.id)
                return found
        # Compiled outside the lock: two threads may both compile a new version; the result
        # is the same and one of them is kept.
        plan = compile_flow(parse_flow(version.graph), self._registry, self)
        with self._compiled_lock:
            self._compiled[version.id] = plan
            while len(self._compiled) > COMPILED_CACHE_SIZE:
                self._compiled.popitem(last=False)
        return plan

    def diff(self, app_ref: str, a: str, b: str) -> dict[str, Any]:
        """What changed from version a to version b. Positions are not compared: moving a
        node in the editor changes the layout, not the flow."""
        with session(self._engine) as db:
            store = AppRepository(db)
            app = store.find(app_ref)
            old, new = store.version(app, a).graph, store.version(app, b).graph
        old_nodes = {n["id"]: n for n in old.get("nodes", [])}
        new_nodes = {n["id"]: n for n in new.get("nodes", [])}
        changed = []
        for node_id, before in old_nodes.items():
            after = new_nodes.get(node_id)
            if after is not None:
                fields = [f for f in NODE_FIELDS if before.get(f) != after.get(f)]
                if fields:
                    changed.append({"id": node_id, "fields": fields})
        old_edges = {_edge_key(e): e for e in old.get("edges", [])}
        new_edges = {_edge_key(e): e for e in new.get("edges", [])}
        meta = {
            key: {"from": old.get(key, ""), "to": new.get(key, "")}
            for key in ("name", "description")
            if old.get(key, "") != new.get(key, "")
        }
        changes: dict[str, Any] = {
            "nodes": {
                "added": [n for n in new_nodes if n not in old_nodes],
                "removed": [n for n in old_nodes if n not in new_nodes],
                "changed": changed,
            },
            "edges": {
                "added": [e for k, e in new_edges.items() if k not in old_edges],
                "removed": [e for k, e in old_edges.items() if k not in new_edges],
            },
            "meta": meta,
        }
        if old.get("subflows") or new.get("subflows"):  # only documents that have them
            changes["subflows"] = _subflow_changes(
                old.get("subflows") or {}, new.get("subflows") or {}
            )
        return changes

    def app_flow(self, app: str, version: str) -> Flow:
        """An app version's flow, for checking the sub-flow nodes that refer to it."""
        return parse_flow(self.get_version(app, version).graph)

    def publish(self, app_ref: str, version_id: str) -> App:
        """Make a version the one the app's endpoint runs. Refused (FlowInvalidError) when
        its app references would then lead back to this app."""
        with session(self._engine) as db:
            store = AppRepository(db)
            app = store.find(app_ref)
            version = store.version_of(app, version_id)
        analysis = analyse(parse_flow(version.graph), self._registry, self, app.slug)
        if not analysis.ok:
            raise FlowInvalidError(analysis.problems)
        with session(self._engine) as db:
            store = AppRepository(db)
            app = store.find(app_ref)
            store.version_of(app, version_id)
            app.published_version_id = version_id
            app.updated_at = utcnow()
            db.commit()
        self.changes.announce(Change("app", "published", app.id))
        return app

    # -- import ----------------------------------------------------------------------------

    def create_app_with_versions(
        self,
        slug: str,
        name: str,
        description: str,
        versions: Sequence[NewVersion],
        published: int | None = None,
    ) -> App:
        """An app with its versions (numbered 1, 2... in list order) and, when `published`
        (an index in the list) is given, published — all in one transaction: any invalid
        version or a taken slug leaves nothing behind."""
        app = self._new_app(slug, name, description)
        saved: list[SavedFlow] = []
        for index, item in enumerate(versions):
            _check_text(f"versions[{index}].note", item.note)
            _check_text(f"versions[{index}].author", item.author, MAX_AUTHOR)
            if item.parent is not None and not 0 <= item.parent < index:
                raise InputError(f"versions[{index}].parent: must be an earlier version")
            try:
                saved.append(self.prepare(item.flow))
            except FlowFormatError as exc:
                raise FlowFormatError(f"versions[{index}].flow: {exc.message}") from None
            except FlowInvalidError as exc:
                raise _located(exc, f"versions[{index}].flow") from None
        if published is not None and not 0 <= published < len(versions):
            raise InputError(f"published: no version at index {published}")
        with session(self._engine) as db:
            store = AppRepository(db)
            store.add(app)
            rows: list[Version] = []
            for index, (item, flow) in enumerate(zip(versions, saved, strict=True)):
                row = Version(
                    app_id=app.id,
                    number=index + 1,
                    parent_id=None if item.parent is None else rows[item.parent].id,
                    graph=flow.graph,
                    layout=flow.layout,
                    note=item.note,
                    author=item.author,
                )
                store.add_version(row)
                rows.append(row)
            if published is not None:
                app.published_version_id = rows[published].id
            db.commit()
        self.changes.announce(Change("app", "created", app.id))
        return app

    # -- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _new_app(slug: str, name: str, description: str) -> App:
        return App(
            slug=_check_slug(slug),
            name=_check_text("name", name, MAX_NAME, required=True),
            description=_check_text("description", description),
        )
