// Package sparse makes structured-zero dense variants of a model, for
// studying sparsity on hardware that only runs dense operators (the
// Hexagon HTP has no sparse kernels). A variant has exactly the tensors and
// shapes of its source; only some weights are zero, in a pattern. It goes
// through the same quantize, plan, export and verify pipeline as the dense
// model, so its quality cost is measured with the same kernels. The
// patterns that remove whole structures (channel, head, neuron, layer) can
// also be pruned physically into a smaller model with the same outputs.
//
// # Patterns
//
// Rows are output channels and columns input elements: in ggml order a
// matrix has Dims[1] rows of Dims[0] elements.
//
//	N:M      in every row of each matched matrix, each group of M
//	         consecutive input elements keeps its N highest-scoring weights
//	         (ties: the lower index is kept). Sparsity is exactly 1 − N/M;
//	         a target that disagrees is an error. A matrix whose rows are
//	         not a multiple of M is an error when a target names it and is
//	         left dense (with a note) when it is only in the default set.
//	blockB   B×B tiles of [rows × inputs]; the round(S × tiles) tiles with
//	         the lowest score are zeroed per tensor. Edge tiles of a matrix
//	         whose sides are not multiples of B are smaller; tiles are
//	         ranked by mean score per weight so that they compete fairly,
//	         and the achieved sparsity (zeroed weights / weights) is
//	         reported.
//	channel  hidden (residual-stream) channels, model-wide: round(S × d)
//	         channels, at most d − 1. Channel c is column c of token_embd
//	         and output, column c of every matrix that reads the residual
//	         stream (attn_q/k/v, ffn_gate/up, attn_qkv, attn_gate,
//	         ssm_alpha/beta), row c of every residual writer (attn_output,
//	         ffn_down, ssm_out) and element c of every hidden-size norm.
//	head     attention query heads: round(S × g) of the g query heads of
//	         every KV group in every attention layer (at most g − 1, so
//	         each group keeps one and the GQA mapping stays valid): the
//	         head's q rows (with its sigmoid-gate rows when attn_q holds
//	         [q_h | gate_h] per head), its attn_q.bias entries and its
//	         attn_output columns.
//	neuron   FFN intermediate units: round(S × ffn) per layer (Config.FFN is
//	         one number), at most ffn − 1: ffn_gate and ffn_up rows and the
//	         ffn_down column.
//	layer    whole decoder layers: round(S × layers), at most layers − 1.
//
// The zeroed variant zeroes every weight of the removed structures, not
// only what is needed to silence them: the embedding column and writer rows
// keep a removed residual channel at 0, a removed head's attn_output
// columns (or a removed neuron's ffn_down column, a layer's writers) make
// its contribution 0, and the rest (reader columns, q rows, norm entries)
// is zeroed too so that the variant is the dense image of the pruned model
// and its sparsity counts the whole structure. In float32 the two choices
// decode identically.
//
// # Selection
//
// A weight's score is |W_ij| (magnitude) or |W_ij|·‖X_j‖ (Wanda: X_j is the
// activation of input column j over calibration tokens, gathered with an
// ActivationRecorder attached to the runtime). A structure's score is the
// sum of its weights' scores; the lowest-scoring structures are zeroed. A
// tensor without recorded activations (the token embedding, which is a
// lookup) is scored by magnitude. By default N:M and block patterns apply
// to every 2-D matrix of the decoder blocks except ssm_conv1d, ssm_alpha
// and ssm_beta (the small DeltaNet gates); Targets ("PATTERN=S", path.Match
// globs, first match wins, S = 0 excludes) choose tensors and per-tensor
// sparsities instead. The structural patterns take one model-wide S.
//
// # Physical pruning
//
// Prune removes the zeroed structures. For channels the hidden size becomes
// d' = d − removed, and every hidden-size RMSNorm would then average over d'
// instead of d dimensions. With x zero on the removed channels,
//
//	w_i x_i / sqrt(Σx²/d + eps) = w'_i x_i / sqrt(Σx²/d' + eps')
//	  with eps' = eps·d/d' and w' = w·sqrt(d/d'),
//
// since Σx²/d' + eps·d/d' = (d/d')(Σx²/d + eps). Config has one RMSEps, so
// the q/k norms (over head_dim) see eps' too; Prune scales the q and k
// rows (and biases) by s = sqrt(d/d'), which makes them exact as well:
// norm(s·q; eps·s²) = norm(q; eps).
//
// The Gated DeltaNet output norm shares RMSEps as well, and its input sits
// behind a SiLU and an L2 norm, so no weight can compensate eps'. Hybrid
// models therefore keep eps and scale the residual stream instead: the
// embedding and every writer row are multiplied by k = sqrt(d'/d), so the
// pruned stream is x' = k·x and Σx'²/d' + eps = Σx²/d + eps exactly; the
// hidden norms take w/k, and the output norm w/k (or w/k² when the head is
// the tied, scaled embedding). Both forms give the zeroed model's logits
// up to float32 summation order (tested within 1e-5 of the largest logit).
//
// # Quantization
//
// Zeros are applied before quantization, so every quantized block is
// encoded from the zeroed weights. Q8_0, Q2_0, F16 and BF16 represent 0
// exactly. A Q1_0 block cannot: every weight is ±d with d = mean|x| of the
// block (zeros counted), and a zero becomes +d; only a block that is
// entirely zero stays zero (d = 0). EffectiveSparsity measures the exact
// zeros in the written artifact, so a Q1_0 variant reports what survived.
package sparse
