"""Whether runs are traced, and where to: read from the environment without importing the
OpenTelemetry SDK, which is loaded only when an endpoint is set."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dagwright.telemetry.tracing import RunTracing


def otlp_endpoint(env: Mapping[str, str] = os.environ) -> str | None:
    """The OTLP/HTTP URL that traces are posted to: DAGWRIGHT_OTLP_ENDPOINT or
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as they are, else OTEL_EXPORTER_OTLP_ENDPOINT plus
    `/v1/traces` (the OpenTelemetry convention); None when none is set."""
    full = env.get("DAGWRIGHT_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    if full:
        return full
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return f"{base.rstrip('/')}/v1/traces" if base else None


def tracing_from_env(env: Mapping[str, str] = os.environ) -> RunTracing | None:
    """Run tracing to the configured collector, or None (and no SDK import) when none is."""
    endpoint = otlp_endpoint(env)
    if endpoint is None:
        return None
    from dagwright.telemetry.tracing import RunTracing

    return RunTracing.to_otlp(endpoint)
