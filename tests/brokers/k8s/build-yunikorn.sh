#!/bin/sh
# Builds YuniKorn's standalone scheduler (k8shim + core in one binary, pkg/cmd/shim) from the Go module proxy into
# $1/yunikorn-scheduler (benchmarks/k8s.py, docs/kubernetes.md). Versions come from the environment. ~2 GB peak.
# The k8shim's own go.mod asks for core v1.9.0-1 and scheduler-interface v1.9.0-0 (pre-release snapshots); the
# released v1.9.0 tags are required here so the binary is the 1.9.0 release. Its replace directives (k8s.io staging
# modules at v0.35.x) are not inherited by a requiring module, so they are copied.
set -eu
OUT=$1
: "${YUNIKORN_VERSION:?}"
export GONOSUMDB=github.com/apache GOFLAGS=-mod=mod
WORK=$(mktemp -d "${TMPDIR:-/tmp}/evsched-yunikorn-build.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"
cd "$WORK"
SHIM=github.com/apache/yunikorn-k8shim
GOMOD=$(go mod download -json "$SHIM@$YUNIKORN_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
GOVER=$(sed -n 's/^go \(.*\)/\1/p' "$GOMOD")
{ printf 'module local/yunikornbuild\n\ngo %s\n\nrequire (\n' "$GOVER"
  printf '\t%s %s\n' "$SHIM" "$YUNIKORN_VERSION" github.com/apache/yunikorn-core "$YUNIKORN_VERSION" \
    github.com/apache/yunikorn-scheduler-interface "$YUNIKORN_VERSION"
  printf ')\n\n'
  sed -n '/^replace (/,/^)/p' "$GOMOD"; } > go.mod
printf '//go:build tools\npackage tools\nimport _ "%s/pkg/cmd/shim"\n' "$SHIM" > tools.go
go mod tidy
go list -m github.com/apache/yunikorn-core github.com/apache/yunikorn-scheduler-interface "$SHIM"
go build -trimpath -ldflags '-s -w' -o "$OUT/yunikorn-scheduler" "$SHIM/pkg/cmd/shim"
