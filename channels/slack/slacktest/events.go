package slacktest

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Envelope is one event as Slack sends it: over Socket Mode (Deliver) or
// to the Events API endpoint (PostEvent, PostSlash).
type Envelope struct {
	// Type is the Socket Mode envelope type: events_api, slash_commands,
	// interactive (or "raw" for a frame sent as it is).
	Type string
	// EventID is the event's id (events_api) or the command's trigger_id.
	EventID string
	// Payload is the envelope's payload: the event_callback body of the
	// Events API, or the slash command.
	Payload json.RawMessage
	// Channel and TS are the message the event is about, where it has one.
	Channel, TS string
	// Command is the slash command's fields (slash_commands).
	Command map[string]string
}

func (e Envelope) key() string {
	if e.EventID != "" {
		return e.EventID
	}
	return string(e.Payload)
}

// event wraps an inner event in an event_callback; the caller holds mu.
func (s *Server) event(inner map[string]any, channel, ts string) Envelope {
	id := s.newID("Ev")
	body, _ := json.Marshal(map[string]any{
		"token": "verification-token", "team_id": TeamID, "api_app_id": "A0TEST",
		"type": "event_callback", "event_id": id, "event_time": time.Now().Unix(),
		"event": inner, "authorizations": []map[string]any{{"team_id": TeamID, "user_id": BotUserID, "is_bot": true}},
	})
	return Envelope{Type: "events_api", EventID: id, Payload: body, Channel: channel, TS: ts}
}

// message stores a new message and returns its ts; the caller holds mu.
func (s *Server) message(channel, threadTS, user, text string) string {
	ts := s.newTS()
	s.messages = append(s.messages, Message{Channel: channel, TS: ts, ThreadTS: threadTS, User: user, Text: text, Type: "message"})
	return ts
}

// BotMention is how a message mentions the bot.
const BotMention = "<@" + BotUserID + ">"

// DM makes user name write text to the bot in their direct message
// channel (in thread threadTS, "" for none): a message event with
// channel_type im. The envelope is not sent yet.
func (s *Server) DM(name, text, threadTS string) Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := DMChannel(name)
	ts := s.message(ch, threadTS, UserID(name), text)
	ev := map[string]any{"type": "message", "channel": ch, "channel_type": "im", "user": UserID(name), "text": text,
		"ts": ts, "event_ts": ts, "team": TeamID, "client_msg_id": s.newID("msg-")}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	return s.event(ev, ch, ts)
}

// Mention makes user name write text mentioning the bot in channel (in
// thread threadTS, "" for none): an app_mention event. text gets the
// mention in front unless it has it already.
func (s *Server) Mention(name, channel, text, threadTS string) Envelope {
	if !strings.Contains(text, BotMention) {
		text = BotMention + " " + text
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.message(channel, threadTS, UserID(name), text)
	ev := map[string]any{"type": "app_mention", "channel": channel, "user": UserID(name), "text": text,
		"ts": ts, "event_ts": ts, "team": TeamID, "client_msg_id": s.newID("msg-")}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	return s.event(ev, channel, ts)
}

// ChannelMessage makes user name write text in channel (in thread
// threadTS, "" for none) without a mention: a message event with
// channel_type channel.
func (s *Server) ChannelMessage(name, channel, text, threadTS string) Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := s.message(channel, threadTS, UserID(name), text)
	return s.messageEvent(channel, "channel", UserID(name), text, ts, threadTS, nil)
}

// MessageTwin is the message event Slack sends alongside an app_mention
// to an app that also subscribes to message.channels: the same message
// under another event id.
func (s *Server) MessageTwin(mention Envelope) Envelope {
	var cb struct {
		Event map[string]any `json:"event"`
	}
	_ = json.Unmarshal(mention.Payload, &cb)
	s.mu.Lock()
	defer s.mu.Unlock()
	thread, _ := cb.Event["thread_ts"].(string)
	return s.messageEvent(mention.Channel, "channel", cb.Event["user"].(string), cb.Event["text"].(string), mention.TS, thread, nil)
}

// Edit makes the author of the message env is about (an app_mention, a
// DM or a channel message) change its text to text, and returns the
// events Slack sends for it: the message event of subtype
// message_changed, the edited message nested in it, and, when text
// mentions the bot outside a DM, an app_mention of the same ts carrying
// "edited" (zero Envelope otherwise). Neither is sent yet.
func (s *Server) Edit(env Envelope, text string) (changed, mention Envelope) {
	var cb struct {
		Event map[string]any `json:"event"`
	}
	_ = json.Unmarshal(env.Payload, &cb)
	s.mu.Lock()
	defer s.mu.Unlock()
	var prev Message
	for i, m := range s.messages {
		if m.Channel == env.Channel && m.TS == env.TS {
			prev = m
			s.messages[i].Text = text
		}
	}
	channelType, _ := cb.Event["channel_type"].(string)
	if channelType == "" {
		channelType = "channel"
		if strings.HasPrefix(env.Channel, "D") {
			channelType = "im"
		}
	}
	edited := map[string]any{"user": prev.User, "ts": s.newTS()}
	msg := map[string]any{"type": "message", "user": prev.User, "text": text, "ts": prev.TS, "team": TeamID, "edited": edited}
	if prev.ThreadTS != "" {
		msg["thread_ts"] = prev.ThreadTS
	}
	now := s.newTS()
	changed = s.messageEvent(env.Channel, channelType, "", "", now, "", map[string]any{
		"subtype": "message_changed", "hidden": true, "message": msg,
		"previous_message": map[string]any{"type": "message", "user": prev.User, "text": prev.Text, "ts": prev.TS},
	})
	if channelType != "im" && strings.Contains(text, BotMention) {
		ev := map[string]any{"type": "app_mention", "channel": env.Channel, "user": prev.User, "text": text,
			"ts": prev.TS, "event_ts": now, "team": TeamID, "edited": edited}
		if prev.ThreadTS != "" {
			ev["thread_ts"] = prev.ThreadTS
		}
		mention = s.event(ev, env.Channel, prev.TS)
	}
	return changed, mention
}

// Other makes a message event of another kind: a subtype (bot_message,
// message_changed, channel_join), or a message from another bot when
// botID is set. Nothing is stored.
func (s *Server) Other(channel, channelType, user, text, subtype, botID string) Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	extra := map[string]any{}
	if subtype != "" {
		extra["subtype"] = subtype
	}
	if botID != "" {
		extra["bot_id"] = botID
	}
	return s.messageEvent(channel, channelType, user, text, s.newTS(), "", extra)
}

// messageEvent builds a message event; the caller holds mu.
func (s *Server) messageEvent(channel, channelType, user, text, ts, threadTS string, extra map[string]any) Envelope {
	ev := map[string]any{"type": "message", "channel": channel, "channel_type": channelType, "text": text,
		"ts": ts, "event_ts": ts, "team": TeamID}
	if user != "" {
		ev["user"] = user
	}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	for k, v := range extra {
		ev[k] = v
	}
	return s.event(ev, channel, ts)
}

// Reaction makes user name add (or remove) the reaction name (Slack's
// name, such as "-1" or "+1::skin-tone-3") on the message channel/ts.
func (s *Server) Reaction(name, channel, ts, reaction string, added bool) Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	typ := "reaction_removed"
	if added {
		typ = "reaction_added"
	}
	now := s.newTS()
	ev := map[string]any{"type": typ, "user": UserID(name), "reaction": reaction, "item_user": s.author(channel, ts),
		"item": map[string]any{"type": "message", "channel": channel, "ts": ts}, "event_ts": now}
	return s.event(ev, channel, ts)
}

// Slash makes user name run a slash command ("/model", "gpt") in channel.
func (s *Server) Slash(name, channel, command, text string) Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	trigger := s.newID("trig-")
	channelName := "general"
	if strings.HasPrefix(channel, "D") {
		channelName = "directmessage"
	}
	cmd := map[string]string{
		"token": "verification-token", "team_id": TeamID, "team_domain": "test", "channel_id": channel,
		"channel_name": channelName, "user_id": UserID(name), "user_name": name, "command": command, "text": text,
		"response_url": s.srv.URL + "/respond/" + trigger, "trigger_id": trigger, "api_app_id": "A0TEST",
	}
	body, _ := json.Marshal(cmd)
	return Envelope{Type: "slash_commands", EventID: trigger, Payload: body, Channel: channel, Command: cmd}
}

// Sign returns the X-Slack-Signature of body sent at ts with secret.
func Sign(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%d:%s", ts, body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// Signed is how PostEvent and PostSlash sign a request.
type Signed struct {
	// Secret signs the request (a wrong one makes a bad signature).
	Secret string
	// At is the request timestamp (zero: now).
	At time.Time
	// RetryNum, when positive, is sent as X-Slack-Retry-Num.
	RetryNum int
}

// PostEvent posts env's event_callback to the Events API endpoint url, as
// Slack does in events mode, and returns the answer's status and body.
func PostEvent(t testing.TB, endpoint string, env Envelope, sig Signed) (int, string) {
	t.Helper()
	return post(t, endpoint, "application/json", env.Payload, sig)
}

// PostSlash posts env's slash command to the endpoint url, form-encoded.
func PostSlash(t testing.TB, endpoint string, env Envelope, sig Signed) (int, string) {
	t.Helper()
	form := url.Values{}
	for k, v := range env.Command {
		form.Set(k, v)
	}
	return post(t, endpoint, "application/x-www-form-urlencoded", []byte(form.Encode()), sig)
}

// URLVerification is the body Slack posts when the Request URL is set.
func URLVerification(challenge string) Envelope {
	body, _ := json.Marshal(map[string]string{"token": "verification-token", "challenge": challenge, "type": "url_verification"})
	return Envelope{Payload: body}
}

func post(t testing.TB, endpoint, contentType string, body []byte, sig Signed) (int, string) {
	t.Helper()
	at := sig.At
	if at.IsZero() {
		at = time.Now()
	}
	req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(at.Unix(), 10))
	req.Header.Set("X-Slack-Signature", Sign(sig.Secret, at.Unix(), body))
	if sig.RetryNum > 0 {
		req.Header.Set("X-Slack-Retry-Num", strconv.Itoa(sig.RetryNum))
		req.Header.Set("X-Slack-Retry-Reason", "http_timeout")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", endpoint, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
