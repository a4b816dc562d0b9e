// Package schedule runs OpenTalon's scheduled tasks: it reads when a
// schedule fires (an interval, five cron fields, or the words of
// /schedule such as "every weekday at 9:00"), keeps the schedules of the
// config, of chat and of plugins in the store, and at each firing time
// queues one firing in the schedule's conversation through the gateway
// (a durable queue item, answered once even across a crash). Firings
// that fell while the gateway was down are skipped or run once, as each
// schedule's missed policy says. A plugin's declared schedules are
// checked once, here (timing, missed policy, an enabled channel). Runner
// decides what a firing does before anything is posted: the Lua scripts'
// on_schedule, then a plugin action or a plugin's callback, else the
// prompt. It adds /schedule, /schedules and /unschedule to the gateway's
// commands.
//
// schedule imports only core (and core/clock); the clock is injected.
package schedule
