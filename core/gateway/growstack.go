package gateway

// workStack is the stack an item's work is started with (growStack).
// Its SQLite calls (modernc's translated C runs deep on the Go stack)
// and HTTP calls took a goroutine's first stack through several
// doublings per item, each copying every frame of a deep stack; started
// this large, the one copy is of a single frame.
const workStack = 64 << 10

// growStack grows the calling goroutine's stack to about workStack at
// once, while it holds one frame: call it first thing in a goroutine
// that will run deep.
//
//go:noinline
func growStack() {
	var buf [workStack - 4<<10]byte
	sink(buf[:])
}

// sink keeps growStack's buffer from being optimized away.
//
//go:noinline
func sink([]byte) {}
