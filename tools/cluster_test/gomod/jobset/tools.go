//go:build tools

// Package tools pins the command this module builds (JobSet controller manager: the module root is package main).
package tools

import _ "sigs.k8s.io/jobset"
