// Command calc is an example OpenTalon plugin that does exact work an LLM
// is bad at, without any network: evaluating arithmetic expressions and
// converting units.
package main
