"""Data-Copilot's interface libraries: review, edit and delete a data source's interfaces
(each change is a new version), and read the requests no interface covered."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response

from dagwright.api.routes.access import Admin
from dagwright.api.state import Services, services
from dagwright.errors import InputError
from dagwright.methods.data_copilot.interface import Interface
from dagwright.methods.data_copilot.library import InterfaceLibrary

router = APIRouter(prefix="/api/v1/data-copilot", tags=["data-copilot"], dependencies=[Admin])
Deps = Annotated[Services, Depends(services)]


@router.get("/{source}/interfaces")
def list_interfaces(source: str, s: Deps) -> list[dict[str, Any]]:
    """The interfaces in use, each with its version, origin and signature."""
    return InterfaceLibrary(s.engine).listing(source)


@router.put("/{source}/interfaces/{name}")
def put_interface(source: str, name: str, interface: Interface, s: Deps) -> dict[str, Any]:
    """Stores an edited (or new) interface as a new version."""
    if interface.name != name:
        raise InputError(f"the body names {interface.name!r}, the path {name!r}")
    version = InterfaceLibrary(s.engine).save(source, interface, origin="edited")
    return {"name": name, "version": version, "signature": interface.signature()}


@router.delete("/{source}/interfaces/{name}", status_code=204)
def delete_interface(source: str, name: str, s: Deps) -> Response:
    InterfaceLibrary(s.engine).delete(source, name)
    return Response(status_code=204)


@router.get("/{source}/uncovered")
def uncovered(source: str, s: Deps) -> list[dict[str, Any]]:
    """Requests the deployment could not cover, waiting for the next design round."""
    return InterfaceLibrary(s.engine).uncovered(source)
