package routing

import (
	"strings"

	"github.com/opentalon/opentalon/core"
)

// Task types the classifier produces; they are the affinity keys.
const (
	TaskChat      = "chat"
	TaskCode      = "code"
	TaskAnalysis  = "analysis"
	TaskTransform = "transform"
	TaskDeep      = "deep_conversation"
)

// TaskTypes lists every task type the classifier produces.
var TaskTypes = []string{TaskChat, TaskCode, TaskAnalysis, TaskTransform, TaskDeep}

// Classifier tunes the task heuristics; the zero value uses defaults.
type Classifier struct {
	// DeepTurns: more user turns than this make a deep_conversation
	// (default 10).
	DeepTurns int
	// LongChars: a message at least this long with structure (several
	// lines, lists, headings) is analysis (default 600); any message twice
	// as long is analysis even without structure.
	LongChars int
}

var codeMarkers = []string{
	"```", "func ", "def ", "#include", "console.log", "println", "printf(", "select * from",
	"traceback (most recent", "panic:", "exception in", "npm ", "go build", "stack trace",
	"syntax error", "compile", "regex", "python", "golang", "javascript", "typescript",
	"rust ", "java ", "c++", "sql", "bash", "dockerfile", "function", "refactor", "unit test", "debug",
}

var transformMarkers = []string{
	"translate", "summarize", "summarise", "summary", "tl;dr", "tldr", "paraphrase", "rewrite",
	"proofread", "übersetz", "zusammenfass", "tradui", "tradu", "résum", "resume this", "resumen", "resum",
	"Übersetz", "перевед", "перевод", "кратко", "резюм", "суммир", "Перевед", "Перевод", "Кратко", "Резюм", "Суммир",
}

// Classify returns the task type of the conversation's last user message.
func (c Classifier) Classify(msgs []core.ChatMessage) string {
	deep, long := c.DeepTurns, c.LongChars
	if deep <= 0 {
		deep = 10
	}
	if long <= 0 {
		long = 600
	}
	var last string
	turns := 0
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == core.RoleUser {
			if turns == 0 {
				last = msgs[i].Content
			}
			turns++
		}
	}
	if hasAnyFold(last, codeMarkers) || indentedLines(last) >= 2 {
		return TaskCode
	}
	if hasAnyFold(last, transformMarkers) {
		return TaskTransform
	}
	if len(last) >= 2*long || (len(last) >= long && structured(last)) {
		return TaskAnalysis
	}
	if turns > deep {
		return TaskDeep
	}
	return TaskChat
}

// hasAnyFold reports whether s contains any marker, ASCII
// case-insensitively (markers are lower case; non-ASCII markers are listed
// in each case they are matched in); it does not allocate.
func hasAnyFold(s string, markers []string) bool {
	for _, m := range markers {
		if containsFold(s, m) {
			return true
		}
	}
	return false
}

func containsFold(s, sub string) bool {
	n := len(sub)
	if n == 0 {
		return true
	}
	first := sub[0]
	for i := 0; i+n <= len(s); i++ {
		if lower(s[i]) != first {
			continue
		}
		j := 1
		for j < n && lower(s[i+j]) == sub[j] {
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}

func lower(b byte) byte {
	if b >= 'A' && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

func indentedLines(s string) int {
	n := 0
	for line := range strings.Lines(s) {
		if strings.HasPrefix(line, "    ") || strings.HasPrefix(line, "\t") {
			n++
		}
	}
	return n
}

// structured reports lists, headings or several paragraphs.
func structured(s string) bool {
	lines, marks := 0, 0
	for line := range strings.Lines(s) {
		lines++
		t := strings.TrimLeft(line, " ")
		if strings.HasPrefix(t, "- ") || strings.HasPrefix(t, "* ") || strings.HasPrefix(t, "#") ||
			(len(t) > 2 && t[0] >= '0' && t[0] <= '9' && (t[1] == '.' || t[1] == ')')) {
			marks++
		}
	}
	return marks >= 2 || lines >= 5
}
