// Package cuda is weft's GPU backend: its own CUDA kernels plus cuBLAS,
// driven through a small C shim that opens the NVIDIA libraries at run time,
// so one weft binary serves machines with and without a GPU.
//
// # Layers
//
//	cmd/weft ──> cuda.Open / cuda.NewBackend ──> batch.Backend (Forward)
//	                 │
//	   Go (device_cgo.go, backend_cgo.go): buffers, shapes, launch order, errors
//	                 │ cgo, one call per kernel launch / GEMM / copy
//	   C shim (shim.c, shim.h): dlopen + dlsym tables, thin wrappers
//	                 │ function pointers
//	   libcuda.so.1 (driver API)      libcublas.so.13/.12/.11 (GemmEx)
//	                 │
//	   kernels (kernels/*.cu[h]) compiled by nvcc into kernels/kernels.fatbin,
//	   embedded with //go:embed and loaded with cuModuleLoadData.
//
// Nothing CUDA is linked at build time: cgo links only -ldl, and shim.h
// declares the handful of driver and cuBLAS types it needs itself (no CUDA
// header), so `go build ./...` needs no toolkit and no GPU. Without cgo
// (CGO_ENABLED=0) nocgo.go keeps the API and Open fails with ErrNoDriver.
//
// Open walks the steps a GPU needs and says which one failed: no
// libcuda.so.1 (ErrNoDriver), cuInit failing or no device (ErrNoDevice), no
// cuBLAS (ErrNoCUBLAS). Config.LibDir is searched before the loader path
// (for a pip-installed cuBLAS, for example).
//
// # Threads and the context
//
// A Device owns the device's primary context, one non-blocking stream, the
// loaded module and a cuBLAS handle bound to that stream. Every CUDA call
// runs on one goroutine locked to one OS thread (Device.do), on which the
// context was made current once; callers (the scheduler's step loop) hand it
// closures and wait. Work inside a step is queued on the stream in order and
// the step synchronises once, when it copies logits (or sampled ids) back; a
// step that wants no logits (a prompt chunk that does not end its prompt)
// returns with its work queued, and a kernel failure in it surfaces at the
// next synchronisation.
//
// # What runs where
//
// At load (NewBackend): each weight matrix is copied to the device in its
// stored type (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K) and expanded to F16 by
// the dequant_f16 kernel; q/k/v and gate/up are stacked into one matrix each
// so a layer does four GEMMs. The token embedding stays in its stored type
// (embed dequantizes the rows a step needs). The KV pool is one F16 buffer
// for K and one for V, [layer][block][position][kv head][head dim], sized by
// KVConfig.NumBlocks or, when 0, by gpumem.BlocksForGPU from free memory.
//
// Per step (Forward): the host packs token ids, positions, KV slots and
// block tables into one int32 upload; then embed; per layer rmsnorm_f16 →
// GEMM qkv → add_bias (qwen2) → rope (llama3 factors / NEOX as the model
// says) → kv_write into the paged blocks → attention (causal, GQA, online
// softmax over tiles of the sequence's paged KV; a token's keys cut into up
// to 16 pieces of at least 128 keys, by its own length only, and merged by
// attention_reduce, so attention is batch-invariant) → GEMM Wo with beta=1
// (the residual add) → rmsnorm_f16 → GEMM gate|up → swiglu → GEMM down with
// beta=1. Last: rmsnorm of each wanted sequence's last token and the output
// GEMM. A step of up to 8 tokens does its GEMMs with weft's gemv_f16 kernel
// (each warp streams one weight row once for every token); larger steps use
// cublasGemmEx, F16 inputs, FP32 output and CUBLAS_COMPUTE_32F
// (tensor cores). The arithmetic follows the CPU backend (runtime/cpu):
// F16-rounded activations into F16 GEMMs, F16 KV with F16-rounded q, ggml's
// RoPE angles, so F16 models should give the same greedy tokens.
//
// Sampling is not the backend's: Forward returns the logits of the
// sequences with SeqStep.Logits and runtime.Engine samples them on the host.
// ForwardGreedy, for device checks and benchmarks, runs argmax_logprob on
// the device (argmax, lowest id on ties, and its log-probability) and copies
// back only ids and logprobs.
//
// # CUDA graphs
//
// A decode step (one token and one logits row per sequence) is captured
// into a CUDA graph the first time its shape comes (tokens, sequences,
// logit rows, attention's grid depth) and replayed after that: one launch
// instead of about ten per layer. The graph reads the step's tokens,
// positions and block tables from the index buffer uploaded just before it,
// so a replay computes the same bits as launching the kernels (gpucheck
// checks it). Graphs are dropped when a buffer they name is reallocated; at
// most 128 are kept, the oldest going first. A failed capture turns graphs
// off for the backend and the step runs eagerly; Config.NoGraphs (serve's
// --cuda-eager) keeps them off. cuBLAS gets a 32 MiB workspace of its own
// so that capturing never makes it allocate one. Steps with prompt chunks
// launch their kernels one by one. Backend.Graphs counts captures, replays
// and eager steps.
//
// # Dependencies
//
// The package reads the model from runtime/llama (weights and
// hyper-parameters), implements runtime/batch's contract and sizes the pool
// with gpumem and batch.KVBytesPerBlock; it never imports the CPU backend
// (runtime/cpu) nor the runtime root.
//
// # Errors and health
//
// Every CUresult and cublasStatus_t becomes an *Error or *BLASError. A
// sticky error (illegal address, launch failure, ...) marks the Device
// unhealthy: Healthy reports false with the reason and later steps fail with
// ErrUnhealthy, so the server can report NOT_SERVING.
//
// # Example
//
//	dev, err := cuda.Open(cuda.Config{})
//	if err != nil { /* errors.Is(err, cuda.ErrNoDriver) ...: use the CPU backend */ }
//	b, err := cuda.NewBackend(dev, model, cuda.KVConfig{Utilization: 0.9})
//	slog.Info(b.Plan())
//	engine := runtime.NewEngine(b, model.HP.VocabSize)
//
// Build and check the kernels with scripts/cuda-build.sh and
// scripts/cuda-check.sh; run the GPU check with scripts/gpu-check.sh.
package cuda
