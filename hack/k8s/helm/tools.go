//go:build tools

// Package tools pins helm's main package so `go build helm.sh/helm/v3/cmd/helm` builds the
// upstream release from this module.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
