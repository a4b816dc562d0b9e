// Package sdk is the Go SDK for OpenTalon plugin authors: implement
// Plugin, call Serve from main, and the core does the rest (handshake on
// the unix socket named by OPENTALON_PLUGIN_SOCKET, Capabilities,
// Execute). OpenState connects to the plugin's private key-value state.
// A plugin offers the other extension points by implementing their
// interfaces (PreHooker, PostHooker, http.Handler with Inject and
// VerifyHMAC, Scheduler, Notifier, Authorizer, BlobStore, Provider) and
// declaring its hooks, routes and schedules in Capabilities; Serve
// registers the matching services.
// The subpackage plugintest plays the core in a plugin's own tests.
//
// It imports only proto; plugin binaries never import the core.
package sdk
