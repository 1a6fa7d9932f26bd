"""Apps and their versions (one aggregate: a version belongs to its app, and goes with it).

The repository style every store module follows: a repository wraps the caller's session
(its unit of work; the service decides when to commit), speaks in table rows and the store's
Page, raises the typed not-found and conflict errors, and holds every query of its
aggregate, so services hold none.
"""

from __future__ import annotations

from sqlalchemy import delete, func, or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from dagwright.errors import ConflictError, NotFoundError
from dagwright.store.models import ApiKey, App, Run, RunNode, Version
from dagwright.store.paging import Page, Window, fetch_page


def app_not_found(ref: str) -> NotFoundError:
    return NotFoundError(f"no app {ref!r} (by slug or id)", code="app_not_found")


class AppRepository:
    def __init__(self, db: Session) -> None:
        self._db = db

    # -- apps ------------------------------------------------------------------------------

    def find(self, ref: str) -> App:
        """The app by id or slug (NotFoundError `app_not_found`)."""
        found = self._db.exec(select(App).where(or_(col(App.id) == ref, col(App.slug) == ref)))
        rows = found.all()
        if not rows:
            raise app_not_found(ref)
        # An id and another app's slug could coincide only by a 1-in-2^128 chance; ids win.
        return next((app for app in rows if app.id == ref), rows[0])

    def page(self, at: Window) -> Page[App]:
        """Newest first."""
        return fetch_page(
            self._db, select(App).order_by(col(App.created_at).desc(), col(App.id)), at
        )

    def add(self, app: App) -> None:
        """Adds and flushes the app; a taken slug is a ConflictError (and rolls back)."""
        taken = ConflictError(f"slug {app.slug!r} is taken by another app", code="slug_taken")
        if self._db.exec(select(App.id).where(App.slug == app.slug)).first() is not None:
            raise taken
        self._db.add(app)
        try:
            self._db.flush()
        except IntegrityError:
            # Taken between the check and the insert, by a concurrent request.
            self._db.rollback()
            raise taken from None

    def delete(self, app: App) -> None:
        """The app with its versions, keys and runs."""
        db = self._db
        # The app points at a version that points back at it: unhook it first.
        db.exec(update(App).where(col(App.id) == app.id).values(published_version_id=None))
        versions = select(Version.id).where(Version.app_id == app.id)
        runs = select(Run.id).where(
            or_(col(Run.app_id) == app.id, col(Run.version_id).in_(versions))
        )
        db.exec(delete(RunNode).where(col(RunNode.run_id).in_(runs)))
        db.exec(delete(Run).where(col(Run.id).in_(runs)))
        db.exec(delete(ApiKey).where(col(ApiKey.app_id) == app.id))
        # One statement: versions point at their parents, and the constraint is checked when
        # the statement ends, with all of them gone.
        db.exec(delete(Version).where(col(Version.app_id) == app.id))
        db.exec(delete(App).where(col(App.id) == app.id))

    # -- versions --------------------------------------------------------------------------

    def version(self, app: App, ref: str) -> Version:
        """The app's version by id, by number ("3") or "published"."""
        if ref == "published":
            if app.published_version_id is None:
                raise NotFoundError(
                    f"app {app.slug!r} has no published version", code="not_published"
                )
            ref = app.published_version_id
        if ref.isascii() and ref.isdigit():  # not "²", which isdigit() accepts
            query = select(Version).where(Version.app_id == app.id, Version.number == int(ref))
        else:
            query = select(Version).where(Version.app_id == app.id, Version.id == ref)
        version = self._db.exec(query).first()
        if version is None:
            raise NotFoundError(
                f"app {app.slug!r} has no version {ref!r} (by id, number or 'published')",
                code="version_not_found",
            )
        return version

    def version_of(self, app: App, version_id: str) -> Version:
        """The version by id, which must belong to `app` (a parent, a version to publish)."""
        version = self._db.get(Version, version_id)
        if version is None:
            raise NotFoundError(f"no version {version_id!r}", code="version_not_found")
        if version.app_id != app.id:
            raise ConflictError(
                f"version {version_id!r} belongs to another app, not to {app.slug!r}",
                code="version_of_another_app",
            )
        return version

    def versions(self, app: App, at: Window) -> Page[Version]:
        """Newest first."""
        query = select(Version).where(Version.app_id == app.id)
        return fetch_page(self._db, query.order_by(col(Version.number).desc()), at)

    def last_number(self, app: App) -> int:
        """The number of the app's newest version; 0 before its first."""
        latest = self._db.exec(select(func.max(Version.number)).where(Version.app_id == app.id))
        return latest.one() or 0

    def add_version(self, version: Version) -> None:
        """Adds and flushes, in order: a version's parent must be added before it."""
        self._db.add(version)
        self._db.flush()

    def add_numbered_version(self, version: Version) -> bool:
        """Adds and flushes the version; False (rolled back) when another save took its
        number meanwhile, or the app went away (finding it again says so)."""
        try:
            self.add_version(version)
        except IntegrityError:
            self._db.rollback()
            return False
        return True
