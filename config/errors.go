package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Problem is one thing wrong with a config file.
type Problem struct {
	File string // file name as given, or "(embedded default)"
	Line int    // 1-based; 0 when unknown
	Path string // key path such as "models.catalog.fake/big.weight"; may be empty
	Msg  string // what is wrong and how to fix it
}

func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}
		b.WriteString(": ")
	}
	if p.Path != "" {
		b.WriteString(p.Path)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Errors is every problem found while loading a config; Load collects them
// all instead of stopping at the first.
type Errors struct {
	Problems []Problem
}

func (e *Errors) Error() string {
	if len(e.Problems) == 1 {
		return "config: " + e.Problems[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "config: %d problems:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// problems collects Problems of one file.
type problems struct {
	file  string
	list  []Problem
	lines map[string]int // key path -> line of its key
}

func (ps *problems) add(line int, path, format string, args ...any) {
	ps.list = append(ps.list, Problem{File: ps.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// at reports a problem at a key path, finding its line from the index (or
// the nearest parent that has one).
func (ps *problems) at(path, format string, args ...any) {
	ps.add(ps.lineOf(path), path, format, args...)
}

// reported says a problem was already reported at path.
func (ps *problems) reported(path string) bool {
	return slices.ContainsFunc(ps.list, func(p Problem) bool { return p.Path == path })
}

func (ps *problems) lineOf(path string) int {
	for p := path; p != ""; {
		if l, ok := ps.lines[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 0
}

func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	// A key whose variable is not set is not also reported missing: the
	// one problem says what to set.
	unset := map[string]bool{}
	for _, p := range ps.list {
		if p.Path != "" && strings.HasPrefix(p.Msg, "environment variable ") {
			unset[p.Path] = true
		}
	}
	var list []Problem
	for _, p := range ps.list {
		if !unset[p.Path] || !strings.HasPrefix(p.Msg, "missing") {
			list = append(list, p)
		}
	}
	sort.SliceStable(list, func(i, j int) bool {
		return sortLine(list[i].Line) < sortLine(list[j].Line)
	})
	return &Errors{Problems: list}
}

// sortLine orders problems without a line after those with one.
func sortLine(l int) int {
	if l <= 0 {
		return int(^uint(0) >> 1)
	}
	return l
}
