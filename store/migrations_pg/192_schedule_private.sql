-- Whether a schedule was made in a one-to-one chat with the bot (192 in
-- migrations, which says how a schedule made before is judged: private
-- only where its row proves a chat with the bot alone).
ALTER TABLE schedules ADD COLUMN private BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE schedules SET private = TRUE
    WHERE source = 'chat' AND (channel = 'console'
        OR channel = 'telegram' AND creator <> '' AND chat = creator
        OR channel = 'slack' AND substr(chat, 1, 1) = 'D');
