package qnnpack

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// SoC is a target chip as the HTP backend extensions name it.
type SoC struct {
	Name     string // canonical short name, e.g. "8elite"
	Model    int    // soc_model
	DSPArch  string // dsp_arch, e.g. "v79"
	Aliases  []string
	Marketed string
}

// SoCs is the soc_model/dsp_arch table of AI Hub Apps' manual bundle guide
// (qnn-genie.md §2).
var SoCs = []SoC{
	{Name: "8gen2", Model: 43, DSPArch: "v73", Aliases: []string{"sm8550"}, Marketed: "Snapdragon 8 Gen 2"},
	{Name: "8gen3", Model: 57, DSPArch: "v75", Aliases: []string{"sm8650"}, Marketed: "Snapdragon 8 Gen 3"},
	{Name: "8elite", Model: 69, DSPArch: "v79", Aliases: []string{"sm8750"}, Marketed: "Snapdragon 8 Elite"},
	{Name: "xelite", Model: 60, DSPArch: "v73", Aliases: []string{"x-elite", "xplus", "x-plus", "sc8380xp"}, Marketed: "Snapdragon X Elite / X Plus"},
}

// LookupSoC finds a SoC by name or alias (case-insensitive).
func LookupSoC(name string) (SoC, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	var names []string
	for _, s := range SoCs {
		if n == s.Name {
			return s, nil
		}
		for _, a := range s.Aliases {
			if n == a {
				return s, nil
			}
		}
		names = append(names, s.Name)
	}
	if n == "" {
		return SoC{}, fmt.Errorf("qnnpack: no target SoC given; choose one of %s", strings.Join(names, ", "))
	}
	return SoC{}, fmt.Errorf("qnnpack: unknown SoC %q; choose one of %s (or their part numbers)", name, strings.Join(names, ", "))
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
