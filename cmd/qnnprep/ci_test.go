package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCICommands: every flag of ci github and ci kubernetes lands in the
// files they write (in directories they make); more shards than stages is
// refused.
func TestCICommands(t *testing.T) {
	needStories(t)
	dir := t.TempDir()
	planPath := filepath.Join(dir, "plan.json")
	require.Equal(t, 0, run([]string{"plan", storiesGGUF, "--stages", "2", "--ar", "32,1", "--cl", "128", "-o", planPath}))
	common := []string{planPath, "--model", "m/q.gguf", "--graphs", "m/onnx", "--cache", "oci://ghcr.io/acme/cache", "--soc", "8gen3"}

	wf := filepath.Join(dir, ".github", "workflows", "build.yml")
	require.Equal(t, 0, run(append([]string{"ci", "github"}, append(common, "--shards", "2", "--runs-on", "self-hosted", "--qnnprep-version", "v0.3.0", "-o", wf)...)))
	b, err := os.ReadFile(wf)
	require.NoError(t, err)
	for _, want := range []string{"runs-on: self-hosted", "cmd/qnnprep@v0.3.0", "--shard-count 2", "/2'", "--cache oci://ghcr.io/acme/cache",
		"--soc 8gen3", "--model m/q.gguf", "--graphs m/onnx", "--plan " + planPath} {
		assert.Contains(t, string(b), want)
	}
	assert.Equal(t, 1, run(append([]string{"ci", "github"}, append(common, "--shards", "3", "-o", wf)...)), "3 shards for 2 stages")
	assert.Equal(t, 2, run(append([]string{"ci", "github"}, append(common, "--soc", "nosuchsoc", "-o", wf)...)))

	require.Equal(t, 0, run(append([]string{"ci", "kubernetes"}, append(common, "--shards", "2", "--image", "reg.example/qnnprep:1", "--pvc", "work-claim",
		"--qnn-sdk", "/opt/qairt/2.40", "--name", "tiny", "-o", filepath.Join(dir, "k8s"))...)), "-o names a directory not made yet")
	shards, err := os.ReadFile(filepath.Join(dir, "k8s", "tiny-shards.yaml"))
	require.NoError(t, err)
	asm, err := os.ReadFile(filepath.Join(dir, "k8s", "tiny-assemble.yaml"))
	require.NoError(t, err)
	for _, want := range []string{"image: reg.example/qnnprep:1", "claimName: work-claim", "value: /opt/qairt/2.40", "name: tiny-", "completions: 2"} {
		assert.Contains(t, string(shards), want)
		if want != "completions: 2" {
			assert.Contains(t, string(asm), want)
		}
	}
	assert.Contains(t, string(shards), "completionMode: Indexed")
	assert.Contains(t, string(asm), "bundle assemble")
	assert.Equal(t, 1, run(append([]string{"ci", "kubernetes"}, append(common, "-o", dir)...)), "no image or claim")
}
