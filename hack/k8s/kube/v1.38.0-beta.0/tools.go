//go:build tools

// Package tools pins the upstream kube-apiserver, kube-scheduler and kube-controller-manager main
// packages so that `go build k8s.io/kubernetes/cmd/...` builds the real, unmodified release from this module.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
