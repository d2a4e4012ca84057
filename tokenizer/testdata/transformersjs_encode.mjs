// Encodes texts with transformers.js tokenizers (@lenml/tokenizers, a
// port of Hugging Face tokenizers) from a tokenizer.json directory, for the
// optional HF comparison test.
// Request on stdin: {"node_modules": dir, "dir": path, "texts": [...]}
// Reply line: QNNPREP-RESULT {"ids": [[...], ...]}
import {readFileSync} from "node:fs";
import {join} from "node:path";
import {pathToFileURL} from "node:url";

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const req = JSON.parse(Buffer.concat(chunks).toString("utf8"));
const mod = await import(pathToFileURL(join(req.node_modules, "@lenml/tokenizers/dist/main.mjs")).href);
const tokenizerJSON = JSON.parse(readFileSync(join(req.dir, "tokenizer.json"), "utf8"));
let tokenizerConfig = {};
try {
    tokenizerConfig = JSON.parse(readFileSync(join(req.dir, "tokenizer_config.json"), "utf8"));
} catch {}
const tok = mod.TokenizerLoader.fromPreTrained({tokenizerJSON, tokenizerConfig});
const ids = req.texts.map((t) => Array.from(tok.encode(t, {add_special_tokens: false})));
process.stdout.write("QNNPREP-RESULT " + JSON.stringify({ids}) + "\n", () => process.exit(0));
