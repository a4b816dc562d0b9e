package sdk

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

func TestVerifyHMAC(t *testing.T) {
	body := []byte(`{"zen":"Keep it logically awesome."}`)
	m := hmac.New(sha256.New, []byte("s3cret"))
	m.Write(body)
	sig := hex.EncodeToString(m.Sum(nil))
	for header, want := range map[string]bool{
		"sha256=" + sig:            true,
		sig:                        true,
		"sha256=" + sig[:62]:       false,
		"sha256=" + sig + "00":     false,
		"sha1=" + sig:              false,
		"":                         false,
		"sha256=" + sig[:63] + "0": false,
	} {
		if got := VerifyHMAC([]byte("s3cret"), body, header); got != want {
			t.Errorf("VerifyHMAC(%q) = %v; want %v", header, got, want)
		}
	}
	if VerifyHMAC(nil, body, "sha256="+sig) {
		t.Error("an empty secret verified a signature")
	}
}

// declaresOnly declares every extension point and implements none.
type declaresOnly struct{ hooks []Hook }

func (d declaresOnly) Capabilities() Capabilities {
	return Capabilities{Name: "x", Hooks: d.hooks, Routes: []Route{{Path: "a"}}}
}
func (declaresOnly) Execute(context.Context, Call) (string, error) { return "", nil }

func TestDeclarationsNeedImplementations(t *testing.T) {
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = ServeListener(context.Background(), l, declaresOnly{hooks: []Hook{{Stage: StagePre}}})
	if err == nil || !strings.Contains(err.Error(), "does not implement PreHook") {
		t.Fatalf("serve = %v; want the missing PreHook named", err)
	}
	err = ServeListener(context.Background(), l, declaresOnly{})
	if err == nil || !strings.Contains(err.Error(), "ServeHTTP") {
		t.Fatalf("serve = %v; want the missing ServeHTTP named", err)
	}
}
