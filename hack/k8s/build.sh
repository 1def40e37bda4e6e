#!/usr/bin/env bash
# Builds the real control-plane binaries from Go modules, only those that are missing.
#   hack/k8s/build.sh [etcd] [kube-apiserver] [kube-scheduler] [kube-controller-manager] [helm] [kwok]
#   (default: all six; kube-controller-manager runs only the PV binder, for the volume tests; kwok
#   plays the kubelets of fake nodes, for the preemption tests, with its own "fast" stages)
# Binaries land in ${SHOAL_BIN_DIR:-$HOME/.cache/shoal/bin}/<version>/ so every clone on this machine
# shares them; the Go build cache (~/.cache/go-build) makes a rebuild after a bump incremental.
# It refuses to build when hack/k8s/*/go.mod pin other versions than versions.env (run gen-mod.sh).
# Another Kubernetes release than the default: SHOAL_KUBE_VERSION=v1.38.0-beta.0 (make passes
# KUBE_VERSION=1.38.0-beta.0 on as that); each release has its wrapper module in kube/<version>/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
KUBE_VERSION=${SHOAL_KUBE_VERSION:-$KUBE_VERSION}
kube_dir=kube/$KUBE_VERSION
bin_root=${SHOAL_BIN_DIR:-$HOME/.cache/shoal/bin}
export CGO_ENABLED=0 GOFLAGS=-mod=mod

# shellcheck source=lib.sh
source "$here/lib.sh"

kube_ldflags() {
  local minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
  local date; date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  local flags="-s -w" key val
  for kv in "gitVersion=${KUBE_VERSION}" "gitMajor=1" "gitMinor=${minor}" "gitTreeState=clean" \
            "gitCommit=shoal-go-module-build" "buildDate=${date}"; do
    key=${kv%%=*}; val=${kv#*=}
    flags+=" -X k8s.io/client-go/pkg/version.${key}=${val} -X k8s.io/component-base/version.${key}=${val}"
  done
  echo "$flags"
}

# helm's own release build stamps the Kubernetes version of its client-go as the default for
# `helm template`, `lint` and client-side dry runs; without it they assume v1.20.0 and refuse a
# chart whose kubeVersion needs more (shoal's says >=1.30.0-0).
helm_ldflags() {
  local client_go minor
  client_go=$(required "$here/helm/go.mod" k8s.io/client-go)   # v0.37.0 -> Kubernetes 1.37
  minor=${client_go#v0.}; minor=${minor%%.*}
  local flags="-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}"
  flags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for pkg in chartutil lint/rules; do
    flags+=" -X helm.sh/helm/v3/pkg/${pkg}.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/${pkg}.k8sVersionMinor=${minor}"
  done
  echo "$flags"
}

build_one() { # name module-dir version package ldflags
  local name=$1 dir=$here/$2 version=$3 pkg=$4 ldflags=$5
  local out=$bin_root/$version/$name
  if [ -x "$out" ]; then
    echo "shoal: $name $version already built ($out)"
    return
  fi
  mkdir -p "$bin_root/$version"
  echo "shoal: building $name $version from Go modules (cold: several minutes on 2 cores)..."
  local start=$SECONDS
  (newer_go_for "$(awk '$1 == "go" { print $2; exit }' "$dir/go.mod")" && cd "$dir" && go build -trimpath -ldflags "$ldflags" -o "$out.tmp" "$pkg")
  mv "$out.tmp" "$out"
  echo "shoal: built $name in $((SECONDS - start)) s -> $out"
}

# The wrapper modules' go.mod must pin what versions.env names, or the binaries cached under a
# version's name would be built from another release. Read go.mod only: no network, no go command.
required() { # go.mod module -> the version it requires (single-line or block form)
  awk -v m="$2" '($1 == "require" && $2 == m) || ($1 == m && $2 != "=>") {
    print ($1 == "require" ? $3 : $2); exit }' "$1"
}
check_module() { # module-dir module version
  local gomod=$here/$1/go.mod got
  got=$(required "$gomod" "$2")
  if [ "$got" != "$3" ]; then
    echo "shoal: hack/k8s/$1/go.mod requires $2 ${got:-(nothing)} but hack/k8s/versions.env says $3;" >&2
    echo "shoal: run hack/k8s/gen-mod.sh $1 (needs the Go module proxy), then build again" >&2
    exit 1
  fi
}
check_kube_staging() { # every k8s.io staging module is replaced by the release matching KUBE_VERSION
  local want="v0.${KUBE_VERSION#v1.}" stale
  stale=$(awk -v want="$want" '{ for (i = 1; i < NF; i++) if ($i == "=>" && $(i + 1) ~ /^k8s\.io\// && $(i + 2) != want)
    print $(i + 1) " " $(i + 2) }' "$here/$kube_dir/go.mod")
  if [ -n "$stale" ]; then
    echo "shoal: hack/k8s/$kube_dir/go.mod replaces staging modules with versions other than $want:" >&2
    echo "$stale" | sed 's/^/  /' >&2
    echo "shoal: run hack/k8s/gen-mod.sh kube (needs the Go module proxy), then build again" >&2
    exit 1
  fi
}

# kwok runs with stage configs; its release ships them as YAML in the module (kustomize/stage/):
# the fast pod stages (ready, complete), the general pod-delete (a pod being deleted goes within its
# grace period, as a kubelet stops it, not at once) and node init.
kwok_stages() {
  local out=$bin_root/kwok-${KWOK_VERSION}/stages.yaml src f
  [ -s "$out" ] && return
  src=$(cd "$here/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
  : >"$out.tmp"
  for f in pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/general/pod-delete.yaml node/fast/node-initialize.yaml; do
    { echo "---"; cat "$src/kustomize/stage/$f"; } >>"$out.tmp"
  done
  mv "$out.tmp" "$out"
  echo "shoal: kwok stages -> $out"
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(etcd kube-apiserver kube-scheduler kube-controller-manager helm kwok)
for t in "${targets[@]}"; do
  case $t in
    etcd) check_module etcd go.etcd.io/etcd/server/v3 "$ETCD_VERSION" ;;
    kube-apiserver|kube-scheduler|kube-controller-manager)
      if [ ! -f "$here/$kube_dir/go.mod" ]; then
        echo "shoal: no wrapper module for Kubernetes $KUBE_VERSION (hack/k8s/$kube_dir/go.mod);" >&2
        echo "shoal: run SHOAL_KUBE_VERSION=$KUBE_VERSION hack/k8s/gen-mod.sh kube (needs the Go module proxy)" >&2
        exit 1
      fi
      check_module "$kube_dir" k8s.io/kubernetes "$KUBE_VERSION"; check_kube_staging ;;
    helm) check_module helm helm.sh/helm/v3 "$HELM_VERSION" ;;
    kwok) check_module kwok sigs.k8s.io/kwok "$KWOK_VERSION" ;;
  esac
done
for t in "${targets[@]}"; do
  case $t in
    etcd) build_one etcd etcd "etcd-${ETCD_VERSION}" . "-s -w" ;;
    kube-apiserver|kube-scheduler|kube-controller-manager)
      build_one "$t" "$kube_dir" "$KUBE_VERSION" "k8s.io/kubernetes/cmd/$t" "$(kube_ldflags)" ;;
    helm) # a helm cached before helm_ldflags existed assumes Kubernetes v1.20.0: build it again
      stamp=$bin_root/helm-${HELM_VERSION}/.kube-version-stamped
      [ -f "$stamp" ] || rm -f "$bin_root/helm-${HELM_VERSION}/helm"
      build_one helm helm "helm-${HELM_VERSION}" helm.sh/helm/v3/cmd/helm "$(helm_ldflags)"
      touch "$stamp" ;;
    kwok) build_one kwok kwok "kwok-${KWOK_VERSION}" sigs.k8s.io/kwok/cmd/kwok \
            "-s -w"; kwok_stages ;;
    *) echo "unknown component $t" >&2; exit 2 ;;
  esac
done
