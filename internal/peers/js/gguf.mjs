// Reads a GGUF file's header with @huggingface/gguf (an independent reader).
// Request: {"node_modules": dir, "path": file}.
// Reply: {"version", "metadata": [{key, type, sub_type, value}] in file order,
// "tensors": [{name, type, dims, offset}]}; 64-bit integers as strings.
import {peerImport, readRequest, reply, fail} from "./resolve.mjs";

process.on("unhandledRejection", fail);
process.on("uncaughtException", fail);

const req = await readRequest();
const {gguf} = await peerImport(req.node_modules, "@huggingface/gguf");
const out = await gguf(req.path, {allowLocalFile: true, typedMetadata: true});
const skip = new Set(["version", "tensor_count", "kv_count"]); // header fields, not KVs
reply({
    version: out.metadata.version,
    metadata: Object.entries(out.typedMetadata)
        .filter(([key]) => !skip.has(key))
        .map(([key, v]) => ({key, type: v.type, sub_type: v.subType ?? null, value: v.value})),
    tensors: out.tensorInfos.map((t) => ({
        name: t.name,
        type: t.dtype,
        dims: t.shape.map((d) => d.toString()),
        offset: t.offset.toString(),
    })),
});
