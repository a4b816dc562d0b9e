package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/opentalon/opentalon/core"
)

// Message templates per task type, written so that a good classifier
// recovers the task; the classifier is not told the truth.
var templates = map[string][]string{
	"chat": {
		"hey, what's a good name for a grey cat?",
		"Any idea what the weather is usually like in Lisbon in May?",
		"thanks! what should I cook tonight with rice and beans?",
		"Who won the last football world cup?",
	},
	"code": {
		"why does this crash?\n```go\nvar m map[string]int\nm[\"a\"] = %d\n```",
		"Write a Python function that merges %d sorted lists",
		"I get panic: runtime error: index out of range [%d] with length 3",
		"How do I write this SQL query: count orders per customer over %d days",
	},
	"analysis": {
		"Compare these options for our office move (budget %d):\n1. Stay and renovate.\n2. Move downtown.\n3. Go remote.\n- cost\n- commute\n- morale\n" + strings.Repeat("Please weigh hiring, lease terms, equipment, and the effect on team cohesion over three years. ", 6),
		"Here are the survey results from %d customers.\n# Findings\n- churn is up\n- support wait times doubled\n- pricing complaints fell\n" + strings.Repeat("Explain the likely causes, the interactions between them and what we should measure next quarter. ", 6),
	},
	"transform": {
		"Translate this paragraph into Spanish: we ship %d orders a day from two warehouses.",
		"Please summarize the following meeting notes in %d bullet points: the team agreed...",
		"Rewrite this email to sound more polite, it is for %d colleagues.",
	},
}

// message builds the conversation for one request of task.
func message(task string, rng *rand.Rand) []core.ChatMessage {
	if task == "deep_conversation" {
		var msgs []core.ChatMessage
		for i := range 11 + rng.IntN(4) {
			msgs = append(msgs, core.ChatMessage{Role: core.RoleUser, Content: fmt.Sprintf("and about point %d?", i)},
				core.ChatMessage{Role: core.RoleAssistant, Content: "Here is more on that."})
		}
		return append(msgs, core.ChatMessage{Role: core.RoleUser, Content: "ok, and how does that change the plan we discussed earlier?"})
	}
	ts := templates[task]
	if len(ts) == 0 {
		return []core.ChatMessage{{Role: core.RoleUser, Content: task}}
	}
	t := ts[rng.IntN(len(ts))]
	if strings.Contains(t, "%d") {
		t = fmt.Sprintf(t, 2+rng.IntN(50))
	}
	return []core.ChatMessage{{Role: core.RoleUser, Content: t}}
}
