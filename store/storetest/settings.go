package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/store"
)

// testSettings: the values admins set in chat (/budget, /allowed). A set
// value is read back with who set it and when, by another handle on the
// same database too (another replica); setting a key again replaces it;
// dropping one leaves the others; a value of any text (JSON, an empty
// list) survives as it is.
func testSettings(t *testing.T, e Engine) {
	clock := NewClock()
	handle := e.New(t)
	a := handle(store.Options{Now: clock.Now})
	b := handle(store.Options{Now: clock.Now})
	read := func(db *store.DB) string {
		t.Helper()
		ss, err := db.Settings(ctx)
		check(t, "settings", err)
		out := ""
		for _, s := range ss {
			out += fmt.Sprintf("%s=%s by %s at %d;", s.Key, s.Value, s.UpdatedBy, s.UpdatedAt.Sub(NewClock().Now())/time.Second)
		}
		return out
	}
	if got := read(a); got != "" {
		t.Fatalf("a new database has settings %q; want none", got)
	}
	check(t, "set daily", a.SetSetting(ctx, core.Setting{Key: "routing.budget.daily_usd", Value: "5", UpdatedBy: "telegram:7"}))
	clock.Advance(time.Second)
	check(t, "set allowed", a.SetSetting(ctx, core.Setting{Key: "routing.allowed", Value: `["fake/small"]`, UpdatedBy: "telegram:7"}))
	want := `routing.allowed=["fake/small"] by telegram:7 at 1;routing.budget.daily_usd=5 by telegram:7 at 0;`
	if got := read(b); got != want {
		t.Fatalf("another handle reads %q; want %q", got, want)
	}

	clock.Advance(time.Second)
	check(t, "set daily again", b.SetSetting(ctx, core.Setting{Key: "routing.budget.daily_usd", Value: "0", UpdatedBy: "slack:U1"}))
	check(t, "set allowed to all", b.SetSetting(ctx, core.Setting{Key: "routing.allowed", Value: `[]`, UpdatedBy: "slack:U1"}))
	want = `routing.allowed=[] by slack:U1 at 2;routing.budget.daily_usd=0 by slack:U1 at 2;`
	if got := read(a); got != want {
		t.Fatalf("after replacing: %q; want %q", got, want)
	}

	dropped, err := a.DeleteSetting(ctx, "routing.budget.daily_usd")
	if err != nil || !dropped {
		t.Fatalf("drop the daily budget: %v, %v; want it dropped", dropped, err)
	}
	if dropped, err := b.DeleteSetting(ctx, "routing.budget.daily_usd"); err != nil || dropped {
		t.Fatalf("drop it again: %v, %v; want nothing to drop", dropped, err)
	}
	if got, want := read(b), `routing.allowed=[] by slack:U1 at 2;`; got != want {
		t.Fatalf("after dropping one: %q; want %q", got, want)
	}
	if err := a.SetSetting(ctx, core.Setting{Value: "x"}); core.ErrorKind(err) != core.KindInvalid {
		t.Fatalf("a setting without a key: %v; want invalid", err)
	}
}
