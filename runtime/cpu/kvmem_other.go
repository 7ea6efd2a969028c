//go:build !linux

package cpu

func kvMap(int) (kvMapping, bool) { return kvMapping{}, false }

func kvDrop([]byte) {}

func kvUnmap([]byte) {}
