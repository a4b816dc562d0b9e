package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/opentalon/opentalon/core"
)

// replyTo is the platform message an answer to in quotes: none for a
// message no platform delivered.
func replyTo(in core.Inbound) string {
	if in.Origin != "" {
		return ""
	}
	return in.MessageID
}

// Inject commits a message that no platform delivered (in.Origin set: a
// plugin's) to its conversation's queue, where it is answered like a
// platform message. The channel's access rules are not applied (the
// operator installed the plugin) and its sender is never an admin. An
// empty MessageID gets a random one; a MessageID already injected into
// the channel is reported with dup=true and not queued again.
func (g *Gateway) Inject(ctx context.Context, in core.Inbound) (dup bool, err error) {
	if in.Origin == "" {
		return false, core.Errorf(core.KindInvalid, "inject: the message has no origin")
	}
	if _, ok := g.channels[in.Conversation.Channel]; !ok {
		return false, core.Errorf(core.KindInvalid, "inject: channel %q is not enabled (enabled: %s)", in.Conversation.Channel, strings.Join(g.channelNames(), ", "))
	}
	if in.Conversation.Chat == "" {
		return false, core.Errorf(core.KindInvalid, "inject: no chat given for channel %s", in.Conversation.Channel)
	}
	if strings.TrimSpace(in.Text) == "" {
		return false, core.Errorf(core.KindInvalid, "inject: the message text is empty")
	}
	if in.MessageID == "" {
		b := make([]byte, 12)
		rand.Read(b)
		in.MessageID = hex.EncodeToString(b)
	}
	in.MessageID = in.Origin + ":" + in.MessageID
	if in.ReceivedAt.IsZero() {
		in.ReceivedAt = g.now()
	}
	in.Mentioned = true
	dup, err = g.enqueue(ctx, core.QueueItem{
		Kind:         core.EventMessage,
		Conversation: in.Conversation,
		DedupeKey:    in.Conversation.Channel + ":i:" + in.MessageID,
		Message:      &in,
		MaxPending:   g.opts.MaxPending,
	})
	if errors.Is(err, core.ErrConversationFull) {
		return false, err
	}
	if err != nil {
		return false, fmt.Errorf("inject into %s: %w", in.Conversation, err)
	}
	return dup, nil
}

func (g *Gateway) channelNames() []string {
	var out []string
	for _, ch := range g.Channels() {
		out = append(out, ch.Name())
	}
	return out
}
