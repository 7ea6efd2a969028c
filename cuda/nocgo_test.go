//go:build !cgo

package cuda

import (
	"errors"
	"testing"
)

func TestOpenWithoutCgo(t *testing.T) {
	if _, err := Open(Config{}); !errors.Is(err, ErrNoDriver) {
		t.Fatalf("Open without cgo: %v, want ErrNoDriver", err)
	}
}
