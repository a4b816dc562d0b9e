package routing

import (
	"context"
	"fmt"
	"strings"

	"github.com/opentalon/opentalon/core"
	"github.com/opentalon/opentalon/routing/provider"
)

// Transcribe turns audio into text with the model ref ("provider/model",
// media.transcription.model) through its provider's /audio/transcriptions
// endpoint, rotating the provider's auth profiles on rate limits and
// refused credentials, under the same local/cloud semaphores as the chat
// calls. The call is recorded in the usage ledger (purpose
// "transcription", no tokens).
func (r *Router) Transcribe(ctx context.Context, ref string, a core.Attachment, conv core.ConversationKey, user string) (string, error) {
	m, ok := r.cat.resolve(ref)
	if !ok {
		m = Model{Ref: ref}
	}
	pid, mid, _ := strings.Cut(m.Ref, "/")
	prov, ok := r.o.Providers[pid]
	if !ok || mid == "" {
		return "", core.Errorf(core.KindInvalid, "media.transcription.model %q: write it as <provider id>/<model id> with a provider of models.providers", ref)
	}
	tr, ok := prov.(provider.Transcriber)
	if !ok {
		return "", core.Errorf(core.KindInvalid, "media.transcription.model %q: provider %s cannot transcribe; use one with api: openai-completions (OpenAI or a whisper server)", ref, pid)
	}
	sem := r.cloud
	if m.Local {
		sem = r.local
	}
	req := &provider.TranscribeRequest{Model: mid, Name: a.Name, MIME: a.MIME, Data: a.Data}
	tried := map[string]bool{}
	lastErr := fmt.Errorf("every auth profile of %s is cooling down", pid)
	for {
		p, found := r.nextProfile(ctx, m, nil, false, tried)
		if !found {
			break
		}
		defer r.endTrial(p.ID)
		// A message's media may be transcribed side by side: not sole.
		if err := acquire(ctx, sem, false); err != nil {
			return "", err
		}
		started := r.now()
		text, err := tr.Transcribe(ctx, provider.Credentials{APIKey: string(p.Key), OAuth: p.OAuth}, req)
		<-sem
		if err == nil {
			r.succeed(ctx, m, p, started)
			if err := r.o.Store.AddUsage(context.WithoutCancel(ctx), core.UsageRecord{At: r.now(), Conversation: conv.String(),
				UserID: user, Model: m.Ref, Purpose: "transcription"}); err != nil {
				r.log.Error("record usage", "model", m.Ref, "err", err)
			}
			return text, nil
		}
		lastErr = err
		if !rotates(core.ErrorKind(err)) || ctx.Err() != nil {
			break
		}
		r.fail(ctx, p, started, err)
	}
	return "", fmt.Errorf("transcribe with %s: %w", m.Ref, lastErr)
}
