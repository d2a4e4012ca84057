// Times llama.cpp (node-llama-cpp's prebuilt CPU build) the way llama-bench
// does: the context is filled to a depth (untimed), then pp processes the
// prompt ids in one evaluation and tg generates n tokens one decode at a
// time (greedy); each repetition erases its tokens back to the depth, and
// one untimed warm-up precedes the timed repetitions.
// Request: {"node_modules": dir, "model": path, "threads": T, "depth_ids": [...],
//           "prompt_ids": [...], "n": N, "reps": R}
// Reply:   {"pp_seconds": [...], "tg_seconds": [...], "max_rss_bytes": B}
import {peerImport, readRequest, reply, fail} from "./resolve.mjs";

process.on("unhandledRejection", fail);
process.on("uncaughtException", fail);

const req = await readRequest();
const {getLlama} = await peerImport(req.node_modules, "node-llama-cpp");

const threads = req.threads > 0 ? req.threads : 1;
const depthIDs = req.depth_ids ?? [];
const promptIDs = req.prompt_ids ?? [];
const n = req.n ?? 0;
const reps = req.reps > 0 ? req.reps : 1;

// maxThreads 0: the context's thread count is used as given, not capped
// by what other evaluations hold.
const llama = await getLlama({gpu: false, build: "never", progressLogs: false, logLevel: "error", maxThreads: 0});
const model = await llama.loadModel({modelPath: req.model, gpuLayers: 0});
const need = depthIDs.length + Math.max(promptIDs.length, n + 1) + 1;
const contextSize = Math.max(256, Math.ceil(need / 256) * 256);
// llama-bench's default micro-batch is 512 tokens.
const batchSize = Math.min(512, contextSize);
const ctx = await model.createContext({contextSize, batchSize, threads: {ideal: threads, min: threads}});
const seq = ctx.getSequence();

if (depthIDs.length > 0) await seq.evaluateWithoutGeneratingNewTokens(depthIDs);
const depth = seq.nextTokenIndex;
if (depth !== depthIDs.length) throw new Error(`context holds ${depth} tokens after the fill, want ${depthIDs.length}`);

async function rewind() {
    if (seq.nextTokenIndex > depth) await seq.eraseContextTokenRanges([{start: depth, end: seq.nextTokenIndex}]);
    if (seq.nextTokenIndex !== depth) throw new Error(`rewind left ${seq.nextTokenIndex} tokens, want ${depth}`);
}

async function pp() {
    const t0 = performance.now();
    await seq.evaluateWithoutGeneratingNewTokens(promptIDs);
    const s = (performance.now() - t0) / 1000;
    await rewind();
    return s;
}

// n decodes: the first feeds one token, each later one the previous
// greedy choice (the generator decodes the next token only when asked).
async function tg() {
    const first = depthIDs.length > 0 ? depthIDs[depthIDs.length - 1] : (model.tokens.bos ?? 0);
    let count = 0;
    const t0 = performance.now();
    for await (const _ of seq.evaluate([first], {temperature: 0, yieldEogToken: true})) {
        if (++count >= n) break;
    }
    const s = (performance.now() - t0) / 1000;
    await rewind();
    return s;
}

const result = {pp_seconds: [], tg_seconds: []};
for (let r = -1; r < reps; r++) {
    if (promptIDs.length > 0) {
        const s = await pp();
        if (r >= 0) result.pp_seconds.push(s);
    }
    if (n > 0) {
        const s = await tg();
        if (r >= 0) result.tg_seconds.push(s);
    }
}
result.max_rss_bytes = process.resourceUsage().maxRSS * 1024;

await ctx.dispose();
await model.dispose();
await llama.dispose();
reply(result);
