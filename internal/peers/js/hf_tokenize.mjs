// Encodes texts with @huggingface/tokenizers (Tokenizers.js, an independent
// implementation of Hugging Face's tokenizer.json) from a tokenizer.json.
// Request: {"node_modules": dir, "path": tokenizer.json, "texts": [string]}.
// Reply: {"plain": [[id]], "special": [[id]]}, one list per text, encoded
// without and with the special tokens the post-processor adds.
import {readFileSync} from "node:fs";
import {peerImport, readRequest, reply, fail} from "./resolve.mjs";

process.on("unhandledRejection", fail);
process.on("uncaughtException", fail);

const req = await readRequest();
const {Tokenizer} = await peerImport(req.node_modules, "@huggingface/tokenizers");
// No tokenizer_config.json: everything the bundle's tokenizer does must be
// in tokenizer.json, which is all Genie reads.
const tok = new Tokenizer(JSON.parse(readFileSync(req.path, "utf8")), {});
const encode = (add_special_tokens) => req.texts.map((t) => tok.encode(t, {add_special_tokens}).ids);
reply({plain: encode(false), special: encode(true)});
