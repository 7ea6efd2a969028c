//go:build !linux

package cpu

func kvMap(int) ([]byte, bool) { return nil, false }

func kvDrop([]byte) {}

func kvUnmap([]byte) {}
