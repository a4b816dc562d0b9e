// Package clock is OpenTalon's one source of time: Real reads the system
// clock, Fake is the single fake clock every test in the repository uses.
//
// Code that waits or reads the time takes a Clock (or its Now and Sleep
// methods as funcs) so that a test can advance time instead of sleeping.
// A Fake's time moves only when the test says so: Advance fires, in
// deadline order, every timer, ticker and sleeper whose time has come,
// moving Now to each deadline as it fires it, so a callback that reads
// Now sees the time it was due at.
//
// The package imports nothing internal; every package may import it.
package clock
