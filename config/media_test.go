package config

import (
	"reflect"
	"strings"
	"testing"
)

// minimalWith is the minimal config with extra keys in fake/small's
// catalog entry.
func minimalWith(extra string) string {
	return strings.Replace(minimal, "fake/small: { alias: small, weight: 90 }", "fake/small: { alias: small, weight: 90, "+extra+" }", 1)
}

func TestStreamingMediaAndCapabilityKeys(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		check   func(t *testing.T, c *Config)
		wantErr []string
	}{
		{
			name: "defaults: edit on the platforms, off on the console, 20 MB files",
			body: "channels:\n  telegram: { enabled: true, token: t }\n",
			check: func(t *testing.T, c *Config) {
				for _, sec := range c.Channels.Sections() {
					if sec.Common != nil && sec.Common.Streaming != StreamingEdit {
						t.Errorf("channels.%s.streaming = %q, want edit", sec.Name, sec.Common.Streaming)
					}
				}
				if c.Channels.Console.Streaming != StreamingOff {
					t.Errorf("channels.console.streaming = %q, want off", c.Channels.Console.Streaming)
				}
				if c.Media.MaxBytes != 20<<20 || c.Media.Transcription.Model != "" || c.Media.Transcription.Echo {
					t.Errorf("media = %+v", c.Media)
				}
			},
		},
		{
			name: "every key set",
			body: `channels:
  console: { streaming: off }
  telegram: { enabled: true, token: t, streaming: native }
media:
  max_bytes: 1048576
  download_timeout: 10s
  retention: 24h
  document_tokens: 500
  transcription: { model: fake/whisper-1, echo: true }
`,
			check: func(t *testing.T, c *Config) {
				if c.Channels.Telegram.Streaming != StreamingNative || c.Media.MaxBytes != 1<<20 || c.Media.DocumentTokens != 500 ||
					c.Media.Transcription.Model != "fake/whisper-1" || !c.Media.Transcription.Echo || c.Media.Retention.D().Hours() != 24 {
					t.Errorf("config = %+v %+v", c.Channels.Telegram.ChannelCommon, c.Media)
				}
				if got := c.Models.Catalog["fake/small"].Capabilities; !reflect.DeepEqual(got, []string{"vision", "tools"}) {
					t.Errorf("capabilities = %v", got)
				}
			},
		},
		{
			name:    "a streaming mode that does not exist",
			body:    "channels:\n  telegram: { enabled: true, token: t, streaming: edits }\n",
			wantErr: []string{`channels.telegram.streaming: unknown value "edits" (did you mean "edit"?); use off, edit`},
		},
		{
			name:    "a capability that does not exist",
			body:    "",
			wantErr: []string{`models.catalog.fake/small.capabilities[0]: unknown capability "vison" (did you mean "vision"?)`},
		},
		{
			name: "a transcription model of an unknown provider, no size limit",
			body: "media:\n  max_bytes: 0\n  transcription: { model: whisper/large }\n",
			wantErr: []string{
				"media.max_bytes: must be positive (got 0)",
				`media.transcription.model: provider "whisper" is not in models.providers`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := minimal + tt.body
			switch tt.name {
			case "every key set":
				body = minimalWith("capabilities: [vision, tools]") + tt.body
			case "a capability that does not exist":
				body = minimalWith("capabilities: [vison]")
			}
			cfg, err := Load(writeConfig(t, body), MapEnv(nil))
			if len(tt.wantErr) > 0 {
				ps := problemsOf(t, err)
				if len(ps) != len(tt.wantErr) {
					t.Fatalf("problems = %v, want %d", err, len(tt.wantErr))
				}
				for i, w := range tt.wantErr {
					mustContain(t, ps[i].String(), w)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, cfg)
		})
	}
}
