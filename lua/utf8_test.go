package lua

import (
	"testing"
	"unicode/utf8"
)

// string.sub and string.byte work on bytes, so a hook that cuts user text
// ("héllo":sub(1, 2)) or builds a NUL byte hands back text no store can
// hold; what a hook returns is made valid UTF-8 without NUL bytes before
// it goes on.
func TestHookTextIsStorable(t *testing.T) {
	te := startEngine(t, map[string]string{"cut.lua": `
function pre_hook(ctx)
  ctx.metadata.head = ctx.message:sub(1, 2) .. "\0"
  ctx.message = ctx.message:sub(1, 2) .. string.char(0) .. "!"
  return ctx
end
function post_hook(ctx)
  ctx.message = ctx.message:sub(1, 2)
  return ctx
end
`}, nil)
	res := te.pre(t, "héllo")
	if !storable(res.Text) {
		t.Errorf("pre_hook text = %q; not valid UTF-8 without NUL", res.Text)
	}
	if v := res.Metadata["head"]; !storable(v) {
		t.Errorf("pre_hook metadata head = %q; not valid UTF-8 without NUL", v)
	}
	if got := te.post(t, input("q"), "wörld"); !storable(got) {
		t.Errorf("post_hook answer = %q; not valid UTF-8", got)
	}
}

func storable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return false
		}
	}
	return utf8.ValidString(s)
}
