"""recipes/deploy as files: the Kubernetes manifest and the compose file parse, name the probes and options that
mtkit serve has, and nginx accepts both nginx configurations (`nginx -t`, where nginx is installed). What they do
when run is shown by tests/serve/test_replicas.py for nginx.conf; compose and Kubernetes are not run here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from mtkit.serve.config import ServeConfig
from tests.serve.outside_services import INSTALL, NGINX, free_port, nginx_conf

yaml = pytest.importorskip("yaml", reason="PyYAML is not installed")
DEPLOY = Path(__file__).resolve().parents[2] / "recipes" / "deploy"
OPTIONS = {"--" + name.replace("_", "-") for name in ServeConfig.__dataclass_fields__} | {"--engine", "--threads"}


def test_the_kubernetes_probes_and_options() -> None:
    documents = list(yaml.safe_load_all((DEPLOY / "kubernetes.yaml").read_text(encoding="utf-8")))
    mtkit = next(d for d in documents if d["kind"] == "Deployment" and d["metadata"]["name"] == "mtkit")
    container = mtkit["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert container["readinessProbe"]["httpGet"]["path"] == "/ready"
    assert container["resources"]["limits"]["cpu"] and container["resources"]["requests"]["memory"]
    assert "--state=redis://mtkit-redis:6379/0" in container["args"]
    assert {arg.split("=")[0] for arg in container["args"] if arg.startswith("--")} <= OPTIONS
    assert any(d["kind"] == "Service" and d["metadata"]["name"] == "mtkit-redis" for d in documents)


def test_the_compose_file() -> None:
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text(encoding="utf-8"))
    assert {"redis", "replica-1", "replica-2", "nginx"} <= set(compose["services"])
    command = compose["services"]["replica-1"]["command"].split()
    assert "redis://redis:6379/0" in command and {word for word in command if word.startswith("--")} <= OPTIONS


@pytest.mark.skipif(NGINX is None, reason=f"nginx is not installed: {INSTALL}")
@pytest.mark.parametrize("name", ["nginx.conf", "nginx-compose.conf"])
def test_nginx_takes_the_configurations(name: str, tmp_path: Path) -> None:
    text = (DEPLOY / name).read_text(encoding="utf-8")
    # compose's upstreams are its services' names: 127.0.0.1 stands in for them
    text = text.replace("replica-1:8080", "127.0.0.1:8081").replace("replica-2:8080", "127.0.0.1:8082")
    (tmp_path / "nginx.conf").write_text(nginx_conf([8081, 8082], free_port(), tmp_path, text), encoding="utf-8")
    settings = f"pid {tmp_path / 'nginx.pid'}; error_log {tmp_path / 'error.log'};"
    done = subprocess.run(
        [str(NGINX), "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-g", settings],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
