package discordtest

import (
	"testing"
	"time"
)

// Msg describes a message a user posts.
type Msg struct {
	// Channel is the channel (or thread, or DM channel) id; Guild is ""
	// for a DM.
	Channel, Guild string
	Author         User
	Content        string
	// Mentions are the users the message mentions (the bot too, when the
	// content has <@bot id>).
	Mentions []User
	// MentionRoles are the roles the message mentions (<@&id> in the
	// content), such as the bot's own role (BotRole).
	MentionRoles []string
	// ReplyTo is the id of the message this one replies to.
	ReplyTo string
	// ID is set by Message; a Msg with an ID already set is dispatched
	// again as it is (Redeliver).
	ID string
	// Attachments are the files the message carries.
	Attachments []Attachment
	// Stickers are the stickers the message carries (sticker_items).
	Stickers []Sticker
	// Forward makes the message a forward of the message id Forward in
	// another channel (ForwardChannel): Discord sends it with no content
	// of its own, a message_reference of type 1 and the forwarded
	// message's content and files in message_snapshots.
	Forward, ForwardChannel string
}

// Message dispatches MESSAGE_CREATE for m and returns the message id.
func (s *Server) Message(tb testing.TB, m Msg) string {
	tb.Helper()
	s.mu.Lock()
	if m.ID == "" {
		m.ID = s.id()
	}
	s.messages[m.ID] = message{ID: m.ID, ChannelID: m.Channel, Author: m.Author, Content: m.Content}
	var ref map[string]any
	var refMsg any
	if m.ReplyTo != "" {
		ref = map[string]any{"message_id": m.ReplyTo, "channel_id": m.Channel}
		if r, ok := s.messages[m.ReplyTo]; ok {
			refMsg = map[string]any{"id": r.ID, "channel_id": r.ChannelID, "content": r.Content, "author": r.Author, "type": 0}
		}
	}
	atts := s.attachmentsJSON(m.Attachments)
	var snapshots []any
	if m.Forward != "" {
		ref = map[string]any{"type": 1, "message_id": m.Forward, "channel_id": m.ForwardChannel}
		refMsg = nil
		f := s.messages[m.Forward]
		snapshots = []any{map[string]any{"message": map[string]any{"type": 0, "content": f.Content,
			"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "mentions": []User{}, "mention_roles": []string{},
			"attachments": []any{}, "embeds": []any{}}}}
	}
	s.mu.Unlock()
	mentions := []User{}
	mentions = append(mentions, m.Mentions...)
	roles := []string{}
	roles = append(roles, m.MentionRoles...)
	typ := 0
	if ref != nil && m.Forward == "" {
		typ = 19 // a reply
	}
	d := map[string]any{
		"id": m.ID, "channel_id": m.Channel, "author": m.Author, "content": m.Content, "type": typ,
		"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "mentions": mentions, "mention_roles": roles,
		"attachments": atts, "embeds": []any{}, "tts": false, "mention_everyone": false, "pinned": false,
	}
	if len(m.Stickers) > 0 {
		items := []any{}
		for _, st := range m.Stickers {
			items = append(items, map[string]any{"id": st.ID, "name": st.Name, "format_type": st.Format})
		}
		d["sticker_items"] = items
	}
	if m.Guild != "" {
		d["guild_id"] = m.Guild
		d["member"] = map[string]any{"roles": []string{}}
	}
	if ref != nil {
		d["message_reference"] = ref
		if m.Forward == "" {
			d["referenced_message"] = refMsg
		}
	}
	if snapshots != nil {
		d["message_snapshots"] = snapshots
	}
	s.Dispatch(tb, "MESSAGE_CREATE", d)
	return m.ID
}

// Mention is the text of a mention of u.
func Mention(u User) string { return "<@" + u.ID + ">" }

// RoleMention is the text of a mention of the role id.
func RoleMention(id string) string { return "<@&" + id + ">" }

// React dispatches MESSAGE_REACTION_ADD (add) or _REMOVE of emoji by u
// on the message messageID in channel (guild "" for a DM).
func (s *Server) React(tb testing.TB, u User, guild, channel, messageID, emoji string, add bool) {
	tb.Helper()
	s.mu.Lock()
	author := ""
	if m, ok := s.messages[messageID]; ok {
		author = m.Author.ID
	}
	s.mu.Unlock()
	d := map[string]any{"user_id": u.ID, "channel_id": channel, "message_id": messageID,
		"emoji": map[string]any{"id": nil, "name": emoji}, "burst": false, "type": 0}
	if guild != "" {
		d["guild_id"] = guild
		d["member"] = map[string]any{"user": u, "roles": []string{}}
	}
	typ := "MESSAGE_REACTION_REMOVE"
	if add {
		typ = "MESSAGE_REACTION_ADD"
		if author != "" {
			d["message_author_id"] = author
		}
	}
	s.Dispatch(tb, typ, d)
}

// Interaction dispatches INTERACTION_CREATE for the slash command name
// with string options (nil for none), used by u in channel (guild "" for
// a DM), and returns the interaction id.
func (s *Server) Interaction(tb testing.TB, u User, guild, channel, name string, options map[string]string) string {
	tb.Helper()
	s.mu.Lock()
	in := &interaction{id: s.id(), token: "itoken-" + s.id(), channelID: channel, at: time.Now()}
	c, known := s.channels[channel]
	s.interactions[in.id] = in
	cmdID := s.id()
	s.mu.Unlock()
	opts := []map[string]any{}
	for k, v := range options {
		opts = append(opts, map[string]any{"name": k, "type": 3, "value": v})
	}
	d := map[string]any{
		"id": in.id, "application_id": s.AppID, "type": 2, "token": in.token, "version": 1, "channel_id": channel,
		"data":   map[string]any{"id": cmdID, "name": name, "type": 1, "options": opts},
		"locale": "en-US", "app_permissions": "0",
	}
	if known {
		d["channel"] = c // the partial channel Discord sends with every interaction
	}
	if guild != "" {
		d["guild_id"] = guild
		d["member"] = map[string]any{"user": u, "roles": []string{}, "permissions": "0"}
	} else {
		d["user"] = u
	}
	s.Dispatch(tb, "INTERACTION_CREATE", d)
	return in.id
}
