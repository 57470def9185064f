"""docker-compose.yml holds together: ``docker compose config`` where the client exists; everywhere, the same
checks on the YAML — every bind-mounted path exists, named volumes are declared, the broker has a listener for the
host, evsched starts with a config it can read and its snapshots on a volume, Kafka keeps its data on a volume."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def _mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    return [(v.split(":")[0], v.split(":")[1]) for v in service.get("volumes", [])]


def _has_compose_client() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=60).returncode == 0


@pytest.mark.skipif(not _has_compose_client(), reason="no `docker compose` client here; the YAML checks below run")
def test_docker_compose_config_accepts_it() -> None:
    proc = subprocess.run(["docker", "compose", "-f", str(COMPOSE), "config", "--quiet"], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def test_every_bind_mount_exists_and_named_volumes_are_declared() -> None:
    compose = _compose()
    declared = set(compose.get("volumes") or {})
    for name, service in compose["services"].items():
        for source, _ in _mounts(service):
            if source.startswith((".", "/")):
                assert (ROOT / source).exists(), f"{name} mounts {source}, which is not in the repository"
            else:
                assert source in declared, f"{name} uses volume {source!r}, not declared under volumes:"


def test_the_broker_is_reachable_from_the_host_and_keeps_its_data() -> None:
    kafka = _compose()["services"]["kafka"]
    env = kafka["environment"]
    listeners = dict(item.split("://") for item in env["KAFKA_ADVERTISED_LISTENERS"].split(","))
    host = [name for name, address in listeners.items() if address.startswith("localhost:")]
    assert host, "no listener advertised to the host (localhost)"
    port = listeners[host[0]].split(":")[1]
    published = [str(p).split(":")[0] for p in kafka["ports"]]
    assert port in published, f"the host listener's port {port} is not published"
    assert f"{host[0]}:" in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"]
    assert any(target == env["KAFKA_LOG_DIRS"] for _, target in _mounts(kafka)), "Kafka's log dirs are not a volume"


def test_evsched_starts_with_a_config_and_snapshots_on_a_volume() -> None:
    service = _compose()["services"]["evsched"]
    command = service["command"]
    config = command[command.index("--config") + 1]
    snapshots = command[command.index("--snapshot-dir") + 1]
    mounts = _mounts(service)
    config_mount = [(src, dst) for src, dst in mounts if config.startswith(dst + "/")]
    assert config_mount, f"--config {config} is not under a mounted directory"
    src, dst = config_mount[0]
    assert (ROOT / src / config[len(dst) + 1:]).is_file()
    assert any(snapshots.startswith(dst) and not src.startswith((".", "/")) for src, dst in mounts), \
        f"--snapshot-dir {snapshots} is not on a named volume"


def test_the_page_and_metrics_are_published_to_the_host_for_every_replica() -> None:
    service = _compose()["services"]["evsched"]
    command = service["command"]
    port = command[command.index("--http") + 1].rsplit(":", 1)[1]
    replicas = service.get("deploy", {}).get("replicas", 1)
    published = [str(p) for p in service.get("ports", [])]
    ranges = [p.rsplit(":", 2) for p in published if p.endswith(f":{port}")]
    assert ranges, f"the container's --http port {port} is not published: {published}"
    host, first_last = ranges[0][0], ranges[0][1]
    assert host == "127.0.0.1", "the page has no authentication: published on the host's loopback only"
    low, _, high = first_last.partition("-")
    assert int(high or low) - int(low) + 1 >= replicas, f"{replicas} replicas need as many host ports: {first_last}"


def test_the_image_compiles_the_core_in_a_build_stage_and_ignores_local_builds() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    stages = [line.split() for line in dockerfile.splitlines() if line.startswith("FROM ")]
    assert len(stages) == 2 and stages[0][-2:] == ["AS", "build"], stages
    build, final = dockerfile.split("\nFROM ", 2)[1:]
    assert "gcc" in build and "pip wheel" in build and "events/native.json" in build  # it checks the build compiled
    assert "gcc" not in final and "--from=build" in final and "core: compiled" in final
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", "**/*.so", "events/native.json", ".git"} <= set(ignored)
    copied = {line.split()[1] for line in dockerfile.splitlines() if line.startswith("COPY ") and "--from" not in line}
    assert not copied & set(ignored), "the Dockerfile copies what .dockerignore leaves out"
