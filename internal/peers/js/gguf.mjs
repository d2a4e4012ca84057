// Lists a GGUF file's tensors with @huggingface/gguf (an independent reader).
// Request: {"node_modules": dir, "path": file}. Reply: {"version", "tensors": [{name, type, dims, offset}]}.
import {peerImport, readRequest, reply, fail} from "./resolve.mjs";

process.on("unhandledRejection", fail);
process.on("uncaughtException", fail);

const req = await readRequest();
const {gguf} = await peerImport(req.node_modules, "@huggingface/gguf");
const out = await gguf(req.path, {allowLocalFile: true});
reply({
    version: out.metadata.version,
    tensors: out.tensorInfos.map((t) => ({
        name: t.name,
        type: t.dtype,
        dims: t.shape.map((d) => d.toString()),
        offset: t.offset.toString(),
    })),
});
