package config

import (
	"net"
	"strings"
)

// validateSlack checks an enabled Slack section: the tokens its mode
// needs, the events endpoint, api_url and reply_in_thread.
func validateSlack(s Slack, ps *problems) {
	const p = "channels.slack"
	bot := s.BotToken.Value()
	switch {
	case !s.BotToken.IsSet():
		ps.at(p+".bot_token", "missing; an enabled Slack channel needs the bot token (xoxb-…, OAuth & Permissions → Bot User OAuth Token), e.g. bot_token: \"${SLACK_BOT_TOKEN}\"")
	case strings.HasPrefix(bot, "xapp-"):
		ps.at(p+".bot_token", "holds an app-level token (xapp-…); bot_token takes the bot token (xoxb-…), app_token the xapp- one")
	case strings.HasPrefix(bot, "xoxp-"):
		ps.at(p+".bot_token", "holds a user token (xoxp-…); use the bot token (xoxb-…, OAuth & Permissions → Bot User OAuth Token)")
	}
	switch s.Mode {
	case SlackModeSocket:
		app := s.AppToken.Value()
		switch {
		case !s.AppToken.IsSet():
			ps.at(p+".app_token", "missing; mode socket needs an app-level token (xapp-…, Basic Information → App-Level Tokens, scope connections:write), e.g. app_token: \"${SLACK_APP_TOKEN}\"; or use mode: events with a signing_secret")
		case !strings.HasPrefix(app, "xapp-"):
			ps.at(p+".app_token", "is not an app-level token: it must start with xapp- (Basic Information → App-Level Tokens, scope connections:write)")
		}
	case SlackModeEvents:
		if !s.SigningSecret.IsSet() {
			ps.at(p+".signing_secret", "missing; mode events needs the app's signing secret (Basic Information → App Credentials), e.g. signing_secret: \"${SLACK_SIGNING_SECRET}\"")
		}
		if s.Events.Listen == "" {
			ps.at(p+".events.listen", "missing; mode events needs a local address to listen on, e.g. \"127.0.0.1:3000\"")
		} else if _, _, err := net.SplitHostPort(s.Events.Listen); err != nil {
			ps.at(p+".events.listen", "%q is not host:port, e.g. \"127.0.0.1:3000\"", s.Events.Listen)
		}
		if !strings.HasPrefix(s.Events.Path, "/") {
			ps.at(p+".events.path", "%q must start with \"/\", e.g. \"/slack/events\" (the path of the Request URL set in the Slack app)", s.Events.Path)
		}
	default:
		modes := []string{SlackModeSocket, SlackModeEvents}
		ps.at(p+".mode", "unknown mode %q%s; use socket (Socket Mode, needs app_token) or events (Events API over HTTP, needs signing_secret)", s.Mode, didYouMean(s.Mode, modes))
	}
	checkURL(ps, p+".api_url", s.APIURL)
	switch s.ReplyInThread {
	case ReplyInThreadAuto, ReplyInThreadAlways, ReplyInThreadNever:
	default:
		vals := []string{ReplyInThreadAuto, ReplyInThreadAlways, ReplyInThreadNever}
		ps.at(p+".reply_in_thread", "unknown value %q%s; use auto, always or never", s.ReplyInThread, didYouMean(s.ReplyInThread, vals))
	}
}
