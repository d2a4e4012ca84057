package main

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// flagTests names, for every flag of every command, the test in this
// package that shows the flag's effect: the output or behaviour it
// documents changes when it is given. For flags that must not change the
// output (threads, progress), the test shows the output is the same.
// Keys are "COMMAND [SUBCOMMAND] --LONG-NAME".
//
// A flag missing here, a key naming no flag, or a test that does not
// exist fails TestFlagsHaveEffectTests: a flag that is accepted must
// change something (issue #16), and this table is where that is proved.
// A new flag comes with its test; a flag without a possible effect test
// is removed instead.
var flagTests = map[string]string{
	"bench --prompt":        "TestBenchCommand",
	"bench --gen":           "TestBenchCommand",
	"bench --depth":         "TestBenchCommand",
	"bench --reps":          "TestBenchFlags",
	"bench --threads":       "TestBenchCommand",
	"bench --batch":         "TestBenchFlags",
	"bench --kv-f16":        "TestBenchFlags",
	"bench --draft":         "TestBenchFlags",
	"bench --spec-text":     "TestBenchSpecText",
	"bench --draft-layers":  "TestBenchCommand",
	"bench --k":             "TestBenchCommand",
	"bench --spec-depth":    "TestBenchFlags",
	"bench --llama":         "TestBenchLlamaFlags",
	"bench --llama-peer":    "TestBenchLlamaFlags",
	"bench --llama-timeout": "TestBenchLlamaTimeout",
	"bench --llama-cpu":     "TestBenchLlamaFlags",
	"bench --output":        "TestBenchCommand",
	"bench --plot":          "TestBenchCommand",
	"bench --no-sanity":     "TestBenchFlags",
	"bench --ref-threads":   "TestBenchFlags",
	"bench --tolerance":     "TestBenchFlags",
	"bench --seed":          "TestBenchFlags",
	"bench --read-probe":    "TestBenchFlags",
	"bench --fault":         "TestBenchCommand",
	"bench --quiet":         "TestQuietFlags",

	"bench --plan":                "TestBenchSpecPlans",
	"bench --forecast-embeddings": "TestBenchSpecPlans",
	"bench --device":              "TestBenchSpecPlans",

	"bench convert --recipe":  "TestBenchConvertCommand",
	"bench convert --threads": "TestBenchConvertFlags",
	"bench convert --dir":     "TestBenchConvertFlags",
	"bench convert --scratch": "TestBenchConvertFlags",
	"bench convert --output":  "TestBenchConvertCommand",
	"bench convert --quiet":   "TestQuietFlags",

	"bench report --output": "TestBenchCommand",
	"bench report --plot":   "TestBenchCommand",

	"build --recipe":                         "TestBuildDryRun",
	"build --override":                       "TestQuantizeOverride",
	"build --stages":                         "TestBuildDryRun",
	"build --layers-per-stage":               "TestBuildPlanFlags",
	"build --max-stage-bytes":                "TestBuildPlanFlags",
	"build --ar":                             "TestBuildDryRun",
	"build --cl":                             "TestBuildDryRun",
	"build --arc":                            "TestBuildPlanFlags",
	"build --positional":                     "TestBuildPlanFlags",
	"build --dialog":                         "TestBuildSPDFakeSDK",
	"build --forecast-token-count":           "TestBuildPlanFlags",
	"build --branches":                       "TestBuildPlanFlags",
	"build --forecast-prefix":                "TestBuildPlanFlags",
	"build --forecast-prefix-name":           "TestBuildPlanFlags",
	"build --forecast-embeddings":            "TestBuildSSD",
	"build --forecast-prefix-file":           "TestBuildSSD",
	"build --draft-len":                      "TestBuildSPDFakeSDK",
	"build --window":                         "TestBuildPlanFlags",
	"build --ngram":                          "TestBuildPlanFlags",
	"build --gcap":                           "TestBuildPlanFlags",
	"build --n-branches":                     "TestBuildPlanFlags",
	"build --max-tokens-target-can-evaluate": "TestBuildPlanFlags",
	"build --vtcm-mb":                        "TestBuildErrorsNameStep",
	"build --context-size":                   "TestBuildPlanFlags",
	"build --probe-prompt":                   "TestBuildPlanFlags",
	"build --draft":                          "TestBuildSPDFakeSDK",
	"build --draft-stages":                   "TestBuildFlags",
	"build --eagle3":                         "TestBuildPlanFlags",
	"build --name":                           "TestBuildFlags",
	"build --skip-check":                     "TestBuildFlags",
	"build --allow-recurrent-state":          "TestBuildDryRun",
	"build --container":                      "TestBuildDryRun",
	"build --soc":                            "TestBuildSoCFlags",
	"build --soc-model":                      "TestBuildSoCFlags",
	"build --dsp-arch":                       "TestBuildSoCFlags",
	"build --qnn-sdk":                        "TestBuildFakeSDK",
	"build --dry-run":                        "TestBuildDryRunScript",
	"build --tokenizer":                      "TestBuildFlags",
	"build --calibrate":                      "TestBuildFlags",
	"build --calib-text":                     "TestBuildCalibSimulate",
	"build --calib-split":                    "TestBuildCalibSimulate",
	"build --calib-samples":                  "TestBuildCalibSimulate",
	"build --calib-len":                      "TestBuildCalibSimulate",
	"build --calib-stat":                     "TestBuildCalibSimulate",
	"build --simulate":                       "TestBuildCalibSimulate",
	"build --converter-arg":                  "TestBuildFlags",
	"build --jobs":                           "TestBuildFlags",
	"build --timeout":                        "TestBuildFlags",
	"build --force":                          "TestBuildFlags",
	"build --cache":                          "TestBuildShards",
	"build --shard":                          "TestBuildShards",
	"build --shard-count":                    "TestBuildShards",
	"build --tokens":                         "TestBuildFlags",
	"build --no-verify":                      "TestBuildDryRun",
	"build --prompts":                        "TestBuildFlags",
	"build --min-top1":                       "TestBuildFlags",
	"build --min-match":                      "TestBuildThresholds",
	"build --min-cosine":                     "TestBuildThresholds",
	"build --fail-on-degeneration":           "TestBuildThresholds",
	"build --threads":                        "TestBuildFlags",
	"build --json":                           "TestBuildDryRun",
	"build --quiet":                          "TestQuietFlags",

	"bundle verify --json": "TestBundleBuildSoCFlags",

	"bundle build --plan":                  "TestBundleBuildAndVerifyCommands",
	"bundle build --model":                 "TestBundleBuildAndVerifyCommands",
	"bundle build --graphs":                "TestBundleBuildAndVerifyCommands",
	"bundle build --out":                   "TestBundleBuildAndVerifyCommands",
	"bundle build --work":                  "TestBundleBuildFlags",
	"bundle build --soc":                   "TestBundleBuildSoCFlags",
	"bundle build --soc-model":             "TestBundleBuildSoCFlags",
	"bundle build --dsp-arch":              "TestBundleBuildSoCFlags",
	"bundle build --qnn-sdk":               "TestBundleBuildAndVerifyCommands",
	"bundle build --tokenizer":             "TestBundleBuildFlags",
	"bundle build --forecast-prefix":       "TestBundleBuildFlags",
	"bundle build --dry-run":               "TestBundleBuildFlags",
	"bundle build --jobs":                  "TestBundleBuildFlags",
	"bundle build --timeout":               "TestBundleBuildFlags",
	"bundle build --force":                 "TestBundleBuildFlags",
	"bundle build --skip-check":            "TestBundleBuildFlags",
	"bundle build --converter-arg":         "TestBundleBuildFlags",
	"bundle build --allow-recurrent-state": "TestBundleBuildRecurrentState",
	"bundle build --cache":                 "TestBundleShardsAndAssemble",
	"bundle build --shard":                 "TestBundleShardsAndAssemble",
	"bundle build --shard-count":           "TestBundleShardsAndAssemble",

	"bundle assemble --plan":          "TestBundleShardsAndAssemble",
	"bundle assemble --model":         "TestBundleShardsAndAssemble",
	"bundle assemble --graphs":        "TestBundleShardsAndAssemble",
	"bundle assemble --out":           "TestBundleShardsAndAssemble",
	"bundle assemble --work":          "TestBundleShardsAndAssemble",
	"bundle assemble --soc":           "TestBundleShardsAndAssemble",
	"bundle assemble --soc-model":     "TestBundleShardsAndAssemble",
	"bundle assemble --dsp-arch":      "TestBundleShardsAndAssemble",
	"bundle assemble --qnn-sdk":       "TestBundleShardsAndAssemble",
	"bundle assemble --tokenizer":     "TestBundleShardsAndAssemble",
	"bundle assemble --converter-arg": "TestBundleShardsAndAssemble",
	"bundle assemble --cache":         "TestBundleShardsAndAssemble",
	"bundle assemble --shard-count":   "TestBundleShardsAndAssemble",

	"ci github --model":           "TestCICommands",
	"ci github --graphs":          "TestCICommands",
	"ci github --shards":          "TestCICommands",
	"ci github --cache":           "TestCICommands",
	"ci github --soc":             "TestCICommands",
	"ci github --runs-on":         "TestCICommands",
	"ci github --qnnprep-version": "TestCICommands",
	"ci github --output":          "TestCICommands",

	"ci kubernetes --model":   "TestCICommands",
	"ci kubernetes --graphs":  "TestCICommands",
	"ci kubernetes --shards":  "TestCICommands",
	"ci kubernetes --cache":   "TestCICommands",
	"ci kubernetes --soc":     "TestCICommands",
	"ci kubernetes --image":   "TestCICommands",
	"ci kubernetes --pvc":     "TestCICommands",
	"ci kubernetes --qnn-sdk": "TestCICommands",
	"ci kubernetes --name":    "TestCICommands",
	"ci kubernetes --output":  "TestCICommands",

	"check --probe-prompt":      "TestPlanCheckCommands",
	"check --max-context-bytes": "TestCheckMaxContextBytes",
	"check --json":              "TestJSONFlags",

	"compare --golden":             "TestCompareGolden",
	"compare --source-fingerprint": "TestVerdicts",
	"compare --json":               "TestJSONFlags",
	"compare --threads":            "TestThreadsDoNotChangeOutputs",

	"convert --to":     "TestConvertIsLosslessAndDeterministic",
	"convert --vocab":  "TestConvertVocab",
	"convert --target": "TestConvertEagle3",
	"convert --quiet":  "TestQuietFlags",

	"demo --model":     "TestDemoUserModel",
	"demo --keep":      "TestDemo",
	"demo --tokenizer": "TestDemoUserModel",
	"demo --stages":    "TestDemoFlags",
	"demo --tokens":    "TestDemoFlags",
	"demo --soc":       "TestDemoFlags",
	"demo --verbose":   "TestDemoFlags",

	"estimate --plan":            "TestEstimateFromPlan",
	"estimate --weights-gb":      "TestEstimateCommand",
	"estimate --weights-bytes":   "TestEstimateCommand",
	"estimate --device":          "TestEstimateCommand",
	"estimate --bandwidth":       "TestEstimateCommand",
	"estimate --position-ms":     "TestEstimateCommand",
	"estimate --draft-step-ms":   "TestEstimateCommand",
	"estimate --host-ms":         "TestEstimateCommand",
	"estimate --k":               "TestEstimateCommand",
	"estimate --acceptance":      "TestEstimateCommand",
	"estimate --weight-fraction": "TestEstimateWeightFraction",
	"estimate --json":            "TestEstimateCommand",

	"export onnx --opset":         "TestExportFlags",
	"export onnx --ir":            "TestExportFlags",
	"export onnx --external":      "TestExportFlags",
	"export onnx --ranges":        "TestExportFlags",
	"export onnx --calibrate":     "TestExportCommand",
	"export onnx --calib-ids":     "TestExportFlags",
	"export onnx --calib-text":    "TestExportCalibText",
	"export onnx --calib-split":   "TestExportCalibText",
	"export onnx --calib-samples": "TestExportCalibText",
	"export onnx --calib-len":     "TestExportCalibText",
	"export onnx --calib-stat":    "TestExportCalibText",
	"export onnx --force":         "TestExportFlags",
	"export onnx --quiet":         "TestQuietFlags",

	"golden record --prompts":     "TestGoldenVerifyCommands",
	"golden record --prompt-file": "TestGoldenLongPrompt",
	"golden record --n":           "TestGoldenRecordFlags",
	"golden record --top-k":       "TestGoldenRecordFlags",
	"golden record --ctx":         "TestGoldenRecordFlags",
	"golden record --kv-f16":      "TestVerdicts",
	"golden record --threads":     "TestThreadsDoNotChangeOutputs",

	"inspect --json": "TestJSONFlags",

	"plan --output":                         "TestPlanCheckCommands",
	"plan --name":                           "TestBuildDryRun",
	"plan --stages":                         "TestPlanCheckCommands",
	"plan --layers-per-stage":               "TestPlanFlags",
	"plan --max-stage-bytes":                "TestPlanFlags",
	"plan --container":                      "TestPlanContainer",
	"plan --ar":                             "TestPlanCheckCommands",
	"plan --cl":                             "TestPlanCheckCommands",
	"plan --arc":                            "TestPlanFlags",
	"plan --positional":                     "TestPlanFlags",
	"plan --dialog":                         "TestPlanFlags",
	"plan --forecast-token-count":           "TestPlanFlags",
	"plan --branches":                       "TestPlanFlags",
	"plan --forecast-prefix":                "TestPlanFlags",
	"plan --forecast-prefix-name":           "TestPlanFlags",
	"plan --draft-len":                      "TestPlanFlags",
	"plan --window":                         "TestPlanFlags",
	"plan --ngram":                          "TestPlanFlags",
	"plan --gcap":                           "TestPlanFlags",
	"plan --n-branches":                     "TestPlanFlags",
	"plan --max-tokens-target-can-evaluate": "TestPlanFlags",
	"plan --vtcm-mb":                        "TestPlanFlags",
	"plan --context-size":                   "TestPlanFlags",
	"plan --probe-prompt":                   "TestPlanFlags",

	"quantize --recipe":   "TestExportCommand",
	"quantize --override": "TestQuantizeOverride",
	"quantize --report":   "TestQuantizeReport",
	"quantize --json":     "TestJSONFlags",
	"quantize --threads":  "TestThreadsDoNotChangeOutputs",

	"run --prompt":     "TestRunCommand",
	"run --ids":        "TestRunCommand",
	"run --n":          "TestRunCommand",
	"run --json":       "TestRunCommand",
	"run --logits":     "TestRunCommand",
	"run --threads":    "TestThreadsDoNotChangeOutputs",
	"run --ctx":        "TestRunPlan",
	"run --ignore-eos": "TestRunPlan",
	"run --kv-f16":     "TestRunKVF16",
	"run --plan":       "TestRunPlan",

	"sdk --qnn-sdk": "TestSDKFlag",
	"sdk --json":    "TestJSONFlags",

	"sparsify --pattern":            "TestSparsifyCommand",
	"sparsify --sparsity":           "TestSparsifyCommand",
	"sparsify --target":             "TestSparsifyErrors",
	"sparsify --align":              "TestSparsifyFlags",
	"sparsify --select":             "TestSparsifyFlags",
	"sparsify --calib":              "TestSparsifyFlags",
	"sparsify --recipe":             "TestSparsifyFlags",
	"sparsify --override":           "TestSparsifyFlags",
	"sparsify --prune":              "TestSparsifyCommand",
	"sparsify --golden":             "TestSparsifyCommand",
	"sparsify --source-fingerprint": "TestVerdicts",
	"sparsify --prompts":            "TestSparsifyFlags",
	"sparsify --steps":              "TestSparsifyCommand",
	"sparsify --save-golden":        "TestSparsifyCommand",
	"sparsify --report":             "TestSparsifyFlags",
	"sparsify --json":               "TestSparsifyCommand",
	"sparsify --threads":            "TestThreadsDoNotChangeOutputs",

	"speculate --draft":       "TestSpeculateCommand",
	"speculate --eagle3":      "TestSpeculateEagle3Plan",
	"speculate --mtp":         "TestSpeculateCommand",
	"speculate --k":           "TestSpeculateCommand",
	"speculate --prompt":      "TestSpeculateCommand",
	"speculate --ids":         "TestSpeculateCommand",
	"speculate --prompt-file": "TestSpeculateFlags",
	"speculate --n":           "TestSpeculateCommand",
	"speculate --plan":        "TestSpeculateCommand",
	"speculate --json":        "TestSpeculateCommand",
	"speculate --ctx":         "TestSpeculateFlags",
	"speculate --threads":     "TestThreadsDoNotChangeOutputs",

	"verify --golden":               "TestGoldenVerifyCommands",
	"verify --plan":                 "TestGoldenVerifyCommands",
	"verify --simulate-encodings":   "TestVerifySimulateEncodings",
	"verify --draft":                "TestGoldenVerifyCommands",
	"verify --eagle3":               "TestVerifyEagle3",
	"verify --k":                    "TestGoldenVerifyCommands",
	"verify --min-match":            "TestGoldenVerifyCommands",
	"verify --min-top1":             "TestVerifyThresholds",
	"verify --min-cosine":           "TestVerifyThresholds",
	"verify --fail-on-degeneration": "TestVerifyFailOnDegeneration",
	"verify --json":                 "TestGoldenVerifyCommands",
	"verify --report":               "TestGoldenVerifyCommands",
	"verify --ctx":                  "TestGoldenLongPrompt",
	"verify --threads":              "TestThreadsDoNotChangeOutputs",
	"verify --kv-f16":               "TestVerdicts",
	"verify --source-fingerprint":   "TestVerdicts",
}

// TestFlagsHaveEffectTests walks every command (and subcommand named in
// its usage lines), collects the flags its flag set defines without
// running it, and requires each in flagTests with a test that exists.
func TestFlagsHaveEffectTests(t *testing.T) {
	flags := allFlags(t)
	tests := testFuncs(t)
	for _, key := range flags {
		name, ok := flagTests[key]
		switch {
		case !ok:
			t.Errorf("%s: not in flagTests; add it with the test that shows its effect", key)
		case !tests[name]:
			t.Errorf("%s: flagTests names %q, which is not a test in this package", key, name)
		}
	}
	for key := range flagTests {
		if !slices.Contains(flags, key) {
			t.Errorf("flagTests lists %s, which no command defines; remove it", key)
		}
	}
	t.Logf("%d flags", len(flags))
}

// usageSub matches a usage line's subcommand: a lower-case word right
// after "qnnprep COMMAND" (MODEL, PATH and [flags] are not subcommands).
var usageSub = regexp.MustCompile(`^\s*qnnprep\s+(\S+)(?:\s+([a-z][a-z0-9-]*)\b)?`)

// allFlags returns "COMMAND [SUB] --NAME" for every flag, sorted. It runs
// each command with flagSets set, so parseFlags hands over the flag set
// and returns before the command does anything.
func allFlags(t *testing.T) []string {
	t.Helper()
	defer func() { flagSets = nil }()
	var keys []string
	for _, c := range commands {
		name := c.Name
		subs := map[string]bool{}
		for _, line := range strings.Split(c.Usage, "\n") {
			m := usageSub.FindStringSubmatch(line)
			if m == nil || m[1] != name {
				t.Errorf("%s: usage line %q does not start with qnnprep %s", name, line, name)
				continue
			}
			subs[m[2]] = true
		}
		for sub := range subs {
			prefix := strings.TrimSpace(name + " " + sub)
			var args []string
			if sub != "" {
				args = []string{sub}
			}
			got := 0
			flagSets = func(fs *pflag.FlagSet) {
				got++
				fs.VisitAll(func(f *pflag.Flag) { keys = append(keys, prefix+" --"+f.Name) })
			}
			if err := c.Run(context.Background(), c, args); !errors.Is(err, errFlagsCollected) || got != 1 {
				t.Errorf("%s: did not reach parseFlags once before doing anything (err %v, %d flag sets)", prefix, err, got)
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// testFuncs returns the names of the Test functions in this package's
// _test.go files.
func testFuncs(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Test") && fd.Name.Name != "TestMain" {
				names[fd.Name.Name] = true
			}
		}
	}
	return names
}
