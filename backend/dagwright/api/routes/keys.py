"""API keys per app (the key is shown once, at creation) and write-only secrets."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response

from dagwright.api.routes.access import Admin
from dagwright.api.schemas import KeyCreate, KeyCreated, KeyOut, SecretIn
from dagwright.api.state import Services, services

router = APIRouter(prefix="/api/v1", tags=["keys and secrets"], dependencies=[Admin])
Deps = Annotated[Services, Depends(services)]


@router.get("/apps/{app}/keys", response_model=list[KeyOut])
def list_keys(app: str, s: Deps) -> Any:
    return s.keys.list(s.apps.get_app(app).id)


@router.post("/apps/{app}/keys", response_model=KeyCreated, status_code=201)
def create_key(app: str, body: KeyCreate, s: Deps) -> Any:
    """Create an API key for the app. The response holds the key itself, this once."""
    key, plaintext = s.keys.create(s.apps.get_app(app).id, body.name)
    return {**KeyOut.model_validate(key).model_dump(), "key": plaintext}


@router.delete("/apps/{app}/keys/{key_id}", status_code=204)
def revoke_key(app: str, key_id: str, s: Deps) -> Response:
    s.keys.revoke(s.apps.get_app(app).id, key_id)
    return Response(status_code=204)


@router.get("/secrets")
def list_secrets(s: Deps) -> dict[str, list[str]]:
    """Secret names only: values never leave the server."""
    return {"names": s.secrets.names()}


@router.put("/secrets/{name}", status_code=204)
def set_secret(name: str, body: SecretIn, s: Deps) -> Response:
    s.secrets.set(name, body.value)
    return Response(status_code=204)


@router.delete("/secrets/{name}", status_code=204)
def delete_secret(name: str, s: Deps) -> Response:
    s.secrets.delete(name)
    return Response(status_code=204)
