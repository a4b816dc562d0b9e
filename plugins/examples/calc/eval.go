package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
)

// maxExprBytes bounds an expression (and so the parser's recursion).
const maxExprBytes = 1000

// Eval evaluates an arithmetic expression with the usual precedence:
// unary minus, ^ (right associative), * / %, + -.
func Eval(expr string) (float64, error) {
	if strings.TrimSpace(expr) == "" {
		return 0, fmt.Errorf("the expression is empty")
	}
	if len(expr) > maxExprBytes {
		return 0, fmt.Errorf("the expression is %d bytes; the limit is %d", len(expr), maxExprBytes)
	}
	p := &parser{s: expr}
	v, err := p.sum()
	if err != nil {
		return 0, err
	}
	p.space()
	if p.i < len(p.s) {
		return 0, fmt.Errorf("unexpected %q at position %d", p.s[p.i:p.i+1], p.i+1)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("the result is not a finite number")
	}
	return v, nil
}

type parser struct {
	s string
	i int
}

func (p *parser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *parser) peek() byte {
	p.space()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *parser) sum() (float64, error) {
	v, err := p.product()
	for err == nil {
		switch p.peek() {
		case '+', '-':
			op := p.s[p.i]
			p.i++
			var r float64
			if r, err = p.product(); err == nil {
				if op == '+' {
					v += r
				} else {
					v -= r
				}
			}
		default:
			return v, nil
		}
	}
	return 0, err
}

func (p *parser) product() (float64, error) {
	v, err := p.unary()
	for err == nil {
		switch op := p.peek(); op {
		case '*', '/', '%':
			p.i++
			var r float64
			if r, err = p.unary(); err != nil {
				break
			}
			if op != '*' && r == 0 {
				return 0, fmt.Errorf("division by zero")
			}
			switch op {
			case '*':
				v *= r
			case '/':
				v /= r
			default:
				v = math.Mod(v, r)
			}
		default:
			return v, nil
		}
	}
	return 0, err
}

func (p *parser) unary() (float64, error) {
	switch p.peek() {
	case '-':
		p.i++
		v, err := p.unary()
		return -v, err
	case '+':
		p.i++
		return p.unary()
	}
	return p.power()
}

func (p *parser) power() (float64, error) {
	base, err := p.atom()
	if err != nil {
		return 0, err
	}
	if p.peek() == '^' {
		p.i++
		exp, err := p.unary() // right associative, allows 2^-1
		if err != nil {
			return 0, err
		}
		return math.Pow(base, exp), nil
	}
	return base, nil
}

var funcs = map[string]func(float64) float64{
	"sqrt": math.Sqrt, "abs": math.Abs, "round": math.Round, "floor": math.Floor, "ceil": math.Ceil,
	"ln": math.Log, "log10": math.Log10, "sin": math.Sin, "cos": math.Cos, "tan": math.Tan,
}

func (p *parser) atom() (float64, error) {
	c := p.peek()
	switch {
	case c == '(':
		p.i++
		v, err := p.sum()
		if err != nil {
			return 0, err
		}
		if p.peek() != ')' {
			return 0, fmt.Errorf("missing ')' at position %d", p.i+1)
		}
		p.i++
		return v, nil
	case c >= '0' && c <= '9' || c == '.':
		start := p.i
		for p.i < len(p.s) && (p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] == '.' || p.s[p.i] == '_') {
			p.i++
		}
		if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') && p.i+1 < len(p.s) && (unicode.IsDigit(rune(p.s[p.i+1])) || p.s[p.i+1] == '-' || p.s[p.i+1] == '+') {
			p.i += 2
			for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
				p.i++
			}
		}
		v, err := strconv.ParseFloat(p.s[start:p.i], 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a number", p.s[start:p.i])
		}
		return v, nil
	case unicode.IsLetter(rune(c)):
		start := p.i
		for p.i < len(p.s) && (unicode.IsLetter(rune(p.s[p.i])) || unicode.IsDigit(rune(p.s[p.i]))) {
			p.i++
		}
		name := strings.ToLower(p.s[start:p.i])
		switch name {
		case "pi":
			return math.Pi, nil
		case "e":
			return math.E, nil
		}
		f, ok := funcs[name]
		if !ok {
			return 0, fmt.Errorf("unknown name %q: functions are sqrt, abs, round, floor, ceil, ln, log10, sin, cos, tan; constants pi, e", name)
		}
		if p.peek() != '(' {
			return 0, fmt.Errorf("%s needs parentheses: %s(x)", name, name)
		}
		v, err := p.atom()
		if err != nil {
			return 0, err
		}
		return f(v), nil
	case c == 0:
		return 0, fmt.Errorf("the expression ends too early")
	}
	return 0, fmt.Errorf("unexpected %q at position %d", string(c), p.i+1)
}
