package toolkit

import "github.com/opentalon/opentalon/config"

// Addressing says how a message relates to the bot.
type Addressing struct {
	// Private: a one-to-one chat with the bot (always answered).
	Private bool
	// Mentioned: the bot was @mentioned.
	Mentioned bool
	// ReplyToBot: the message replies to one of the bot's messages.
	ReplyToBot bool
	// Command: the message is an in-chat command ("/model ...").
	Command bool
}

// Addressed reports whether the bot was addressed in any way.
func (a Addressing) Addressed() bool {
	return a.Private || a.Mentioned || a.ReplyToBot || a.Command
}

// Trigger is the common block's trigger: config.TriggerMention (the
// default, also for "") answers group messages only when addressed,
// config.TriggerAll answers every message.
type Trigger string

// Admits reports whether a message with that addressing is for the bot.
func (t Trigger) Admits(a Addressing) bool {
	return t == config.TriggerAll || a.Addressed()
}
