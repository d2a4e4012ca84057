package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qnnprep/qnnprep/qnnpack"
)

// TestBundleBuildSoCFlags: --soc by name or part number, and --soc-model
// with --dsp-arch for a chip the table lacks, reach the bundle's HTP
// config and every context-binary command's config (the fake SDK records
// what it compiled for); conflicting or incomplete choices are usage
// errors. bundle verify --json prints the manifest.
func TestBundleBuildSoCFlags(t *testing.T) {
	dir := t.TempDir()
	planPath, graphs := storiesBundleInputs(t, dir)
	root := fakeSDKRoot(t)
	for i, tt := range []struct {
		flags []string
		model int
		arch  string
	}{
		{[]string{"--soc", "sm8650"}, 57, "v75"},
		{[]string{"--soc", "8elite-gen5"}, 87, "v81"},
		{[]string{"--soc-model", "99", "--dsp-arch", "v83"}, 99, "v83"},
	} {
		out := filepath.Join(dir, "bundle"+string(rune('a'+i)))
		args := append([]string{"bundle", "build", "--plan", planPath, "--model", storiesGGUF, "--graphs", graphs, "--out", out, "--qnn-sdk", root}, tt.flags...)
		if code := run(args); code != 0 {
			t.Fatalf("%v: exit %d", tt.flags, code)
		}
		var ext struct {
			Devices []struct {
				SoCModel int    `json:"soc_model"`
				DSPArch  string `json:"dsp_arch"`
			} `json:"devices"`
		}
		b, _ := os.ReadFile(filepath.Join(out, qnnpack.HTPExtConfigName))
		if err := json.Unmarshal(b, &ext); err != nil || len(ext.Devices) != 1 || ext.Devices[0].SoCModel != tt.model || ext.Devices[0].DSPArch != tt.arch {
			t.Errorf("%v: %s: %s", tt.flags, qnnpack.HTPExtConfigName, b)
		}
		if i == 0 {
			// bundle verify prints a line, or with --json the manifest.
			var code int
			line := captureStdout(t, func() { code = run([]string{"bundle", "verify", out}) })
			js := captureStdout(t, func() { code += run([]string{"bundle", "verify", "--json", out}) })
			var m qnnpack.Manifest
			if code != 0 || !strings.Contains(line, "OK") || json.Valid([]byte(line)) || json.Unmarshal([]byte(js), &m) != nil || m.SoC != "8gen3" {
				t.Errorf("bundle verify: exit %d:\n%s\n--json:\n%s", code, line, js)
			}
		}
		for _, bin := range []string{"llama_01_of_02.bin", "llama_02_of_02.bin"} {
			var desc struct {
				SoCModel int    `json:"soc_model"`
				DSPArch  string `json:"dsp_arch"`
			}
			data, _ := os.ReadFile(filepath.Join(out, bin))
			if !strings.HasPrefix(string(data), "FAKECTX1\n") || json.Unmarshal(data[9:], &desc) != nil || desc.SoCModel != tt.model || desc.DSPArch != tt.arch {
				t.Errorf("%v: %s compiled for %+v", tt.flags, bin, desc)
			}
		}
	}
	for _, flags := range [][]string{
		{"--soc", "qcs8300"},                      // no dsp_arch in the table
		{"--soc-model", "99"},                     // without --dsp-arch
		{"--soc-model", "99", "--dsp-arch", "83"}, // not vNN
		{"--soc", "8elite", "--soc-model", "99", "--dsp-arch", "v83"},
		{},
	} {
		args := append([]string{"bundle", "build", "--plan", planPath, "--model", storiesGGUF, "--graphs", graphs, "--out", filepath.Join(dir, "bad"), "--qnn-sdk", root}, flags...)
		if code := run(args); code != 2 {
			t.Errorf("%v: exit %d, want 2", flags, code)
		}
	}
}

// TestBuildSoCFlags: build's --soc (default 8elite) and --soc-model with
// --dsp-arch reach the bundle's HTP config and the per-stage configs its
// context-binary commands read.
func TestBuildSoCFlags(t *testing.T) {
	src := synthLlamaGGUF(t)
	t.Setenv("QNN_SDK_ROOT", "")
	t.Setenv("QAIRT_SDK_ROOT", "")
	for _, tt := range []struct {
		flags []string
		want  string
	}{
		{nil, `"soc_model": 69,
      "dsp_arch": "v79"`},
		{[]string{"--soc", "sm8850"}, `"soc_model": 87,
      "dsp_arch": "v81"`},
		{[]string{"--soc-model", "99", "--dsp-arch", "v83"}, `"soc_model": 99,
      "dsp_arch": "v83"`},
	} {
		out := filepath.Join(t.TempDir(), "out")
		var code int
		stdout := captureStdout(t, func() {
			code = run(append([]string{"build", src, out, "--recipe", "q8_0", "--stages", "2", "--ar", "8,1", "--cl", "64", "--calibrate", "0", "--no-verify", "-q"}, tt.flags...))
		})
		if code != 0 {
			t.Fatalf("%v: exit %d\n%s", tt.flags, code, stdout)
		}
		configs, _ := filepath.Glob(filepath.Join(out, "work", "*", "stage_*", "htp_backend_ext.json"))
		configs = append(configs, filepath.Join(out, "bundle", qnnpack.HTPExtConfigName))
		if len(configs) != 3 {
			t.Fatalf("%v: HTP configs %v", tt.flags, configs)
		}
		for _, c := range configs {
			if b, _ := os.ReadFile(c); !strings.Contains(string(b), tt.want) {
				t.Errorf("%v: %s lacks %s:\n%s", tt.flags, c, tt.want, b)
			}
		}
	}
}
