// Command fakesdk stands in for the QAIRT SDK host tools in qnnpack's
// tests. One binary, installed under each tool's name, dispatches on
// argv[0]:
//
//	qairt-converter               --input_network X.onnx --output_path Y.dlc [--quantization_overrides E.json]
//	                              [--float_bitwidth 16|32] [--target_backend HTP] [--preserve_io_datatype NAME...]
//	qnn-context-binary-generator  --backend libQnnHtp.so [--model libQnnModelDlc.so] --dlc_path A.dlc[,B.dlc...]
//	                              --binary_file NAME --output_dir DIR --config_file CFG.json
//
// It checks every argument and input the way the real tools would reject
// them (unknown or missing flags, missing or empty files, an ONNX file that
// does not parse as a ModelProto, encodings that are not JSON, a config
// file without its two levels, soc_model and dsp_arch that do not belong
// together, graph names that do not match the DLCs) and writes placeholder
// outputs with a recognisable header: "FAKEDLC1\n" or "FAKECTX1\n" then
// JSON describing the inputs.
//
// Environment for tests:
//
//	FAKESDK_CALLS=FILE      append one JSON line per invocation: {"tool":…, "args":[…]}
//	FAKESDK_FAIL=TOOL[:S]   TOOL fails (when an argument contains S), after writing to stderr
//	FAKESDK_FAIL_CODE=N     its exit code (default 3)
//	FAKESDK_SLEEP=DUR       write half an output, then sleep DUR before finishing
//	FAKESDK_SPAWN=1         with FAKESDK_SLEEP, also start a child "sleep" in the same process group
//	FAKESDK_PIDS=DIR        write the tool's pid (and the child's) as files in DIR
//	FAKESDK_RUNNING=DIR     while running, hold DIR/running-PID; with FAKESDK_SLEEP, append to
//	                        DIR/overlap how many tools are running when its pause ends
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/qnnprep/qnnprep/onnx"
	pb "github.com/qnnprep/qnnprep/onnx/onnxpb"
	"github.com/qnnprep/qnnprep/qnnpack"
)

const (
	dlcMagic = "FAKEDLC1\n"
	ctxMagic = "FAKECTX1\n"
)

func main() {
	// Windows layouts: qnn-context-binary-generator.exe, and qairt-converter
	// as a Python entry point run by "python SCRIPT ARGS".
	exe := filepath.Base(os.Args[0])
	tool, args := strings.TrimSuffix(exe, ".exe"), os.Args[1:]
	if (tool == "python" || tool == "python3") && len(args) > 0 {
		tool, args = filepath.Base(args[0]), args[1:]
	}
	record(exe, tool, args)
	if dir := os.Getenv("FAKESDK_RUNNING"); dir != "" {
		me := filepath.Join(dir, "running-"+strconv.Itoa(os.Getpid()))
		os.WriteFile(me, nil, 0o644)
		defer os.Remove(me)
	}
	if spec := os.Getenv("FAKESDK_FAIL"); spec != "" {
		t, sub, _ := strings.Cut(spec, ":")
		if t == tool && (sub == "" || slices.ContainsFunc(args, func(a string) bool { return strings.Contains(a, sub) })) {
			code := 3
			if c, err := strconv.Atoi(os.Getenv("FAKESDK_FAIL_CODE")); err == nil {
				code = c
			}
			fmt.Fprintf(os.Stderr, "[INFO] %s starting\n", tool)
			fmt.Fprintf(os.Stderr, "[ERROR] %s: injected failure (FAKESDK_FAIL)\n", tool)
			fmt.Fprintf(os.Stderr, "[ERROR] graph finalize failed: err 1002\n")
			os.Exit(code)
		}
	}
	var err error
	switch tool {
	case "qairt-converter":
		err = converter(args)
	case "qnn-context-binary-generator":
		err = ctxgen(args)
	default:
		err = fmt.Errorf("fakesdk: unknown tool name %q", tool)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "[ERROR] %s: %v\n", tool, err)
		os.Exit(2)
	}
}

func record(exe, tool string, args []string) {
	path := os.Getenv("FAKESDK_CALLS")
	if path == "" {
		return
	}
	line, _ := json.Marshal(map[string]any{"exe": exe, "tool": tool, "args": args})
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakesdk:", err)
		os.Exit(70)
	}
	f.Write(append(line, '\n'))
	f.Close()
}

// parse reads "--flag value" pairs; list flags take every following
// argument that is not a flag. Unknown flags are errors, like argparse.
func parse(args []string, single, list []string) (map[string][]string, error) {
	out := map[string][]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, val, hasVal := strings.Cut(a, "=")
		switch {
		case slices.Contains(list, name):
			out[name] = []string{}
			for i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
				out[name] = append(out[name], args[i])
			}
		case slices.Contains(single, name):
			if _, dup := out[name]; dup {
				return nil, fmt.Errorf("%s given twice", name)
			}
			if !hasVal {
				if i+1 >= len(args) {
					return nil, fmt.Errorf("%s needs a value", name)
				}
				i++
				val = args[i]
			}
			out[name] = []string{val}
		default:
			return nil, fmt.Errorf("unrecognized argument %q", a)
		}
	}
	return out, nil
}

func need(flags map[string][]string, names ...string) error {
	for _, n := range names {
		if v, ok := flags[n]; !ok || len(v) == 0 || v[0] == "" {
			return fmt.Errorf("the following argument is required: %s", n)
		}
	}
	return nil
}

func readNonEmpty(path, what string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("%s %s is empty", what, path)
	}
	return b, nil
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func converter(args []string) error {
	f, err := parse(args, []string{"--input_network", "--output_path", "--quantization_overrides", "--float_bitwidth", "--target_backend"}, []string{"--preserve_io_datatype"})
	if err != nil {
		return err
	}
	if v, ok := f["--float_bitwidth"]; ok && v[0] != "16" && v[0] != "32" {
		return fmt.Errorf("--float_bitwidth %s: want 16 or 32", v[0])
	}
	if v, ok := f["--target_backend"]; ok && !slices.Contains([]string{"HTP", "CPU", "GPU", "AIC"}, v[0]) {
		return fmt.Errorf("--target_backend %s: want HTP, CPU, GPU or AIC (upper case)", v[0])
	}
	if err := need(f, "--input_network", "--output_path"); err != nil {
		return err
	}
	in := f["--input_network"][0]
	raw, err := readNonEmpty(in, "input network")
	if err != nil {
		return err
	}
	m, err := onnx.Read(in)
	if err != nil {
		return fmt.Errorf("input network %s is not an ONNX model: %w", in, err)
	}
	if m.GetIrVersion() <= 0 || m.GetGraph() == nil || len(m.GetGraph().GetInput()) == 0 || len(m.GetGraph().GetOutput()) == 0 {
		return fmt.Errorf("input network %s: no ir_version or graph with inputs and outputs", in)
	}
	io := map[string]bool{}
	for _, v := range m.GetGraph().GetInput() {
		io[v.GetName()] = true
	}
	for _, v := range m.GetGraph().GetOutput() {
		io[v.GetName()] = true
	}
	desc := map[string]any{"onnx_sha256": sum(raw)}
	ext, err := externalData(in, m)
	if err != nil {
		return err
	}
	if len(ext) > 0 {
		desc["external_data_sha256"] = ext
	}
	for _, k := range []string{"--float_bitwidth", "--target_backend"} {
		if v, ok := f[k]; ok {
			desc[k] = v[0]
		}
	}
	if enc, ok := f["--quantization_overrides"]; ok {
		b, err := readNonEmpty(enc[0], "quantization overrides")
		if err != nil {
			return err
		}
		var e map[string]any
		if err := json.Unmarshal(b, &e); err != nil {
			return fmt.Errorf("quantization overrides %s: %w", enc[0], err)
		}
		_, a := e["activation_encodings"]
		_, p := e["param_encodings"]
		_, l := e["encodings"]
		if !a && !p && !l {
			return fmt.Errorf("quantization overrides %s: no activation_encodings, param_encodings or encodings", enc[0])
		}
		desc["encodings_sha256"] = sum(b)
	}
	if keep, ok := f["--preserve_io_datatype"]; ok {
		for _, n := range keep {
			if !io[n] {
				return fmt.Errorf("--preserve_io_datatype: %q is not an input or output of the graph", n)
			}
		}
		desc["preserve_io_datatype"] = keep
	}
	out := f["--output_path"][0]
	if !strings.HasSuffix(out, ".dlc") {
		return fmt.Errorf("--output_path %s: want a .dlc file", out)
	}
	desc["graph"] = strings.TrimSuffix(filepath.Base(out), ".dlc")
	return writeOutput(out, dlcMagic, desc)
}

// externalData reads every external initializer of m as the real
// converter does (location relative to the model, offset and length inside
// the file) and returns the SHA-256 of each data file by location.
func externalData(path string, m *pb.ModelProto) (map[string]string, error) {
	out := map[string]string{}
	files := map[string][]byte{}
	for _, t := range m.GetGraph().GetInitializer() {
		if t.GetDataLocation() != pb.TensorProto_EXTERNAL {
			continue
		}
		kv := map[string]string{}
		for _, e := range t.GetExternalData() {
			kv[e.GetKey()] = e.GetValue()
		}
		loc := kv["location"]
		b, ok := files[loc]
		if !ok {
			var err error
			if b, err = os.ReadFile(filepath.Join(filepath.Dir(path), loc)); err != nil {
				return nil, fmt.Errorf("input network %s: initializer %s: external data: %w", path, t.GetName(), err)
			}
			files[loc] = b
		}
		off, err1 := strconv.ParseInt(kv["offset"], 10, 64)
		n, err2 := strconv.ParseInt(kv["length"], 10, 64)
		if err1 != nil || err2 != nil || off < 0 || n < 0 || off+n > int64(len(b)) {
			return nil, fmt.Errorf("input network %s: initializer %s: offset %q length %q outside %s (%d bytes)", path, t.GetName(), kv["offset"], kv["length"], loc, len(b))
		}
		out[loc] = sum(b)
	}
	return out, nil
}

// writeOutput writes magic + JSON, pausing half-way when FAKESDK_SLEEP is
// set so tests can interrupt a tool that has a half-written output.
func writeOutput(path, magic string, desc any) error {
	body, _ := json.Marshal(desc)
	data := append([]byte(magic), body...)
	data = append(data, '\n')
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	half := len(data) / 2
	if _, err := fh.Write(data[:half]); err != nil {
		return err
	}
	if d, err := time.ParseDuration(os.Getenv("FAKESDK_SLEEP")); err == nil {
		if dir := os.Getenv("FAKESDK_RUNNING"); dir != "" {
			defer func() {
				running, _ := filepath.Glob(filepath.Join(dir, "running-*"))
				f, err := os.OpenFile(filepath.Join(dir, "overlap"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
				if err == nil {
					fmt.Fprintln(f, len(running))
					f.Close()
				}
			}()
		}
		pids := os.Getenv("FAKESDK_PIDS")
		if pids != "" {
			os.WriteFile(filepath.Join(pids, strconv.Itoa(os.Getpid())), nil, 0o644)
		}
		if os.Getenv("FAKESDK_SPAWN") == "1" {
			c := exec.Command("sleep", "1000")
			if err := c.Start(); err != nil {
				return err
			}
			if pids != "" {
				os.WriteFile(filepath.Join(pids, strconv.Itoa(c.Process.Pid)), nil, 0o644)
			}
		}
		time.Sleep(d)
	}
	_, err = fh.Write(data[half:])
	return err
}

// isLib reports whether path names library stem in a Linux (libX.so) or
// Windows (X.dll, libX.dll) layout.
func isLib(path, stem string) bool {
	b := filepath.Base(path)
	return b == "lib"+stem+".so" || b == stem+".dll" || b == "lib"+stem+".dll"
}

func ctxgen(args []string) error {
	f, err := parse(args, []string{"--backend", "--model", "--dlc_path", "--binary_file", "--output_dir", "--config_file"}, nil)
	if err != nil {
		return err
	}
	if err := need(f, "--backend", "--dlc_path", "--binary_file", "--output_dir", "--config_file"); err != nil {
		return err
	}
	if b := f["--backend"][0]; !isLib(b, "QnnHtp") {
		return fmt.Errorf("--backend %s: this test SDK only has the HTP backend", b)
	} else if _, err := readNonEmpty(b, "backend"); err != nil {
		return err
	}
	if m, ok := f["--model"]; ok {
		if !isLib(m[0], "QnnModelDlc") {
			return fmt.Errorf("--model %s: with --dlc_path the model library must be libQnnModelDlc.so", m[0])
		}
		if _, err := readNonEmpty(m[0], "model library"); err != nil {
			return err
		}
	}
	var graphs []string
	dlcs := map[string]string{}
	for _, p := range strings.Split(f["--dlc_path"][0], ",") {
		b, err := readNonEmpty(p, "dlc")
		if err != nil {
			return err
		}
		if !strings.HasPrefix(string(b), dlcMagic) {
			return fmt.Errorf("dlc %s: not a DLC", p)
		}
		var d struct{ Graph string }
		if err := json.Unmarshal(b[len(dlcMagic):], &d); err != nil || d.Graph == "" {
			return fmt.Errorf("dlc %s: corrupt", p)
		}
		if _, dup := dlcs[d.Graph]; dup {
			return fmt.Errorf("graph %s given twice", d.Graph)
		}
		graphs = append(graphs, d.Graph)
		dlcs[d.Graph] = sum(b)
	}
	name := f["--binary_file"][0]
	if strings.ContainsRune(name, '/') || strings.HasSuffix(name, ".bin") {
		return fmt.Errorf("--binary_file %q: a base name without .bin", name)
	}
	outDir := f["--output_dir"][0]
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}

	// Level 1: backend_extensions → level 2: HTP backend-extension JSON.
	cb, err := readNonEmpty(f["--config_file"][0], "config file")
	if err != nil {
		return err
	}
	var outer struct {
		BackendExtensions *struct {
			SharedLibraryPath string `json:"shared_library_path"`
			ConfigFilePath    string `json:"config_file_path"`
		} `json:"backend_extensions"`
	}
	if err := strict(cb, &outer); err != nil || outer.BackendExtensions == nil {
		return fmt.Errorf("config file %s: want {\"backend_extensions\": {\"shared_library_path\", \"config_file_path\"}}: %v", f["--config_file"][0], err)
	}
	be := outer.BackendExtensions
	if !isLib(be.SharedLibraryPath, "QnnHtpNetRunExtensions") {
		return fmt.Errorf("shared_library_path %s: want libQnnHtpNetRunExtensions.so", be.SharedLibraryPath)
	}
	if _, err := readNonEmpty(be.SharedLibraryPath, "backend extensions library"); err != nil {
		return err
	}
	ib, err := readNonEmpty(be.ConfigFilePath, "backend extensions config")
	if err != nil {
		return err
	}
	var inner struct {
		Graphs []struct {
			GraphNames []string `json:"graph_names"`
			VTCMMB     *int     `json:"vtcm_mb"`
			O          *int     `json:"O"`
		} `json:"graphs"`
		Devices []struct {
			SoCModel *int   `json:"soc_model"`
			DSPArch  string `json:"dsp_arch"`
		} `json:"devices"`
		Context struct {
			WeightSharingEnabled bool `json:"weight_sharing_enabled"`
		} `json:"context"`
	}
	if err := strict(ib, &inner); err != nil {
		return fmt.Errorf("backend extensions config %s: %v", be.ConfigFilePath, err)
	}
	if len(inner.Devices) != 1 || inner.Devices[0].SoCModel == nil {
		return fmt.Errorf("backend extensions config: want one device with soc_model")
	}
	dev := inner.Devices[0]
	// Chips in qnnprep's table must carry its dsp_arch; others (given by
	// --soc-model/--dsp-arch) only a well-formed one.
	arch := ""
	for _, s := range qnnpack.SoCs {
		if s.Model == *dev.SoCModel {
			arch = s.DSPArch
		}
	}
	if arch == "" && !regexp.MustCompile(`^v[0-9]+$`).MatchString(dev.DSPArch) {
		return fmt.Errorf("soc_model %d: dsp_arch %q is not an HTP architecture", *dev.SoCModel, dev.DSPArch)
	}
	if arch != "" && dev.DSPArch != arch {
		return fmt.Errorf("soc_model %d is a %s, but dsp_arch is %q", *dev.SoCModel, arch, dev.DSPArch)
	}
	var named []string
	for _, g := range inner.Graphs {
		if g.VTCMMB == nil || *g.VTCMMB < 1 || *g.VTCMMB > 8 {
			return fmt.Errorf("graphs: vtcm_mb must be 1…8")
		}
		if g.O == nil || *g.O < 0 || *g.O > 3 {
			return fmt.Errorf("graphs: O must be 0…3")
		}
		named = append(named, g.GraphNames...)
	}
	if !slices.Equal(named, graphs) {
		return fmt.Errorf("graphs %v in the config, but the DLCs hold %v", named, graphs)
	}
	if len(graphs) > 1 && !inner.Context.WeightSharingEnabled {
		return fmt.Errorf("%d graphs in one context without weight_sharing_enabled", len(graphs))
	}
	return writeOutput(filepath.Join(outDir, name+".bin"), ctxMagic, map[string]any{
		"graphs": graphs, "dlc_sha256": dlcs, "soc_model": *dev.SoCModel, "dsp_arch": dev.DSPArch,
		"vtcm_mb": *inner.Graphs[0].VTCMMB,
	})
}

func strict(b []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
