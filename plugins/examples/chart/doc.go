// Command chart is an example OpenTalon plugin that makes a file: a bar
// chart PNG of the numbers it is given, sent to the user with the answer
// (sdk.FilePlugin). It draws with the standard library only.
package main
