// Package opentalon_test holds repository-wide checks: the import rules
// of ARCHITECTURE.md and one doc.go per package.
package opentalon_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/opentalon/opentalon/"

// allowed is ARCHITECTURE.md's table: which internal top-level folders a
// folder's non-test code may import (besides its own subpackages).
var allowed = map[string][]string{
	"core":         {},
	"config":       {"core"},
	"store":        {"core"},
	"guard":        {"core"},
	"proto":        {},
	"channels":     {"core", "config"},
	"routing":      {"core", "store"},
	"lua":          {"core"},
	"plugins":      {"core", "guard", "proto"},
	"orchestrator": {"core", "routing", "guard", "plugins"},
	"metrics":      {"core"},
	"cmd":          {"*"},
}

// goPackages maps each folder holding non-test Go files to those files.
func goPackages(t *testing.T) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != "." || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dir := filepath.ToSlash(filepath.Dir(path))
			pkgs[dir] = append(pkgs[dir], path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func TestImportRules(t *testing.T) {
	for dir, files := range goPackages(t) {
		top, _, _ := strings.Cut(dir, "/")
		rules, ok := allowed[top]
		if !ok {
			if dir != "." {
				t.Errorf("%s: top-level folder %q is not in ARCHITECTURE.md's table; add it there and to this test", dir, top)
			}
			continue
		}
		for _, f := range files {
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				if !strings.HasPrefix(p, module) {
					continue
				}
				target, _, _ := strings.Cut(strings.TrimPrefix(p, module), "/")
				if target == top || contains(rules, "*") || contains(rules, target) {
					continue
				}
				t.Errorf("%s imports %s: %s/ may import only %v (ARCHITECTURE.md)", f, p, top, rules)
			}
		}
	}
}

// sharedChannelPackages are the packages under channels/ every platform
// may use; every other folder under channels/ is a platform.
var sharedChannelPackages = map[string]bool{"textfmt": true, "toolkit": true, "channeltest": true}

// TestPlatformsImportNoOtherPlatform: a platform package under channels/
// may import core, config and the shared channel packages, never another
// platform (its own subpackages, such as telegramtest, are its own).
func TestPlatformsImportNoOtherPlatform(t *testing.T) {
	for dir, files := range goPackages(t) {
		parts := strings.Split(dir, "/")
		if parts[0] != "channels" || len(parts) < 2 {
			continue
		}
		own := parts[1]
		for _, f := range files {
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				rest, ok := strings.CutPrefix(p, module+"channels/")
				if !ok {
					continue
				}
				target, _, _ := strings.Cut(rest, "/")
				if target != own && !sharedChannelPackages[target] {
					t.Errorf("%s imports %s: a channel package may import only core, config and the shared channel packages (%v), never another platform", f, p, sharedChannelPackages)
				}
				if sharedChannelPackages[own] && !sharedChannelPackages[target] {
					t.Errorf("%s imports %s: a shared channel package must not depend on a platform", f, p)
				}
			}
		}
	}
}

func TestEveryPackageHasDoc(t *testing.T) {
	for dir := range goPackages(t) {
		if dir == "." || strings.Contains(dir, "/testdata") {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "doc.go")); err != nil {
			t.Errorf("%s has no doc.go saying what the package owns", dir)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
