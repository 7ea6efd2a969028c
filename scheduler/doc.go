// Package scheduler is weft's batching loop: one goroutine merges every
// in-flight request into one ragged batch per decoding step (continuous
// batching) over a paged KV cache, with chunked prefill, a prefix cache,
// preemption by recompute, priority classes and a static-batching baseline.
//
// # Files
//
//   - api.go, config.go: the contract (Request, Event, Final, Stats, Config).
//   - scheduler.go: Scheduler, Submit and the Run loop around the core.
//   - core.go: the core's state and what every batching mode shares:
//     submit, cancel, plan's assembly of the batch, apply, finish. It reaches
//     the batching mode through a small policy interface (plan the step's
//     entries, append padding rows, account for them, hold a Final, settle),
//     so the continuous path has no padding branches.
//   - plan.go: continuous batching: decode-first planning under the token
//     budget, chunked prefill, admission, growth and preemption.
//   - static.go: static batching: groups, prompt and decode padding rows on
//     scratch blocks, held Finals.
//   - output.go: what a sampled token does to its stream: stop token ids,
//     EOS, stop strings, held-back text, length limits.
//   - seq.go, stream.go, kv.go: a sequence's state, its output mailbox, the
//     block ledger and prefix cache.
//   - spec.go: speculative decoding (Config.Spec): n-gram drafts, or a
//     Drafter's (a draft model: one Draft call per step, Forget whenever
//     a sequence's blocks go back), planned into decode rows, verified by the model in the same step
//     (Verifier), accepted tokens applied one by one, adaptive draft
//     lengths.
//   - check_test.go: the invariant checker the tests run after every step;
//     trace_test.go replays the golden traces in testdata/ (see there for
//     the format; -update rewrites them); schedtest holds the fake model.
//
// # Ownership
//
// Run is the only goroutine that touches scheduler state: the waiting queue,
// the running set, the KV block ledger (blockPool) and the prefix cache. It
// wraps a synchronous core with three plain methods and no goroutines or
// clock: plan builds the next batch (admitting, allocating and preempting as
// needed), the Model runs it, and apply takes the sampled tokens, applies
// stop conditions and frees the blocks of sequences that ended, all in that
// same step. Time is passed in.
//
// Other goroutines reach the loop through channels only:
//
//   - Submit validates the request against Limits (limits.go: the one owner
//     of every bound on a request's fields, the context honoured in the
//     configured batching mode among them; front doors report and consult
//     them and check none), reserves a waiting slot (an atomic count
//     bounded by Config.MaxWaiting, so ErrQueueFull is decided at once) and
//     sends the new sequence on a channel with room for every slot, so it
//     never blocks on the loop.
//   - A request's cancellation (its context, or Stream.Cancel) becomes a loop
//     event through context.AfterFunc; the loop handles it in whatever phase
//     the sequence is: waiting, just admitted (cancel after grant), prefilling
//     or decoding. Its blocks go back before the next step is planned.
//   - Drain and Stats use an atomic flag and an atomically published snapshot.
//
// Output never blocks the loop: each Stream has a mailbox (pending events,
// merged, behind a small mutex) and a capacity-1 notify channel. The loop
// appends and moves on; the one reader calls Recv, which returns everything
// pending as one Event. A slow reader grows only its own mailbox, bounded by
// its MaxTokens.
//
// When the loop is idle it blocks on its channels (and a timer for the next
// queue deadline or capacity retry); it never spins.
//
// # A step (continuous batching)
//
// Each sequence keeps its whole token history (prompt, then generated) and
// the number of those tokens whose K/V are computed. A step feeds each chosen
// sequence the next slice of its history; the slice that reaches the end of
// the history asks for logits (SeqStep.Logits) and goes to the model with
// the sequence's Sampler, so the model samples the next token. Decoding is
// the case of a one-token slice. The batch is built under
// Config.MaxBatchTokens and Config.MaxSeqs, in this order:
//
//  1. one decode token for every running sequence that is decoding;
//  2. chunks of the prompts of running sequences still prefilling;
//  3. the first chunk of waiting requests, admitted strictly in queue order
//     (higher Priority first, FCFS within a priority) while their chunk's
//     blocks are free beyond a watermark (Config.WatermarkBlocks) that lets
//     running sequences grow, and while Config.Capacity (if any) agrees;
//  4. with speculative decoding (Config.Spec), drafted tokens appended to
//     decode rows (a row of the last token and k drafts, SeqStep.Draft),
//     from the budget and the blocks left over, never preempting, and
//     only while the step holds at most Spec.MaxStepTokens tokens. The
//     model samples every position of the row and accepts the drafts its
//     sampler would have chosen (Verifier.StepDrafts); the accepted tokens
//     go through the stop conditions one by one as if decoded alone, only
//     verified positions count as computed, and the blocks that hold only
//     rejected drafts go back at once (spec.go has the details).
//
// Admission never preempts running sequences, whatever their priority, and
// stops at the first request that does not fit (no overtaking within the
// queue order, so a large request is not starved by small ones). So a
// 4,000-token prompt is prefilled over several steps while every running
// stream still gets its token each step.
//
// # KV blocks, preemption, prefix cache
//
// Blocks have a fixed size; a sequence's block table covers the positions it
// has fed. When a running sequence needs a block and none is left, the
// lowest-ranked running sequence (lowest priority, then most recently first
// admitted) gives all its blocks back and is re-queued for recompute: its
// history so far becomes its prompt, its Sampler is kept (not re-created), so
// its stream goes on without repeating or losing a token. Ranks are a total
// order and a victim always ranks below the sequence that needs the block,
// so preemption cannot cycle; a preempted sequence is not readmitted in the
// step that preempted it; the highest-ranked sequence always progresses,
// since one sequence alone always fits (ContextLen <= NumBlocks*BlockSize).
// Prompt chunks shrink to the blocks at hand before they preempt.
//
// Every full computed block is registered under a chain hash of its prefix,
// hash(parent hash, block tokens), and kept (with a copy of its tokens, so a
// hash collision cannot serve wrong K/V) while referenced, then on an LRU
// list when free, until the allocator needs it. Admission reuses the longest
// cached prefix (Final.CachedTokens) but never the block holding the last
// token of the history: the last prompt token is always computed, since its
// logits give the first sampled token. A sequence gives its blocks back last
// first, so the LRU list evicts the tail of a prefix before its head (a
// prefix is only found from its first block on); preempted sequences often
// find their own blocks still cached when they resume.
//
// # Embedding requests
//
// A Request with Embed set is a prompt-only sequence: it is admitted,
// chunked and preempted like any other, but its rows ask for hidden states
// (batch.SeqStep.Hidden, from a Model whose HiddenSize is non-zero) instead
// of logits, so the backend skips the LM head for them. After each step
// its chunk's rows are folded, in token order, into a batch.Pool
// (Config.Pooling: mean, last or cls), whose result does not depend on the
// chunking; when the last prompt token has run the sequence ends with
// FinishEmbedded and the L2-normalized vector in Final.Embedding, and its
// blocks go straight back to the free list. It neither takes a cached
// prefix (every token's hidden state is needed) nor registers one. A
// preempted embedding empties its pool and is computed again. Static
// batching serves none (ErrNoEmbeddings).
//
// # Stop conditions and text
//
// After each sampled token: stop token ids and EOS (Config.IsEOG, unless
// IgnoreEOS) end the stream when at least MinTokens tokens came before it;
// then the token is decoded by the sequence's TextDecoder and the stop
// strings are searched in the text not yet emitted. Text that may still turn
// into a stop string (a suffix that is a prefix of one) is held back; on a
// match the text before the stop string (plus the stop string with
// IncludeStopString) is emitted and the rest dropped. MaxTokens and the
// context length end it with FinishLength. On every end the decoder is
// flushed.
//
// # Static batching
//
// With Config.Batching = "static" the scheduler is the baseline a static
// batcher gives (a fixed [B, T] batch, as in HF generate): a group of up to
// BatchSize waiting requests is admitted together (blocks for each member's
// whole run reserved up front, so no preemption), the whole group is
// prefilled, then decoded together until its longest member ends. No new
// arrival joins a running group and no slot is refilled. Tokens of the
// members stream as made; a member that ends early (EOS, stop, length) has
// its Final held until the group ends.
//
// A static batch has a fixed shape, so a member that has ended (or was
// cancelled, or failed) while others of its group still run keeps its row:
// every later decode step of the group computes a padding row for it, one
// token (its last) at a position that grows by one per step, so attention
// runs over a growing length, and asks for logits, which a throwaway greedy
// sampler turns into a token that is discarded: never streamed, never in
// usage or Stats.GenerationTokens, counted in Stats.PaddingTokens (and in
// LastBatchTokens, as model work, but not in PromptTokens). So a decode
// step has as many rows as the group has members until the group ends.
// Padding positions stop growing at ContextLen-1. A cancelled or failed
// member's Final is sent at once; its row still pads.
//
// Padding rows always follow the planned rows in the batch, and apply drops
// their results, so the core sees only real sequences. Padding K/V go to
// scratch blocks: static mode keeps BatchSize-1 blocks
// (the highest-numbered of the pool) out of the ledger (Stats
// .KVBlocksReserved; KVBlocksTotal and ContextLen's bound count only the
// ledger). A padding row gets its own scratch block and every entry of its
// block table points at it, so its writes overwrite each other (harmless:
// the output is discarded) and never touch another row's memory. At most
// BatchSize-1 members can have ended while one still runs, so the scratch
// blocks always suffice. A member's own blocks are freed as soon as it
// ends: padding needs none of them.
//
// Prompts are padded too: at group start each member whose prompt is
// shorter than the group's longest gets a prompt padding of the difference,
// computed in the prefill steps (after the prompts, under MaxBatchTokens,
// decoding waits for it) as a separate row of that many tokens (the
// member's first token repeated, positions from 0, no logits) on its own
// scratch block. It costs what left-padding costs a real batch; it is not
// prepended to the member's own row, so the member's K/V, positions and
// answer are those of an unpadded run. Decode padding rows never run in a
// prefill step, so the two kinds share the scratch blocks. A prompt
// padding longer than BlockSize writes several of its positions to the
// same slot in one step (a backend must tolerate that; the CPU backend
// stores K/V sequentially). A member's padding row attends over its own
// length, not the group's longest.
//
// # Invariants
//
// The tests check them after every step (check_test.go):
//
//   - every block is exactly one of free (on the free stack), cached
//     (registered, ref 0, on the LRU list) or used (ref > 0);
//   - a block's ref count equals the number of running block tables that
//     hold it; waiting sequences hold no block; no table holds a block twice;
//   - the hash index and the registered blocks agree;
//   - a running sequence's blocks cover its computed positions, and in
//     continuous mode no more (no block holds only unverified drafts);
//   - the queues are in order, the running set is within MaxSeqs, and no
//     sequence was readmitted in the step that preempted it;
//   - static padding rows belong to ended members of the current group that
//     hold no ledger block, each on its own scratch block, within
//     ContextLen, and there are no more of them than scratch blocks; so do
//     prompt paddings (of any member of the current group).
//
// A failed step fails the sequences in it (only the ones a
// batch.StepErrors lists, when the model returns one), never the
// scheduler. When Run returns, every stream in flight ends with FinishError and
// ErrClosed, and every block is back. Every stream ends exactly once: its
// last Event carries Final, after which Recv returns io.EOF.
//
// # Example
//
//	s, err := scheduler.New(scheduler.Config{
//		BlockSize: kv.BlockSize, NumBlocks: kv.NumBlocks,
//		NewDecoder: func() scheduler.TextDecoder { return tok.NewStreamDecoder() },
//		IsEOG:      tok.IsEOG,
//	}, engine)
//	go s.Run(ctx)
//	st, err := s.Submit(reqCtx, scheduler.Request{Prompt: ids, MaxTokens: 128})
//	for {
//		ev, err := st.Recv(reqCtx)
//		if err == io.EOF {
//			break
//		}
//		...
//	}
package scheduler
