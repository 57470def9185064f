#!/bin/sh
# Builds etcd, kube-apiserver, kube-scheduler and kwok from the Go module proxy into $1 (docs/kubernetes.md).
# Versions come from the environment (tests/kubernetes_cluster.py sets them). ~5 minutes on 2 cores, ~2 GB peak.
set -eu
OUT=$1
: "${K8S_VERSION:?}" "${ETCD_VERSION:?}" "${KWOK_VERSION:?}"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/evsched-k8s-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT" "$WORK/etcd" "$WORK/kas"

# etcd: `go install` refuses its replace directives; a tiny module builds its main package.
cd "$WORK/etcd"
printf 'module local/etcdbuild\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > go.mod
printf '//go:build tools\npackage tools\nimport _ "go.etcd.io/etcd/server/v3"\n' > tools.go
go mod tidy
go build -trimpath -ldflags '-s -w' -o "$OUT/etcd" go.etcd.io/etcd/server/v3

# kube-apiserver and kube-scheduler: k8s.io/kubernetes with each staging module replaced by its published v0.x.
cd "$WORK/kas"
minor=${K8S_VERSION#v1.}
GOMOD=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
{ printf 'module local/kasbuild\n\ngo 1.24.0\n\ngodebug default=go1.24\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
  sed -n '/^replace (/,/^)/p' "$GOMOD" | awk -v v="v0.$minor" '/=>/{printf "\t%s => %s %s\n",$1,$1,v}'
  printf ')\n'; } > go.mod
printf '//go:build tools\npackage tools\nimport (\n_ "k8s.io/kubernetes/cmd/kube-apiserver"\n_ "k8s.io/kubernetes/cmd/kube-scheduler"\n)\n' > tools.go
go mod tidy
V=k8s.io/component-base/version
major_minor=${minor%%.*}
for cmd in kube-apiserver kube-scheduler; do
  go build -trimpath -ldflags "-s -w -X $V.gitVersion=$K8S_VERSION -X $V.gitMajor=1 -X $V.gitMinor=$major_minor -X $V.gitTreeState=clean" \
    -o "$OUT/$cmd" "k8s.io/kubernetes/cmd/$cmd"
done

GOBIN="$OUT" go install -trimpath -ldflags '-s -w' "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
