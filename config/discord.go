package config

import (
	"fmt"
	"strconv"
	"strings"
)

// DiscordShardsAuto is the shards value that asks Discord for the count.
const DiscordShardsAuto = "auto"

// DiscordShards is channels.discord.shards as written: a whole number or
// "auto" ("" means 1). Validate checks it; Count reads it.
type DiscordShards string

// Count is the configured shard count; auto reports that Discord's
// recommendation decides (n is then 0).
func (s DiscordShards) Count() (n int, auto bool, err error) {
	v := strings.TrimSpace(string(s))
	switch {
	case v == "":
		return 1, false, nil
	case strings.EqualFold(v, DiscordShardsAuto):
		return 0, true, nil
	}
	n, err = strconv.Atoi(v)
	if err != nil {
		return 0, false, fmt.Errorf("%q is neither a number nor auto", v)
	}
	if n < 1 {
		return 0, false, fmt.Errorf("%d shards cannot connect", n)
	}
	return n, false, nil
}

// MarshalYAML is how `config check` prints the value: the shard count as
// a number (1 when unset), or auto; a value Validate refuses as written.
func (s DiscordShards) MarshalYAML() (any, error) {
	n, auto, err := s.Count()
	switch {
	case err != nil:
		return string(s), nil
	case auto:
		return DiscordShardsAuto, nil
	}
	return n, nil
}
