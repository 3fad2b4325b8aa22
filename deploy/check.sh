#!/usr/bin/env bash
# Render every overlay of deploy/k8s with `kubectl kustomize` and validate each object,
# and the examples, with `kubernetes-validate --strict` (an unknown field fails) against
# the two newest Kubernetes versions it knows. `make deploy-check`; CI runs it.
#
# An object whose kind kubernetes-validate has no schema for passes it with a warning
# only; that is accepted for the custom resources listed in CUSTOM_KINDS (their fields
# are checked by tests/unit/test_deploy.py) and fails for anything else, so a misspelt
# apiVersion or kind cannot slip through as "unknown".
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
CUSTOM_KINDS="PodMonitor"

if ! command -v kubectl >/dev/null 2>&1; then
    echo "deploy/check.sh: kubectl not found: it renders the package (kubectl kustomize)." \
        "Install Debian's kubectl package." >&2
    exit 1
fi

rendered=$(mktemp -d)
trap 'rm -rf "$rendered"' EXIT

for overlay in deploy/k8s/overlays/*/; do
    name=$(basename "$overlay")
    if ! kubectl kustomize "$overlay" >"$rendered/overlay-$name.yaml"; then
        echo "deploy/check.sh: kubectl kustomize $overlay failed" \
            "(the package needs kustomize v5: kubectl 1.27 or newer)" >&2
        exit 1
    fi
done
for example in deploy/k8s/examples/*.yaml; do
    cp "$example" "$rendered/example-$(basename "$example")"
done

versions=$("$VENV/bin/python" - <<'EOF'
from kubernetes_validate.utils import all_versions, major_minor
from packaging.version import Version

newest = sorted({major_minor(v) for v in all_versions()}, key=Version)[-2:]
print(" ".join(newest))
EOF
)

status=0
for version in $versions; do
    for file in "$rendered"/*.yaml; do
        label=$(basename "$file" .yaml)
        objects=$(grep -c '^kind:' "$file")
        if ! report=$("$VENV/bin/kubernetes-validate" --strict --quiet -k "$version" "$file" 2>&1); then
            echo "$report" >&2
            echo "FAIL $label: not valid for Kubernetes $version" >&2
            status=1
            continue
        fi
        unknown=$(grep "Couldn't find schema" <<<"$report" \
            | grep -Ev "for kind ($CUSTOM_KINDS) with api version" || true)
        if [[ -n $unknown ]]; then
            echo "$unknown" >&2
            echo "FAIL $label: objects with no schema for Kubernetes $version" >&2
            status=1
            continue
        fi
        echo "ok   $label: $objects objects valid for Kubernetes $version (strict)"
    done
done
exit $status
