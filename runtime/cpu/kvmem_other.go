//go:build !linux

package cpu

func kvMap(int) ([]byte, bool) { return nil, false }

func kvDrop([]byte) {}

func kvUnmap([]byte) {}

func kvResident([]byte) (int64, bool) { return 0, false }
