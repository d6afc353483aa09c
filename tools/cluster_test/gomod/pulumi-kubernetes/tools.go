//go:build tools

package tools

import (
	_ "github.com/pulumi/pulumi-kubernetes/provider/v4/cmd/pulumi-resource-kubernetes"
	// The provider's own `go generate` step (cmd/pulumi-resource-kubernetes/generate.go) imports this package.
	_ "github.com/pulumi/pulumi/pkg/v3/codegen/schema"
)
