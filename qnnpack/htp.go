package qnnpack

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// SoC is a target chip as the HTP backend extensions name it.
type SoC struct {
	Name     string // canonical short name, e.g. "8elite"
	Model    int    // soc_model
	DSPArch  string // dsp_arch, e.g. "v79"; "" when no public source states it
	Aliases  []string
	Marketed string
}

// SoCs is the soc_model/dsp_arch table of qnn-genie.md §2: AI Hub Apps'
// manual bundle guide (8 Gen 2/3, 8 Elite, X Elite) and the wider
// ExecuTorch QcomChipset table. SM8350 is 30 there (mllm says 35); QCS8300
// has no stated dsp_arch, so it needs --soc-model/--dsp-arch. Names and
// aliases are matched without case, spaces, hyphens or underscores.
var SoCs = []SoC{
	{Name: "888", Model: 30, DSPArch: "v68", Aliases: []string{"sm8350"}, Marketed: "Snapdragon 888"},
	{Name: "sa8295", Model: 39, DSPArch: "v68"},
	{Name: "8gen1", Model: 36, DSPArch: "v69", Aliases: []string{"sm8450"}, Marketed: "Snapdragon 8 Gen 1"},
	{Name: "8+gen1", Model: 42, DSPArch: "v69", Aliases: []string{"sm8475", "8plusgen1"}, Marketed: "Snapdragon 8+ Gen 1"},
	{Name: "sxr2230p", Model: 53, DSPArch: "v69"},
	{Name: "8gen2", Model: 43, DSPArch: "v73", Aliases: []string{"sm8550"}, Marketed: "Snapdragon 8 Gen 2"},
	{Name: "ssg2115p", Model: 46, DSPArch: "v73"},
	{Name: "ssg2125p", Model: 58, DSPArch: "v73"},
	{Name: "sxr1230p", Model: 45, DSPArch: "v73"},
	{Name: "qcs9100", Model: 77, DSPArch: "v73"},
	{Name: "sa8255", Model: 52, DSPArch: "v73"},
	{Name: "8gen3", Model: 57, DSPArch: "v75", Aliases: []string{"sm8650"}, Marketed: "Snapdragon 8 Gen 3"},
	{Name: "8elite", Model: 69, DSPArch: "v79", Aliases: []string{"sm8750"}, Marketed: "Snapdragon 8 Elite"},
	{Name: "sxr2330p", Model: 75, DSPArch: "v79"},
	{Name: "8elite-gen5", Model: 87, DSPArch: "v81", Aliases: []string{"sm8850"}, Marketed: "Snapdragon 8 Elite Gen 5"},
	{Name: "sar2230p", Model: 95, DSPArch: "v81"},
	{Name: "sw6100", Model: 96, DSPArch: "v81"},
	{Name: "qcs8300", Model: 82},
	{Name: "xelite", Model: 60, DSPArch: "v73", Aliases: []string{"xplus", "sc8380xp"}, Marketed: "Snapdragon X Elite / X Plus"},
}

// socKey folds a SoC name for matching: "8 Elite Gen 5", "8elite-gen5"
// and "8ELITE_GEN5" are the same chip.
func socKey(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '-', '_':
			return -1
		}
		return unicode.ToLower(r)
	}, strings.TrimSpace(s))
}

// customSoC matches the Name CustomSoC gives, so a custom chip survives
// the round trip through LookupSoC (options, manifests).
var customSoC = regexp.MustCompile(`^soc_model=([0-9]+),dsp_arch=(v[0-9]+)$`)

var dspArchRE = regexp.MustCompile(`^v[0-9]{2,3}$`)

// CustomSoC is a chip the table lacks, given by its soc_model and dsp_arch
// (e.g. 87, "v81"). Its Name, "soc_model=87,dsp_arch=v81", is accepted by
// LookupSoC.
func CustomSoC(model int, dspArch string) (SoC, error) {
	if model <= 0 || model > 1<<16 {
		return SoC{}, fmt.Errorf("qnnpack: soc_model %d: want a positive QNN SoC model number", model)
	}
	if !dspArchRE.MatchString(dspArch) {
		return SoC{}, fmt.Errorf("qnnpack: dsp_arch %q: want the HTP architecture as v and its number, e.g. v81", dspArch)
	}
	return SoC{Name: fmt.Sprintf("soc_model=%d,dsp_arch=%s", model, dspArch), Model: model, DSPArch: dspArch}, nil
}

// LookupSoC finds a SoC by name, alias or part number (ignoring case,
// spaces, hyphens and underscores), or by the Name of a CustomSoC.
func LookupSoC(name string) (SoC, error) {
	if m := customSoC.FindStringSubmatch(strings.TrimSpace(name)); m != nil {
		n, _ := strconv.Atoi(m[1])
		return CustomSoC(n, m[2])
	}
	n := socKey(name)
	var names []string
	for _, s := range SoCs {
		match := n == socKey(s.Name)
		for _, a := range s.Aliases {
			match = match || n == socKey(a)
		}
		if match && s.DSPArch == "" {
			return SoC{}, fmt.Errorf("qnnpack: SoC %s is soc_model %d, but no public source states its dsp_arch; give both (qnnprep: --soc-model %d --dsp-arch vNN)", s.Name, s.Model, s.Model)
		}
		if match {
			return s, nil
		}
		names = append(names, s.Name)
	}
	if n == "" {
		return SoC{}, fmt.Errorf("qnnpack: no target SoC given; choose one of %s", strings.Join(names, ", "))
	}
	return SoC{}, fmt.Errorf("qnnpack: unknown SoC %q; choose one of %s (or their part numbers), or give its soc_model and dsp_arch", name, strings.Join(names, ", "))
}

// Default HTP settings.
const (
	DefaultOptLevel = 3 // graph optimization level "O"
)

// The HTP backend-extension JSON (qnn-genie.md §2). Field order is the
// order written.
type htpGraph struct {
	GraphNames []string `json:"graph_names"`
	VTCMMB     int      `json:"vtcm_mb"`
	O          int      `json:"O"`
}

type htpCore struct {
	CoreID            int    `json:"core_id"`
	PerfProfile       string `json:"perf_profile"`
	RPCControlLatency int    `json:"rpc_control_latency"`
}

type htpDevice struct {
	SoCModel int       `json:"soc_model"`
	DSPArch  string    `json:"dsp_arch"`
	Cores    []htpCore `json:"cores,omitempty"`
}

type htpMemory struct {
	MemType string `json:"mem_type"`
}

type htpContext struct {
	WeightSharingEnabled bool `json:"weight_sharing_enabled"`
}

type htpExtConfig struct {
	Graphs  []htpGraph  `json:"graphs,omitempty"`
	Devices []htpDevice `json:"devices"`
	Memory  *htpMemory  `json:"memory,omitempty"`
	Context htpContext  `json:"context"`
}

// CompileExtConfig is the HTP backend-extension JSON for compiling one
// stage: its graphs with vtcm_mb and optimization level, the device
// (soc_model, dsp_arch) and weight sharing across the stage's graphs.
// Runtime-only keys (cores, perf_profile) are left out: some SDKs' context
// binary generators reject them as unknown.
func CompileExtConfig(graphs []string, vtcmMB, optLevel int, soc SoC) ([]byte, error) {
	if len(graphs) == 0 {
		return nil, fmt.Errorf("qnnpack: HTP config without graphs")
	}
	c := htpExtConfig{
		Graphs:  []htpGraph{{GraphNames: graphs, VTCMMB: vtcmMB, O: optLevel}},
		Devices: []htpDevice{{SoCModel: soc.Model, DSPArch: soc.DSPArch}},
		Context: htpContext{WeightSharingEnabled: true},
	}
	return marshal(c)
}

// RuntimeExtConfig is the bundle's htp_backend_ext_config.json, Genie's
// backend.extensions: the device with a burst perf profile, shared-buffer
// memory and weight sharing, like AI Hub Apps' template.
func RuntimeExtConfig(soc SoC) ([]byte, error) {
	c := htpExtConfig{
		Devices: []htpDevice{{SoCModel: soc.Model, DSPArch: soc.DSPArch,
			Cores: []htpCore{{CoreID: 0, PerfProfile: "burst", RPCControlLatency: 100}}}},
		Memory:  &htpMemory{MemType: "shared_buffer"},
		Context: htpContext{WeightSharingEnabled: true},
	}
	return marshal(c)
}

// CtxGenConfig is the outer --config_file of qnn-context-binary-generator:
// it names the HTP extensions library and the inner HTP JSON (two levels,
// qnn-genie.md §2).
func CtxGenConfig(extensionsLib, innerPath string) ([]byte, error) {
	c := struct {
		BackendExtensions struct {
			SharedLibraryPath string `json:"shared_library_path"`
			ConfigFilePath    string `json:"config_file_path"`
		} `json:"backend_extensions"`
	}{}
	c.BackendExtensions.SharedLibraryPath = extensionsLib
	c.BackendExtensions.ConfigFilePath = innerPath
	return marshal(c)
}

func marshal(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
