package python

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/core/testenv"
	"github.com/opentalon/opentalon/plugins/sdk/plugintest"
)

// python is Debian's interpreter: the python3 first on PATH can be a
// separate installation that does not see Debian's packages.
const python = "/usr/bin/python3"

// genStubs generates plugin_pb2.py and plugin_pb2_grpc.py into a temp dir.
// Without protoc, grpc_python_plugin or Debian's Python with grpcio and
// protobuf the test is skipped (failed under CI=true) naming the package.
func genStubs(t *testing.T) string {
	t.Helper()
	protoc := testenv.LookPath(t, "protoc", "protobuf-compiler")
	grpcPlugin := testenv.LookPath(t, "grpc_python_plugin", "protobuf-compiler-grpc")
	if _, err := os.Stat(python); err != nil {
		testenv.Missing(t, python, "python3 python3-grpcio python3-protobuf")
	}
	if out, err := exec.Command(python, "-c", "import grpc, google.protobuf").CombinedOutput(); err != nil {
		testenv.Missing(t, fmt.Sprintf("Python's grpc and protobuf modules (%s: %v: %s)", python, err, bytes.TrimSpace(out)), "python3-grpcio python3-protobuf")
	}
	dir := t.TempDir()
	cmd := exec.Command(protoc, "-I", "../../../proto", "--python_out="+dir, "--grpc_python_out="+dir,
		"--plugin=protoc-gen-grpc_python="+grpcPlugin, "plugin.proto")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generate Python stubs: %v\n%s", err, out)
	}
	return dir
}

func TestPythonPlugin(t *testing.T) {
	stubs := genStubs(t)
	script, err := filepath.Abs("textstats.py")
	if err != nil {
		t.Fatal(err)
	}
	c := plugintest.Start(t, python, plugintest.Options{Args: []string{script}, Env: []string{"PYTHONPATH=" + stubs}, APIKey: "k"})
	caps := c.Capabilities()
	if caps.Name != "textstats" || len(caps.Actions) != 1 || !caps.Actions[0].Parameters[0].Required {
		t.Fatalf("capabilities = %+v", caps)
	}
	res := c.Call("count", map[string]string{"text": "one two three\nfour"})
	if res.Error != "" || plugintest.Unwrap(res.Content) != "words=4 lines=2 characters=18 calls=1" {
		t.Fatalf("count = %+v", res)
	}
	if got := c.Text("count", map[string]string{"text": ""}); got != "words=0 lines=0 characters=0 calls=2" {
		t.Fatalf("second count = %q", got)
	}
	// Its state went to its own namespace through the core's state service.
	if v, ok, _ := c.State.PluginStateGet(context.Background(), "textstats", "calls"); !ok || v != "2" {
		t.Fatalf("state calls = %q %v", v, ok)
	}
	if res := c.Call("count", nil); res.Error == "" {
		t.Fatal("missing text: no error")
	}
	// The request hook, in another language, through the same contract.
	if hooks := c.Capabilities().Hooks; len(hooks) != 1 || hooks[0].Stage != "pre" || hooks[0].Order != 50 {
		t.Fatalf("hooks = %+v", hooks)
	}
	pre, err := c.PreHook(core.HookInput{Text: "three little words", Metadata: map[string]string{"lang": "en"}})
	if err != nil || pre.Text != "three little words" || pre.Metadata["words"] != "3" || pre.Metadata["lang"] != "en" {
		t.Fatalf("pre hook = %+v %v", pre, err)
	}
	// And the HTTP route, behind the API key.
	r := httptest.NewRequest("GET", "/api/plugins/textstats/stats", nil)
	if w := c.HTTP(r); w.Code != http.StatusUnauthorized {
		t.Fatalf("stats without the key = %d", w.Code)
	}
	r.Header.Set("X-API-Key", "k")
	if w := c.HTTP(r); w.Code != 200 || w.Body.String() != `{"calls": 2}` || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("stats = %d %q %v", w.Code, w.Body, w.Header())
	}
}
