"""OpenTelemetry traces of runs, exported over OTLP when a collector is configured.

`context` (W3C trace context, span ids, the links between runs) and `config` are plain Python
and cheap to import; `spans` and `tracing` import the OpenTelemetry SDK and are loaded only
when an endpoint is configured (see docs/integrations.md).
"""
