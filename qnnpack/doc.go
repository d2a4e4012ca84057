// Package qnnpack turns exported stages into something a phone runs: it
// finds the Qualcomm QAIRT/QNN SDK, plans and runs its tools per stage,
// writes the HTP and Genie configs and the bundle manifest, and models how
// fast the result will decode on a device.
//
// # Building
//
// Build is the whole flow; the pieces are exported for tools and tests:
//
//	sdk, _ := qnnpack.FindSDK(flagDir)     // --qnn-sdk, else $QNN_SDK_ROOT, else $QAIRT_SDK_ROOT
//	res, err := qnnpack.Build(ctx, qnnpack.BuildOptions{
//		SDK: sdk, Plan: plan, Config: m.Config, Graphs: files, // files: graph name → ONNX + encodings
//		OutDir: "bundle", SoC: "8elite", Tokenizer: "tokenizer.json",
//	})
//
// Per stage, every (AR, CL) graph is converted with qairt-converter (ONNX +
// encodings → DLC named after the graph), then qnn-context-binary-generator
// puts all of the stage's graphs into one weight-shared context binary
// (--dlc_path a.dlc,b.dlc, as public command lines do), configured through
// the two-level --config_file whose inner file is the HTP backend-extension
// JSON (soc_model, dsp_arch, vtcm_mb, O, weight_sharing_enabled). PlanJobs
// documents every flag. Jobs run in parallel (2 by default), each in its own
// process group, writing into a temporary directory that is renamed into
// place only on success; a cancelled context kills every group. A job is
// skipped when the SHA-256 of its input files, its arguments and the SDK
// version match its cache record and its outputs are unchanged.
//
// The bundle (genie_config.json validated against Genie's key lists,
// htp_backend_ext_config.json, plan.json, tokenizer.json, the context
// binaries in stage order, the ssd-q1 forecast prefix, manifest.json) is
// written into a temporary directory and renamed into place; VerifyBundle
// re-checks it.
//
// # Facts and assumptions
//
// Sources are in reference/qnn-genie.md (§1.1 key lists, §1.4 cache file,
// §2 tools). The SDK version comes from the root's sdk.yaml ("version:"
// line, read the same way by onnxruntime's QNN build), else from the root
// directory's name (qairt/2.40.0.251030). From public build scripts rather
// than Qualcomm's documentation: that the DLC's file name becomes the graph
// name in the context binary, and that a DLC converted with
// --quantization_overrides goes to the context binary generator without a
// qairt-quantizer pass. The placeholder forecast prefix has
// the shape Genie checks but zero contents.
//
// The SDK cannot be installed where qnnprep is developed: the tests run
// against a fake SDK (testdata/fakesdk) that checks arguments and inputs as
// the real tools would and writes placeholder outputs.
package qnnpack
