package config

import "time"

// Default data directory before "~" expansion.
const DefaultDataDir = "~/.opentalon"

// Default returns the configuration used for every key the file leaves out.
func Default() *Config {
	return &Config{
		State: State{DataDir: DefaultDataDir, Retention: Duration(DefaultRetention), SessionTTL: Duration(DefaultSessionTTL),
			Compaction: Compaction{Notify: true},
			Memory:     Memory{Tools: true, RecallTokens: 400, Workflows: 3},
			Driver:     DriverSQLite,
			Postgres:   Postgres{PoolSize: 10, StatementTimeout: Duration(30 * time.Second), ConnectWait: 0}},
		Cluster: Cluster{LeaseTTL: Duration(10 * time.Second), Heartbeat: Duration(5 * time.Second)},
		Queue: Queue{
			Workers:        4,
			MaxAttempts:    3,
			RequestTimeout: Duration(5 * time.Minute),
			ShutdownGrace:  Duration(30 * time.Second),
			MaxPending:     20,
			MaxWait:        Duration(10 * time.Minute),
			LeaseTTL:       Duration(30 * time.Second),
		},
		Routing: Routing{
			MaxEscalations: 2,
			Affinity:       Affinity{Enabled: true, DecayDays: 30},
			CostWeight:     0.15,
			Explore:        Explore{Rate: 0.03, StaleAfter: Duration(12 * time.Hour)},
			// Off without a model; 0 grades nothing.
			Judge: Judge{Rate: 0.05},
		},
		Auth: Auth{Cooldowns: Cooldowns{
			Initial:         Duration(time.Minute),
			Multiplier:      5,
			Max:             Duration(time.Hour),
			BillingMaxHours: 24,
		}},
		LLM: LLM{MaxConcurrentLocal: 1, MaxConcurrentCloud: 4},
		Channels: Channels{
			Console: Console{Enabled: true, Streaming: StreamingOff},
			Telegram: Telegram{
				APIURL:        "https://api.telegram.org",
				Mode:          ModePolling,
				ChannelCommon: commonDefaults("👀", []string{"👍", "❤", "🔥", "🎉", "👏"}, []string{"👎", "💩", "🤮"}),
			},
			Slack: Slack{
				Mode:          SlackModeSocket,
				Events:        SlackEvents{Listen: "127.0.0.1:3000", Path: "/slack/events"},
				APIURL:        "https://slack.com/api/",
				ReplyInThread: ReplyInThreadAuto,
				// Slack names reactions; skin-tone variants are matched too.
				ChannelCommon: commonDefaults("eyes", []string{"+1", "heart", "tada", "fire"}, []string{"-1", "thumbsdown", "poop"}),
			},
			Discord: Discord{
				APIURL:           "https://discord.com",
				RegisterCommands: true,
				ChannelCommon:    commonDefaults("👀", []string{"👍", "❤", "🔥", "🎉"}, []string{"👎", "💩"}),
			},
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
				MaxCallsPerTurn: 16,
				State:           PluginStateLimits{MaxKeys: 10000, MaxBytes: 16 << 20, WritesPerSecond: 20},
				Sandbox:         PluginSandbox{Landlock: true},
				ProcessLimits:   PluginProcessLimits{AddressSpaceMB: 4096, OpenFiles: 1024, Processes: 1024},
				Hooks:           PluginHooks{Timeout: Duration(2 * time.Second)},
				HTTP:            PluginHTTP{MaxBodyBytes: 1 << 20, Timeout: Duration(10 * time.Second)},
			},
			Auth: PluginAuth{CacheTTL: Duration(5 * time.Minute), Timeout: Duration(2 * time.Second)},
			Lua: Lua{Limits: LuaLimits{
				MemoryMB:          64,
				TimeoutSeconds:    5,
				LLMTimeoutSeconds: 10,
				LLMMaxCalls:       3,
				KVMaxKeys:         10000,
				KVMaxBytes:        16 << 20,
			}},
		},
		Orchestrator: Orchestrator{MaxSteps: 10},
		Server:       Server{Listen: "127.0.0.1:7070", Metrics: true},
		Media: Media{MaxBytes: 20 << 20, DownloadTimeout: Duration(time.Minute), Retention: Duration(30 * 24 * time.Hour),
			DocumentTokens: 8000},
		Notifications: Notifications{Window: Duration(10 * time.Minute), MaxPerWindow: 5, ChannelDownAfter: Duration(time.Minute)},
	}
}

// DefaultSessionTTL ends a conversation's session after a day without
// messages.
const DefaultSessionTTL = 24 * time.Hour

// DefaultRetention keeps finished queue rows for a week.
const DefaultRetention = 7 * 24 * time.Hour

// ProviderTimeout is used when models.providers.<id>.timeout is unset.
const ProviderTimeout = 120 * time.Second

// commonDefaults is the common channel block every platform starts from:
// answer in groups when addressed, the platform's own spelling of the ack
// reaction and of the positive and negative reactions.
func commonDefaults(ack string, positive, negative []string) ChannelCommon {
	return ChannelCommon{
		Trigger:     TriggerMention,
		Access:      AccessOpen,
		Streaming:   StreamingEdit,
		AckReaction: ack,
		Reactions:   Reactions{Positive: positive, Negative: negative},
	}
}
