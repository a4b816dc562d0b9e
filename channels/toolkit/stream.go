package toolkit

import (
	"time"

	"github.com/opentalon/opentalon/core"
)

// FirstDelay is how long the first text of a streamed answer waits
// before it is shown: an answer complete by then arrives as one message.
const FirstDelay = 500 * time.Millisecond

// StreamPolicy turns channels.<x>.streaming into the policy of one
// conversation: mode as configured ("" = edit), native only where the
// platform streams natively (native=false falls back to edit), with the
// platform's interval between updates.
func StreamPolicy(mode string, native bool, interval time.Duration) core.StreamPolicy {
	m := core.StreamMode(mode)
	switch m {
	case "":
		m = core.StreamEdit
	case core.StreamNative:
		if !native {
			m = core.StreamEdit
		}
	case core.StreamEdit, core.StreamOff:
	default:
		m = core.StreamOff
	}
	return core.StreamPolicy{Mode: m, FirstDelay: FirstDelay, Interval: interval}
}
