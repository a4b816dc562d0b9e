-- Whether a schedule was made in a one-to-one chat with the bot (the
-- Inbound.Private of its /schedule): its firings then recall the
-- creator's memories as that chat does, all of them (core.MemoryPlace);
-- a group's firings recall only what was saved in the group. 0 for the
-- config's and plugins' schedules.
--
-- A schedule made before this migration recorded nothing. It is taken as
-- private only where its row proves a chat with the bot alone: a
-- Telegram chat whose id is its creator's user id (a private chat's id is
-- its user's), a Slack D… channel (an IM), the console. The rest (a
-- Discord DM cannot be told from a guild channel by its id) recall as a
-- group's: they could never put a private memory in front of others.
ALTER TABLE schedules ADD COLUMN private INTEGER NOT NULL DEFAULT 0;
UPDATE schedules SET private = 1
    WHERE source = 'chat' AND (channel = 'console'
        OR channel = 'telegram' AND creator <> '' AND chat = creator
        OR channel = 'slack' AND substr(chat, 1, 1) = 'D');
