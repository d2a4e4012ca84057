package scaleout

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/qnnprep/qnnprep/qnnpack"
	"github.com/qnnprep/qnnprep/testkit"
)

// Environment for the registry tests: .ci/run starts Debian's
// docker-registry on 127.0.0.1 with a temporary storage directory.
const (
	EnvTestRegistry        = "QNNPREP_TEST_REGISTRY"         // HOST:PORT
	EnvTestRegistryStorage = "QNNPREP_TEST_REGISTRY_STORAGE" // its filesystem storage root
)

// testRepo returns a new repository name on the test registry, or skips.
func testRepo(t *testing.T) string {
	t.Helper()
	host := os.Getenv(EnvTestRegistry)
	if host == "" {
		if os.Getenv("QNNPREP_REQUIRE_PEERS") == "1" {
			t.Fatalf("%s is not set and QNNPREP_REQUIRE_PEERS=1: start a registry (bash .ci/run does)", EnvTestRegistry)
		}
		t.Skipf("%s not set: no OCI registry to test against (.ci/run starts Debian's docker-registry)", EnvTestRegistry)
	}
	var b [4]byte
	rand.Read(b[:])
	return host + "/qnnprep-test/" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")) + "-" + hex.EncodeToString(b[:])
}

// tamperBlob flips a byte of the stored blob with the given sha256 in the
// registry's storage until the test ends (blobs are shared by every
// repository), or skips without the storage path.
func tamperBlob(t *testing.T, sum string) {
	t.Helper()
	root := os.Getenv(EnvTestRegistryStorage)
	if root == "" {
		t.Skipf("%s not set: cannot reach the registry's blobs to change one", EnvTestRegistryStorage)
	}
	p := filepath.Join(root, "docker/registry/v2/blobs/sha256", sum[:2], sum, "data")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	orig := append([]byte(nil), b...)
	b[len(b)/2] ^= 0xff
	require.NoError(t, os.WriteFile(p, b, 0o644))
	t.Cleanup(func() { os.WriteFile(p, orig, 0o644) })
}

func sha(t *testing.T, path string) string {
	t.Helper()
	f, err := copyHashed(context.Background(), path, filepath.Join(t.TempDir(), "copy"))
	require.NoError(t, err)
	return f.SHA256
}

// jobFiles writes two outputs of a pretend job and returns their paths.
func jobFiles(t *testing.T, big int) []string {
	t.Helper()
	dir := t.TempDir()
	a, b := filepath.Join(dir, "g.dlc"), filepath.Join(dir, "g.bin")
	data := make([]byte, big)
	rand.Read(data)
	require.NoError(t, os.WriteFile(a, []byte("FAKEDLC1\n{}"), 0o644))
	require.NoError(t, os.WriteFile(b, data, 0o644))
	return []string{a, b}
}

func outputsIn(dir string, files []string) []string {
	var out []string
	for _, f := range files {
		out = append(out, filepath.Join(dir, filepath.Base(f)))
	}
	return out
}

func key(s string) string { return strings.Repeat(s, 64/len(s)) }

func TestOCICacheRoundTrip(t *testing.T) {
	ctx := context.Background()
	c, err := OpenCache("oci://" + testRepo(t))
	require.NoError(t, err)
	files := jobFiles(t, 1<<20)
	ok, err := c.Get(ctx, key("a"), outputsIn(t.TempDir(), files))
	require.NoError(t, err)
	assert.False(t, ok, "an empty registry has the entry")
	require.NoError(t, c.Put(ctx, key("a"), files))
	got := outputsIn(t.TempDir(), files)
	ok, err = c.Get(ctx, key("a"), got)
	require.NoError(t, err)
	require.True(t, ok)
	for i := range files {
		assert.Equal(t, sha(t, files[i]), sha(t, got[i]))
	}
}

// TestOCICacheConcurrentWriters: four writers of one key at once, each
// with its own client, leave one entry that reads back whole.
func TestOCICacheConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	repo := testRepo(t)
	files := jobFiles(t, 4<<20)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() {
			c, err := NewOCICache(repo)
			if err == nil {
				err = c.Put(ctx, key("b"), files)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	c, _ := NewOCICache(repo)
	got := outputsIn(t.TempDir(), files)
	ok, err := c.Get(ctx, key("b"), got)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, sha(t, files[1]), sha(t, got[1]))
}

// cutContext is cancelled after a number of Err calls: every read of a
// pushed file asks it, so the push stops part-way through a blob.
type cutContext struct {
	context.Context
	left atomic.Int64
	once sync.Once
	done chan struct{}
}

func newCutContext(n int64) *cutContext {
	c := &cutContext{Context: context.Background(), done: make(chan struct{})}
	c.left.Store(n)
	return c
}

func (c *cutContext) Done() <-chan struct{} { return c.done }
func (c *cutContext) Err() error {
	if c.left.Add(-1) < 0 {
		c.once.Do(func() { close(c.done) })
		return context.Canceled
	}
	return nil
}

// TestOCICacheInterruptedPush: a push cut off in the middle of a blob
// leaves no entry (the key's tag comes last); the next push completes it.
func TestOCICacheInterruptedPush(t *testing.T) {
	repo := testRepo(t)
	c, err := NewOCICache(repo)
	require.NoError(t, err)
	files := jobFiles(t, 8<<20)
	err = c.Put(newCutContext(40), key("c"), files)
	require.Error(t, err)
	ctx := context.Background()
	got := outputsIn(t.TempDir(), files)
	ok, err := c.Get(ctx, key("c"), got)
	require.NoError(t, err)
	assert.False(t, ok, "an interrupted push left an entry")
	assert.NoFileExists(t, got[1])
	require.NoError(t, c.Put(ctx, key("c"), files))
	ok, err = c.Get(ctx, key("c"), got)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, sha(t, files[1]), sha(t, got[1]))
}

func TestOCICacheRefusesTamperedBlob(t *testing.T) {
	ctx := context.Background()
	c, err := NewOCICache(testRepo(t))
	require.NoError(t, err)
	files := jobFiles(t, 1<<20)
	require.NoError(t, c.Put(ctx, key("d"), files))
	tamperBlob(t, sha(t, files[1]))
	got := outputsIn(t.TempDir(), files)
	_, err = c.Get(ctx, key("d"), got)
	assert.ErrorContains(t, err, "refusing a changed cache entry")
	assert.NoFileExists(t, got[1])
}

func TestBundlePushPull(t *testing.T) {
	ctx := context.Background()
	ref := testRepo(t) + ":v1"
	dir := testBundle(t)
	m, err := PushBundle(ctx, dir, ref)
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "pulled")
	pm, err := PullBundle(ctx, ref, out)
	require.NoError(t, err)
	assert.Equal(t, m.Self, pm.Self)
	assert.Equal(t, testkit.ReadTree(t, dir), testkit.ReadTree(t, out))

	// A blob changed in the registry: refused, nothing written.
	tamperBlob(t, sha(t, filepath.Join(dir, qnnpack.TokenizerName)))
	again := filepath.Join(t.TempDir(), "again")
	_, err = PullBundle(ctx, ref, again)
	assert.ErrorContains(t, err, "refusing a changed cache entry")
	assert.NoDirExists(t, again)
}

// TestShardsThroughRegistry: shards share an OCI cache; assemble takes
// every stage from it and matches the one-process bundle.
func TestShardsThroughRegistry(t *testing.T) {
	ctx := context.Background()
	repo := testRepo(t)
	e := newEnv(t)
	one := filepath.Join(t.TempDir(), "bundle")
	_, err := qnnpack.Build(ctx, e.options(one, one+".work"))
	require.NoError(t, err)
	for i := range 2 {
		c, err := OpenCache("oci://" + repo)
		require.NoError(t, err)
		o := e.options("", filepath.Join(t.TempDir(), "work"))
		o.Cache = c
		_, _, err = BuildShard(ctx, o, Shard{i, 2})
		require.NoError(t, err)
	}
	c, err := OpenCache("oci://" + repo)
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "bundle")
	o := e.options(out, filepath.Join(t.TempDir(), "assemble"))
	o.Cache = c
	res, err := Assemble(ctx, o, 2)
	require.NoError(t, err)
	for _, r := range res.Runs {
		assert.True(t, r.Fetched, r.Job.Name())
	}
	assert.Equal(t, testkit.ReadTree(t, one), testkit.ReadTree(t, out))
}
