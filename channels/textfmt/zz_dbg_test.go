package textfmt

import (
	"fmt"
	"testing"
)

func TestZZDbg(t *testing.T) {
	in := capAnswer(adversarialInput("table-many", 1<<20))
	fmt.Printf("%q\n", in[:300])
	calls := 0
	f := func(s string) string { calls++; return ToTelegramHTML(s) }
	parts := Draft(in, 4096, f, telegramVisible)
	fmt.Println("len", len(in), "parts", len(parts), "format calls", calls)
	for i, p := range parts[:6] {
		fmt.Println(i, len(p.Raw), telegramVisible(p.Part))
	}
}
