// Package opentalon_test holds repository-wide checks: the import rules
// of docs/architecture.md's package table, one doc.go per package, and
// that no consumer's interface names a store type.
package opentalon_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/opentalon/opentalon/"

// allowed is docs/architecture.md's package table: which internal
// packages a package's non-test code may import. A rule's key is a
// package folder; it applies to that folder and to every folder below it
// that has no rule of its own (the longest key wins). An entry "x"
// allows package x only; "x/..." allows x and every package below it.
var allowed = map[string][]string{
	// The vocabulary imports nothing internal; the engine and the
	// scheduler only the vocabulary.
	"core":          {},
	"core/gateway":  {"core"},
	"core/schedule": {"core"},
	"core/lease":    {"core"},
	"config":        {"core", "core/schedule"},
	"store":         {"core"},
	// The store's contract suite opens the engines it checks.
	"store/storetest": {"core", "store"},
	"guard":           {"core"},
	"proto":           {},
	// A platform, and the shared channel packages (which platform may
	// import which is TestPlatformsImportNoOtherPlatform's).
	"channels": {"core", "config", "channels/..."},
	// The conformance suite runs every platform over the real engine.
	"channels/channeltest": {"core", "core/gateway", "config", "channels/..."},
	"routing":              {"core", "store", "routing/..."},
	"lua":                  {"core"},
	"plugins":              {"core", "guard", "proto", "plugins/..."},
	"orchestrator":         {"core", "routing/...", "guard", "plugins", "orchestrator/..."},
	"metrics":              {"core", "metrics/..."},
	"cmd":                  {"*"},
}

// everywhere are the leaves every package may import: they import
// nothing internal (the "core" rule covers them).
var everywhere = []string{"core/clock"}

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

// ruleFor returns the rule that applies to dir: the longest key that is
// dir or a folder above it.
func ruleFor(dir string) (key string, rule []string, ok bool) {
	for d := dir; d != "."; d = filepath.ToSlash(filepath.Dir(d)) {
		if r, ok := allowed[d]; ok {
			return d, r, true
		}
	}
	return "", nil, false
}

// allows reports whether rule lets a package import target.
func allows(rule []string, target string) bool {
	if slices.Contains(everywhere, target) {
		return true
	}
	for _, e := range rule {
		if e == "*" || e == target {
			return true
		}
		if base, ok := strings.CutSuffix(e, "/..."); ok && (target == base || strings.HasPrefix(target, base+"/")) {
			return true
		}
	}
	return false
}

// internalImports returns the internal packages f imports (module-relative
// paths).
func internalImports(t *testing.T, f string) []string {
	t.Helper()
	af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, imp := range af.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if rel, ok := strings.CutPrefix(p, module); ok {
			out = append(out, rel)
		}
	}
	return out
}

func TestImportRules(t *testing.T) {
	for dir, files := range goPackages(t) {
		if dir == "." {
			continue
		}
		key, rule, ok := ruleFor(dir)
		if !ok {
			t.Errorf("%s: no rule in docs/architecture.md's package table covers it; add a row there and to this test", dir)
			continue
		}
		for _, f := range files {
			for _, target := range internalImports(t, f) {
				if target == dir || allows(rule, target) {
					continue
				}
				t.Errorf("%s imports %s: %s may import only %v (docs/architecture.md, rule %q)", f, target, dir, rule, key)
			}
		}
	}
}

// TestEngineImportsOnlyTheVocabulary: the engine (core/gateway) imports
// core and nothing else internal (but the leaves everywhere names), core imports nothing internal, and
// nothing but cmd and the channel conformance suite imports the engine:
// the words and the machine stay apart.
func TestEngineImportsOnlyTheVocabulary(t *testing.T) {
	pkgs := goPackages(t)
	if _, ok := pkgs["core/gateway"]; !ok {
		t.Fatal("core/gateway holds no Go files; the engine moved: update docs/architecture.md and this test")
	}
	importers := map[string]bool{}
	for dir, files := range pkgs {
		for _, f := range files {
			for _, target := range internalImports(t, f) {
				switch {
				case dir == "core/gateway" && target != "core" && !slices.Contains(everywhere, target):
					t.Errorf("%s imports %s: the engine imports core only", f, target)
				case dir == "core":
					t.Errorf("%s imports %s: core imports nothing internal", f, target)
				case target == "core/gateway":
					importers[strings.Split(dir, "/")[0]+"/"] = true
					if dir != "channels/channeltest" && !strings.HasPrefix(dir, "cmd/") {
						t.Errorf("%s imports the engine (core/gateway); only cmd wires it and channels/channeltest runs it", f)
					}
				}
			}
		}
	}
	if !importers["cmd/"] {
		t.Error("cmd does not import core/gateway: what runs the engine?")
	}
}

// TestNoConsumerInterfaceNamesAStoreType: an interface outside store/
// (and cmd/, which wires the store) speaks core's records only, so a
// second store implementation needs nothing from the first.
func TestNoConsumerInterfaceNamesAStoreType(t *testing.T) {
	checked := 0
	for dir, files := range goPackages(t) {
		if dir == "store" || strings.HasPrefix(dir, "store/") || strings.HasPrefix(dir, "cmd/") {
			continue
		}
		for _, f := range files {
			fset := token.NewFileSet()
			af, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			name := ""
			for _, imp := range af.Imports {
				if p, _ := strconv.Unquote(imp.Path.Value); p == module+"store" {
					name = "store"
					if imp.Name != nil {
						name = imp.Name.Name
					}
				}
			}
			ast.Inspect(af, func(n ast.Node) bool {
				it, ok := n.(*ast.InterfaceType)
				if !ok {
					return true
				}
				checked++
				if name == "" {
					return false
				}
				ast.Inspect(it, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok {
						if id, ok := sel.X.(*ast.Ident); ok && id.Name == name {
							t.Errorf("%s: an interface names %s.%s; use (or add) core's record instead", fset.Position(sel.Pos()), name, sel.Sel.Name)
						}
					}
					return true
				})
				return false
			})
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d interfaces; the walk found too few to mean anything", checked)
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
			for _, p := range internalImports(t, f) {
				rest, ok := strings.CutPrefix(p, "channels/")
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

// TestRulesNameRealPackages: every rule and every entry of the table
// names a folder that holds Go code, so a renamed package cannot leave a
// rule that checks nothing.
func TestRulesNameRealPackages(t *testing.T) {
	pkgs := goPackages(t)
	exists := func(p string) bool {
		for dir := range pkgs {
			if dir == p || strings.HasPrefix(dir, p+"/") {
				return true
			}
		}
		return false
	}
	for key, rule := range allowed {
		if !exists(key) {
			t.Errorf("rule %q: no Go package is there", key)
		}
		for _, e := range rule {
			if e == "*" {
				continue
			}
			base, sub := strings.CutSuffix(e, "/...")
			if _, ok := pkgs[base]; !ok && !sub || sub && !exists(base) {
				t.Errorf("rule %q allows %q: no Go package is there", key, e)
			}
		}
	}
	if !slices.Contains(allowed["core/gateway"], "core") {
		t.Error("the engine's rule must allow core")
	}
}
