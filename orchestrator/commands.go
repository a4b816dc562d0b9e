package orchestrator

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/opentalon/opentalon/core"
)

// Commands returns /compact, /memory and /forget for Gateway.AddCommand:
// answered from the store, never by the LLM. Without a store there are
// none.
func (o *Orchestrator) Commands() []core.Command {
	if o.o.Store == nil {
		return nil
	}
	cmds := []core.Command{
		{CommandInfo: core.CommandInfo{Name: "memory", Usage: "/memory", Description: "What I remember about you"}, Run: o.cmdMemory, Aside: true},
		{CommandInfo: core.CommandInfo{Name: "forget", Usage: "/forget <id>|all", Description: "Forget one memory, or all of them"}, Run: o.cmdForget},
	}
	if o.o.Generator != nil {
		cmds = append(cmds, core.Command{CommandInfo: core.CommandInfo{Name: "compact", Usage: "/compact", Description: "Summarize the older part of this conversation now"}, Run: o.cmdCompact})
	}
	return cmds
}

func (o *Orchestrator) cmdCompact(ctx context.Context, req core.CommandRequest) (string, error) {
	n, err := o.ForceCompact(ctx, req.Session, req.In)
	if err != nil {
		return "", err
	}
	if n == 0 {
		return "Nothing to compact yet: this conversation holds only its latest exchange.", nil
	}
	return fmt.Sprintf("Compacted: %d earlier messages are now one summary; the latest exchange is kept as it was.", n), nil
}

// noOwner is the answer to a memory command from a message without a
// memory identity.
func noOwner(in core.Inbound) string {
	if strings.HasPrefix(in.Origin, core.OriginPlugin) {
		return "I keep memories per user, and a message a plugin put into this conversation speaks for no user."
	}
	return "I keep memories per user, and this message has no user."
}

// maxListedMemories bounds the facts /memory lists.
const maxListedMemories = 50

func (o *Orchestrator) cmdMemory(ctx context.Context, req core.CommandRequest) (string, error) {
	owner := Owner(req.In)
	if owner == "" {
		return noOwner(req.In), nil
	}
	if !req.In.Private && !req.In.Ephemeral {
		// A fact one user saved is never shown to another: in a group,
		// everyone would read the list.
		return "I list what I remember about you only where no one else reads it: send /memory in a private chat with me.", nil
	}
	// Counted up to 1,000 (as the workflows are), listed up to 50.
	facts, err := o.o.Store.Memories(ctx, core.MemoryQuery{Owner: owner, NotTag: core.TagWorkflow, Limit: 1000})
	if err != nil {
		return "", err
	}
	flows, err := o.o.Store.Memories(ctx, core.MemoryQuery{Owner: owner, Tag: core.TagWorkflow, Limit: 1000})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if len(facts) == 0 {
		b.WriteString("I remember nothing about you yet.")
		if o.o.Memory.Tools {
			b.WriteString(" Ask me to remember something (\"remember that I prefer short answers\").")
		}
	} else {
		if len(facts) > maxListedMemories {
			fmt.Fprintf(&b, "What I remember about you (%d; the newest %d):\n", len(facts), maxListedMemories)
		} else {
			fmt.Fprintf(&b, "What I remember about you (%d):\n", len(facts))
		}
		for _, m := range facts[:min(len(facts), maxListedMemories)] {
			b.WriteString(memoryLine(m) + " — " + m.CreatedAt.UTC().Format("2006-01-02") + "\n")
		}
	}
	if len(flows) > 0 {
		ok := 0
		for _, w := range flows {
			if w.Outcome == core.WorkflowSucceeded {
				ok++
			}
		}
		fmt.Fprintf(&b, "\nAnd %d workflows I recorded from your requests (%d worked; ids %s).", len(flows), ok, workflowIDs(flows))
	}
	if len(facts)+len(flows) > 0 {
		b.WriteString("\n/forget <id> forgets one; /forget all forgets everything.")
	}
	return strings.TrimSpace(b.String()), nil
}

func workflowIDs(ws []core.Memory) string {
	ids := make([]string, 0, min(len(ws), 10))
	for _, w := range ws[:min(len(ws), 10)] {
		ids = append(ids, "#"+strconv.FormatInt(w.ID, 10))
	}
	if len(ws) > 10 {
		ids = append(ids, "…")
	}
	return strings.Join(ids, ", ")
}

func (o *Orchestrator) cmdForget(ctx context.Context, req core.CommandRequest) (string, error) {
	owner := Owner(req.In)
	if owner == "" {
		return noOwner(req.In), nil
	}
	arg := strings.TrimSpace(req.Args)
	switch {
	case arg == "":
		return "Usage: /forget <id> forgets one memory (ids are in /memory); /forget all forgets everything I remember about you.", nil
	case strings.EqualFold(arg, "all"):
		n, err := o.o.Store.DeleteMemories(ctx, owner)
		if err != nil {
			return "", err
		}
		if n == 1 {
			return "Forgot everything I remembered about you (1 memory).", nil
		}
		return fmt.Sprintf("Forgot everything I remembered about you (%d memories).", n), nil
	}
	id, err := strconv.ParseInt(strings.TrimPrefix(arg, "#"), 10, 64)
	if err != nil {
		return fmt.Sprintf("%q is not a memory id. Usage: /forget <id> (ids are in /memory) or /forget all.", arg), nil
	}
	ok, err := o.o.Store.DeleteMemory(ctx, id, owner, o.isAdmin(owner, req.Admin))
	if err != nil {
		return "", err
	}
	if !ok {
		return fmt.Sprintf("There is no memory #%d of yours. /memory lists them.", id), nil
	}
	return fmt.Sprintf("Forgot memory #%d.", id), nil
}
