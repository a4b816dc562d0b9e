// Command notes is an example OpenTalon plugin that keeps short notes in
// the plugin's private state: add, list, delete.
package main
