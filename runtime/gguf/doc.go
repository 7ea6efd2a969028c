// Package gguf reads and writes GGUF files, the model format of llama.cpp
// and the Hugging Face hub's quantized downloads.
//
// A GGUF file is a header (magic "GGUF", version, tensor count, metadata
// count), typed key/value metadata, tensor infos (name, dims, type, offset),
// padding to the file's alignment, then the tensor data. Versions 2 and 3 are
// read (they differ only in byte order support, which weft refuses: only
// little-endian files are accepted); version 1 (32-bit counts) is refused.
//
// Validation is strict because files come from outside: every count, length
// and offset is checked against the bytes that are really there before
// anything is allocated, so a truncated or hostile file yields an error,
// never a panic or an allocation larger than the file. Tensor data is not
// copied: [TensorInfo.Data] is a view into the memory-mapped file, valid
// until [File.Close]. On Linux the file is mapped at a 2 MiB-aligned
// address, and [File.ToMemory] can move its bytes into anonymous memory
// in transparent huge pages at the same addresses, so that the views stay
// valid (weft serve --weights).
//
//	f, err := gguf.Open("model.gguf")
//	if err != nil { ... }
//	defer f.Close()
//	arch := f.Arch()
//	emb, ok := f.Tensor("token_embd.weight")
package gguf
