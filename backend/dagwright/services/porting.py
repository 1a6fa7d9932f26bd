"""Export an app with its versions as one JSON document, and import such a document.

The document carries what makes the app: its flows, their history (parents) and which one is
published. It carries nothing that belongs to one installation: no API keys, no secrets (a
flow names its secrets, the new installation sets them), no runs.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dagwright.errors import InputError, describe_validation_error
from dagwright.services.apps import AppService, NewVersion
from dagwright.store.models import App, Version

FORMAT: Final = "dagwright.app"
FORMAT_VERSION: Final = 1
PAGE = 200


class _Doc(BaseModel):
    model_config = ConfigDict(strict=True)


class _AppPart(_Doc):
    slug: str
    name: str
    description: str = ""


class _VersionPart(_Doc):
    number: int = Field(ge=1)
    parent: int | None = None
    note: str = ""
    author: str = ""
    created_at: str | None = None  # informative: an import is created now
    flow: dict[str, Any]


class _AppDocument(_Doc):
    format: Literal["dagwright.app"]
    version: Literal[1]
    app: _AppPart
    versions: list[_VersionPart] = Field(default_factory=list)
    published: int | None = None


def _all_versions(apps: AppService, ref: str) -> list[Version]:
    found: list[Version] = []
    while True:
        page = apps.list_versions(ref, offset=len(found), limit=PAGE)
        found.extend(page.items)
        if not page.items or len(found) >= page.total:
            return sorted(found, key=lambda version: version.number)


def export_app(apps: AppService, ref: str) -> dict[str, Any]:
    app = apps.get_app(ref)
    versions = _all_versions(apps, app.id)
    numbers = {version.id: version.number for version in versions}
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "app": {"slug": app.slug, "name": app.name, "description": app.description},
        "versions": [
            {
                "number": version.number,
                "parent": None if version.parent_id is None else numbers.get(version.parent_id),
                "note": version.note,
                "author": version.author,
                "created_at": version.created_at.isoformat(),
                "flow": apps.flow_of(version),
            }
            for version in versions
        ],
        "published": numbers.get(app.published_version_id or ""),
    }


def _parse(doc: Any) -> _AppDocument:
    if not isinstance(doc, dict):
        raise InputError(f"an app document is a JSON object, not {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise InputError(
            f"format: not a dagwright app export: must be {FORMAT!r}, not {doc.get('format')!r}"
        )
    if doc.get("version") != FORMAT_VERSION:
        raise InputError(
            f"version: app document version {doc.get('version')!r} is not supported; "
            f"this dagwright reads {FORMAT_VERSION}"
        )
    try:
        return _AppDocument.model_validate(doc)
    except ValidationError as exc:
        raise InputError(f"invalid app document: {describe_validation_error(exc)}") from None


def _new_versions(parsed: _AppDocument) -> tuple[list[NewVersion], int | None]:
    """The versions with parents and the published one as list indexes."""
    index: dict[int, int] = {}
    versions: list[NewVersion] = []
    for i, part in enumerate(parsed.versions):
        if part.number in index:
            raise InputError(f"versions[{i}].number: {part.number} appears twice")
        parent = None
        if part.parent is not None:
            parent = index.get(part.parent)
            if parent is None:
                raise InputError(
                    f"versions[{i}].parent: {part.parent} is not the number of a version "
                    "listed before it"
                )
        index[part.number] = i
        versions.append(NewVersion(part.flow, part.note, part.author, parent))
    published = None
    if parsed.published is not None:
        published = index.get(parsed.published)
        if published is None:
            raise InputError(f"published: there is no version {parsed.published}")
    return versions, published


def import_app(apps: AppService, doc: Any, slug: str | None = None) -> App:
    """A new app from an exported document (under another slug when given). All or nothing:
    an invalid document or flow, or a taken slug, leaves nothing behind. Versions are
    numbered 1, 2... in the document's order."""
    parsed = _parse(doc)
    versions, published = _new_versions(parsed)
    return apps.create_app_with_versions(
        slug if slug is not None else parsed.app.slug,
        parsed.app.name,
        parsed.app.description,
        versions,
        published,
    )
