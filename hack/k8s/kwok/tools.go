//go:build tools

// Package tools pins kwok's main package so `go build sigs.k8s.io/kwok/cmd/kwok` builds the
// upstream release from this module.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
