package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/opentalon/opentalon/config"
	"github.com/opentalon/opentalon/core"
)

// accessPolicies maps each enabled channel's access keys onto the
// gateway's rules. The console's user is whoever runs the process: an
// admin.
func accessPolicies(cfg *config.Config) map[string]core.AccessPolicy {
	out := map[string]core.AccessPolicy{}
	for _, sec := range cfg.Channels.Sections() {
		if !sec.Enabled {
			continue
		}
		if sec.Common == nil {
			out[sec.Name] = core.AccessPolicy{Mode: core.AccessOpen, Operator: true}
			continue
		}
		c := sec.Common
		out[sec.Name] = core.AccessPolicy{Mode: core.AccessMode(c.Access), Admins: c.Admins, Users: c.AllowUsers}
	}
	return out
}

// minWebhookSecret is the shortest Telegram webhook secret start accepts
// without a warning (Telegram takes 1 to 256 characters).
const minWebhookSecret = 16

// warnAccess logs, once at start, what an operator should know of the
// channels' access: a channel anyone can talk to, pairing without an
// admin to approve in chat, a Telegram webhook secret short enough to
// guess; and a config key that is taken but ignored.
func warnAccess(cfg *config.Config, log *slog.Logger) {
	for _, sec := range cfg.Channels.Sections() {
		if !sec.Enabled || sec.Common == nil {
			continue
		}
		c, p := sec.Common, "channels."+sec.Name
		switch {
		case c.Access == config.AccessOpen && len(c.AllowUsers) == 0 && len(c.AllowChats) == 0:
			log.Warn(p+" is open to everyone: anyone who finds the bot can talk to it and spend your LLM budget; set "+p+".access: pairing, or "+p+".allow_users or "+p+".allow_chats (and routing.budget), to limit it",
				"channel", sec.Name)
		case c.Access == config.AccessPairing && len(c.Admins) == 0:
			log.Warn(p+" pairs users but has no admins: approve them with `opentalon pair approve CODE`, or list user ids in "+p+".admins to approve in chat with /pair",
				"channel", sec.Name)
		}
	}
	if t := cfg.Channels.Telegram; t.Enabled && t.Mode == config.ModeWebhook && t.Webhook.Secret.IsSet() && len(t.Webhook.Secret.Value()) < minWebhookSecret {
		log.Warn(fmt.Sprintf("channels.telegram.webhook.secret has %d characters: whoever guesses it can post updates as any user; use at least %d random ones (letters, digits, _ and -), e.g. the output of `openssl rand -hex 16`",
			len(t.Webhook.Secret.Value()), minWebhookSecret), "channel", "telegram")
	}
	if f := cfg.Routing.Affinity.Store; f != "" {
		log.Warn("routing.affinity.store is ignored: the learned scores live in the database (state.data_dir, or state.postgres), where `opentalon affinity show` reads them; remove the key", "routing.affinity.store", f)
	}
}

// pairStore is what `opentalon pair` needs; *store.DB has it.
type pairStore interface {
	Pairings(ctx context.Context, channel string) ([]core.Pairing, error)
	DecidePairing(ctx context.Context, channel, code string, approve bool, by string) (core.Pairing, error)
}

const pairUsage = "usage: opentalon pair list | opentalon pair approve CODE | opentalon pair deny CODE"

// runPair implements `opentalon pair list|approve CODE|deny CODE`; it
// works while the gateway runs (which reads approvals from the database
// at each message). args are the words after "pair".
func runPair(ctx context.Context, db pairStore, now time.Time, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return subUsageError("pair", args, "list, approve or deny", pairUsage)
	}
	switch args[0] {
	case "list":
		if len(args) != 1 {
			return argCountError("pair list", args[1:], 0, "", pairUsage)
		}
		recs, err := db.Pairings(ctx, "")
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			fmt.Fprintln(stdout, "No pairing requests yet (channels with access: pairing record them when an unknown user writes).")
			return nil
		}
		// The user's id and name are what the platform sent: made safe for
		// the terminal (termText).
		rows := [][]string{{"CODE", "STATUS", "CHANNEL", "USER ID", "NAME", "ASKED"}}
		for _, r := range recs {
			status := string(r.Status)
			if core.PairingExpired(r, now) {
				// It can no longer be approved; the user gets a new
				// code when they write again.
				status = "expired"
			}
			rows = append(rows, []string{termText(r.Code), termText(status), termText(r.Channel), termText(r.UserID),
				dash(termText(r.UserName)), fmt.Sprintf("%s ago", now.Sub(r.RequestedAt).Round(time.Second))})
		}
		return writeTable(stdout, rows)
	case "approve", "deny":
		if len(args) != 2 {
			return argCountError("pair "+args[0], args[1:], 1, "CODE", pairUsage)
		}
		approve := args[0] == "approve"
		if approve {
			if expired, err := core.PairingCodeExpired(ctx, db, "", args[1], now); err != nil {
				return err
			} else if expired {
				return fmt.Errorf("the code %s expired (a code is valid for %s): the user gets a new one when they write to the bot again", core.NormalizePairingCode(args[1]), core.PairingTTL)
			}
		}
		rec, err := db.DecidePairing(ctx, "", core.NormalizePairingCode(args[1]), approve, "cli")
		if err != nil {
			return err
		}
		verb := "denied"
		if approve {
			verb = "approved"
		}
		fmt.Fprintf(stdout, "%s %s user %s (%s)\n", verb, termText(rec.Channel), termText(rec.UserID), termText(rec.UserName))
		return nil
	}
	return subUsageError("pair", args, "list, approve or deny", pairUsage)
}
