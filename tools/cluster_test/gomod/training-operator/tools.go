//go:build tools

package tools

import _ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
