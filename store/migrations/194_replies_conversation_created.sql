-- A conversation's last reply (sessions.go, sweptIdle: how long a
-- conversation whose session the TTL sweep deleted had been idle) is one
-- probe of this index on both engines. With replies_conversation alone
-- the planner either reads every reply of the conversation or walks
-- replies_created backwards until one of it turns up, which for a
-- conversation with no reply yet is the whole table, inside the
-- transaction that creates its session.
CREATE INDEX replies_conversation_created ON replies (conversation, created_at);
