"""The production shape, checked without a container engine: the compose file's services,
images, environment, ports, health checks and volumes, and the Dockerfile's stages."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def test_services_and_images() -> None:
    services = compose()["services"]
    assert set(services) == {"api", "worker", "proxy", "postgres", "qdrant"}
    assert services["api"]["build"] == "."
    assert services["api"]["deploy"]["replicas"] == 2
    assert services["postgres"]["image"].startswith("postgres:")
    assert services["qdrant"]["image"].startswith("qdrant/qdrant:")
    for name, service in services.items():
        assert "healthcheck" in service, f"{name} has no health check"


def test_api_environment_points_at_the_other_services() -> None:
    services = compose()["services"]
    env = services["api"]["environment"]
    database = env["DAGWRIGHT_DATABASE_URL"]
    pg = services["postgres"]["environment"]
    assert database.startswith("postgresql+psycopg://")
    assert f"{pg['POSTGRES_USER']}:" in database
    assert database.endswith(f"@postgres:5432/{pg['POSTGRES_DB']}")
    assert env["DAGWRIGHT_QDRANT_URL"] == "http://qdrant:6333"
    assert env["DAGWRIGHT_HOST"] == "0.0.0.0"
    # Beyond loopback the server refuses to start without an admin token; replicas share
    # the secret master key.
    assert "DAGWRIGHT_ADMIN_TOKEN" in env
    assert "DAGWRIGHT_SECRET_KEY" in env
    assert services["api"]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_workers_execute_the_queue_of_the_api_replicas() -> None:
    services = compose()["services"]
    api, worker = services["api"], services["worker"]
    assert worker["image"] == api["image"]
    assert worker["command"] == ["dagwright", "worker"]
    assert worker["deploy"]["replicas"] == 2
    assert "ports" not in worker
    # The same database (where the jobs are), queue mode, secrets and example store.
    shared = ("DAGWRIGHT_DATABASE_URL", "DAGWRIGHT_QUEUE", "DAGWRIGHT_SECRET_KEY")
    for name in (*shared, "DAGWRIGHT_QDRANT_URL"):
        assert worker["environment"][name] == api["environment"][name], name
    assert api["environment"]["DAGWRIGHT_QUEUE"] == "procrastinate"
    # Healthy only while its loop runs: the file it touches every heartbeat is fresh.
    alive = worker["environment"]["DAGWRIGHT_WORKER_ALIVE_FILE"]
    assert alive in " ".join(worker["healthcheck"]["test"])
    assert worker["depends_on"]["api"]["condition"] == "service_healthy"
    # SIGTERM hands unfinished runs over after the grace period, before the platform's kill.
    grace = float(worker["environment"]["DAGWRIGHT_WORKER_SHUTDOWN_GRACE"])
    kill_after = worker["stop_grace_period"]
    assert kill_after.endswith("m")
    assert grace + 10 <= float(kill_after[:-1]) * 60


def test_ports_and_volumes() -> None:
    data = compose()
    services = data["services"]
    assert services["proxy"]["ports"] == ["127.0.0.1:8080:8080"]
    assert "ports" not in services["api"]  # replicas are reached through the proxy only
    mounted = {v.split(":")[0] for s in services.values() for v in s.get("volumes", [])}
    assert {"api-data", "worker-data", "postgres-data", "qdrant-data"} <= mounted
    assert set(data["volumes"]) == {"api-data", "worker-data", "postgres-data", "qdrant-data"}
    nginx = (ROOT / "deploy" / "nginx.conf").read_text()
    assert "server api:8000;" in nginx
    assert "proxy_buffering off;" in nginx  # server-sent events must not be buffered


def test_dockerfile_builds_the_editor_in_its_own_stage() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+) AS (\w+)", dockerfile, flags=re.MULTILINE)
    assert [name for _, name in stages] == ["editor", "server"]
    assert "COPY --from=editor /src/frontend/dist frontend/dist" in dockerfile
    assert "-c requirements.lock" in dockerfile
    assert 'CMD ["dagwright", "serve"]' in dockerfile
