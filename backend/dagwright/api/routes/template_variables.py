"""The variables a Jinja2 template reads, by the server's own parser: the editor shows them
under a template field (each becomes an input port) instead of parsing templates itself, so
the editor and the validator cannot disagree."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from dagwright.api.routes.access import Admin
from dagwright.errors import BlockConfigError
from dagwright.templating import template_variables

router = APIRouter(prefix="/api/v1", tags=["editor"], dependencies=[Admin])


class TemplateIn(BaseModel):
    template: str = Field(description="the Jinja2 template's text")


class TemplateVariablesOut(BaseModel):
    variables: list[str] = Field(description="the undeclared variables it reads, sorted")


@router.post("/template-variables")
def variables(body: TemplateIn) -> TemplateVariablesOut:
    """The variables a template reads; a template that does not parse is refused with the
    parser's message (`invalid_config`)."""
    try:
        names = template_variables(body.template)
    except ValueError as error:
        raise BlockConfigError(str(error)) from error
    return TemplateVariablesOut(variables=list(names))
