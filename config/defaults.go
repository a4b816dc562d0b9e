package config

import "time"

// Default data directory before "~" expansion.
const DefaultDataDir = "~/.opentalon"

// Default returns the configuration used for every key the file leaves out.
func Default() *Config {
	return &Config{
		State: State{DataDir: DefaultDataDir},
		Queue: Queue{
			Workers:        4,
			MaxAttempts:    3,
			RequestTimeout: Duration(5 * time.Minute),
			ShutdownGrace:  Duration(30 * time.Second),
		},
		Routing: Routing{
			MaxEscalations: 2,
			Affinity:       Affinity{Enabled: true, DecayDays: 30},
			CostWeight:     0.15,
			Explore:        Explore{Rate: 0.03, StaleAfter: Duration(12 * time.Hour)},
		},
		Auth: Auth{Cooldowns: Cooldowns{
			Initial:         Duration(time.Minute),
			Multiplier:      5,
			Max:             Duration(time.Hour),
			BillingMaxHours: 24,
		}},
		LLM: LLM{MaxConcurrentLocal: 1, MaxConcurrentCloud: 4},
		Channels: Channels{
			Console: Console{Enabled: true},
			Telegram: Telegram{
				APIURL:       "https://api.telegram.org",
				Mode:         ModePolling,
				GroupTrigger: TriggerMention,
				AckReaction:  "👀",
				Reactions: Reactions{
					Positive: []string{"👍", "❤", "🔥", "🎉", "👏"},
					Negative: []string{"👎", "💩", "🤮"},
				},
			},
			Slack:   Slack{APIURL: "https://slack.com/api/"},
			Discord: Discord{APIURL: "https://discord.com/api/v10"},
		},
		Plugins: Plugins{
			Tools: Tools{
				HealthCheckInterval: Duration(30 * time.Second),
				RestartOnFailure:    true,
				MaxRestarts:         3,
				Defaults: PluginLimits{
					Timeout:          Duration(30 * time.Second),
					MaxResponseBytes: 65536,
				},
			},
			Lua: Lua{Limits: LuaLimits{
				MemoryMB:          64,
				TimeoutSeconds:    5,
				LLMTimeoutSeconds: 10,
				LLMMaxCalls:       3,
			}},
		},
		Orchestrator: Orchestrator{MaxSteps: 10},
		Server:       Server{Listen: "127.0.0.1:7070"},
	}
}

// ProviderTimeout is used when models.providers.<id>.timeout is unset.
const ProviderTimeout = 120 * time.Second
