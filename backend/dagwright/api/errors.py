"""Every error leaves the API in one shape, {"error": {"code", "message", ...}}, with its
HTTP status decided here, once."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from dagwright.api.jsontext import SafeJSONResponse
from dagwright.errors import (
    AuthError,
    BlockConfigError,
    ConflictError,
    DagwrightError,
    DataSourceError,
    FlowFormatError,
    ForbiddenError,
    InputError,
    NotFoundError,
    QueryError,
    RetryLaterError,
    UnknownBlockError,
    describe_validation_error,
)
from dagwright.runtime import FlowInvalidError
from dagwright.secrets import SecretNotFoundError


class RateLimitedError(RetryLaterError):
    code = "rate_limited"


# The first kind an error is an instance of decides: subclasses before their bases.
_STATUS: list[tuple[type[DagwrightError], int]] = [
    (ForbiddenError, 403),
    (AuthError, 401),
    (FlowInvalidError, 422),
    (FlowFormatError, 422),
    (InputError, 422),
    (BlockConfigError, 422),
    (UnknownBlockError, 404),
    (NotFoundError, 404),
    (SecretNotFoundError, 404),  # deleting a secret that is not set
    (ConflictError, 409),
    (RetryLaterError, 429),
    (DataSourceError, 502),
]


def status_of(exc: DagwrightError) -> int:
    if isinstance(exc, QueryError) and exc.code == "query_timeout":
        return 408
    if isinstance(exc, QueryError) and exc.code == "query_busy":
        return 503  # queries past their time limit are still finishing: try again later
    if isinstance(exc, DataSourceError) and exc.code == "table_not_found":
        return 404
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status
    return 400


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None, **extra: Any
) -> JSONResponse:
    body = {"error": {"code": code, "message": message, **extra}}
    return SafeJSONResponse(body, status_code=status, headers=headers)


def dagwright_error_response(exc: DagwrightError) -> JSONResponse:
    extra = exc.to_dict()
    extra.pop("code", None)
    extra.pop("message", None)
    status = status_of(exc)
    headers = None
    if isinstance(exc, RetryLaterError):
        headers = {"Retry-After": str(max(1, round(exc.retry_after + 0.5)))}
    if status == 401:
        headers = {"WWW-Authenticate": "Bearer"}
    return error_response(status, exc.code, exc.message, headers, **extra)


def invalid_value_response(exc: ValidationError) -> JSONResponse:
    # A body the route parses itself (a block's config, say) that does not fit its model.
    return error_response(422, "invalid_config", describe_validation_error(exc))


def install(app: FastAPI) -> None:
    @app.exception_handler(DagwrightError)
    async def dagwright_error(request: Request, exc: DagwrightError) -> JSONResponse:
        return dagwright_error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            {"field": ".".join(str(p) for p in e["loc"] if p != "body"), "message": e["msg"]}
            for e in exc.errors()
        ]
        summary = "; ".join(f"{p['field'] or '(body)'}: {p['message']}" for p in problems)
        return error_response(422, "invalid_request", summary, problems=problems)

    @app.exception_handler(ValidationError)
    async def invalid_value(request: Request, exc: ValidationError) -> JSONResponse:
        return invalid_value_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}
        code = codes.get(exc.status_code, "http_error")
        message = str(exc.detail)
        if exc.status_code == 413:
            message = "the request body is larger than the server accepts"
        elif exc.status_code == 404:
            message = f"no route {request.method} {request.url.path}"
        return error_response(exc.status_code, code, message)
