//go:build tools

// Package tools pins the command this module builds.
package tools

import _ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
