// Command startfloor is the lower bound of OpenTalon's start-up that its
// own code does not decide: a binary built as a release is, linking the
// six libraries the project is built on (and with them their package
// initialization), that runs nothing of its own. BenchmarkPerfStart/floor
// times it from exec to the byte it writes once main runs, and reads its
// RSS while it waits for its stdin to close.
package main

import (
	"io"
	"os"

	_ "github.com/bwmarrin/discordgo"
	_ "github.com/go-telegram/bot"
	_ "github.com/slack-go/slack"
	_ "github.com/yuin/gopher-lua"
	_ "google.golang.org/grpc"
	_ "modernc.org/sqlite"
)

func main() {
	os.Stdout.Write([]byte{'.'})
	io.Copy(io.Discard, os.Stdin)
}
