package store

import (
	"context"
	"maps"
	"testing"

	"github.com/opentalon/opentalon/core"
)

func TestLuaKV(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	db, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, found, err := db.LuaKVGet(ctx, "counter", "n"); err != nil || found {
		t.Fatalf("get before set: found=%v err=%v", found, err)
	}
	for _, kv := range [][3]string{{"counter", "n", "1"}, {"counter", "n", "2"}, {"other", "n", "secret"}, {"counter", "gone", "x"}} {
		if err := db.LuaKVSet(ctx, kv[0], kv[1], kv[2]); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.LuaKVDelete(ctx, "counter", "gone"); err != nil {
		t.Fatal(err)
	}
	if err := db.LuaKVDelete(ctx, "counter", "never-set"); err != nil {
		t.Fatalf("deleting a missing key: %v", err)
	}
	for _, tc := range []struct{ script, key, want string }{{"counter", "n", "2"}, {"other", "n", "secret"}, {"counter", "gone", ""}} {
		if v, found, err := db.LuaKVGet(ctx, tc.script, tc.key); err != nil || v != tc.want || found != (tc.want != "") {
			t.Errorf("%s/%s = %q found=%v err=%v, want %q", tc.script, tc.key, v, found, err, tc.want)
		}
	}
	for _, bad := range [][2]string{{"", "k"}, {"s", ""}} {
		if err := db.LuaKVSet(ctx, bad[0], bad[1], "v"); core.ErrorKind(err) != core.KindInvalid {
			t.Errorf("set %q/%q: err = %v, want an invalid-input error", bad[0], bad[1], err)
		}
	}
	// The values persist across a reopen.
	db.Close()
	db2, err := Open(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if v, _, _ := db2.LuaKVGet(ctx, "counter", "n"); v != "2" {
		t.Fatalf("after reopen counter/n = %q, want 2", v)
	}
}

func TestReplyMetadata(t *testing.T) {
	db := openTest(t, Options{})
	ctx := context.Background()
	conv := core.ConversationKey{Channel: "console", Chat: "local"}
	s, _ := db.ActiveSession(ctx, conv)
	meta := map[string]string{"category": "jira", "priority": "critical"}
	if _, err := db.SaveReply(ctx, &core.Reply{RequestID: 3, SessionID: s.ID, Conversation: conv, Text: "ok", Parts: []string{"ok"}, Metadata: meta}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SaveReply(ctx, &core.Reply{RequestID: 4, SessionID: s.ID, Conversation: conv, Text: "plain", Parts: []string{"plain"}}, nil); err != nil {
		t.Fatal(err)
	}
	r, err := db.ReplyForRequest(ctx, 3, conv)
	if err != nil || r == nil || !maps.Equal(r.Metadata, meta) {
		t.Fatalf("reply 3 = %+v err=%v, want metadata %v", r, err, meta)
	}
	if r, _ := db.ReplyForRequest(ctx, 4, conv); r == nil || len(r.Metadata) != 0 {
		t.Fatalf("reply 4 = %+v, want no metadata", r)
	}
	var raw string
	if err := db.r.QueryRowContext(ctx, `SELECT metadata FROM replies WHERE request_id = 3`).Scan(&raw); err != nil || raw != `{"category":"jira","priority":"critical"}` {
		t.Fatalf("stored metadata = %q err=%v", raw, err)
	}
}
