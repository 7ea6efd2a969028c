package main

import (
	"fmt"
	"log/slog"

	"github.com/weft-inference/weft/cuda"
	"github.com/weft-inference/weft/runtime"
)

// The CUDA backend is found at run time: cuda.Open dlopens libcuda and
// cuBLAS, so this file builds everywhere (without cgo cuda.Open reports that
// there is no driver) and `--backend auto` falls back to the CPU with the
// reason in the log.
func init() { newCUDABackend = openCUDABackend }

// cudaBlockSize is the KV block size on the GPU (positions per block).
const cudaBlockSize = 16

func openCUDABackend(m *runtime.Model, kvBytes int64, log *slog.Logger) (runtime.Backend, error) {
	dev, err := cuda.Open(cuda.Config{})
	if err != nil {
		return nil, err
	}
	kv := cuda.KVConfig{BlockSize: cudaBlockSize}
	if kvBytes > 0 {
		// --kv-memory pins the pool; otherwise it is sized from the GPU's
		// memory (gpu-memory-utilization of the total, as vLLM does).
		per := cuda.KVBytesPerBlock(m.HP, cudaBlockSize)
		kv.NumBlocks = int(kvBytes / per)
		if kv.NumBlocks < 1 {
			dev.Close()
			return nil, fmt.Errorf("--kv-memory %d bytes holds no %d-byte KV block", kvBytes, per)
		}
	}
	b, err := cuda.NewBackend(dev, m.LM, kv)
	if err != nil {
		dev.Close()
		return nil, err
	}
	log.Info("CUDA backend ready", "device", dev.String(), "kv_plan", b.Plan())
	return &cudaBackend{Backend: b, dev: dev}, nil
}

// cudaBackend closes the device with the backend.
type cudaBackend struct {
	*cuda.Backend
	dev *cuda.Device
}

func (c *cudaBackend) Close() error {
	err := c.Backend.Close()
	if derr := c.dev.Close(); err == nil {
		err = derr
	}
	return err
}
