package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
)

func TestExpand(t *testing.T) {
	env := MapEnv(map[string]string{"A": "x", "EMPTY": "", "N": "42"})
	tests := []struct {
		in      string
		want    string
		changed bool
		missing []string
		err     string
	}{
		{in: "plain", want: "plain"},
		{in: "${A}", want: "x", changed: true},
		{in: "pre-${A}-post", want: "pre-x-post", changed: true},
		{in: "${A}${N}", want: "x42", changed: true},
		{in: "${UNSET:-def}", want: "def", changed: true},
		{in: "${EMPTY:-def}", want: "def", changed: true},
		{in: "${A:-def}", want: "x", changed: true},
		{in: "${UNSET:-}", want: "", changed: true},
		{in: "${UNSET:-~/.opentalon}", want: "~/.opentalon", changed: true},
		{in: "${EMPTY}", want: "", changed: true},
		{in: "${UNSET}", want: "", changed: true, missing: []string{"UNSET"}},
		{in: "a${U1}b${U2}", want: "ab", changed: true, missing: []string{"U1", "U2"}},
		{in: "$$HOME", want: "$HOME", changed: true},
		{in: "$${A}", want: "${A}", changed: true},
		{in: "cost $5", want: "cost $5"},
		{in: "end$", want: "end$"},
		{in: "${A", err: "unterminated"},
		{in: "${1A}", err: "not a valid variable reference"},
		{in: "${A:def}", err: "${NAME:-default}"},
		{in: "${}", err: "not a valid variable reference"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			r, err := expand(tt.in, env)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.value != tt.want || r.changed != tt.changed || !reflect.DeepEqual(r.missing, tt.missing) {
				t.Errorf("expand(%q) = %+v, want value %q changed %v missing %v", tt.in, r, tt.want, tt.changed, tt.missing)
			}
		})
	}
}

func TestEditDistanceAndClosest(t *testing.T) {
	if d := core.EditDistance("wieght", "weight"); d != 2 {
		t.Errorf("editDistance = %d, want 2", d)
	}
	if d := core.EditDistance("", "abc"); d != 3 {
		t.Errorf("editDistance = %d, want 3", d)
	}
	cands := []string{"workers", "max_attempts", "request_timeout"}
	if c := closest("wrokers", cands); c != "workers" {
		t.Errorf("closest = %q, want workers", c)
	}
	if c := closest("zzzzzz", cands); c != "" {
		t.Errorf("closest = %q, want none", c)
	}
}
