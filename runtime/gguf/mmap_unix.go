//go:build unix && !linux

package gguf

import (
	"errors"
	"os"
	"syscall"
)

func mapFile(f *os.File, size int64) ([]byte, func() error, error) {
	if int64(int(size)) != size {
		return nil, nil, syscall.EFBIG
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}

// toMemory is refused here: the file stays mapped.
func toMemory([]byte) (Placement, error) {
	return Placement{}, errors.ErrUnsupported
}
