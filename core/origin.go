package core

// Origins of a message that no platform delivered (Inbound.Origin).
const (
	// OriginSchedule: a schedule's firing.
	OriginSchedule = "schedule"
	// OriginPlugin prefixes "plugin:<name>": a message a plugin injected
	// (a plugin HTTP route's handler).
	OriginPlugin = "plugin:"
)
