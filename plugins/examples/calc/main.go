package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/opentalon/opentalon/plugins/sdk"
)

type calc struct{}

func (calc) Capabilities() sdk.Capabilities {
	return sdk.Capabilities{
		Name:        "calc",
		Description: "Exact arithmetic and unit conversion.",
		Actions: []sdk.Action{
			{Name: "evaluate", Description: "Evaluate an arithmetic expression: + - * / % ^, parentheses, and sqrt, abs, round, floor, ceil, ln, log10, sin, cos, tan, pi, e.",
				Params: []sdk.Param{{Name: "expression", Description: "for example (2+3)*4^2", Required: true}}},
			{Name: "convert", Description: "Convert a value between units of length, mass, volume, speed or temperature (" + unitList() + ").",
				Params: []sdk.Param{
					{Name: "value", Type: "number", Required: true},
					{Name: "from", Description: "unit of the value, e.g. km", Required: true},
					{Name: "to", Description: "unit wanted, e.g. mi", Required: true},
				}},
		},
	}
}

func (calc) Execute(_ context.Context, c sdk.Call) (string, error) {
	switch c.Action {
	case "evaluate":
		v, err := Eval(c.Args["expression"])
		if err != nil {
			return "", err
		}
		return format(v), nil
	case "convert":
		v, err := strconv.ParseFloat(strings.TrimSpace(c.Args["value"]), 64)
		if err != nil {
			return "", fmt.Errorf("value %q is not a number", c.Args["value"])
		}
		out, err := Convert(v, c.Args["from"], c.Args["to"])
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s %s = %s %s", format(v), c.Args["from"], format(out), c.Args["to"]), nil
	}
	return "", fmt.Errorf("unknown action %q: use evaluate or convert", c.Action)
}

// format prints v with up to 12 significant digits and no trailing zeros.
func format(v float64) string {
	return strconv.FormatFloat(v, 'g', 12, 64)
}

func main() {
	if err := sdk.Serve(calc{}); err != nil {
		fmt.Fprintln(os.Stderr, "calc:", err)
		os.Exit(1)
	}
}
