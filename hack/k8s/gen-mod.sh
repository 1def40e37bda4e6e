#!/usr/bin/env bash
# Regenerates the go.mod/go.sum of the wrapper modules from the pinned versions.
# kube: k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with
# ./staging/...; a consumer must replace each with its published v0.X.Y. The list is read from that
# release's own go.mod (never hand-copied), so bumping KUBE_VERSION is a one-line change.
# build.sh checks that these go.mod files still match versions.env before it builds anything.
# Each Kubernetes release has its own wrapper module, kube/<version>/ (SHOAL_KUBE_VERSION picks one
# other than versions.env's); its go directive is the release's own, and a release needing a
# newer Go than this machine's is resolved with NEWER_GO (fetched from the module proxy).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
default_kube=$KUBE_VERSION
KUBE_VERSION=${SHOAL_KUBE_VERSION:-$KUBE_VERSION}
# shellcheck source=lib.sh
source "$here/lib.sh"
export GOFLAGS=-mod=mod

gen_kube() {
  local dir=$here/kube/$KUBE_VERSION staging_version modfile go_version
  staging_version="v0.${KUBE_VERSION#v1.}"
  mkdir -p "$dir"
  [ -f "$dir/tools.go" ] || cp "$here/kube/$default_kube/tools.go" "$dir/tools.go"
  # downloaded outside any module (so a go.mod asking for a newer Go stops nothing), with any Go;
  # the release's go directive then says which Go tidies the wrapper
  modfile=$(cd "$(mktemp -d)" && GOTOOLCHAIN=local go mod download -json "k8s.io/kubernetes@${KUBE_VERSION}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  go_version=$(awk '$1 == "go" { print $2; exit }' "$modfile")
  newer_go_for "$go_version"
  rm -f "$dir/go.sum"
  printf 'module shoal.dev/hack/k8s/kube\n\ngo %s\n' "$go_version" >"$dir/go.mod"
  local args=("-require=k8s.io/kubernetes@${KUBE_VERSION}")
  while read -r path; do
    args+=("-replace=${path}=${path}@${staging_version}")
  done < <(go mod edit -json "$modfile" | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Replace") or []:
    if r["New"]["Path"].startswith("./staging/"):
        print(r["Old"]["Path"])')
  (cd "$dir" && go mod edit "${args[@]}" && go mod tidy)
  echo "kube: ${#args[@]} directives (k8s.io/kubernetes ${KUBE_VERSION}, staging ${staging_version})"
}

gen_simple() { # dir module require
  local dir=$here/$1
  printf 'module shoal.dev/hack/k8s/%s\n\ngo 1.26.0\n' "$1" >"$dir/go.mod"
  rm -f "$dir/go.sum"
  (cd "$dir" && go mod edit "-require=$2" && go mod tidy)
  echo "$1: $2"
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(kube etcd helm kwok)
for t in "${targets[@]}"; do
  case $t in
    kube) gen_kube ;;
    etcd) gen_simple etcd "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" ;;
    helm) gen_simple helm "helm.sh/helm/v3@${HELM_VERSION}" ;;
    kwok) gen_simple kwok "sigs.k8s.io/kwok@${KWOK_VERSION}" ;;
    *) echo "unknown module $t" >&2; exit 2 ;;
  esac
done
