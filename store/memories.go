package store

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/opentalon/opentalon/core"
)

// SaveMemory stores a new memory and returns its id.
func (db *DB) SaveMemory(ctx context.Context, m core.Memory) (int64, error) {
	// A model may write a NUL byte or bytes that are not UTF-8 into
	// memory_save; a PostgreSQL TEXT column holds neither.
	m.Content = core.CleanText(m.Content)
	tags := make([]string, len(m.Tags))
	for i, t := range m.Tags {
		tags[i] = core.CleanText(t)
	}
	if strings.TrimSpace(m.Owner) == "" || strings.TrimSpace(m.Content) == "" {
		return 0, core.Errorf(core.KindInvalid, "a memory needs an owner and content")
	}
	steps := ""
	if len(m.Steps) > 0 {
		b, err := json.Marshal(m.Steps)
		if err != nil {
			return 0, err
		}
		steps = string(b)
	}
	now := db.ms()
	var req any
	if m.RequestID != 0 {
		req = m.RequestID
	}
	var id int64
	err := db.w.QueryRowContext(ctx, `INSERT INTO memories (owner, shared, place, content, tags, steps, outcome, task_type, request_id, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, m.Owner, m.Shared, core.CleanText(m.Place), m.Content, strings.Join(core.NormalizeTags(tags...), " "),
		steps, m.Outcome, m.TaskType, req, now, now).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("save memory: %w", err)
	}
	return id, nil
}

// SaveWorkflow records a workflow pattern of w.Owner with outcome
// success. The same steps for the same request text refresh the existing
// pattern (its time, request and outcome) instead of adding another.
func (db *DB) SaveWorkflow(ctx context.Context, w core.Memory) (int64, error) {
	if len(w.Steps) == 0 {
		return 0, core.Errorf(core.KindInvalid, "a workflow needs steps")
	}
	b, err := json.Marshal(w.Steps)
	if err != nil {
		return 0, err
	}
	var id int64
	err = db.tx(ctx, func(tx *txn) error {
		w.Place = core.CleanText(w.Place)
		err := tx.QueryRowContext(ctx, `SELECT id FROM memories WHERE owner = ? AND place = ? AND steps = ? AND content = ? ORDER BY id DESC LIMIT 1`,
			w.Owner, w.Place, string(b), w.Content).Scan(&id)
		var req any
		if w.RequestID != 0 {
			req = w.RequestID
		}
		now := db.ms()
		switch {
		case err == nil:
			_, err = tx.ExecContext(ctx, `UPDATE memories SET outcome = ?, request_id = ?, task_type = ?, updated_at = ? WHERE id = ?`,
				core.WorkflowSucceeded, req, w.TaskType, now, id)
			return err
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		tags := core.NormalizeTags(append([]string{core.TagWorkflow}, w.Tags...)...)
		return tx.QueryRowContext(ctx, `INSERT INTO memories (owner, shared, place, content, tags, steps, outcome, task_type, request_id, created_at, updated_at)
			VALUES (?, FALSE, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`, w.Owner, w.Place, w.Content, strings.Join(tags, " "), string(b), core.WorkflowSucceeded, w.TaskType, req, now, now).Scan(&id)
	})
	if err != nil {
		return 0, fmt.Errorf("save workflow: %w", err)
	}
	return id, nil
}

const memoryCols = `m.id, m.owner, m.shared, m.place, m.content, m.tags, m.steps, m.outcome, m.task_type, COALESCE(m.request_id, 0), m.created_at, m.updated_at`

// Memories lists the memories q selects: ranked by relevance to q.Text
// when it is set (FTS5 over content and tags), else newest first. A text
// without searchable words matches nothing.
func (db *DB) Memories(ctx context.Context, q core.MemoryQuery) ([]core.Memory, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 20
	}
	var where []string
	var args []any
	if q.Owner != "" {
		if q.WithShared {
			where = append(where, "(m.owner = ? OR m.shared = TRUE)")
		} else {
			where = append(where, "m.owner = ?")
		}
		args = append(args, q.Owner)
	}
	if q.Place != "" {
		// A group's recall: what was saved there, and what is shared.
		where = append(where, "(m.place = ? OR m.shared = TRUE)")
		args = append(args, q.Place)
	}
	// A substring search (instr, strpos), not LIKE: SQLite prepares a
	// statement again whenever the pattern bound to a LIKE changes.
	if t := strings.ToLower(strings.TrimSpace(q.Tag)); t != "" {
		where = append(where, db.d.strpos+"(' ' || m.tags || ' ', ?) > 0")
		args = append(args, " "+t+" ")
	}
	if t := strings.ToLower(strings.TrimSpace(q.NotTag)); t != "" {
		where = append(where, db.d.strpos+"(' ' || m.tags || ' ', ?) = 0")
		args = append(args, " "+t+" ")
	}
	if q.Outcome != "" {
		where = append(where, "m.outcome = ?")
		args = append(args, q.Outcome)
	}
	var query string
	if strings.TrimSpace(q.Text) != "" && db.d.concurrent {
		// PostgreSQL: the memories' tsvector (the English stemmer over
		// content and tags); ts_rank grows with a better match, so its
		// negative orders like bm25. The owner is a filter.
		tsq := tsQuery(q.Text)
		if tsq == "" {
			return nil, nil
		}
		query = `SELECT ` + memoryCols + `, -ts_rank(m.search, tq) * (CASE WHEN ? <> '' AND m.task_type = ? THEN 1.5 ELSE 1.0 END) AS rank
			FROM memories m, to_tsquery('english', ?) tq WHERE m.search @@ tq`
		args = append([]any{q.TaskType, q.TaskType, tsq}, args...)
		for _, w := range where {
			query += " AND " + w
		}
		query += ` ORDER BY rank, m.id DESC LIMIT ` + strconv.Itoa(limit)
	} else if strings.TrimSpace(q.Text) != "" {
		match := MatchQuery(q.Text)
		if match == "" {
			return nil, nil
		}
		match = "{content tags} : (" + match + ")"
		if q.Owner != "" {
			// Only the owner's (and the shared) memories are scored.
			scope := ownerToken(q.Owner)
			if q.WithShared {
				scope = "(" + scope + " OR shared)"
			}
			match = "scope : " + scope + " AND " + match
		}
		// bm25 is negative (more negative = better), the scope column
		// does not count; the same task type makes a workflow's rank half
		// again as good.
		query = `SELECT ` + memoryCols + `, bm25(memories_fts, 0, 1, 1) * (CASE WHEN ? != '' AND m.task_type = ? THEN 1.5 ELSE 1.0 END) AS rank
			FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid WHERE memories_fts MATCH ?`
		args = append([]any{q.TaskType, q.TaskType, match}, args...)
		for _, w := range where {
			query += " AND " + w
		}
		query += ` ORDER BY rank, m.id DESC LIMIT ` + strconv.Itoa(limit)
	} else {
		query = `SELECT ` + memoryCols + `, 0 FROM memories m`
		if len(where) > 0 {
			query += " WHERE " + strings.Join(where, " AND ")
		}
		query += ` ORDER BY m.id DESC LIMIT ` + strconv.Itoa(limit)
	}
	return db.queryMemories(ctx, query, args...)
}

// Memory returns one memory by id (nil when there is none).
func (db *DB) Memory(ctx context.Context, id int64) (*core.Memory, error) {
	ms, err := db.memoriesWhere(ctx, `m.id = ?`, id)
	if err != nil || len(ms) == 0 {
		return nil, err
	}
	return &ms[0], nil
}

func (db *DB) memoriesWhere(ctx context.Context, where string, args ...any) ([]core.Memory, error) {
	return db.queryMemories(ctx, `SELECT `+memoryCols+`, 0 FROM memories m WHERE `+where, args...)
}

// queryMemories runs a query selecting memoryCols and a rank.
func (db *DB) queryMemories(ctx context.Context, query string, args ...any) ([]core.Memory, error) {
	rows, err := db.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("memories: %w", err)
	}
	defer rows.Close()
	var out []core.Memory
	for rows.Next() {
		var m core.Memory
		var tags, steps string
		var created, updated int64
		if err := rows.Scan(&m.ID, &m.Owner, &m.Shared, &m.Place, &m.Content, &tags, &steps, &m.Outcome, &m.TaskType, &m.RequestID, &created, &updated, &m.Rank); err != nil {
			return nil, err
		}
		m.Tags = strings.Fields(tags)
		if steps != "" {
			if err := json.Unmarshal([]byte(steps), &m.Steps); err != nil {
				return nil, fmt.Errorf("memory %d: decode steps: %w", m.ID, err)
			}
		}
		m.CreatedAt, m.UpdatedAt = time.UnixMilli(created), time.UnixMilli(updated)
		out = append(out, m)
	}
	return out, rows.Err()
}

// DeleteMemory deletes memory id when owner may: its own memory, or any
// memory when owner is "" (the command line) — and a shared one only
// when admin is set. It reports whether a memory was deleted.
func (db *DB) DeleteMemory(ctx context.Context, id int64, owner string, admin bool) (bool, error) {
	q, args := `DELETE FROM memories WHERE id = ?`, []any{id}
	if owner != "" {
		if admin {
			q += ` AND (owner = ? OR shared = TRUE)`
		} else {
			q += ` AND owner = ? AND shared = FALSE`
		}
		args = append(args, owner)
	}
	res, err := db.w.ExecContext(ctx, q, args...)
	if err != nil {
		return false, fmt.Errorf("delete memory %d: %w", id, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// DeleteMemories deletes every memory of owner (workflows included; the
// shared ones it saved stay) and returns how many.
func (db *DB) DeleteMemories(ctx context.Context, owner string) (int, error) {
	res, err := db.w.ExecContext(ctx, `DELETE FROM memories WHERE owner = ? AND shared = FALSE`, owner)
	if err != nil {
		return 0, fmt.Errorf("delete memories of %s: %w", owner, err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// HasMemories reports whether any memory could be recalled for owner:
// one of owner's own, or a shared one. Two index probes: the turn asks
// it before the searches, which most users (with no memories) can skip.
func (db *DB) HasMemories(ctx context.Context, owner string) (bool, error) {
	var has bool
	err := db.r.QueryRowContext(ctx, `SELECT `+hasMemories, owner).Scan(&has)
	if err != nil {
		return false, fmt.Errorf("memories of %s: %w", owner, err)
	}
	return has, nil
}

// hasMemories is HasMemories' expression (its argument: the owner).
const hasMemories = `EXISTS (SELECT 1 FROM memories WHERE owner = ?) OR EXISTS (SELECT 1 FROM memories WHERE shared = TRUE)`

// CountMemories counts the memories q selects (Text is ignored).
func (db *DB) CountMemories(ctx context.Context, q core.MemoryQuery) (int, error) {
	q.Text, q.Limit = "", 1<<30
	ms, err := db.Memories(ctx, q)
	return len(ms), err
}

// isStopWord says whether w is left out of full-text queries built from
// free text: such words match nearly every memory.
func isStopWord(w string) bool {
	switch w {
	case "an", "and", "are", "as", "at", "be", "but", "by", "can", "could", "did", "do", "does", "for", "from",
		"had", "has", "have", "he", "her", "him", "his", "how", "if", "in", "into", "is", "it", "its",
		"me", "my", "of", "on", "or", "our", "please", "she", "so", "than", "that", "the", "their", "them", "then",
		"there", "these", "they", "this", "to", "us", "was", "we", "were", "what", "when", "where", "which",
		"who", "why", "will", "with", "would", "you", "your", "yours":
		return true
	}
	return false
}

// MatchQuery turns free text into an FTS5 query: its words (stop words
// and one-letter words left out), each quoted, joined with OR, so bm25
// ranks memories sharing more and rarer words first. It returns "" when
// no word is left.
func MatchQuery(text string) string {
	terms := searchWords(text)
	for i, w := range terms {
		terms[i] = `"` + strings.ReplaceAll(w, `"`, `""`) + `"`
	}
	return strings.Join(terms, " OR ")
}

// tsQuery is MatchQuery for PostgreSQL: the same words, each a quoted
// lexeme of to_tsquery, joined with | (or).
func tsQuery(text string) string {
	terms := searchWords(text)
	for i, w := range terms {
		terms[i] = "'" + w + "'"
	}
	return strings.Join(terms, " | ")
}

// searchWords are the words of a search: letters and digits only, lower
// case, stop words, one-letter words and repeats left out, at most 32.
func searchWords(text string) []string {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
	var terms []string
	seen := map[string]bool{}
	for _, w := range words {
		if len([]rune(w)) < 2 || isStopWord(w) || seen[w] {
			continue
		}
		seen[w] = true
		terms = append(terms, w)
		if len(terms) == 32 {
			break
		}
	}
	return terms
}

// ownerToken is the owner's token in the scope column of memories_fts
// (as the insert trigger writes it).
func ownerToken(owner string) string {
	return "u" + hex.EncodeToString([]byte(owner))
}
