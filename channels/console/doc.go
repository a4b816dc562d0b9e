// Package console is the local channel: each line read from an io.Reader
// (stdin by default) is a message of one console conversation, and each
// reply is written to an io.Writer (stdout). It is both the newcomer's
// first way to talk to OpenTalon and the fake platform of end-to-end
// tests, which drive it through pipes. On a terminal (Options.Interactive)
// it shows a prompt and, while an answer is being written, a line
// counting the seconds (core.Indicator); through pipes it writes the
// answers only.
package console
