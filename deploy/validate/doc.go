// Package validate checks weft's Kubernetes manifests (deploy/) without a
// cluster: see validate_test.go. It is a module of its own so that the
// Kubernetes API modules stay out of the server's go.mod.
package validate
