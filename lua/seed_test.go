package lua

import (
	"errors"
	"maps"
	"strings"
	"testing"
)

// The scripts of seed 001, saved unchanged under testdata/seed, behave as
// the seed describes.

func TestSeedFilter(t *testing.T) {
	te := startEngine(t, map[string]string{"filter.lua": seed(t, "filter.lua")}, nil)
	for _, tc := range []struct{ text, reason string }{
		{"buy cheap spam now", "blocked word: spam"},
		{"this is a scam", "blocked word: scam"},
		{"hello there", ""},
	} {
		res := te.pre(t, tc.text)
		if res.Drop != (tc.reason != "") || res.Reason != tc.reason {
			t.Errorf("%q: drop=%v reason=%q, want drop=%v reason=%q", tc.text, res.Drop, res.Reason, tc.reason != "", tc.reason)
		}
		if res.Reply != "" {
			t.Errorf("%q: reply %q without plugins.lua.drop_notice", tc.text, res.Reply)
		}
		if res.Text != tc.text {
			t.Errorf("%q: text became %q; a filter does not rewrite", tc.text, res.Text)
		}
	}
	noticed := startEngine(t, map[string]string{"filter.lua": seed(t, "filter.lua")}, func(o *Options) { o.DropNotice = "Your message was blocked." })
	if res := noticed.pre(t, "spam spam"); !res.Drop || res.Reply != "Your message was blocked." {
		t.Errorf("with drop_notice: %+v, want a drop answered with the notice", res)
	}
}

func TestSeedExpertClassify(t *testing.T) {
	te := startEngine(t, map[string]string{"expert_classify.lua": seed(t, "expert_classify.lua")}, nil)
	for _, tc := range []struct{ text, category, priority string }{
		{"Please CREATE a Jira TICKET for this", "jira", "normal"},
		{"URGENT: there is a bug in login", "jira", "critical"},
		{"deploy the release to prod", "devops", "high"},
		{"summarize this code for me", "code", "normal"},
		{"how are you?", "", ""},
	} {
		res := te.pre(t, tc.text)
		if res.Text != tc.text || res.Metadata["category"] != tc.category || res.Metadata["priority"] != tc.priority {
			t.Errorf("%q: text %q metadata %v, want category %q priority %q", tc.text, res.Text, res.Metadata, tc.category, tc.priority)
		}
	}
	if !strings.Contains(te.logs.String(), `msg="classified as devops/high" component=lua script=expert_classify.lua hook=pre_hook`) {
		t.Errorf("ctx.log did not reach slog under the script's name:\n%s", te.logs.String())
	}
}

func TestSeedVocabularyGuard(t *testing.T) {
	te := startEngine(t, map[string]string{"vocabulary_guard.lua": seed(t, "vocabulary_guard.lua")}, nil)
	got := te.post(t, input("q"), "guys, this bug must be fixed asap because this sucks")
	want := "team, this defect must be fixed with high priority because this needs improvement"
	if got != want {
		t.Fatalf("post_hook = %q, want %q", got, want)
	}
	if res := te.pre(t, "a bug"); res.Text != "a bug" {
		t.Fatalf("a post-only script changed the question: %q", res.Text)
	}
}

func TestSeedSmartPreprocess(t *testing.T) {
	te := startEngine(t, map[string]string{"smart_preprocess.lua": seed(t, "smart_preprocess.lua")}, nil)
	te.llm.answer = func(p string) string {
		switch {
		case strings.HasPrefix(p, "What language is this text?"):
			if strings.Contains(p, "Bonjour") {
				return "fr\n" // models add white space; ctx.llm trims it
			}
			return "en"
		case strings.HasPrefix(p, "Translate to English: "):
			return "Hello, how are you?"
		}
		return "?"
	}
	res := te.pre(t, "Bonjour, comment ça va ?")
	if res.Text != "Hello, how are you?" || res.Metadata["original_language"] != "fr" {
		t.Fatalf("French message: %+v, want the translation and original_language=fr", res)
	}
	reqs := te.llm.requests()
	if len(reqs) != 2 || reqs[0].Model != "small" || reqs[0].Purpose != "lua" || reqs[0].SessionID != 7 || reqs[0].UserID != "u1" ||
		reqs[0].Conversation.Channel != "console" || reqs[1].Messages[0].Content != "Translate to English: Bonjour, comment ça va ?" {
		t.Fatalf("LLM requests = %+v", reqs)
	}
	res = te.pre(t, "Hello there")
	if res.Text != "Hello there" || len(res.Metadata) != 0 || len(te.llm.requests()) != 3 {
		t.Fatalf("English message: %+v after %d LLM calls; want it unchanged after one more call", res, len(te.llm.requests()))
	}
}

func TestSeedComplianceCheck(t *testing.T) {
	te := startEngine(t, map[string]string{"compliance_check.lua": seed(t, "compliance_check.lua")}, nil)
	te.llm.answer = func(p string) string {
		switch {
		case strings.HasPrefix(p, "Does this response contain any PII"):
			if strings.Contains(p, "@") {
				return "YES"
			}
			return "NO"
		case strings.HasPrefix(p, "Redact all PII"):
			return "Write to [REDACTED] for details."
		}
		return "?"
	}
	if got := te.post(t, input("q"), "Write to jane@example.com for details."); got != "Write to [REDACTED] for details." {
		t.Fatalf("answer with PII = %q, want it redacted", got)
	}
	if !strings.Contains(te.logs.String(), "PII detected in response, redacting") {
		t.Errorf("no warning logged:\n%s", te.logs.String())
	}
	// A redaction must see the answer before the user does, and fails
	// closed: with the small model down the answer is withheld.
	if te.StreamSafe(input("q")) {
		t.Error("compliance_check.lua lets answers stream; it must set stream_safe = false")
	}
	te.llm.fail = func(string) error { return errors.New("small model down") }
	if got := te.post(t, input("q"), "Write to jane@example.com for details."); got != answerFailedNotice {
		t.Fatalf("answer with the checker down = %q, want it withheld", got)
	}
	te.llm.fail = nil
	if got := te.post(t, input("q"), "The sky is blue."); got != "The sky is blue." {
		t.Fatalf("clean answer changed to %q", got)
	}
}

func TestSeedHybridClassifier(t *testing.T) {
	te := startEngine(t, map[string]string{"hybrid_classifier.lua": seed(t, "hybrid_classifier.lua")}, nil)
	te.llm.answer = func(p string) string {
		if strings.Contains(p, "drop the database") {
			return "HIGH"
		}
		return "LOW"
	}
	for _, tc := range []struct {
		text, want string
		meta       map[string]string
		llmCalls   int
	}{
		{"my Password is hunter2", "[blocked: contains credential]", map[string]string{"blocked": "true"}, 0},
		{"here is the API-Key: abc", "[blocked: contains API key]", map[string]string{"blocked": "true"}, 0},
		{"please drop the database", "please drop the database", map[string]string{"security_review": "required"}, 1},
		{"what time is it", "what time is it", map[string]string{}, 1},
	} {
		before := len(te.llm.requests())
		res := te.pre(t, tc.text)
		if res.Text != tc.want || !maps.Equal(res.Metadata, tc.meta) || len(te.llm.requests())-before != tc.llmCalls {
			t.Errorf("%q: text %q metadata %v after %d LLM calls; want %q %v after %d", tc.text, res.Text, res.Metadata, len(te.llm.requests())-before, tc.want, tc.meta, tc.llmCalls)
		}
	}
	if !strings.Contains(te.logs.String(), "high-risk message flagged for review") {
		t.Errorf("no warning logged:\n%s", te.logs.String())
	}
}

// All six together: scripts run in file-name order, metadata travels.
func TestSeedScriptsTogether(t *testing.T) {
	scripts := map[string]string{}
	for _, n := range []string{"compliance_check.lua", "expert_classify.lua", "filter.lua", "hybrid_classifier.lua", "smart_preprocess.lua", "vocabulary_guard.lua"} {
		scripts[n] = seed(t, n)
	}
	te := startEngine(t, scripts, nil)
	te.llm.answer = func(p string) string {
		switch {
		case strings.HasPrefix(p, "What language"):
			return "en"
		case strings.HasPrefix(p, "Rate the security risk"):
			return "LOW"
		case strings.HasPrefix(p, "Does this response"):
			return "NO"
		}
		return "?"
	}
	var names []string
	for _, s := range te.Scripts() {
		names = append(names, s.File)
	}
	if strings.Join(names, ",") != "compliance_check.lua,expert_classify.lua,filter.lua,hybrid_classifier.lua,smart_preprocess.lua,vocabulary_guard.lua" {
		t.Fatalf("scripts run in order %v, want file-name order", names)
	}
	res := te.pre(t, "urgent: the bug in deploy")
	if res.Drop || res.Metadata["category"] != "jira" || res.Metadata["priority"] != "critical" {
		t.Fatalf("pre = %+v", res)
	}
	in := input("q")
	in.Metadata = res.Metadata
	if got := te.post(t, in, "the bug is fixed asap"); got != "the defect is fixed with high priority" {
		t.Fatalf("post = %q", got)
	}
	if res := te.pre(t, "spam offer"); !res.Drop || res.Metadata["category"] != "" {
		t.Fatalf("spam: %+v", res)
	}
}
