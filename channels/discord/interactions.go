package discord

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bwmarrin/discordgo"

	"github.com/opentalon/opentalon/channels/toolkit"
	"github.com/opentalon/opentalon/core"
)

// interactionTTL is how long Discord accepts an interaction's token.
const interactionTTL = 15 * time.Minute

// interaction is what Send needs to answer an application command: its
// webhook token, kept in memory and sealed in the database through the
// sink's core.CredentialKeeper (never in the clear), and whether the
// deferred response went out.
type interaction struct {
	appID, token string
	expires      time.Time
	ready        chan struct{} // closed once the deferred response was tried
	deferred     bool          // written before ready is closed
}

// interactionTokens maps interaction ids to their tokens until they
// expire.
type interactionTokens struct {
	mu sync.Mutex
	m  map[string]*interaction
}

func newInteractionTokens() *interactionTokens {
	return &interactionTokens{m: map[string]*interaction{}}
}

func (t *interactionTokens) add(id string, in *interaction, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range t.m {
		if now.After(v.expires) {
			delete(t.m, k)
		}
	}
	t.m[id] = in
}

func (t *interactionTokens) remove(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, id)
}

func (t *interactionTokens) get(id string) *interaction {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id]
}

// interactionName is the name an interaction's token is kept under by
// the sink's credential keeper.
func interactionName(id string) string { return "discord:interaction:" + id }

// keepInteraction seals an interaction's token in the database (before
// the command is committed), so whichever replica runs the command edits
// its deferred response.
func (b *Bot) keepInteraction(ctx context.Context, id string, it *interaction) {
	keeper := b.credentialKeeper()
	if keeper == nil {
		return
	}
	if err := keeper.KeepCredential(ctx, interactionName(id), it.appID+"\n"+it.token, it.expires); err != nil {
		b.log.Debug("the interaction's token is kept in this process only", "interaction", id, "err", err)
	}
}

// keptInteraction is an interaction another replica received: its token
// from the keeper, its deferred response taken as sent.
func (b *Bot) keptInteraction(ctx context.Context, id string) *interaction {
	keeper := b.credentialKeeper()
	if keeper == nil {
		return nil
	}
	secret, ok := keeper.Credential(ctx, interactionName(id))
	app, token, found := strings.Cut(secret, "\n")
	if !ok || !found || token == "" {
		return nil
	}
	ready := make(chan struct{})
	close(ready)
	// The keeper returns only a token still valid; a minute is enough
	// for this answer's parts.
	return &interaction{appID: app, token: token, expires: b.now().Add(time.Minute), ready: ready, deferred: true}
}

// forgetInteraction drops an interaction's token once its answer is
// sent.
func (b *Bot) forgetInteraction(ctx context.Context, id string) {
	b.interactions.remove(id)
	if keeper := b.credentialKeeper(); keeper != nil {
		keeper.DropCredential(ctx, interactionName(id))
	}
}

func (b *Bot) credentialKeeper() core.CredentialKeeper {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.keeper
}

// metaInteraction is the Inbound.Meta key of an application command's
// interaction id; metaEphemeral ("1") marks a command whose answer only
// its user sees, and metaUser, in a guild, is that user's id.
const (
	metaInteraction = "interaction"
	metaEphemeral   = "ephemeral"
	metaUser        = "user"
)

// answerCommands are the application commands whose answer is an answer
// of the conversation, posted for everyone as Slack posts it: /retry's
// re-answer is a reply like any other, reactions on it teach the router.
// Every other command (/memory, /status, /schedules, /pair, ...) is a
// notice for the one user, answered ephemerally as Slack answers a slash
// command.
var answerCommands = map[string]bool{"retry": true}

// interaction turns an application command into a message for the sink:
// "/name value". It is committed first, then acknowledged with a deferred
// response within Discord's 3 seconds; Send edits that response into the
// answer. The deferred response, and so the answer, is ephemeral (only
// the user sees it) but for answerCommands. A command from outside the
// allowlists, or one the sink cannot take, is answered at once, visible
// to its user only.
func (r *run) interaction(ctx context.Context, raw json.RawMessage) error {
	var i discordgo.Interaction
	if err := json.Unmarshal(raw, &i); err != nil {
		return badEvent("interaction: %v", err)
	}
	if i.Type != discordgo.InteractionApplicationCommand {
		return nil
	}
	data, ok := i.Data.(discordgo.ApplicationCommandInteractionData)
	user := i.User
	if i.Member != nil && i.Member.User != nil {
		user = i.Member.User
	}
	if !ok || i.ID == "" || i.Token == "" || i.ChannelID == "" || user == nil || data.Name == "" {
		return badEvent("application command without id, token, channel, user or name")
	}
	b := r.b
	if i.AppID == "" {
		_, i.AppID, _ = b.identity()
	}
	// The interaction names its channel (a thread with its parent): no
	// channel lookup, which a rate limit can hold up, stands before the
	// deferred response Discord wants within 3 seconds.
	var named struct {
		Channel *discordgo.Channel `json:"channel"`
	}
	if json.Unmarshal(raw, &named) == nil && named.Channel != nil && named.Channel.ID == i.ChannelID && i.GuildID != "" {
		b.chans.put(i.ChannelID, chanInfo{thread: named.Channel.IsThread(), parent: named.Channel.ParentID})
	}
	conv, parent := b.conversation(ctx, i.GuildID, i.ChannelID)
	if !b.allowed(i.GuildID, i.ChannelID, parent, user) {
		b.respondNow(ctx, &i, "This bot does not answer you here.")
		return nil
	}
	text := "/" + data.Name
	for _, o := range data.Options {
		if o != nil && o.Value != nil {
			text += " " + strings.TrimSpace(fmt.Sprint(o.Value))
		}
	}
	ephemeral := !answerCommands[strings.ToLower(data.Name)]
	it := &interaction{appID: i.AppID, token: i.Token, expires: b.now().Add(interactionTTL), ready: make(chan struct{})}
	b.interactions.add(i.ID, it, b.now())
	b.keepInteraction(ctx, i.ID, it)
	in := core.Inbound{
		Conversation: conv,
		MessageID:    i.ID,
		UserID:       user.ID,
		UserName:     "@" + user.Username,
		Text:         text,
		Mentioned:    true,
		Private:      i.GuildID == "",
		Awaited:      true, // the deferred response shows "thinking…" until it is answered
		Meta:         map[string]string{metaInteraction: i.ID},
		ReceivedAt:   b.now(),
	}
	if ephemeral {
		in.Meta[metaEphemeral] = "1"
		in.Ephemeral = true
		if i.GuildID != "" {
			in.Meta[metaUser] = user.ID // where the answer goes once the interaction cannot carry it
		}
	}
	if err := r.accept(ctx, in); err != nil {
		close(it.ready)
		b.respondNow(ctx, &i, "Sorry, I could not take that command right now. Please try again.")
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	// The deferred response decides whether the answer that edits it is
	// ephemeral; Discord keeps that for the original response.
	deferred := &discordgo.InteractionResponse{Type: discordgo.InteractionResponseDeferredChannelMessageWithSource}
	if ephemeral {
		deferred.Data = &discordgo.InteractionResponseData{Flags: discordgo.MessageFlagsEphemeral}
	}
	err := b.rest.InteractionRespond(&i, deferred, discordgo.WithContext(rctx))
	it.deferred = err == nil
	close(it.ready)
	if err != nil {
		b.log.Warn("the deferred response to a Discord command failed; the answer will be posted in the channel", "command", data.Name, "err", b.scrubInteraction(err, i.Token))
	}
	return nil
}

// respondNow answers an interaction at once with text only its user sees.
func (b *Bot) respondNow(ctx context.Context, i *discordgo.Interaction, text string) {
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	err := b.rest.InteractionRespond(i, &discordgo.InteractionResponse{
		Type: discordgo.InteractionResponseChannelMessageWithSource,
		Data: &discordgo.InteractionResponseData{Content: text, Flags: discordgo.MessageFlagsEphemeral, AllowedMentions: noPings(false)},
	}, discordgo.WithContext(rctx))
	if err != nil {
		b.log.Warn("answering a Discord command failed", "err", b.scrubInteraction(err, i.Token))
	}
}

// scrubInteraction removes the bot token and an interaction's token from
// an error's text.
func (b *Bot) scrubInteraction(err error, token string) error {
	return toolkit.NewScrubber(b.token, token).Error(err)
}

// registerCommands makes the application commands match core's commands,
// globally or in each guild of allow_guilds: missing ones are created,
// changed ones edited, ones core no longer has deleted; unchanged ones
// are left alone. Failures are logged: the text forms still work.
func (r *run) registerCommands(ctx context.Context, appID string) {
	b := r.b
	want := appCommands(r.sink.Commands())
	scopes := []string{""}
	if len(b.cfg.AllowGuilds) > 0 {
		scopes = nil
		for _, g := range b.cfg.AllowGuilds {
			if g = strings.TrimSpace(g); g != "" {
				scopes = append(scopes, g)
			}
		}
	}
	for _, guild := range scopes {
		created, edited, deleted, err := b.syncCommands(ctx, appID, guild, want)
		where := "global"
		if guild != "" {
			where = "guild " + guild
		}
		if err != nil {
			if ctx.Err() == nil && apiCode(err) == discordgo.ErrCodeMissingAccess {
				b.log.Warn("Discord refused the application commands (403 Missing Access): the bot is not in this server (check channels.discord.allow_guilds), or was invited without the applications.commands scope; invite it with scope=bot+applications.commands (the README's link; inviting again keeps it in the server), or set channels.discord.register_commands: false. The commands still work typed after a mention", "scope", where)
			} else if ctx.Err() == nil {
				b.log.Warn("registering the Discord application commands failed; the commands still work typed after a mention", "scope", where, "err", err)
			}
			continue
		}
		b.log.Info("Discord application commands registered", "scope", where, "commands", len(want), "created", created, "edited", edited, "deleted", deleted)
	}
}

// syncCommands brings one scope's commands to want.
func (b *Bot) syncCommands(ctx context.Context, appID, guild string, want []*discordgo.ApplicationCommand) (created, edited, deleted int, err error) {
	opt := discordgo.WithContext(ctx)
	have, err := b.rest.ApplicationCommands(appID, guild, opt)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("list: %w", b.scrub(err))
	}
	byName := map[string]*discordgo.ApplicationCommand{}
	for _, h := range have {
		if h != nil && (h.Type == 0 || h.Type == discordgo.ChatApplicationCommand) {
			byName[h.Name] = h
		}
	}
	for _, w := range want {
		h, ok := byName[w.Name]
		delete(byName, w.Name)
		switch {
		case !ok:
			if _, err := b.rest.ApplicationCommandCreate(appID, guild, w, opt); err != nil {
				return created, edited, deleted, fmt.Errorf("create /%s: %w", w.Name, b.scrub(err))
			}
			created++
		case !sameCommand(h, w):
			if _, err := b.rest.ApplicationCommandEdit(appID, guild, h.ID, w, opt); err != nil {
				return created, edited, deleted, fmt.Errorf("edit /%s: %w", w.Name, b.scrub(err))
			}
			edited++
		}
	}
	stale := make([]string, 0, len(byName))
	for name := range byName {
		stale = append(stale, name)
	}
	sort.Strings(stale)
	for _, name := range stale {
		if err := b.rest.ApplicationCommandDelete(appID, guild, byName[name].ID, opt); err != nil {
			return created, edited, deleted, fmt.Errorf("delete /%s: %w", name, b.scrub(err))
		}
		deleted++
	}
	return created, edited, deleted, nil
}

// appCommands describes core's commands as Discord slash commands. A
// command whose usage takes an argument ("/model [name|alias|auto]") gets
// one optional text option named like the command.
func appCommands(infos []core.CommandInfo) []*discordgo.ApplicationCommand {
	var out []*discordgo.ApplicationCommand
	seen := map[string]bool{}
	for _, c := range infos {
		name := strings.ToLower(strings.TrimSpace(c.Name))
		if !validCommand(name) || seen[name] {
			continue
		}
		seen[name] = true
		desc := c.Description
		if desc == "" {
			desc = c.Usage
		}
		if desc == "" {
			desc = name
		}
		cmd := &discordgo.ApplicationCommand{Type: discordgo.ChatApplicationCommand, Name: name, Description: clip(desc, 100)}
		if arg := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(c.Usage), "/"+c.Name)); arg != "" {
			argDesc := strings.Trim(arg, "[]<> ")
			if argDesc == "" {
				argDesc = name
			}
			cmd.Options = []*discordgo.ApplicationCommandOption{{
				Type: discordgo.ApplicationCommandOptionString, Name: name, Description: clip(argDesc, 100),
			}}
		}
		out = append(out, cmd)
	}
	return out
}

// sameCommand compares what the channel sets of a command.
func sameCommand(have, want *discordgo.ApplicationCommand) bool {
	if have.Description != want.Description || len(have.Options) != len(want.Options) {
		return false
	}
	for i, w := range want.Options {
		h := have.Options[i]
		if h == nil || h.Type != w.Type || h.Name != w.Name || h.Description != w.Description || h.Required != w.Required {
			return false
		}
	}
	return true
}

// validCommand: Discord command names are 1-32 lowercase letters, digits,
// "-" or "_".
func validCommand(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// clip cuts s to at most n runes.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
