"""Typed errors. Every error carries a stable code; the API maps codes to HTTP once."""

from __future__ import annotations

from pydantic import ValidationError


class DagwrightError(Exception):
    """Base of every error dagwright raises on purpose."""

    code: str = "error"  # subclasses set theirs; some take a more specific one per instance

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def to_dict(self) -> dict[str, object]:
        return {"code": self.code, "message": self.message}


class RetryLaterError(DagwrightError):
    """More work than the service takes now; the same request may succeed `retry_after`
    seconds later (HTTP 429 with Retry-After)."""

    code = "retry_later"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class BlockDefinitionError(DagwrightError):
    """A block is declared wrongly (bad annotation, missing docstring...)."""

    code = "block_definition"


class RegistryError(DagwrightError):
    """The block registry could not be built (duplicate names, a module that fails)."""

    code = "registry"


class BlockConfigError(DagwrightError):
    """A block's configuration is valid alone but gives the block unusable ports."""

    code = "invalid_config"


class UnknownBlockError(DagwrightError):
    code = "unknown_block"


class FlowFormatError(DagwrightError):
    """A flow file is not valid JSON or not a flow of a version this dagwright reads."""

    code = "flow_format"


class InputError(DagwrightError):
    """The inputs given to a run do not fit the flow's inputs."""

    code = "invalid_input"


class NotFoundError(DagwrightError):
    """An app, version, run, key or secret that does not exist (HTTP 404)."""

    code = "not_found"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code  # e.g. app_not_found, version_not_found


class ConflictError(DagwrightError):
    """The request contradicts what is stored: a taken slug, another app's version (409)."""

    code = "conflict"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class AuthError(DagwrightError):
    """No credentials, or credentials that are not valid (unknown, revoked, a bad signature)."""

    code = "unauthorized"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code


class ForbiddenError(AuthError):
    """Valid credentials for something else (another app's key, a wrong admin token), or an
    action this server does not allow anyone."""

    code = "forbidden"


class DataError(DagwrightError):
    """Base of the data layer's errors (connectors, the query engine, table tools).

    Each instance may take a more specific code; ``source`` names the data source involved.
    """

    code = "data_error"

    def __init__(self, message: str, code: str | None = None, source: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        self.source = source

    def to_dict(self) -> dict[str, object]:
        result = super().to_dict()
        if self.source is not None:
            result["source"] = self.source
        return result


class DataSourceError(DataError):
    """A source cannot answer: unreachable (``source_unreachable``), refused credentials
    (``source_auth``), a table that vanished (``table_not_found``), a column type the engine
    cannot map (``type_unmapped``). The HTTP status is 502: the fault is not the caller's."""

    code = "source_error"


class SqlRefusedError(DataError):
    """SQL that is not a single read-only query, or that reaches outside the catalog (400)."""

    code = "sql_refused"


class QueryError(DataError):
    """A query that fails in the engine (``query_failed``, 400), runs past its time
    (``query_timeout``, 408) or past the memory limit (``query_memory``)."""

    code = "query_failed"


class SandboxError(DataError):
    """Python on tables that fails (``python_failed``, with the traceback), runs past its CPU or
    wall time (``python_timeout``) or its memory (``python_memory``)."""

    code = "python_failed"

    def __init__(
        self, message: str, code: str | None = None, traceback: str | None = None, stdout: str = ""
    ) -> None:
        super().__init__(message, code)
        self.traceback = traceback
        self.stdout = stdout

    def to_dict(self) -> dict[str, object]:
        result = super().to_dict()
        if self.traceback:
            result["traceback"] = self.traceback
        if self.stdout:
            result["stdout"] = self.stdout
        return result


class SandboxBusyError(SandboxError, RetryLaterError):
    """The host's sandbox budget (calls at once, memory) stayed full for the time a call may
    wait (``sandbox_busy``): a SandboxError to the flow, HTTP 429 with Retry-After to an API
    caller."""

    code = "sandbox_busy"

    def __init__(self, message: str, retry_after: float) -> None:
        # Not through super(): the two bases take different arguments; set what each keeps.
        DagwrightError.__init__(self, message)
        self.code = "sandbox_busy"
        self.source = None
        self.traceback = None
        self.stdout = ""
        self.retry_after = retry_after


def format_location(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as a path: ``("rules", 2, "fault")`` -> ``rules[2].fault``."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path


def describe_validation_error(error: ValidationError) -> str:
    """Every problem of a validation error as ``path: message``, separated by ``; ``."""
    problems = []
    for item in error.errors():
        message = item["msg"].removeprefix("Value error, ")
        where = format_location(tuple(item["loc"]))
        problems.append(f"{where}: {message}" if where else message)
    return "; ".join(problems)
