"""Route dependencies for who may call: the admin token (editor API) and app API keys."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from dagwright.api.auth import bearer_token, check_admin
from dagwright.api.settings import admin_required
from dagwright.api.state import Services, services
from dagwright.errors import AuthError, ForbiddenError
from dagwright.store.models import App


async def require_admin(request: Request, s: Annotated[Services, Depends(services)]) -> None:
    check_admin(request, s.settings.admin_token, admin_required(s.settings))


Admin = Depends(require_admin)


async def app_for_key(request: Request, s: Services, app_ref: str) -> App:
    """The app a published call addresses, once its API key is checked: 401 without a key
    or with an unknown one, 404 for an unknown app, 403 for another app's key, 429 over the
    rate limit."""
    token = bearer_token(request)
    if token is None:
        raise AuthError(
            "this endpoint needs the app's API key: send 'Authorization: Bearer <key>'",
            code="api_key_required",
        )
    key = await s.endpoints.key(token)
    if key is None:
        raise AuthError("the API key is not valid (unknown or revoked)", "invalid_api_key")
    app = await s.endpoints.app(app_ref)
    if key.app_id != app.id:
        raise ForbiddenError(
            f"this API key belongs to another app, not {app_ref!r}", "key_for_another_app"
        )
    s.limiter.take(key.id)
    return app


async def may_read_app(request: Request, s: Services, app_id: str | None) -> None:
    """Admins may read every run; an app's API key may read that app's runs."""
    try:
        check_admin(request, s.settings.admin_token, admin_required(s.settings))
        return
    except AuthError:
        token = bearer_token(request)
        key = await s.endpoints.key(token) if token else None
        if key is None or app_id is None:
            raise
        if key.app_id != app_id:
            # A valid key, of another app: say so, not that the admin token is wrong.
            raise ForbiddenError(
                "this API key belongs to another app than the run's", "key_for_another_app"
            ) from None
