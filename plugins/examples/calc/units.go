package main

import (
	"fmt"
	"sort"
	"strings"
)

// unit is a linear unit: value in the base unit = value*factor.
type unit struct {
	kind   string
	factor float64
}

var units = map[string]unit{
	// length, base metre
	"mm": {"length", 0.001}, "cm": {"length", 0.01}, "m": {"length", 1}, "km": {"length", 1000},
	"in": {"length", 0.0254}, "ft": {"length", 0.3048}, "yd": {"length", 0.9144}, "mi": {"length", 1609.344}, "nmi": {"length", 1852},
	// mass, base kilogram
	"mg": {"mass", 1e-6}, "g": {"mass", 0.001}, "kg": {"mass", 1}, "t": {"mass", 1000},
	"oz": {"mass", 0.028349523125}, "lb": {"mass", 0.45359237}, "st": {"mass", 6.35029318},
	// volume, base litre
	"ml": {"volume", 0.001}, "l": {"volume", 1}, "m3": {"volume", 1000}, "tsp": {"volume", 0.00492892159375},
	"tbsp": {"volume", 0.01478676478125}, "cup": {"volume", 0.2365882365}, "pt": {"volume", 0.473176473}, "gal": {"volume", 3.785411784},
	// speed, base m/s
	"m/s": {"speed", 1}, "km/h": {"speed", 1 / 3.6}, "mph": {"speed", 0.44704}, "kn": {"speed", 1852.0 / 3600},
}

var temperatures = map[string]bool{"c": true, "f": true, "k": true}

func unitList() string {
	names := make([]string, 0, len(units)+3)
	for n := range units {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(append(names, "C", "F", "K"), ", ")
}

// Convert converts v from one unit to another of the same kind.
func Convert(v float64, from, to string) (float64, error) {
	f, t := strings.ToLower(strings.TrimSpace(from)), strings.ToLower(strings.TrimSpace(to))
	if temperatures[f] || temperatures[t] {
		if !temperatures[f] || !temperatures[t] {
			return 0, fmt.Errorf("cannot convert %s to %s: only C, F and K convert to each other", from, to)
		}
		var k float64
		switch f {
		case "c":
			k = v + 273.15
		case "f":
			k = (v-32)*5/9 + 273.15
		default:
			k = v
		}
		if k < 0 {
			return 0, fmt.Errorf("%g %s is below absolute zero", v, from)
		}
		switch t {
		case "c":
			return k - 273.15, nil
		case "f":
			return (k-273.15)*9/5 + 32, nil
		}
		return k, nil
	}
	uf, ok := units[f]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q; known units: %s", from, unitList())
	}
	ut, ok := units[t]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q; known units: %s", to, unitList())
	}
	if uf.kind != ut.kind {
		return 0, fmt.Errorf("cannot convert %s (%s) to %s (%s)", from, uf.kind, to, ut.kind)
	}
	return v * uf.factor / ut.factor, nil
}
