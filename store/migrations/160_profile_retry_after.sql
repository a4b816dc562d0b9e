-- The server's Retry-After of the failure that set a credential's
-- cooldown, in milliseconds (0: none): the router probes a cooling
-- credential that often, so a restart or another replica does not fall
-- back to probing once per cooldowns.initial.
ALTER TABLE profiles ADD COLUMN retry_after INTEGER NOT NULL DEFAULT 0;
