package lua

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// Lua 5.1's results for the pattern functions, as the reference
// implementation gives them.
var patternCases = []struct{ name, expr, want string }{
	{"find_plain", `string.find("hello world", "o w")`, "5|7"},
	{"find_plus", `string.find("hello world", "l+")`, "3|4"},
	{"find_star_empty", `string.find("hello", "l*")`, "1|0"},
	{"find_anchor", `string.find("hello", "^h")`, "1|1"},
	{"find_anchor_miss", `string.find("hello", "^e")`, "nil"},
	{"find_end", `string.find("hello", "o$")`, "5|5"},
	{"find_dollar_mid", `string.find("a$b", "$b")`, "2|3"},
	{"find_plain_flag", `string.find("[x]", "[", 1, true)`, "1|1"},
	{"find_dot_plain", `string.find("a.b", ".", 1, true)`, "2|2"},
	{"find_caps", `string.find("key = value", "(%w+)%s*=%s*(%w+)")`, "1|11|key|value"},
	{"find_escaped_parens", `string.find("THE (quick) fox", "%((%a+)%)")`, "5|11|quick"},
	{"find_balance", `string.find("f(a(b)c)d", "%b()")`, "2|8"},
	{"find_init", `string.find("abcabc", "b", 3)`, "5|5"},
	{"find_negative_init", `string.find("abc", "c", -1)`, "3|3"},
	{"find_init_past_end", `string.find("abc", "", 10)`, "4|3"},
	{"find_lone_plus", `string.find("a+b", "+")`, "2|2"},
	{"find_lazy_miss", `string.find("aaa", "a-b")`, "nil"},
	{"match_dates", `string.match("2024-01-02", "(%d+)-(%d+)-(%d+)")`, "2024|01|02"},
	{"match_positions", `string.match("hello", "()ll()")`, "3|5"},
	{"match_trim", `string.match("  trim me  ", "^%s*(.-)%s*$")`, "trim me"},
	{"match_lazy", `string.match("aaab", "a-b")`, "aaab"},
	{"match_long_bracket", `string.match("x = [[abc]]", "%[%[(.-)%]%]")`, "abc"},
	{"match_bracket_close", `string.match("[[x]]", "[]]")`, "]"},
	{"match_set_escape", `string.match("a-z", "[a%-z]+")`, "a-z"},
	{"match_negated_set", `string.match("hello123", "[^%d]+")`, "hello"},
	{"match_range", `string.match("Zeta9", "[A-Z][a-z]+")`, "Zeta"},
	{"match_ident", `string.match("_x1 = 2", "[%a_][%w_]*")`, "_x1"},
	{"match_backref", `string.match("say 'hi' now", "(['\"])(.-)%1")`, "'|hi"},
	{"match_frontier", `string.match("THE (quick) fox", "%f[%a]%a+%f[%A]", 5)`, "quick"},
	{"match_classes", `string.match("\t x9_!", "%s+(%l)(%d)(_)(%p)")`, "x|9|_|!"},
	{"match_optional", `string.match("color colour", "colou?r", 6)`, "colour"},
	{"match_none", `string.match("abc", "%d")`, "nil"},
	{"gsub_caps", `string.gsub("hello world", "(%w+)", "<%1>")`, "<hello> <world>|2"},
	{"gsub_whole_limit", `string.gsub("hello world", "%w+", "%0 %0", 1)`, "hello hello world|1"},
	{"gsub_empty_pattern", `string.gsub("abc", "", "-")`, "-a-b-c-|4"},
	{"gsub_table", `string.gsub("hello world", "o", {o = "0"})`, "hell0 w0rld|2"},
	{"gsub_table_caps", `string.gsub("$name is $age", "%$(%w+)", {name = "Ann", age = 3})`, "Ann is 3|2"},
	{"gsub_function", `string.gsub("abc", "%w", function(c) return c:upper() .. "." end)`, "A.B.C.|3"},
	{"gsub_function_nil", `string.gsub("abc", "b", function() return nil end)`, "abc|1"},
	{"gsub_percent", `string.gsub("hello", "l", "%%")`, "he%%o|2"},
	{"gsub_anchor", `string.gsub("aaa", "^a", "b")`, "baa|1"},
	{"gsub_plain_fast", `string.gsub("a.b.c", "%.", "/")`, "a/b/c|2"},
	{"gsub_plain_limit", `string.gsub("x x x", "x", "y", 2)`, "y y x|2"},
	{"gsub_position_capture", `string.gsub("abc", "()b", "%1")`, "a2c|1"},
	{"gmatch_words", `(function() local t = {} for w in string.gmatch("one two  three", "%a+") do t[#t+1] = w end return table.concat(t, ",") end)()`, "one,two,three"},
	{"gmatch_pairs", `(function() local t = {} for k, v in string.gmatch("k1=v1, k2=v2", "(%w+)=(%w+)") do t[#t+1] = k .. ":" .. v end return table.concat(t, ",") end)()`, "k1:v1,k2:v2"},
	{"gmatch_empty", `(function() local n = 0 for _ in string.gmatch("abc", "x*") do n = n + 1 end return n end)()`, "4"},
	{"err_missing_bracket", `string.find("abc", "[a-")`, "error: string.find: malformed pattern (missing ']')"},
	{"err_trailing_percent", `string.find("abc", "%")`, "error: string.find: malformed pattern (ends with '%')"},
	{"err_unfinished", `string.find("abc", "(()")`, "error: string.find: unfinished capture"},
	{"err_capture_index", `string.find("abc", "%1")`, "error: string.find: invalid capture index"},
	{"err_bad_replacement", `string.gsub("abc", "%w", {a = true})`, "error: string.gsub: invalid replacement value (a boolean)"},
	{"err_frontier", `string.find("abc", "%fa")`, "error: string.find: missing '[' after '%f' in pattern"},
	{"err_balance", `string.find("abc", "%b(")`, "error: string.find: unbalanced pattern (missing arguments to '%b')"},
}

func TestPatternsMatchLua51(t *testing.T) {
	var b strings.Builder
	b.WriteString("local function pack(...) return {n = select('#', ...), ...} end\nlocal cases = {\n")
	for _, c := range patternCases {
		fmt.Fprintf(&b, "  {%q, function() return %s end},\n", c.name, c.expr)
	}
	b.WriteString(`}
function pre_hook(ctx)
  for _, c in ipairs(cases) do
    local r = pack(pcall(c[2]))
    local parts = {}
    if not r[1] then
      parts[1] = "error: " .. tostring(r[2]):gsub("^[^:]*:%d+: ", "")
    else
      for i = 2, r.n do parts[#parts + 1] = tostring(r[i]) end
    end
    ctx.metadata[c[1]] = table.concat(parts, "|")
  end
  return ctx
end
`)
	te := startEngine(t, map[string]string{"patterns.lua": b.String()}, nil)
	res := te.pre(t, "x")
	var failed []string
	for _, c := range patternCases {
		if got := res.Metadata[c.name]; got != c.want {
			failed = append(failed, fmt.Sprintf("%s: %s = %q, want %q", c.name, c.expr, got, c.want))
		}
	}
	sort.Strings(failed)
	for _, f := range failed {
		t.Error(f)
	}
}
