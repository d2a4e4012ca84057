// Package runtime is qnnprep's bundled CPU runtime: it decodes a model
// (a GGUF file or qmodel, or a Hugging Face directory, as opened by
// package model) in pure Go, for llama, qwen2, qwen3, qwen3next and qwen35
// with dense MLPs.
//
// # Use
//
//	m, _ := model.Open(path)
//	e, _ := runtime.New(m, runtime.Options{Threads: 2})
//	ids, _ := e.Greedy(ctx, prompt, 64)        // greedy continuation
//	rows, _ := e.Logits(ctx, tokens)           // teacher-forced logits, one row per token
//
// Run is qnnprep run's workflow: a timed greedy decode, whole or through
// a plan (RunOptions.Plan), that can write every step's logits to a file.
// CompareSpeculative is qnnprep speculate's: a speculative decode with a
// draft model, EAGLE-3 head or MTP block (OpenDrafts) set against plain
// greedy decoding, whole or through a plan.
//
// For step-by-step control, a State holds one sequence:
//
//	st := e.NewState()
//	logits, _ := st.Forward(prompt)            // prefill; logits after the last token
//	rows, _ := st.ForwardAll(draft)            // logits after every token (verification)
//	st.Truncate(n)                             // roll back to n positions
//	st.Compact(from, keep)                     // keep an accepted tree path (attention-only models)
//	a, next, _ := st.Verify(last, draft)       // exact greedy speculative step (§7.1)
//	c := st.Clone()                            // independent copy
//	st.Generate(ctx, prompt, n, func(s runtime.Step) bool { … })
//
// A staged executor runs the same arithmetic layer range by layer range:
// Engine.Embed turns tokens into hidden states, State.RunLayers(a, b, x,
// pos, mask) runs layers [a, b) with explicit RoPE positions and an
// explicit attention mask over the cache slots, and State.Head applies
// the final norm and output projection. Forward is exactly Embed, one
// RunLayers over all layers and Head. State.KV and State.DeltaNet expose
// each layer's cache and recurrent state for checking I/O surfaces.
//
// NewStaged(e, plan) decodes through a shard plan: each stage is one call
// over exactly the plan's I/O buffers (input_ids or hidden_states_k,
// attention_mask, RoPE cos/sin, past_*_in/_out in Genie's layouts), with a
// KV manager between calls that behaves like Genie's (n_past, n_process,
// selection masks on accept, rollback, AR-c re-processing). Its logits are
// bit-identical to whole-model decoding, which proves the surfaces.
//
// # Speculative decoding
//
// Engine.Speculate and State.Speculate take a Drafter that proposes K
// tokens per window: NewDraftModel (a separate small model with its own
// State), an EAGLE-3 head (NewEagle3, OpenEagle3: fc over three target
// feature layers from ForwardFeatures, one decoder layer, a draft
// vocabulary mapped to target ids) or a Qwen3.5 MTP head (LoadMTP). The
// target verifies K+1 positions in one call and accepts drafts while they
// equal its argmax; KV and DeltaNet state roll back to the accepted
// position. The output equals greedy decoding bit for bit; SpecStats
// reports the acceptance length and target calls per token.
//
// # Arithmetic
//
// Weights stay in their stored type; nothing is dequantized as a whole.
// Each matrix product rounds its input the way llama.cpp's CPU backend
// does for that weight type (its vec_dot_type) and then takes one dot
// product per output element:
//
//	F32                  float32 activations
//	F16 / BF16           activations rounded to F16 / BF16
//	Q8_0, Q1_0, Q2_0     activations quantized to Q8_0 blocks of 32
//	                     (int8.QuantizeRowQ8_0), integer dot products
//	other types          one weight row at a time decoded by
//	                     gguf.Dequantize into scratch (slow), float32 dot
//	                     with the activations rounded as llama.cpp rounds
//	                     them for that type: Q8_0 blocks for Q4_0, Q4_1,
//	                     Q5_0, Q5_1, IQ4_NL, MXFP4, NVFP4; Q8_K blocks of
//	                     256 (ggml's quantize_row_q8_K_ref) for K-quants,
//	                     IQ and TQ types
//
// Options.KVF16 switches attention to llama.cpp's F16-KV flash-attention
// arithmetic (see Options); by default attention is float32.
//
// Sums that ggml accumulates in double (RMS norm, L2 norm, softmax) are
// accumulated in float64; everything else is float32. RoPE angles are
// built like ggml's rope cache (theta multiplied by base^(−2/n_rot) per
// pair, divided by the optional frequency factors); NORM and NEOX modes and
// partial rotary come from model.Config (HF checkpoints are made canonical
// by package model, so HF and GGUF forms of a model decode alike).
//
// # Determinism
//
// Every reduction has one fixed order that depends neither on the thread
// count nor on how many tokens are processed together: a matrix product is
// split over goroutines by output rows, and each output element is one
// kernel call on the same operands; attention runs per (token, head) over
// the cache slots in order; the Gated DeltaNet recurrence runs token by
// token (reference §5.1) even in prefill. Hence Forward on N tokens gives
// bit-identical logits to N single-token calls, and speculative
// verification is bit-identical to greedy decoding.
//
// # Gated DeltaNet
//
// q and k are L2-normalised in the Hugging Face / FLA form,
// x·1/sqrt(Σx² + 1e−6), rather than llama.cpp's x/max(‖x‖, eps): the two
// differ noticeably only for vectors of norm below about 1e−3, and on 20
// synthetic qwen35 GGUFs compared with llama.cpp, switching to llama.cpp's
// form changed no greedy id. Value head h reads key head h mod Hk when
// Config.SSMTiledHeads (qwen35 GGUF order), else h / (Hv/Hk). The conv
// state holds the raw projection rows of the last K−1 tokens, oldest
// first ([K−1][conv_dim], the transpose of the plan's past_conv surface),
// and the recurrent state is [Hv][Dk][Dv] float32 (past_ssm).
//
// DeltaNet layers cannot be truncated in place; State.SetRollback(n)
// keeps per-token snapshots so Truncate can move back up to n positions.
// DeltaNet layers ignore RunLayers' mask: their tokens form a chain.
//
// # Errors
//
// Token ids outside the vocabulary, sequences longer than the context
// (Options.Context, default the model's), missing or misshapen tensors
// and unsupported weight types are reported as errors naming the model
// file and tensor.
package runtime
