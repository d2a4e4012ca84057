// peerImport loads an npm package from the node_modules directory that the
// Go side found (QNNPREP_PEERS_DIR or <repo>/.peers/node_modules). The
// scripts live in the source tree, away from node_modules, so a bare
// `import "pkg"` would not find it; once the package's entry file is loaded
// from its real path, its own imports resolve normally.
import {readFileSync} from "node:fs";
import {join} from "node:path";
import {pathToFileURL} from "node:url";

export async function peerImport(nodeModules, pkg) {
    const dir = join(nodeModules, pkg);
    const meta = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
    let entry = meta.exports?.["."] ?? meta.exports;
    if (entry != null && typeof entry === "object") {
        entry = entry.import ?? entry.node ?? entry.default;
        if (entry != null && typeof entry === "object") entry = entry.default;
    }
    if (typeof entry !== "string") entry = meta.module ?? meta.main ?? "index.js";
    return import(pathToFileURL(join(dir, entry)).href);
}

// readRequest parses the JSON request the Go side writes to stdin.
export async function readRequest() {
    const chunks = [];
    for await (const c of process.stdin) chunks.push(c);
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

// fail reports an error and exits at once: a half-initialised native
// binding can otherwise keep the event loop (and the Go caller) waiting.
export function fail(err) {
    process.stderr.write(String(err?.stack ?? err) + "\n");
    process.exit(1);
}

// reply writes the single result line the Go side looks for; anything else
// a library prints on stdout is ignored.
export function reply(result) {
    const line = "QNNPREP-RESULT " + JSON.stringify(result, (k, v) => typeof v === "bigint" ? v.toString() : v) + "\n";
    // Exit only once the line is flushed: large writes to a pipe are async.
    process.stdout.write(line, () => process.exit(0));
}
