package core

import (
	"strings"
	"time"
	"unicode"
)

// The records of long-term memory: what the orchestrator saves and
// recalls through its Store, typed here so a store implements it without
// the orchestrator depending on that store's own types.

// TagWorkflow marks a workflow pattern among the memories.
const TagWorkflow = "workflow"

// Workflow outcomes (Memory.Outcome of a workflow).
const (
	WorkflowSucceeded = "success"
	WorkflowFailed    = "failed"
)

// Memory is one long-term memory: a fact saved about a user (or shared
// with every user), or a workflow pattern (tag TagWorkflow: the request
// that started it in Content, its plugin/action Steps and Outcome).
type Memory struct {
	ID int64
	// Owner is "<channel>:<user id>" of the user the memory belongs to.
	Owner string
	// Shared memories are recalled for every user.
	Shared bool
	// Place is where the memory was saved: "" in a private chat with the
	// bot (and for memories older than the field), else the group
	// conversation "<channel>:<chat>" (MemoryPlace). A group recalls only
	// its own.
	Place     string
	Content   string
	Tags      []string
	Steps     []WorkflowStep
	Outcome   string
	TaskType  string
	RequestID int64
	CreatedAt time.Time
	UpdatedAt time.Time
	// Rank orders search results: lower is a better match (FTS5 bm25).
	Rank float64
}

// MemoryPlace is where a message's memories are saved and recalled
// (Memory.Place): "" for a private chat with the bot, else the group
// conversation "<channel>:<chat>". The threads and topics of a chat share
// its place: the same people read them. A message that does not say it
// is private counts as a group's: a plugin's, and a schedule's firing
// unless the schedule was made in a private chat (Firing.Private).
func MemoryPlace(in Inbound) string {
	if in.Private {
		return ""
	}
	return in.Conversation.Channel + ":" + in.Conversation.Chat
}

// HasTag reports whether the memory carries tag.
func (m Memory) HasTag(tag string) bool {
	for _, t := range m.Tags {
		if t == tag {
			return true
		}
	}
	return false
}

// WorkflowStep is one plugin action of a workflow, in order from 1.
type WorkflowStep struct {
	Plugin string `json:"plugin" yaml:"plugin"`
	Action string `json:"action" yaml:"action"`
	Order  int    `json:"order" yaml:"order"`
}

// MemoryQuery selects memories. The zero value lists every memory.
type MemoryQuery struct {
	// Owner limits to one user's memories ("" = every user's).
	Owner string
	// WithShared adds the shared memories to Owner's.
	WithShared bool
	// Place, when set, keeps the memories saved there (Memory.Place)
	// and the shared ones: a group conversation's recall. "" keeps
	// memories saved anywhere (a private chat, the command line).
	Place string
	// Tag keeps memories with this tag; NotTag drops those with it.
	Tag, NotTag string
	// Outcome keeps workflows with this outcome.
	Outcome string
	// Text is a full-text query (words; results ranked by relevance).
	// Empty lists newest first.
	Text string
	// TaskType ranks workflows of this task type higher in a search.
	TaskType string
	// Limit bounds the results (default 20).
	Limit int
}

// NormalizeTags lower-cases tags, splits them at commas and spaces and
// drops duplicates and empty ones.
func NormalizeTags(tags ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range tags {
		for _, f := range strings.FieldsFunc(strings.ToLower(t), func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
			f = strings.Trim(f, "#\"'[]")
			if f != "" && !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	return out
}
