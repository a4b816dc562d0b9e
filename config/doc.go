// Package config owns OpenTalon's YAML configuration: the typed tree
// (types.go), its defaults (Default), locating the file (Resolve), loading it
// with ${VAR} / ${VAR:-default} substitution and strict decoding (Load), the
// embedded zero-config default driven by environment variables, validation
// with key paths, and printing the effective config with secrets redacted.
//
// Secrets (API keys, tokens, webhook secrets) are held in the Secret type,
// whose String, LogValue and YAML form are redacted; call Secret.Value to get
// the real string at the point of use.
//
// config imports only the standard library, gopkg.in/yaml.v3 and core; any
// package may import it.
package config
