// Tokenizes texts with llama.cpp (node-llama-cpp, vocab only) for the
// tokenizer package's peer test.
// Request on stdin: {"node_modules": dir, "model": path, "texts": [...], "n_vocab": n}
// Reply line: QNNPREP-RESULT {"plain": [[...], ...], "special": [[...], ...], "text": [...], "eog": [...]}
// (parse_special false and true; no BOS/EOS added).
import {readFileSync} from "node:fs";
import {join} from "node:path";
import {pathToFileURL} from "node:url";

function fail(err) {
    process.stderr.write(String(err?.stack ?? err) + "\n");
    process.exit(1);
}
process.on("unhandledRejection", fail);
process.on("uncaughtException", fail);

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const req = JSON.parse(Buffer.concat(chunks).toString("utf8"));

// Load the package's ESM entry from its real path so its own imports resolve.
const dir = join(req.node_modules, "node-llama-cpp");
const meta = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
let entry = meta.exports?.["."] ?? meta.exports;
if (entry != null && typeof entry === "object") {
    entry = entry.import ?? entry.node ?? entry.default;
    if (entry != null && typeof entry === "object") entry = entry.default;
}
if (typeof entry !== "string") entry = meta.module ?? meta.main ?? "index.js";
const {getLlama} = await import(pathToFileURL(join(dir, entry)).href);

const llama = await getLlama({gpu: false, build: "never", progressLogs: false, logLevel: "error"});
const model = await llama.loadModel({modelPath: req.model, gpuLayers: 0, vocabOnly: true});
const plain = req.texts.map((t) => model.tokenize(t, false));
const special = req.texts.map((t) => model.tokenize(t, true));
// llama_detokenize of the parse_special ids, special tokens rendered.
const text = special.map((ids) => model.detokenize(ids, true));
// The ids llama.cpp treats as end of generation.
const eog = [];
for (let i = 0; i < (req.n_vocab ?? 0); i++) if (model.isEogToken(i)) eog.push(i);
process.stdout.write("QNNPREP-RESULT " + JSON.stringify({plain, special, text, eog}) + "\n", () => process.exit(0));
