// Package telegramtest is a fake Telegram Bot API server for tests, in the
// style of net/http/httptest: it listens on 127.0.0.1, answers POSTs to
// /bot<token>/<method> with multipart form, url-encoded or JSON bodies the
// way the real Bot API does, long-polls getUpdates (a request blocks until
// an update is queued or its timeout passes), honours offsets (updates
// below the offset are confirmed and dropped), validates HTML parse mode
// like Telegram and lets a test inject errors (400, 429 with retry_after,
// 409).
//
// It imports channels/textfmt (to judge HTML like Telegram) and the
// library's models; only tests use it.
package telegramtest
