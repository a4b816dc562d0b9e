package config

import (
	"reflect"
	"testing"
)

func TestAccessKeys(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		check   func(t *testing.T, c *Config)
		wantErr []string
	}{
		{
			name: "open is the default, so configs in use keep working",
			body: "channels:\n  telegram: { enabled: true, token: t }\n",
			check: func(t *testing.T, c *Config) {
				for _, sec := range c.Channels.Sections() {
					if sec.Common != nil && sec.Common.Access != AccessOpen {
						t.Errorf("channels.%s.access = %q, want open", sec.Name, sec.Common.Access)
					}
				}
			},
		},
		{
			name: "pairing with admins",
			body: "channels:\n  telegram: { enabled: true, token: t, access: pairing, admins: [\"7\"], allow_users: [\"42\"] }\n",
			check: func(t *testing.T, c *Config) {
				tg := c.Channels.Telegram
				if tg.Access != AccessPairing || !reflect.DeepEqual(tg.Admins, []string{"7"}) {
					t.Errorf("access %q admins %v", tg.Access, tg.Admins)
				}
			},
		},
		{
			name:    "a bad mode names the key and the values",
			body:    "channels:\n  telegram: { enabled: true, token: t, access: pairng }\n",
			wantErr: []string{`channels.telegram.access: unknown value "pairng" (did you mean "pairing"?); use open, allowlist or pairing`},
		},
		{
			name:    "allowlist with nobody on it",
			body:    "channels:\n  telegram: { enabled: true, token: t, access: allowlist }\n",
			wantErr: []string{"channels.telegram.access: allowlist lets only allow_users and admins talk, and both are empty"},
		},
		{
			name:    "admins are ids",
			body:    "channels:\n  telegram: { enabled: true, token: t, admins: [\"@boss\"] }\n",
			wantErr: []string{`channels.telegram.admins[0]: "@boss" is a username; admins are user ids`},
		},
		{
			name:    "pairing's allow_users are ids",
			body:    "channels:\n  telegram: { enabled: true, token: t, access: pairing, allow_users: [\"@bob\"] }\n",
			wantErr: []string{`channels.telegram.allow_users[0]: "@bob" is a username; with access: pairing`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(writeConfig(t, minimal+tt.body), MapEnv(nil))
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

func TestPlatformUsers(t *testing.T) {
	tests := []struct {
		name string
		c    ChannelCommon
		want []string
	}{
		{"open to everyone", ChannelCommon{Access: AccessOpen, Admins: []string{"1"}}, nil},
		{"allow_users plus admins", ChannelCommon{Access: AccessOpen, AllowUsers: []string{"@bob"}, Admins: []string{"1"}}, []string{"@bob", "1"}},
		{"allowlist of admins only", ChannelCommon{Access: AccessAllowlist, Admins: []string{"1"}}, []string{"1"}},
		{"pairing lets strangers reach the gateway", ChannelCommon{Access: AccessPairing, AllowUsers: []string{"42"}, Admins: []string{"1"}}, nil},
	}
	for _, tt := range tests {
		if got := tt.c.PlatformUsers(); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: PlatformUsers = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestZeroConfigDefaultPairs(t *testing.T) {
	cfg, err := LoadDefault(MapEnv(map[string]string{"HOME": "/home/tester", "OPENAI_API_KEY": "sk"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range cfg.Channels.Sections() {
		if sec.Common != nil && sec.Common.Access != AccessPairing {
			t.Errorf("zero-config channels.%s.access = %q, want pairing", sec.Name, sec.Common.Access)
		}
	}
	if !cfg.Server.Metrics {
		t.Error("server.metrics should default to true")
	}
}
