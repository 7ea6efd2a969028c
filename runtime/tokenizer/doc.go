// Package tokenizer turns text into token ids and back, for the
// vocabularies stored in GGUF files, reproducing llama.cpp's tokenizer
// exactly (its test vectors in shared/vocab and llama-tokenize's output on
// stories260K are checked token for token).
//
// # Models
//
// [FromGGUF] reads tokenizer.ggml.* metadata. Two algorithms exist, the
// second in two forms:
//
//   - "llama" ([SPM]): SentencePiece BPE. Spaces become "▁", a "▁" is
//     prefixed to the text (and to text that follows a special token) unless
//     tokenizer.ggml.add_space_prefix is false, then adjacent symbols are
//     merged by highest token score (leftmost first on ties) starting from
//     UTF-8 characters; a final symbol that is not a token becomes byte
//     tokens "<0xAB>". No pre-tokenization. BOS is added by default.
//   - "gpt2" ([BPE]): byte-level BPE. The text is first cut into words by
//     the pre-tokenizer that tokenizer.ggml.pre names, each word's bytes are
//     mapped to GPT-2's printable byte alphabet, and adjacent symbols are
//     merged by lowest merge rank (leftmost first on ties). BOS is not added
//     unless the model says so (tokenizer.ggml.add_bos_token) or the
//     pre-tokenizer is Llama 3's or Tekken's, which also take a word that is
//     already a token as it is ("ignore_merges").
//   - "gemma4" ([BPE], SentencePiece-style): Gemma 4's merges over
//     SentencePiece text. Spaces become "▁" (no prefix is added), the text
//     is cut only into runs of newlines and runs of other characters, merges
//     run on the UTF-8 characters (no byte alphabet), a run of newlines that
//     is a token is taken whole, and a final symbol that is not a token
//     becomes "<0xAB>" byte tokens. The file gives the special ids; BOS is
//     always added (llama.cpp overrides add_bos_token=false for Gemma 4).
//
// Other models (bert, t5, rwkv...) and unknown pre-tokenizer names are
// refused with [ErrUnsupported].
//
// # Pre-tokenizers
//
// The reference pre-tokenizers are regular expressions with Unicode
// categories (\p{L}, \p{N}, \p{P}) and look-aheads (\s+(?!\S)), which Go's
// regexp package lacks; pretok.go implements each as a scanner over runes
// using package unicode. A rule set is a list of expressions applied in turn,
// each cutting every current piece into its matches and the gaps between
// them, as llama.cpp does. Supported tokenizer.ggml.pre values:
//
//	gpt-2, phi-2, roberta-bpe, jina-*, gigachat, mpt, olmo, jais   GPT-2's expression
//	llama3, llama-v3, llama-bpe, falcon3, dbrx, smaug-bpe, chatglm-bpe   Llama 3's
//	qwen2, stablelm2, megrez   Llama 3's with single digits
//	qwen35   Qwen2's, letter runs also taking marks ([\p{L}\p{M}]+)
//	starcoder, refact, command-r, smollm, codeshell, exaone, minerva-7b   digits, then GPT-2's
//	falcon, default (or absent)   punctuation runs, GPT-2's, digit groups
//	deepseek-llm, deepseek-coder, deepseek-v3   DeepSeek's lists of expressions
//	tekken   Mistral's (as llama.cpp adapts it: case told apart for ASCII only)
//	bloom, poro-chat, gpt3-finnish, viking   BLOOM's
//
// Character categories come from Go's unicode tables; llama.cpp's come from
// its own copy of the Unicode database, so a character whose category
// changed between Unicode versions may split differently. Non-ASCII
// whitespace never matches an explicit character range (llama.cpp matches
// those expressions with std::wregex on text where such whitespace is
// replaced by U+000B). testdata/pretok_golden.json (made by
// testdata/gen_pretok.py with Python's regex module) pins every rule set.
//
// # Special tokens
//
// Control and unknown tokens ("<s>", "<|eot_id|>") are recognised in the
// text only when Encode's parseSpecial is true; user-defined tokens always
// are. Longer texts are cut out first. Tokens with llama.cpp's rstrip/lstrip
// attribute (all special tokens of Phi-3 models, chosen by general.name, as
// llama.cpp does) swallow the ASCII whitespace after/before them. As in
// llama.cpp, tokens whose text is <|eot_id|>, <|im_end|>, <|end|>,
// <end_of_turn>, <|endoftext|>, <|eom_id|>, <EOT> (and <|end_of_text|>, and
// Gemma 4's <eos>, <turn|>, <|tool_response>) are made control tokens and end
// generation ([Tokenizer.IsEOG]).
//
// # Decoding
//
// [Tokenizer.TokenBytes] is what one token adds to the output (llama.cpp's
// token_to_piece without special tokens): control tokens add nothing.
// [Tokenizer.Decode] decodes a whole sequence: for SPM it drops the leading
// space of the first token that produces text, so Decode(Encode(s)) == s
// for text the vocabulary can represent (all byte-level BPE vocabularies,
// SPM vocabularies with byte fallback, as long as s has no "▁" for SPM and
// no special-token text). It does not apply the "clean up tokenization
// spaces" rewrites llama_detokenize applies to some BPE models.
//
// A [StreamDecoder] turns generated tokens into text one at a time, holding
// back the bytes of a character split across tokens and replacing bytes that
// can never form a character by U+FFFD, so every piece it returns is valid
// UTF-8 and their concatenation does not depend on how the ids arrive. It
// keeps the leading space of the first token (the generated text continues
// the prompt), as llama-server and llama-cli print it.
//
// # Concurrency and cost
//
// A Tokenizer is immutable and safe for concurrent use; a StreamDecoder
// belongs to one sequence. Encoding is O(n log n) in the text length: merges
// run off a binary heap, pre-tokenizers scan linearly and special tokens are
// found with one trie pass (see BenchmarkEncodeLong).
//
//	f, err := gguf.Open("model.gguf")
//	if err != nil { ... }
//	defer f.Close()
//	tok, err := tokenizer.FromGGUF(f)
//	if err != nil { ... }
//	ids := tok.Encode("Once upon a time", true, true) // [1 403 407 261 378]
//	d := tok.NewStreamDecoder()
//	for _, id := range generated {
//		fmt.Print(d.Add(id))
//		if tok.IsEOG(id) { break }
//	}
//	fmt.Print(d.Flush())
package tokenizer
