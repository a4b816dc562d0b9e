package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/opentalon/opentalon/core"
)

// validate checks the decoded config and records every problem in ps.
func validate(c *Config, ps *problems) {
	validateBasics(c, ps)
	validateProviders(c, ps)
	validateCatalog(c, ps)
	validateRouting(c, ps)
	validateChannels(c, ps)
	validatePlugins(c, ps)
	validateMemory(c, ps)
	validateMedia(c, ps)
	validateExtensions(c, ps)
	for _, r := range c.ModelRefs() {
		checkRef(c, ps, r.Path, r.Ref)
	}
}

func atLeast(ps *problems, path string, v, min int) {
	if v < min {
		ps.at(path, "must be at least %d (got %d)", min, v)
	}
}

func validateBasics(c *Config, ps *problems) {
	atLeast(ps, "queue.workers", c.Queue.Workers, 1)
	atLeast(ps, "queue.max_attempts", c.Queue.MaxAttempts, 1)
	atLeast(ps, "queue.max_pending", c.Queue.MaxPending, 1)
	if c.Queue.MaxWait <= 0 {
		ps.at("queue.max_wait", "must be a positive duration such as \"10m\"")
	}
	if d := c.Cluster.LeaseTTL.D(); d < time.Second {
		ps.at("cluster.lease_ttl", "must be at least \"1s\" (default 10s): a holder renews every third of it and stops a sixth before it ends")
	}
	if d := c.Cluster.Heartbeat.D(); d < 100*time.Millisecond {
		ps.at("cluster.heartbeat", "must be at least \"100ms\" (default 5s)")
	}
	if len(c.Cluster.ReplicaID) > 200 {
		ps.at("cluster.replica_id", "is longer than 200 characters; use a short name such as the host name")
	}
	if d := c.Queue.LeaseTTL.D(); d < time.Second {
		ps.at("queue.lease_ttl", "must be at least \"1s\" (default 30s): the gateway renews a claim every third of it")
	}
	if c.Queue.RequestTimeout <= 0 {
		ps.at("queue.request_timeout", "must be a positive duration such as \"5m\"")
	}
	atLeast(ps, "llm.max_concurrent_local", c.LLM.MaxConcurrentLocal, 1)
	atLeast(ps, "llm.max_concurrent_cloud", c.LLM.MaxConcurrentCloud, 1)
	atLeast(ps, "orchestrator.max_steps", c.Orchestrator.MaxSteps, 1)
	if c.State.DataDir == "" {
		ps.at("state.data_dir", "must not be empty; the default is %s", DefaultDataDir)
	}
	validateState(c, ps)
	if r := c.State.Retention.D(); r > 0 && r < time.Hour {
		ps.at("state.retention", "%s is shorter than an hour: a platform redelivering an event after that would get it answered twice; use at least \"1h\" (default %s), or 0 to keep finished rows forever", r, DefaultRetention)
	}
	cd := c.Auth.Cooldowns
	if cd.Initial <= 0 {
		ps.at("auth.cooldowns.initial", "must be a positive duration such as \"1m\"")
	}
	if cd.Multiplier < 1 {
		ps.at("auth.cooldowns.multiplier", "must be at least 1 (got %g)", cd.Multiplier)
	}
	if cd.Max < cd.Initial {
		ps.at("auth.cooldowns.max", "must be at least auth.cooldowns.initial (%s)", cd.Initial)
	}
	atLeast(ps, "auth.cooldowns.billing_max_hours", cd.BillingMaxHours, 1)
	for prov, ids := range c.Auth.Order {
		if _, ok := c.Models.Providers[prov]; !ok {
			ps.at("auth.order."+prov, "no provider %q in models.providers%s", prov, didYouMean(prov, c.providerIDs()))
		}
		seen := map[string]bool{}
		for i, id := range ids {
			if seen[id] {
				ps.at(fmt.Sprintf("auth.order.%s[%d]", prov, i), "profile %q is listed twice", id)
			}
			seen[id] = true
		}
	}
	if l := c.Server.Listen; l != "" {
		if _, _, err := net.SplitHostPort(l); err != nil {
			ps.at("server.listen", "%q is not host:port (e.g. \"127.0.0.1:7070\"; empty turns the server off)", l)
		}
	}
}

var apis = []string{APIOpenAICompletions, APIAnthropicMessages, APIPlugin}

func validateProviders(c *Config, ps *problems) {
	for _, id := range c.providerIDs() {
		p := c.Models.Providers[id]
		path := "models.providers." + id
		if strings.Contains(id, "/") || strings.TrimSpace(id) == "" {
			ps.at(path, "a provider id must be non-empty and must not contain \"/\" (it is the prefix of \"<provider>/<model>\")")
		}
		switch p.API {
		case APIOpenAICompletions, APIAnthropicMessages:
		case APIPlugin:
			if p.Plugin == "" {
				ps.at(path+".plugin", "missing; api: plugin needs the name of the plugin that serves the provider (its capabilities' name)")
			}
		case "":
			ps.at(path+".api", "missing; set it to %s", strings.Join(apis, " or "))
		default:
			hint := didYouMean(p.API, apis)
			if hint == "" {
				hint = fmt.Sprintf(" (use %s)", strings.Join(apis, " or "))
			}
			ps.at(path+".api", "unknown api %q%s", p.API, hint)
		}
		if p.BaseURL != "" {
			checkURL(ps, path+".base_url", p.BaseURL)
		}
		seen := map[string]bool{}
		for i, m := range p.Models {
			mp := fmt.Sprintf("%s.models[%d]", path, i)
			if m.ID == "" {
				ps.at(mp+".id", "missing; the model id the API expects, e.g. \"llama3.2\"")
			} else if seen[m.ID] {
				ps.at(mp+".id", "model %q is listed twice", m.ID)
			}
			seen[m.ID] = true
			checkCost(ps, mp+".cost", m.Cost)
			if m.ContextWindow < 0 || m.MaxTokens < 0 {
				ps.at(mp, "context_window and max_tokens must not be negative")
			}
		}
	}
}

func checkURL(ps *problems, path, raw string) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		ps.at(path, "%q is not an http(s) URL such as \"http://localhost:11434/v1\"", core.RedactURL(raw))
	}
}

func checkCost(ps *problems, path string, c Cost) {
	if c.Input < 0 || c.Output < 0 {
		ps.at(path, "costs must not be negative (USD per million tokens)")
	}
}

func validateCatalog(c *Config, ps *problems) {
	keys := make([]string, 0, len(c.Models.Catalog))
	for k := range c.Models.Catalog {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	aliases := map[string]string{}
	for _, key := range keys {
		e := c.Models.Catalog[key]
		path := "models.catalog." + key
		prov, model, ok := strings.Cut(key, "/")
		switch {
		case !ok || prov == "" || model == "":
			ps.at(path, "a catalog key is \"<provider>/<model>\", e.g. \"openai/gpt-4o-mini\"")
		default:
			if _, known := c.Models.Providers[prov]; !known {
				ps.at(path, "provider %q is not in models.providers%s; add models.providers.%s", prov, didYouMean(prov, c.providerIDs()), prov)
			}
		}
		if e.Weight < 0 || e.Weight > 100 {
			ps.at(path+".weight", "must be 0..100 (got %d)", e.Weight)
		}
		if e.Cost != nil {
			checkCost(ps, path+".cost", *e.Cost)
		}
		if e.ContextWindow < 0 {
			ps.at(path+".context_window", "must not be negative")
		}
		if e.MaxOutputTokens < 0 {
			ps.at(path+".max_output_tokens", "must not be negative (0 takes the default)")
		} else if e.ContextWindow > 0 && e.MaxOutputTokens >= e.ContextWindow {
			ps.at(path+".max_output_tokens", "%d does not leave room for the prompt in context_window %d; lower it", e.MaxOutputTokens, e.ContextWindow)
		}
		for i, cap := range e.Capabilities {
			if !slices.Contains(capabilities, cap) {
				ps.at(fmt.Sprintf("%s.capabilities[%d]", path, i), "unknown capability %q%s; use vision, audio or tools", cap, didYouMean(cap, capabilities))
			}
		}
		if e.Alias == "" {
			continue
		}
		if other, dup := aliases[e.Alias]; dup {
			ps.at(path+".alias", "alias %q is already used by models.catalog.%s; aliases must be unique", e.Alias, other)
		}
		if _, clash := c.Models.Catalog[e.Alias]; clash && e.Alias != key {
			ps.at(path+".alias", "alias %q is also a catalog key; choose another alias", e.Alias)
		}
		aliases[e.Alias] = key
	}
}

// checkRef reports a model reference that resolves to nothing.
func checkRef(c *Config, ps *problems, path, ref string) {
	if ref == "" {
		return
	}
	if _, ok := c.ResolveModel(ref); ok {
		return
	}
	known := c.knownModels()
	hint := didYouMean(ref, known)
	var b strings.Builder
	fmt.Fprintf(&b, "unknown model %q%s; ", ref, hint)
	b.WriteString("use a models.catalog key, a catalog alias, or \"<provider>/<model>\" with a provider from models.providers")
	if ids := c.providerIDs(); len(ids) > 0 {
		fmt.Fprintf(&b, " (configured: %s)", strings.Join(ids, ", "))
	} else {
		b.WriteString(" (none configured)")
	}
	ps.at(path, "%s", b.String())
}

func validateRouting(c *Config, ps *problems) {
	r := c.Routing
	if len(c.Models.Providers) == 0 {
		ps.at("models.providers", "no LLM provider configured; add one under models.providers (api: %s) and set routing.primary, or run without a config file and export ANTHROPIC_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL", strings.Join(apis, " or "))
	} else if r.Primary == "" && len(c.Models.Catalog) == 0 {
		ps.at("routing.primary", "not set; set it to a model reference such as \"<provider>/<model>\"")
	}
	atLeast(ps, "routing.max_escalations", r.MaxEscalations, 0)
	if r.Affinity.Enabled {
		atLeast(ps, "routing.affinity.decay_days", r.Affinity.DecayDays, 1)
	}
	if r.Budget.DailyUSD < 0 {
		ps.at("routing.budget.daily_usd", "must not be negative (0 means no cap)")
	}
	if r.Budget.ChatDailyUSD < 0 {
		ps.at("routing.budget.chat_daily_usd", "must not be negative (0 means no cap)")
	}
	if r.CostWeight < 0 || r.CostWeight > 1 {
		ps.at("routing.cost_weight", "must be between 0 (ignore cost) and 1 (got %g); 0.15 is the default", r.CostWeight)
	}
	if r.Explore.Rate < 0 || r.Explore.Rate > 0.5 {
		ps.at("routing.explore.rate", "must be between 0 (no probes) and 0.5 (got %g); 0.03 is the default", r.Explore.Rate)
	}
	if r.Explore.DailyUSD < 0 {
		ps.at("routing.explore.daily_usd", "must not be negative (0 means no cap)")
	}
	if r.Explore.Rate > 0 && r.Explore.StaleAfter.D() < time.Minute {
		ps.at("routing.explore.stale_after", "must be at least 1m (got %s); 12h is the default", r.Explore.StaleAfter.D())
	}
	if r.Judge.Rate < 0 || r.Judge.Rate > 1 {
		ps.at("routing.judge.rate", "must be between 0 and 1 (got %g); the default is 0.05, and 0 turns the judge off", r.Judge.Rate)
	}
	if r.Judge.DailyUSD < 0 {
		ps.at("routing.judge.daily_usd", "must not be negative (0 means no cap)")
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var triggers = []string{TriggerMention, TriggerAll}

var accessModes = []string{AccessOpen, AccessAllowlist, AccessPairing}

// applyAliases maps older key names onto their current ones:
// channels.telegram.group_trigger is trigger's older name.
func applyAliases(c *Config, ps *problems) {
	t := &c.Channels.Telegram
	if t.GroupTrigger == "" {
		return
	}
	const p = "channels.telegram"
	if !slices.Contains(triggers, t.GroupTrigger) {
		ps.at(p+".group_trigger", "unknown value %q%s; use mention or all", t.GroupTrigger, didYouMean(t.GroupTrigger, triggers))
		return
	}
	if _, both := ps.lines[p+".trigger"]; both && t.Trigger != t.GroupTrigger {
		ps.at(p+".group_trigger", "%q conflicts with %s.trigger %q; group_trigger is the older name of trigger: keep one of the two", t.GroupTrigger, p, t.Trigger)
		return
	}
	t.Trigger = t.GroupTrigger
}

func validateChannels(c *Config, ps *problems) {
	for _, sec := range c.Channels.Sections() {
		if sec.Enabled && sec.Common != nil {
			validateCommon(ps, "channels."+sec.Name, *sec.Common)
		}
	}
	if s := c.Channels.Console.Streaming; s != "" && !slices.Contains(streamingModes, s) {
		ps.at("channels.console.streaming", "unknown value %q%s; use off, edit or native (the console prints each answer once either way)", s, didYouMean(s, streamingModes))
	}
	t := c.Channels.Telegram
	if t.Enabled {
		const p = "channels.telegram"
		if !t.Token.IsSet() {
			ps.at(p+".token", "missing; an enabled Telegram channel needs the bot token from @BotFather, e.g. token: \"${TELEGRAM_BOT_TOKEN}\"")
		}
		checkURL(ps, p+".api_url", t.APIURL)
		if t.MessagesPerSecond < 0 {
			ps.at(p+".messages_per_second", "%d is negative; use 0 for Telegram's limit of 30 a second, or a higher number only with paid broadcasts", t.MessagesPerSecond)
		}
		switch t.Mode {
		case ModePolling:
		case ModeWebhook:
			if t.Webhook.URL == "" {
				ps.at(p+".webhook.url", "missing; mode webhook needs the public https URL Telegram posts to")
			} else {
				checkURL(ps, p+".webhook.url", t.Webhook.URL)
			}
			if t.Webhook.Listen == "" {
				ps.at(p+".webhook.listen", "missing; mode webhook needs a local address to listen on, e.g. \"127.0.0.1:8443\"")
			} else if _, _, err := net.SplitHostPort(t.Webhook.Listen); err != nil {
				ps.at(p+".webhook.listen", "%q is not host:port", t.Webhook.Listen)
			}
			if !t.Webhook.Secret.IsSet() {
				ps.at(p+".webhook.secret", "missing; mode webhook needs a secret token, e.g. secret: \"${TELEGRAM_WEBHOOK_SECRET}\"")
			}
		default:
			ps.at(p+".mode", "unknown mode %q%s; use polling or webhook", t.Mode, didYouMean(t.Mode, []string{ModePolling, ModeWebhook}))
		}
	}
	if c.Channels.Slack.Enabled {
		validateSlack(c.Channels.Slack, ps)
	}
	if d := c.Channels.Discord; d.Enabled {
		validateDiscord(ps, d)
	}
}

// validateDiscord checks an enabled Discord block: the token, api_url,
// and ids where Discord uses numeric ids (guilds and channels).
func validateDiscord(ps *problems, d Discord) {
	const p = "channels.discord"
	if !d.Token.IsSet() {
		ps.at(p+".token", "missing; an enabled Discord channel needs the bot token from the developer portal (Applications → your app → Bot → Reset Token), e.g. token: \"${DISCORD_BOT_TOKEN}\"")
	}
	checkURL(ps, p+".api_url", d.APIURL)
	if _, _, err := d.Shards.Count(); err != nil {
		ps.at(p+".shards", "%v; use a whole number of gateway shards, 1 or more (e.g. shards: 2), or shards: auto for the count Discord recommends", err)
	}
	lists := []struct {
		key, what string
		list      []string
	}{{"allow_guilds", "guild (server)", d.AllowGuilds}, {"allow_chats", "channel", d.AllowChats}}
	for _, l := range lists {
		for i, v := range l.list {
			if v = strings.TrimSpace(v); v != "" && !snowflake(v) {
				ps.at(fmt.Sprintf("%s.%s[%d]", p, l.key, i), "%q is not a Discord %s id; use the number Discord shows with Developer Mode on (right-click → Copy ID), e.g. \"123456789012345678\"", v, l.what)
			}
		}
	}
	for i, v := range d.AllowGuilds {
		if strings.TrimSpace(v) == "" {
			ps.at(fmt.Sprintf("%s.allow_guilds[%d]", p, i), "is empty; remove the entry")
		}
	}
}

// snowflake reports whether s looks like a Discord id: 1 to 20 digits.
func snowflake(s string) bool {
	if len(s) == 0 || len(s) > 20 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// streamingModes are the values of channels.<x>.streaming.
var streamingModes = []string{StreamingOff, StreamingEdit, StreamingNative}

// capabilities are the values of models.catalog.<ref>.capabilities.
var capabilities = []string{CapabilityVision, CapabilityAudio, CapabilityTools}

// validateMedia checks the media block.
func validateMedia(c *Config, ps *problems) {
	m := c.Media
	if m.MaxBytes <= 0 {
		ps.at("media.max_bytes", "must be positive (got %d); the default is 20971520 (20 MB)", m.MaxBytes)
	}
	if m.DownloadTimeout.D() <= 0 {
		ps.at("media.download_timeout", "must be positive, e.g. 60s")
	}
	if m.Retention.D() < 0 {
		ps.at("media.retention", "must not be negative (0 keeps files forever)")
	}
	if m.DocumentTokens <= 0 {
		ps.at("media.document_tokens", "must be positive (got %d), e.g. 8000", m.DocumentTokens)
	}
	if ref := m.Transcription.Model; ref != "" {
		prov, model, ok := strings.Cut(ref, "/")
		p, known := c.Models.Providers[prov]
		switch {
		case !ok || prov == "" || model == "":
			ps.at("media.transcription.model", "%q is not \"<provider>/<model>\", e.g. \"openai/whisper-1\"", ref)
		case !known:
			ps.at("media.transcription.model", "provider %q is not in models.providers%s; add models.providers.%s with the transcription server's base_url", prov, didYouMean(prov, c.providerIDs()), prov)
		case p.API != APIOpenAICompletions:
			ps.at("media.transcription.model", "provider %q has api %s; transcription needs an OpenAI-compatible server (api: %s) with /audio/transcriptions", prov, p.API, APIOpenAICompletions)
		}
	}
}

// validateCommon checks the common block of an enabled channel at path.
func validateCommon(ps *problems, path string, cc ChannelCommon) {
	if !slices.Contains(streamingModes, cc.Streaming) {
		ps.at(path+".streaming", "unknown value %q%s; use off, edit (show the answer while it is written by editing a message) or native (the platform's own streaming, falling back to edit)", cc.Streaming, didYouMean(cc.Streaming, streamingModes))
	}
	if !slices.Contains(triggers, cc.Trigger) {
		ps.at(path+".trigger", "unknown value %q%s; use mention (answer in groups when addressed) or all", cc.Trigger, didYouMean(cc.Trigger, triggers))
	}
	switch cc.Access {
	case AccessOpen, AccessPairing:
	case AccessAllowlist:
		if len(cc.AllowUsers) == 0 && len(cc.Admins) == 0 {
			ps.at(path+".access", "allowlist lets only allow_users and admins talk, and both are empty; list user ids in %s.allow_users or %s.admins, or use access: open or pairing", path, path)
		}
	default:
		ps.at(path+".access", "unknown value %q%s; use open, allowlist or pairing", cc.Access, didYouMean(cc.Access, accessModes))
	}
	for i, v := range cc.Admins {
		if strings.HasPrefix(strings.TrimSpace(v), "@") {
			ps.at(fmt.Sprintf("%s.admins[%d]", path, i), "%q is a username; admins are user ids (a name can be changed by its owner)", v)
		}
	}
	if cc.Access == AccessPairing {
		for i, v := range cc.AllowUsers {
			if strings.HasPrefix(strings.TrimSpace(v), "@") {
				ps.at(fmt.Sprintf("%s.allow_users[%d]", path, i), "%q is a username; with access: pairing, allow_users are the user ids approved from the start", v)
			}
		}
	}
	lists := []struct {
		key  string
		list []string
	}{{"allow_users", cc.AllowUsers}, {"allow_chats", cc.AllowChats}, {"admins", cc.Admins},
		{"reactions.positive", cc.Reactions.Positive}, {"reactions.negative", cc.Reactions.Negative}}
	for _, l := range lists {
		for i, v := range l.list {
			if strings.TrimSpace(v) == "" {
				ps.at(fmt.Sprintf("%s.%s[%d]", path, l.key, i), "is empty; remove the entry")
			}
		}
	}
}

func validatePlugins(c *Config, ps *problems) {
	t := c.Plugins.Tools
	if t.HealthCheckInterval <= 0 {
		ps.at("plugins.tools.health_check_interval", "must be a positive duration such as \"30s\"")
	}
	atLeast(ps, "plugins.tools.max_restarts", t.MaxRestarts, 0)
	if t.Defaults.Timeout <= 0 {
		ps.at("plugins.tools.defaults.timeout", "must be a positive duration such as \"30s\"")
	}
	atLeast(ps, "plugins.tools.defaults.max_response_bytes", t.Defaults.MaxResponseBytes, 1)
	for name, o := range t.Overrides {
		if o.MaxResponseBytes < 0 {
			ps.at("plugins.tools.overrides."+name+".max_response_bytes", "must not be negative")
		}
	}
	atLeast(ps, "plugins.tools.max_calls_per_turn", t.MaxCallsPerTurn, 1)
	atLeast(ps, "plugins.tools.state.max_keys", t.State.MaxKeys, 0)
	if t.State.MaxBytes < 0 {
		ps.at("plugins.tools.state.max_bytes", "must not be negative (0 = no limit)")
	}
	if t.State.WritesPerSecond < 0 {
		ps.at("plugins.tools.state.writes_per_second", "must not be negative (0 = no limit)")
	}
	atLeast(ps, "plugins.tools.process_limits.address_space_mb", t.ProcessLimits.AddressSpaceMB, 0)
	atLeast(ps, "plugins.tools.process_limits.open_files", t.ProcessLimits.OpenFiles, 0)
	atLeast(ps, "plugins.tools.process_limits.processes", t.ProcessLimits.Processes, 0)
	if m := t.ProcessLimits.AddressSpaceMB; m > 0 && m < 256 {
		ps.at("plugins.tools.process_limits.address_space_mb", "%d MB is too little for most programs (a Go plugin reserves over 1 GB of address space); use 0 for no limit or at least 256", m)
	}
	for i, p := range t.Sandbox.ReadPaths {
		if p == "" {
			ps.at(fmt.Sprintf("plugins.tools.sandbox.read_paths[%d]", i), "is empty")
		}
	}
	for i, p := range t.Sandbox.WritePaths {
		if p == "" {
			ps.at(fmt.Sprintf("plugins.tools.sandbox.write_paths[%d]", i), "is empty")
		}
	}
	for i, pat := range t.Sanitize.ExtraPatterns {
		if _, err := regexp.Compile(pat); err != nil {
			ps.at(fmt.Sprintf("plugins.tools.sanitize.extra_patterns[%d]", i), "not a valid Go regular expression: %v", err)
		}
	}
	l := c.Plugins.Lua
	atLeast(ps, "plugins.lua.limits.memory_mb", l.Limits.MemoryMB, 1)
	atLeast(ps, "plugins.lua.limits.timeout_seconds", l.Limits.TimeoutSeconds, 1)
	atLeast(ps, "plugins.lua.limits.llm_timeout_seconds", l.Limits.LLMTimeoutSeconds, 1)
	atLeast(ps, "plugins.lua.limits.llm_max_calls", l.Limits.LLMMaxCalls, 0)
	atLeast(ps, "plugins.lua.limits.kv_max_keys", l.Limits.KVMaxKeys, 0)
	if l.Limits.KVMaxBytes < 0 {
		ps.at("plugins.lua.limits.kv_max_bytes", "must not be negative (0 = no limit)")
	}
}

// validateState checks state.driver and state.postgres. Whether the DSN
// reaches a server is checked when the database is opened.
func validateState(c *Config, ps *problems) {
	pg := c.State.Postgres
	switch c.State.Driver {
	case DriverSQLite:
	case DriverPostgres:
		if !pg.DSN.IsSet() {
			ps.at("state.postgres.dsn", "is required with state.driver: postgres; set it to the database's DSN, e.g. \"${OPENTALON_POSTGRES_DSN}\" with OPENTALON_POSTGRES_DSN=postgres://opentalon:PASSWORD@db.example:5432/opentalon (a config that leaves the key out takes OPENTALON_POSTGRES_DSN)")
		}
	default:
		ps.at("state.driver", "%q is not a driver; use sqlite (one machine, the default) or postgres (a database several replicas share)%s", c.State.Driver, didYouMean(c.State.Driver, []string{DriverSQLite, DriverPostgres}))
	}
	if k := c.State.SealKey; k.IsSet() && len(k.Value()) < 16 {
		ps.at("state.seal_key", "is %d characters: too short to seal anything; use a random secret of at least 16 (32 is better), e.g. the output of `openssl rand -base64 32` in OPENTALON_SEAL_KEY, or leave it out to derive one from the channel tokens", len(k.Value()))
	}
	atLeast(ps, "state.postgres.pool_size", pg.PoolSize, 1)
	if pg.StatementTimeout < 0 {
		ps.at("state.postgres.statement_timeout", "must not be negative (0 = no limit; default 30s)")
	} else if d := pg.StatementTimeout.D(); d > 0 && d < time.Second {
		ps.at("state.postgres.statement_timeout", "%s is below a second: ordinary statements would be cancelled; use at least \"1s\" (default 30s), or 0 for no limit", d)
	}
	if pg.ConnectWait < 0 {
		ps.at("state.postgres.connect_wait", "must not be negative (0, the default, fails at once when the server is not up; 1m waits a minute)")
	}
}
