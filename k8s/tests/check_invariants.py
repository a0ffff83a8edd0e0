"""Project-specific invariants of the rendered manifests (what schema validation and checkov do not
know about this system). Run by scripts/check-k8s.sh on each `kubectl kustomize` output:

    python k8s/tests/check_invariants.py --overlay production rendered.yaml

Needs PyYAML (present in the validation tools venv). Exit status 1 on any violation.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

GRPC_SERVICES = {
    "capture": "contextengine.v1.CaptureService",
    "assembly": "contextengine.v1.AssemblyService",
    "compaction": "contextengine.v1.CompactionService",
}
GRPC_PORT = 50051
# Capture flushes pending sessions after draining; budget for it on top of the drain grace.
FLUSH_BUDGET_SECONDS = 20
HPA_WORKLOADS = ("capture", "assembly", "compaction", "embeddings")
SHARDS_CONFIG_MAP = "openviking-shards"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
GENERATED_SHARDS = re.compile(SHARDS_CONFIG_MAP + r"(-[a-z0-9]+)?")
WORKLOAD_KINDS = {"Deployment", "StatefulSet", "DaemonSet", "Job", "CronJob"}

Manifest = dict[str, Any]


def env_map(container: Manifest) -> dict[str, Any]:
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container.get("env", [])}


def containers(pod_spec: Manifest) -> Iterator[Manifest]:
    yield from pod_spec.get("initContainers", [])
    yield from pod_spec.get("containers", [])


class Checker:
    def __init__(self, docs: list[Manifest], overlay: str) -> None:
        self.docs = docs
        self.overlay = overlay
        self.errors: list[str] = []
        self.checked: list[str] = []

    def find(self, kind: str, name: str) -> Manifest | None:
        return next((d for d in self.docs if d["kind"] == kind and d["metadata"]["name"] == name), None)

    def fail(self, message: str) -> None:
        self.errors.append(message)

    def check_pod_hardening(self) -> None:
        for doc in self.docs:
            if doc["kind"] not in WORKLOAD_KINDS:
                continue
            where = f"{doc['kind']}/{doc['metadata']['name']}"
            spec = doc["spec"]["template"]["spec"]
            pod_sc = spec.get("securityContext", {})
            if spec.get("automountServiceAccountToken") is not False:
                self.fail(f"{where}: automountServiceAccountToken must be false")
            if pod_sc.get("runAsNonRoot") is not True:
                self.fail(f"{where}: pod runAsNonRoot must be true")
            if pod_sc.get("seccompProfile", {}).get("type") != "RuntimeDefault":
                self.fail(f"{where}: seccompProfile must be RuntimeDefault")
            for container in containers(spec):
                cwhere = f"{where} container {container['name']}"
                sc = container.get("securityContext", {})
                if sc.get("readOnlyRootFilesystem") is not True:
                    self.fail(f"{cwhere}: readOnlyRootFilesystem must be true")
                if sc.get("allowPrivilegeEscalation") is not False:
                    self.fail(f"{cwhere}: allowPrivilegeEscalation must be false")
                if sc.get("capabilities", {}).get("drop") != ["ALL"]:
                    self.fail(f"{cwhere}: capabilities.drop must be [ALL]")
                resources = container.get("resources", {})
                for section in ("requests", "limits"):
                    for resource in ("cpu", "memory"):
                        if resource not in resources.get(section, {}):
                            self.fail(f"{cwhere}: missing resources.{section}.{resource}")
            self.checked.append(f"hardening {where}")

    def check_grpc_services(self) -> None:
        for name, health_name in GRPC_SERVICES.items():
            deployment = self.find("Deployment", name)
            service = self.find("Service", name)
            if deployment is None or service is None:
                self.fail(f"{name}: Deployment and Service are both required")
                continue
            if service["spec"].get("clusterIP") != "None":
                self.fail(f"Service/{name}: must be headless (clusterIP: None) for client-side round_robin")
            spec = deployment["spec"]["template"]["spec"]
            container = spec["containers"][0]
            env = env_map(container)
            for probe_name in ("readinessProbe", "livenessProbe", "startupProbe"):
                grpc = container.get(probe_name, {}).get("grpc")
                if grpc is None or grpc.get("port") != GRPC_PORT:
                    self.fail(f"{name}: {probe_name} must be a native grpc probe on {GRPC_PORT}")
                elif probe_name != "livenessProbe" and grpc.get("service") != health_name:
                    self.fail(f"{name}: {probe_name} must check health service {health_name}")
            grace = int(env.get("CONTEXT_ENGINE_SHUTDOWN_GRACE_SECONDS", "20"))
            pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
            needed = pre_stop + grace + FLUSH_BUDGET_SECONDS
            if spec.get("terminationGracePeriodSeconds", 30) <= needed:
                self.fail(
                    f"{name}: terminationGracePeriodSeconds must exceed {needed} s (preStop+drain+flush)"
                )
            if env.get("OTEL_SERVICE_NAME") != name:
                self.fail(f"{name}: OTEL_SERVICE_NAME must be {name!r}")
            if "CONTEXT_ENGINE_MAX_CONNECTION_AGE_SECONDS" not in env:
                self.fail(f"{name}: CONTEXT_ENGINE_MAX_CONNECTION_AGE_SECONDS must be set")
            if "CONTEXT_ENGINE_API_KEY" in env and not isinstance(env["CONTEXT_ENGINE_API_KEY"], dict):
                self.fail(f"{name}: CONTEXT_ENGINE_API_KEY must come from a Secret, not a literal")
            self.checked.append(f"grpc service {name}")
        capture = self.find("Deployment", "capture")
        if capture is not None:
            target = env_map(capture["spec"]["template"]["spec"]["containers"][0]).get(
                "CONTEXT_ENGINE_COMPACTION_TARGET", ""
            )
            namespace = capture["metadata"].get("namespace", "default")
            expected = f"dns:///compaction.{namespace}.svc.cluster.local:{GRPC_PORT}"
            if target != expected:
                self.fail(f"capture: CONTEXT_ENGINE_COMPACTION_TARGET is {target!r}, expected {expected!r}")

    def check_openviking(self) -> None:
        sts = self.find("StatefulSet", "openviking")
        if sts is None:
            self.fail("StatefulSet/openviking is missing")
            return
        self.check_shards(sts["spec"].get("replicas"))
        if not sts["spec"].get("volumeClaimTemplates"):
            self.fail("StatefulSet/openviking: needs a PVC for its workspace")
        config_name = next(
            v["configMap"]["name"] for v in sts["spec"]["template"]["spec"]["volumes"] if "configMap" in v
        )
        config_map = self.find("ConfigMap", config_name)
        if config_map is None:
            self.fail(f"ConfigMap/{config_name} (ov.conf fragments) is missing")
            return
        conf: Manifest = {}
        for key in sorted(k for k in config_map["data"] if k.endswith(".json")):
            for section, value in json.loads(config_map["data"][key]).items():
                if isinstance(value, dict):
                    conf[section] = {**conf.get(section, {}), **value}
                else:
                    conf[section] = value
        server = conf.get("server", {})
        if server.get("host") != "0.0.0.0" or server.get("auth_mode") not in {"trusted", "api_key"}:
            self.fail(
                "ov.conf: server must listen on 0.0.0.0 with auth_mode trusted or api_key (dev refuses it)"
            )
        extraction = conf.get("memory", {}).get("extraction_enabled", True)
        if extraction and "vlm" not in conf:
            self.fail("ov.conf: memory.extraction_enabled without an LLM (vlm) fails every commit")
        if conf.get("embedding", {}).get("dense", {}).get("dimension") != 384:
            self.fail("ov.conf: embedding dimension must be 384 (all-MiniLM-L6-v2)")
        self.checked.append(f"openviking (auth_mode={server.get('auth_mode')}, extraction={extraction})")

    def check_shards(self, replicas: int | None) -> None:
        """One shard per StatefulSet ordinal, each through its own Service; the services route by
        the openviking-shards ConfigMap; no Service balances over several shards."""
        config_maps = [d for d in self.docs if d["kind"] == "ConfigMap"]
        shards_map = next((d for d in config_maps if GENERATED_SHARDS.fullmatch(d["metadata"]["name"])), None)
        if shards_map is None:
            self.fail(f"ConfigMap/{SHARDS_CONFIG_MAP} is missing")
            return
        entries = shards_map["data"].get("shards", "").split(",")
        shards = [entry.split("=", 1) for entry in entries if entry]
        if replicas != len(shards):
            self.fail(f"StatefulSet/openviking: replicas {replicas} != {len(shards)} shards (one each)")
        for ordinal, (name, url) in enumerate(shards):
            pod = f"openviking-{ordinal}"
            if (name, url) != (f"ov-{ordinal}", f"http://{pod}:1933"):
                self.fail(f"shard {ordinal}: expected ov-{ordinal}=http://{pod}:1933")
            service = self.find("Service", pod) or {}
            if service.get("spec", {}).get("selector", {}).get(POD_NAME_LABEL) != pod:
                self.fail(f"Service/{pod} must select pod {pod}")
        for doc in self.docs:
            spec = doc.get("spec", {})
            selector = spec.get("selector", {}) if doc["kind"] == "Service" else {}
            balances = spec.get("clusterIP") != "None" and POD_NAME_LABEL not in selector
            if selector.get("app.kubernetes.io/name") == "openviking" and balances:
                self.fail(f"Service/{doc['metadata']['name']} balances over every shard")
        for name in GRPC_SERVICES:
            deployment = self.find("Deployment", name)
            env = env_map(deployment["spec"]["template"]["spec"]["containers"][0]) if deployment else {}
            source = env.get("CONTEXT_ENGINE_OPENVIKING_SHARDS")
            ref = source.get("configMapKeyRef", {}) if isinstance(source, dict) else {}
            if ref.get("name") != shards_map["metadata"]["name"]:
                self.fail(f"{name}: CONTEXT_ENGINE_OPENVIKING_SHARDS must come from {SHARDS_CONFIG_MAP}")
        if self.overlay.startswith("production") and len(shards) < 2:
            self.fail("production runs at least 2 OpenViking shards")
        self.checked.append(f"openviking shards {[name for name, _ in shards]}")

    def check_network_policies(self) -> None:
        deny = self.find("NetworkPolicy", "default-deny-all")
        if (
            deny is None
            or deny["spec"].get("podSelector") != {}
            or set(deny["spec"]["policyTypes"])
            != {
                "Ingress",
                "Egress",
            }
        ):
            self.fail("NetworkPolicy/default-deny-all must select every pod for Ingress and Egress")
        policies = [d for d in self.docs if d["kind"] == "NetworkPolicy"]
        self.checked.append(f"{len(policies)} network policies incl. default deny")

    def check_production(self) -> None:
        if self.overlay not in {"production", "production-llm"}:
            return
        for name in HPA_WORKLOADS:
            hpa = self.find("HorizontalPodAutoscaler", name)
            pdb = self.find("PodDisruptionBudget", name)
            deployment = self.find("Deployment", name)
            if hpa is None or pdb is None:
                self.fail(f"{name}: production needs an HPA and a PodDisruptionBudget")
                continue
            if not 1 < hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]:
                self.fail(f"HPA/{name}: needs minReplicas >= 2 and maxReplicas > minReplicas")
            if deployment is not None:
                if "replicas" in deployment["spec"]:
                    self.fail(f"Deployment/{name}: leave spec.replicas to the HPA")
                if not deployment["spec"]["template"]["spec"].get("topologySpreadConstraints"):
                    self.fail(f"Deployment/{name}: needs topologySpreadConstraints")
            self.checked.append(f"hpa+pdb+spread {name}")

    def run(self) -> list[str]:
        self.check_pod_hardening()
        self.check_grpc_services()
        self.check_openviking()
        self.check_network_policies()
        self.check_production()
        return self.errors


def resolved(docs: list[Manifest], value: Any) -> str:
    """An env value as the pod sees it: literal, a ConfigMap key, or a stand-in for a Secret."""
    if isinstance(value, str):
        return value
    ref = value.get("configMapKeyRef")
    if ref is None:
        return "secret-from-kubernetes"
    config_map = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == ref["name"])
    return str(config_map["data"][ref["key"]])


def export_settings(docs: list[Manifest], directory: Path) -> None:
    """Write, per gRPC service, the engine config file and the literal CONTEXT_ENGINE_* env values
    the pod would see, so the project's own settings loader can validate them (check-k8s.sh)."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in GRPC_SERVICES:
        deployment = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == name)
        spec = deployment["spec"]["template"]["spec"]
        config_map_name = next(v["configMap"]["name"] for v in spec["volumes"] if "configMap" in v)
        config_map = next(
            d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == config_map_name
        )
        env = {
            key: resolved(docs, value)
            for key, value in env_map(spec["containers"][0]).items()
            if key.startswith("CONTEXT_ENGINE_") and key != "CONTEXT_ENGINE_CONFIG"
        }
        (directory / f"{name}.config.json").write_text(config_map["data"]["config.json"], encoding="utf-8")
        (directory / f"{name}.env.json").write_text(json.dumps(env, indent=2), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--overlay", required=True)
    parser.add_argument("--export-settings", type=Path, help="directory for per-service settings inputs")
    parser.add_argument("rendered", type=Path)
    args = parser.parse_args(argv)
    docs = [d for d in yaml.safe_load_all(args.rendered.read_text(encoding="utf-8")) if d]
    if args.export_settings is not None:
        export_settings(docs, args.export_settings)
    checker = Checker(docs, args.overlay)
    errors = checker.run()
    for error in errors:
        print(f"  INVARIANT FAILED [{args.overlay}]: {error}")
    print(f"  invariants [{args.overlay}]: {len(checker.checked)} groups checked, {len(errors)} violations")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
