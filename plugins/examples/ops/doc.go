// Command ops is an example plugin for the operator's side of the
// gateway: a notification sink (it keeps the recent operator events and
// offers them to the LLM as the tool ops.recent_alerts), an auth provider
// (users and admins listed in ops.json next to the binary) and blob
// storage kept in the plugin's own state.
package main
