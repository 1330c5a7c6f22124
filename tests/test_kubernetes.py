"""The Kubernetes manifests in deploy/kubernetes/ (docs/fleet.md, "Deploy on Kubernetes"): every one valid for the
Kubernetes version it states, by ``kubernetes-validate --strict`` (the API server's own OpenAPI schemas; one
call for them all, with a broken copy beside them that must be refused with the tool's message), and what no
schema checks: the ConfigMap's proxy.toml is a config file ``kip714 proxy`` accepts (with the pod's
environment), the Service and the PodDisruptionBudget select the pods, the Service's ports are the container's,
the probes and the preStop pause fit the drain into the grace period, and the pod's security settings match
the image's user (deploy/image/Containerfile)."""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from kip714.cli import build_parser
from kip714.cli._settings import resolve

ROOT = pathlib.Path(__file__).resolve().parents[1]
MANIFESTS = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
VERSION_LINE = re.compile(r"^# kubernetes-version: (\d+\.\d+)\b", re.M)


def _version() -> str:
    """The Kubernetes version the manifests state (each one's first line; all the same)."""
    versions = {m.name: VERSION_LINE.search(m.read_text()) for m in MANIFESTS}
    missing = [name for name, found in versions.items() if found is None]
    assert not missing, f"no '# kubernetes-version: X.Y' line in {missing}"
    stated = {found.group(1) for found in versions.values() if found is not None}
    assert len(stated) == 1, f"the manifests state several Kubernetes versions: {sorted(stated)}"
    return stated.pop()


def _objects() -> dict[str, dict]:
    """The manifests' objects by kind."""
    objects = [doc for m in MANIFESTS for doc in yaml.safe_load_all(m.read_text()) if doc]
    return {doc["kind"]: doc for doc in objects}


def test_the_manifests_validate_against_the_kubernetes_version_they_state(tmp_path):
    assert {m.name for m in MANIFESTS} >= {
        "configmap.yaml",
        "deployment.yaml",
        "poddisruptionbudget.yaml",
        "secret.yaml",
        "service.yaml",
    }
    version = _version()
    # a manifest Kubernetes refuses: a misspelt field (kubectl apply --validate=strict refuses it too)
    broken = tmp_path / "broken-deployment.yaml"
    broken.write_text(
        (ROOT / "deploy/kubernetes/deployment.yaml").read_text().replace("periodSeconds: 2", "periodSecond: 2")
    )
    tool = shutil.which("kubernetes-validate", path=str(pathlib.Path(sys.executable).parent))
    cmd = [tool] if tool else [sys.executable, "-m", "kubernetes_validate"]
    done = subprocess.run(
        [*cmd, "--strict", "--kubernetes-version", f"{version}.0", *map(str, MANIFESTS), str(broken)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    said = done.stdout + done.stderr
    for m in MANIFESTS:
        assert f"{m} passed" in said, f"kubernetes-validate (Kubernetes {version}, strict):\n{said}"
    assert done.returncode == 1, said
    assert (
        f"{broken} did not validate for resource deployment/kip714-proxy against version {version}: "
        "spec.template.spec.containers.0.readinessProbe: Additional properties are not allowed "
        "('periodSecond' was unexpected)"
    ) in said, said


@pytest.mark.unit
def test_the_configmap_is_a_config_file_the_proxy_accepts_with_the_pods_environment(tmp_path):
    objects = _objects()
    deployment, configmap, secret = objects["Deployment"], objects["ConfigMap"], objects["Secret"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    # the file the container's arguments name, where the ConfigMap's volume puts it
    args = container["args"]
    assert args[:2] == ["proxy", "--config-file"]
    path = pathlib.PurePosixPath(args[2])
    (mount,) = [v for v in container["volumeMounts"] if path.parent == pathlib.PurePosixPath(v["mountPath"])]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    config = tmp_path / path.name
    config.write_text(configmap["data"][path.name])

    # the pod's environment: the downward API's pod name, the Secret's keys
    environ = {}
    for var in container["env"]:
        source = var["valueFrom"]
        if "fieldRef" in source:
            assert source["fieldRef"]["fieldPath"] == "metadata.name"
            environ[var["name"]] = "kip714-proxy-7d9f8c6b5-x2x4q"
        else:
            ref = source["secretKeyRef"]
            assert ref["name"] == secret["metadata"]["name"]
            environ[var["name"]] = secret["stringData"][ref["key"]]
    assert set(environ) == {"KIP714_REPLICA_ID", "KIP714_UPSTREAM_SASL_USERNAME", "KIP714_UPSTREAM_SASL_PASSWORD"}

    words = ["proxy", "--config-file", str(config)]
    parsed = build_parser(["proxy"]).parse_args(words)
    parsed._argv = words
    settings = resolve(parsed, environ=environ)
    assert parsed.replica_id == "kip714-proxy-7d9f8c6b5-x2x4q"
    assert parsed.state_topic == "kip714-subscriptions"
    assert (parsed.upstream_sasl_username, parsed.upstream_sasl_password) == ("kip714-proxy", "change-me")
    assert settings.origins["upstream_sasl_password"].startswith("env ")

    # the listeners the config opens are the container's ports, and the Service's
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["bootstrap"] == parsed.port
    brokers = {int(n.split("-")[1]): port for n, port in ports.items() if n.startswith("broker-")}
    assert brokers == {i: parsed.broker_port_base + i for i in brokers} and brokers
    assert ports["metrics"] == parsed.prometheus[1]
    assert parsed.host == "0.0.0.0"  # the pod's address, where the Service and the kubelet connect
    service_ports = {p["name"]: (p["port"], p["targetPort"]) for p in objects["Service"]["spec"]["ports"]}
    assert service_ports == {n: (ports[n], n) for n in ports if n != "metrics"}

    # the drain fits the grace period: the preStop pause, then SIGTERM and at most drain-timeout
    grace = pod["terminationGracePeriodSeconds"]
    pause = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert pause + parsed.drain_timeout < grace
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}

    # the state folder is on a writable volume: the root filesystem is read-only
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    writable = [v["mountPath"] for v in container["volumeMounts"] if not v.get("readOnly")]
    assert any(parsed.state_dir.startswith(w + "/") for w in writable), (parsed.state_dir, writable)


@pytest.mark.unit
def test_the_service_and_the_budget_select_the_pods_which_run_as_the_images_user():
    objects = _objects()
    deployment = objects["Deployment"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert objects["Service"]["spec"]["selector"].items() <= labels.items()
    assert objects["PodDisruptionBudget"]["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert deployment["spec"]["replicas"] == 3
    assert objects["PodDisruptionBudget"]["spec"]["maxUnavailable"] == 1

    pod = deployment["spec"]["template"]["spec"]
    (user,) = re.findall(r"^USER (\d+):(\d+)$", (ROOT / "deploy/image/Containerfile").read_text(), re.M)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == tuple(map(int, user))
    assert pod["containers"][0]["securityContext"]["capabilities"]["drop"] == ["ALL"]
