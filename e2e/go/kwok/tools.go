//go:build tools

// Package tools pins the KWOK controller command built by e2e/build.sh.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
