package main

import (
	"math"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/plugins/sdk/plugintest"
)

func TestEval(t *testing.T) {
	tests := []struct {
		in   string
		want float64
		err  string
	}{
		{"1+2*3", 7, ""},
		{"(1+2)*3", 9, ""},
		{"2^3^2", 512, ""},
		{"-2^2", -4, ""},
		{"2^-1", 0.5, ""},
		{"10 % 4", 2, ""},
		{"sqrt(16) + abs(-3)", 7, ""},
		{"round(pi*100)/100", 3.14, ""},
		{"1.5e3 / 3", 500, ""},
		{"1_000 * 2", 2000, ""},
		{"", 0, "empty"},
		{"1/0", 0, "division by zero"},
		{"(1+2", 0, "missing ')'"},
		{"2 +", 0, "ends too early"},
		{"foo(1)", 0, "unknown name"},
		{"sqrt 4", 0, "needs parentheses"},
		{"1 2", 0, "unexpected"},
		{"10^400", 0, "not a finite number"},
		{strings.Repeat("(", 2000), 0, "limit"},
	}
	for _, tt := range tests {
		got, err := Eval(tt.in)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Eval(%q) = %v, %v; want error ~%q", tt.in, got, err, tt.err)
			}
			continue
		}
		if err != nil || math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("Eval(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestConvert(t *testing.T) {
	tests := []struct {
		v        float64
		from, to string
		want     float64
		err      string
	}{
		{1, "mi", "km", 1.609344, ""},
		{100, "C", "F", 212, ""},
		{32, "f", "c", 0, ""},
		{0, "K", "C", -273.15, ""},
		{1, "lb", "g", 453.59237, ""},
		{100, "km/h", "m/s", 27.777777777, ""},
		{1, "gal", "l", 3.785411784, ""},
		{1, "kg", "m", 0, "cannot convert"},
		{1, "C", "m", 0, "only C, F and K"},
		{-500, "C", "K", 0, "below absolute zero"},
		{1, "furlong", "m", 0, "unknown unit"},
	}
	for _, tt := range tests {
		got, err := Convert(tt.v, tt.from, tt.to)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("Convert(%v %s→%s) = %v, %v; want error ~%q", tt.v, tt.from, tt.to, got, err, tt.err)
			}
			continue
		}
		if err != nil || math.Abs(got-tt.want) > 1e-6 {
			t.Errorf("Convert(%v %s→%s) = %v, %v; want %v", tt.v, tt.from, tt.to, got, err, tt.want)
		}
	}
}

func TestCalcPlugin(t *testing.T) {
	c := plugintest.Start(t, plugintest.Build(t, "."), plugintest.Options{})
	if caps := c.Capabilities(); caps.Name != "calc" || len(caps.Actions) != 2 {
		t.Fatalf("capabilities = %+v", caps)
	}
	if got := c.Text("evaluate", map[string]string{"expression": "(2+3)*4^2"}); got != "80" {
		t.Fatalf("evaluate = %q", got)
	}
	if got := c.Text("convert", map[string]string{"value": "5", "from": "km", "to": "mi"}); got != "5 km = 3.10685596119 mi" {
		t.Fatalf("convert = %q", got)
	}
	if res := c.Call("evaluate", map[string]string{"expression": "1/0"}); !strings.Contains(res.Error, "division by zero") {
		t.Fatalf("1/0 = %+v", res)
	}
	tools := c.Tools()
	if len(tools) != 2 || tools[1].Action != "convert" || len(tools[1].Params) != 3 || tools[1].Params[0].Type != "number" {
		t.Fatalf("tools = %+v", tools)
	}
}
