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
// The checks are split by what they check: validate.go (the core blocks
// and the channels), validate_ext.go (schedules, notifications, the
// plugin extension blocks).
//
// config imports only the standard library, gopkg.in/yaml.v3, core and
// core/schedule (a cron expression is read by the scheduler's parser);
// any package may import it.
package config
