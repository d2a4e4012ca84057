// Package scaleout spreads one build over many machines with the pieces
// CI already has: an engine's job index for the split, a directory or an
// OCI registry for the shared cache, and a tar.zst or OCI artifact for the
// bundle. It sits above qnnpack and schedules nothing itself.
//
// # Shards
//
// A build's SDK work is one converter job per graph and one context-binary
// job per stage; a stage's jobs stay together. Owners splits the stages
// over N shards by device bytes (largest first, each to the least loaded
// shard), so every process computes the same split from the plan.
// BuildShard builds one shard's stages into its work directory and the
// cache; Assemble then writes the bundle from the cache without running a
// tool, or returns a *MissingError naming each missing stage and the
// shard that owns it.
//
// # Cache keys
//
// A job's key is qnnpack's: the SHA-256 of the SDK version, the tool, its
// arguments with every path replaced by a placeholder (the input's
// position, the temporary output directory, ${QNN_SDK_ROOT}) and the
// SHA-256 of each input's contents. Keys therefore match across work
// directories and machines. DirCache keeps an entry per key in a
// directory; OCICache keeps it in a registry as an artifact tagged with
// the key. Both check every file's SHA-256 when they hand it out.
//
// # Bundles
//
// Pack writes a bundle as a deterministic tar.zst (sorted entries, fixed
// times and owners); Unpack extracts one into a new directory, refusing
// anything but regular files and directories inside the target, and
// re-verifies the manifest before the directory gets its name.
// PushBundle and PullBundle move a bundle to and from a registry as one
// artifact.
//
// # CI
//
// GitHubWorkflow and KubernetesJobs write the files that run the shards
// and the assemble step on GitHub Actions and Kubernetes.
package scaleout
