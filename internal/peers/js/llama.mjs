// Runs llama.cpp through node-llama-cpp's low-level sequence API on explicit
// token ids (no tokenization, no chat wrapper, no LlamaCompletion), as
// reference/peers.md §1.2 prescribes for comparisons: CPU only, prebuilt
// binaries only, greedy sampling (temperature 0).
// Request: {"node_modules": dir, "op": "greedy"|"logits"|"load", "model": path, "ids": [...], "n": N, "threads": T}
import {peerImport, readRequest, reply, fail} from "./resolve.mjs";

process.on("unhandledRejection", fail);
process.on("uncaughtException", fail);

const req = await readRequest();
const {getLlama} = await peerImport(req.node_modules, "node-llama-cpp");

let ids = req.ids ?? [];
const n = req.n ?? 0;
const threads = req.threads > 0 ? req.threads : 1;

const llama = await getLlama({gpu: false, build: "never", progressLogs: false, logLevel: "error"});
const model = await llama.loadModel({modelPath: req.model, gpuLayers: 0});
if (req.op === "load") ids = [model.tokens.bos ?? 0];
// Size the context (and the batch) so the prompt and the generated tokens
// always fit: a context shift would silently change the results.
const contextSize = Math.max(64, Math.ceil((ids.length + n + 1) / 64) * 64);
const ctx = await model.createContext({contextSize, batchSize: contextSize, threads});
const seq = ctx.getSequence();

// yieldEogToken: keep going past end-of-generation tokens, so callers get
// exactly `count` ids to compare.
async function greedy(count) {
    const out = [];
    if (count > 0) {
        for await (const t of seq.evaluate(ids, {temperature: 0, yieldEogToken: true})) {
            out.push(t);
            if (out.length >= count) break;
        }
    }
    return out;
}

let result;
switch (req.op) {
case "greedy":
    result = {ids: await greedy(n)};
    break;
case "load":
    result = {ids: await greedy(1), train_context: model.trainContextSize};
    break;
case "logits": {
    // node-llama-cpp exposes no raw logits. With temperature 0 its sampler
    // chain is the greedy sampler alone, which leaves the candidates (the
    // raw logits of the whole vocabulary) untouched, and the probabilities it
    // returns are their float32 softmax. So log(p_i / p_max) recovers
    // logit_i − max(logit) at every position; a probability that underflowed
    // to 0 comes back as null (−Inf).
    const input = ids.map((t) => [t, {generateNext: {probabilities: true, options: {temperature: 0}}}]);
    const res = await seq.controlledEvaluate(input);
    const rows = [];
    for (let i = 0; i < ids.length; i++) {
        const probs = res[i]?.next?.probabilities;
        if (probs == null) throw new Error(`no probabilities for position ${i}`);
        let pmax = 0, size = 0;
        for (const [tok, p] of probs) {
            if (p > pmax) pmax = p;
            if (tok + 1 > size) size = tok + 1;
        }
        const row = new Array(size).fill(null);
        for (const [tok, p] of probs) row[tok] = p > 0 ? Math.log(p / pmax) : null;
        rows.push(row);
    }
    result = {logits: rows};
    break;
}
default:
    throw new Error(`unknown op ${JSON.stringify(req.op)}`);
}

await ctx.dispose();
await model.dispose();
await llama.dispose();
reply(result);
