package routing

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

// /budget and /allowed: anyone may see the daily budgets and the models
// /model may pick; only the channel's admins (CommandRequest.Admin) may
// change them. A change is a setting (settings.go) that overrides the
// config key until /budget default or /allowed default.

const (
	budgetUsage  = "Usage: /budget to show today's spend; admins: /budget daily <usd>|off, /budget chat <usd>|off, /budget default."
	allowedUsage = "Usage: /allowed to list the models /model may pick; admins: /allowed add <model>, /allowed remove <model>, /allowed all, /allowed default."
)

// adminCommands are /budget and /allowed (see Commands).
func (r *Router) adminCommands() []core.Command {
	return []core.Command{
		{CommandInfo: core.CommandInfo{Name: "budget", Usage: "/budget [daily|chat <usd>|off, default]", Description: "Today's spend against the daily budgets (admins change them)"},
			Run: r.cmdBudget, Aside: true},
		{CommandInfo: core.CommandInfo{Name: "allowed", Usage: "/allowed [add|remove <model>, all, default]", Description: "The models /model may pick (admins change the list)"},
			Run: r.cmdAllowed, Aside: true},
	}
}

// onlyAdmin is the refusal of a change to a non-admin, in the gateway's
// words for an admin-only command.
func onlyAdmin(req core.CommandRequest, what string) string {
	ch := req.In.Conversation.Channel
	if ch == "" {
		ch = "chat"
	}
	return fmt.Sprintf("Only an admin of this %s bot can change %s.", ch, what)
}

// who names the sender of req for the settings and the log.
func who(req core.CommandRequest) string {
	if req.In.UserID == "" {
		return req.In.Conversation.Channel
	}
	return req.In.Conversation.Channel + ":" + req.In.UserID
}

func (r *Router) cmdBudget(ctx context.Context, req core.CommandRequest) (string, error) {
	r.load(ctx)
	args := strings.Fields(strings.ToLower(req.Args))
	if len(args) == 0 {
		return r.showBudget(ctx, req)
	}
	var key, name string
	switch args[0] {
	case "daily":
		key, name = KeyDailyUSD, "daily budget"
	case "chat":
		key, name = KeyChatDailyUSD, "daily budget of each conversation"
	case "default":
		if len(args) != 1 {
			return budgetUsage, nil
		}
	default:
		return budgetUsage, nil
	}
	if !req.Admin {
		return onlyAdmin(req, "the budget"), nil
	}
	if _, ok := r.o.Store.(SettingsStore); !ok {
		return "This store cannot keep settings made in chat; change routing.budget in the config.", nil
	}
	if key == "" {
		had1, err := r.setSetting(ctx, KeyDailyUSD, "", who(req), req.In.Conversation.String())
		if err != nil {
			return "", err
		}
		had2, err := r.setSetting(ctx, KeyChatDailyUSD, "", who(req), req.In.Conversation.String())
		if err != nil {
			return "", err
		}
		if !had1 && !had2 {
			return "The budgets are the config's already: " + configBudgets(r.o) + ".", nil
		}
		return "Back to the config's budgets: " + configBudgets(r.o) + ".", nil
	}
	if len(args) != 2 {
		return budgetUsage, nil
	}
	v, ok := parseUSD(args[1])
	if !ok {
		return budgetUsage, nil
	}
	if _, err := r.setSetting(ctx, key, formatBudgetValue(v), who(req), req.In.Conversation.String()); err != nil {
		return "", err
	}
	l := r.limits()
	if v > 0 {
		o := r.o
		o.DailyUSD, o.ChatDailyUSD = l.daily, l.chatDaily
		warnUnpriced(o, r.cat.byWeight)
	}
	if v == 0 {
		return fmt.Sprintf("The %s is off (%s) until /budget default.", name, key), nil
	}
	return fmt.Sprintf("The %s is now $%s (%s) until /budget default; it counts today's spend so far (UTC).", name, usd(v), key), nil
}

// parseUSD reads a budget: dollars ("1.50", "$2"), or "off" (0).
func parseUSD(s string) (float64, bool) {
	if s == "off" {
		return 0, true
	}
	v, err := strconv.ParseFloat(strings.TrimPrefix(s, "$"), 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// configBudgets describes the config's budgets.
func configBudgets(o Options) string {
	return fmt.Sprintf("%s %s, %s %s", KeyDailyUSD, orNone(o.DailyUSD), KeyChatDailyUSD, orNone(o.ChatDailyUSD))
}

func orNone(v float64) string {
	if v <= 0 {
		return "none"
	}
	return "$" + usd(v)
}

// spent writes an amount spent: to the cent, or finer below a cent.
func spent(v float64) string {
	if v > 0 && v < 0.01 {
		return strconv.FormatFloat(v, 'f', 4, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func (r *Router) showBudget(ctx context.Context, req core.CommandRequest) (string, error) {
	l := r.limits()
	since := r.now().UTC().Truncate(24 * time.Hour)
	all, err := r.o.Store.SpentSince(ctx, since, "")
	if err != nil {
		return "", fmt.Errorf("budget: %w", err)
	}
	conv := req.Session.Conversation
	if conv == (core.ConversationKey{}) {
		conv = req.In.Conversation
	}
	mine, err := r.o.Store.SpentSince(ctx, since, conv.String())
	if err != nil {
		return "", fmt.Errorf("budget: %w", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Today (UTC): $%s", spent(all))
	if l.daily > 0 {
		fmt.Fprintf(&b, " of $%s (%s%s)", usd(l.daily), KeyDailyUSD, fromChat(l.dailyFromChat, l.dailySet))
	} else {
		fmt.Fprintf(&b, ", no daily budget (%s%s)", KeyDailyUSD, fromChat(l.dailyFromChat, l.dailySet))
	}
	fmt.Fprintf(&b, "; this conversation: $%s", spent(mine))
	if l.chatDaily > 0 {
		fmt.Fprintf(&b, " of $%s (%s%s)", usd(l.chatDaily), KeyChatDailyUSD, fromChat(l.chatFromChat, l.chatSet))
	} else {
		fmt.Fprintf(&b, ", no budget per conversation (%s%s)", KeyChatDailyUSD, fromChat(l.chatFromChat, l.chatSet))
	}
	b.WriteString(".")
	if l.dailyFromChat || l.chatFromChat {
		b.WriteString("\nThe config's: " + configBudgets(r.o) + ".")
	}
	if req.Admin {
		b.WriteString("\n" + budgetUsage)
	}
	return b.String(), nil
}

// fromChat is ", set in chat by … on …" for a value set in chat.
func fromChat(yes bool, s core.Setting) string {
	if !yes {
		return ""
	}
	return ", " + setBy(s)
}

func (r *Router) cmdAllowed(ctx context.Context, req core.CommandRequest) (string, error) {
	r.load(ctx)
	args := strings.Fields(req.Args)
	if len(args) == 0 {
		return r.showAllowed(req), nil
	}
	sub := strings.ToLower(args[0])
	switch {
	case (sub == "add" || sub == "remove") && len(args) == 2, (sub == "all" || sub == "default") && len(args) == 1:
	default:
		return allowedUsage, nil
	}
	if !req.Admin {
		return onlyAdmin(req, "the models /model may pick"), nil
	}
	if _, ok := r.o.Store.(SettingsStore); !ok {
		return "This store cannot keep settings made in chat; change routing.allowed in the config.", nil
	}
	l := r.limits()
	set := func(refs []string) error {
		_, err := r.setSetting(ctx, KeyAllowed, mustJSON(refs), who(req), req.In.Conversation.String())
		return err
	}
	switch sub {
	case "all":
		if err := set(nil); err != nil {
			return "", err
		}
		return "/model may pick any model of the catalog now, until /allowed default.", nil
	case "default":
		had, err := r.setSetting(ctx, KeyAllowed, "", who(req), req.In.Conversation.String())
		if err != nil {
			return "", err
		}
		prefix := "Back to routing.allowed: "
		if !had {
			prefix = "The list is routing.allowed's already: "
		}
		return prefix + r.describeAllowed(r.o.Allowed) + ".", nil
	}
	m, ok := r.cat.resolve(args[1])
	if !ok {
		return fmt.Sprintf("Unknown model %q%s. Send /models for the list.", args[1], suggest(r.cat.closeMatches(args[1]))), nil
	}
	// The list in force, as catalog refs; an empty one (any model) is
	// every model of the catalog.
	var refs []string
	for _, a := range l.allowed {
		if x, ok := r.cat.resolve(a); ok && !slices.Contains(refs, x.Ref) {
			refs = append(refs, x.Ref)
		}
	}
	anyModel := len(l.allowed) == 0
	if sub == "add" {
		if !anyModel && slices.Contains(refs, m.Ref) {
			return fmt.Sprintf("%s is allowed already: %s.", m.Ref, r.describeAllowed(refs)), nil
		}
		refs = append(refs, m.Ref)
		if err := set(refs); err != nil {
			return "", err
		}
		return fmt.Sprintf("Added %s: %s, until /allowed default.", m.Ref, r.describeAllowed(refs)), nil
	}
	if anyModel {
		refs = refs[:0]
		for _, x := range r.cat.byWeight {
			refs = append(refs, x.Ref)
		}
	}
	if !slices.Contains(refs, m.Ref) {
		return fmt.Sprintf("%s is not allowed already: %s.", m.Ref, r.describeAllowed(refs)), nil
	}
	refs = slices.DeleteFunc(refs, func(x string) bool { return x == m.Ref })
	if len(refs) == 0 {
		return fmt.Sprintf("%s is the only model /model may pick; an empty list would allow any. Add another first, or /allowed all.", m.Ref), nil
	}
	if err := set(refs); err != nil {
		return "", err
	}
	return fmt.Sprintf("Removed %s: %s, until /allowed default. A conversation pinned to it is answered by my own choice again.", m.Ref, r.describeAllowed(refs)), nil
}

// describeAllowed says which models /model may pick from refs.
func (r *Router) describeAllowed(refs []string) string {
	if len(refs) == 0 {
		return "/model may pick any model of the catalog"
	}
	names := make([]string, 0, len(refs))
	for _, a := range refs {
		m, ok := r.cat.resolve(a)
		switch {
		case !ok:
			names = append(names, a+" (not in the catalog)")
		case m.Alias != "":
			names = append(names, m.Ref+" ("+m.Alias+")")
		default:
			names = append(names, m.Ref)
		}
	}
	return "/model may pick " + strings.Join(names, ", ")
}

func (r *Router) showAllowed(req core.CommandRequest) string {
	l := r.limits()
	out := r.describeAllowed(l.allowed)
	if l.allowedFromChat {
		out += " (" + KeyAllowed + ", " + setBy(l.allowedBy) + "; the config's: " + strings.TrimPrefix(r.describeAllowed(r.o.Allowed), "/model may pick ") + ")"
	} else {
		out += " (" + KeyAllowed + ")"
	}
	out += "."
	if req.Admin {
		out += "\n" + allowedUsage
	}
	return out
}
