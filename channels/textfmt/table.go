package textfmt

import (
	"bytes"
	"strings"
	"unicode"

	"golang.org/x/text/width"
)

// Tables. An LLM writes GFM tables (a header row "| a | b |", a
// delimiter row "|---|:---:|", body rows), and none of Telegram HTML,
// Slack mrkdwn or Discord renders them: sent as they are, they arrive as
// rows of pipes. A table is shown instead as a monospace block, each
// column padded to its widest cell (in display columns: an East Asian
// wide character takes two) and aligned as its delimiter says, with
// inline markup in the cells reduced to its text as ToPlain writes it.
// A wide table keeps its shape; a phone scrolls or wraps the block, and
// wrapping the cells ourselves would read worse.
//
// The work is bounded: finding and laying out a table costs a few steps
// per byte, and the padding all the tables of an answer add is at most
// half the answer's size plus tableRoom (a table of short rows under a
// long header could otherwise grow a hundredfold, and the splitters cost
// a multiple of what they split); past it a table's cells are only
// separated by pipes, as in its Markdown.

// maxColumn is the widest a column is padded to; a cell wider than that
// sticks out of its column instead of widening every row.
const maxColumn = 80

// tableRoom is the padding, beyond the answer's own size, the tables of
// an answer may add.
const tableRoom = 4 << 10

type alignment uint8

const (
	alignLeft alignment = iota
	alignCenter
	alignRight
)

// tableAt lays out the table whose header row is lines[i] (lines may end
// in "\n"): its text, and the index of the first line after it. ok is
// false when lines[i] starts no table: a table needs a header row with a
// pipe and, next, a delimiter row with as many cells. Body rows follow
// up to a blank line, a line without a pipe, or a quote or fence.
func tableAt(lines []string, i int, w *work) (text string, end int, ok bool) {
	if i+1 >= len(lines) || strings.IndexByte(lines[i], '|') < 0 {
		return "", 0, false
	}
	w.add(len(lines[i+1]))
	aligns, ok := delimiterRow(lines[i+1])
	if !ok {
		return "", 0, false
	}
	header := splitRow(lines[i])
	w.add(len(lines[i]))
	if len(header) != len(aligns) {
		return "", 0, false
	}
	rows := [][]string{header}
	in := len(lines[i]) + len(lines[i+1])
	end = i + 2
	for ; end < len(lines); end++ {
		t := strings.TrimSpace(lines[end])
		w.add(len(lines[end]))
		if t == "" || strings.IndexByte(t, '|') < 0 || t[0] == '>' || isFence(t) {
			break
		}
		rows = append(rows, splitRow(t))
		in += len(lines[end])
	}
	return layoutTable(rows, aligns, in, w), end, true
}

// delimiterRow parses a table's delimiter row: cells of dashes, a colon
// at the left, right or both ends saying the column's alignment.
func delimiterRow(line string) ([]alignment, bool) {
	t := strings.TrimSpace(line)
	if strings.IndexByte(t, '|') < 0 || strings.IndexByte(t, '-') < 0 {
		return nil, false
	}
	for k := 0; k < len(t); k++ {
		if strings.IndexByte(" \t|:-", t[k]) < 0 {
			return nil, false
		}
	}
	cells := splitRow(t)
	aligns := make([]alignment, len(cells))
	for k, c := range cells {
		c = strings.TrimSpace(c)
		left, right := strings.HasPrefix(c, ":"), strings.HasSuffix(c, ":")
		dashes := strings.TrimSuffix(strings.TrimPrefix(c, ":"), ":")
		if dashes == "" || strings.Trim(dashes, "-") != "" {
			return nil, false
		}
		switch {
		case left && right:
			aligns[k] = alignCenter
		case right:
			aligns[k] = alignRight
		}
	}
	return aligns, true
}

// splitRow cuts a table row into its cells at the pipes that are not
// escaped ("\|" is a pipe inside a cell); the outer pipes are optional.
func splitRow(line string) []string {
	s := strings.TrimSpace(line)
	s = strings.TrimPrefix(s, "|")
	if strings.HasSuffix(s, "|") && !strings.HasSuffix(s, `\|`) {
		s = s[:len(s)-1]
	}
	var cells []string
	start := 0
	for k := 0; k < len(s); k++ {
		switch s[k] {
		case '\\':
			k++
		case '|':
			cells = append(cells, s[start:k])
			start = k + 1
		}
	}
	return append(cells, s[start:])
}

// layoutTable writes the rows (the header first) as aligned text; in is
// the size of the table's Markdown. A row writes only the cells it has
// (extra ones are dropped, as GFM does), so a short row costs its own
// size, not the header's.
func layoutTable(rows [][]string, aligns []alignment, in int, w *work) string {
	cols := len(aligns)
	cells := make([][]string, len(rows))
	widths := make([][]int, len(rows)) // each cell's display width
	colWidth := make([]int, cols)
	var plain strings.Builder
	for r, row := range rows {
		row = row[:min(len(row), cols)]
		cells[r] = make([]string, len(row))
		widths[r] = make([]int, len(row))
		for c, cell := range row {
			text := strings.TrimSpace(cell)
			if strings.ContainsAny(text, "\\`*_~[<") {
				plain.Reset()
				inline(&plain, plainRenderer{}, text, w)
				text = plain.String()
			}
			text = strings.ReplaceAll(text, "\t", " ")
			cells[r][c] = text
			widths[r][c] = displayWidth(text)
			w.add(len(text))
			colWidth[c] = max(colWidth[c], min(widths[r][c], maxColumn))
		}
	}
	// The size padded: each cell and its padding, " | " between cells,
	// and the rule under the header.
	size := 0
	for r := range cells {
		for c, text := range cells[r] {
			size += len(text) + max(colWidth[c]-widths[r][c], 0) + 3
		}
	}
	for _, n := range colWidth {
		size += max(n, 1) + 3
	}
	padded := w == nil || size-in <= w.room
	if padded && w != nil && size > in {
		w.room -= size - in
	}
	sep := " | "
	if !padded {
		sep = "|" // no longer than the Markdown's own
	}
	var b bytes.Buffer
	if padded {
		b.Grow(size) // within w's room, checked above
	} else {
		b.Grow(min(size, 2*in+64))
	}
	for r := range cells {
		if r > 0 {
			b.WriteByte('\n')
		}
		start := b.Len()
		for c, text := range cells[r] {
			if c > 0 {
				b.WriteString(sep)
			}
			pad := 0
			if padded {
				pad = max(colWidth[c]-widths[r][c], 0)
			}
			left := 0
			switch aligns[c] {
			case alignRight:
				left = pad
			case alignCenter:
				left = pad / 2
			}
			writeSpaces(&b, left)
			b.WriteString(text)
			writeSpaces(&b, pad-left)
		}
		b.Truncate(start + len(bytes.TrimRight(b.Bytes()[start:], " ")))
		w.add(b.Len() - start)
		if r > 0 {
			continue
		}
		// The rule under the header.
		b.WriteByte('\n')
		if !padded {
			b.WriteString("---")
			continue
		}
		for c, n := range colWidth {
			if c > 0 {
				b.WriteString("-+-")
			}
			b.WriteString(strings.Repeat("-", max(n, 1)))
		}
	}
	return b.String()
}

func writeSpaces(b *bytes.Buffer, n int) {
	for ; n > 0; n-- {
		b.WriteByte(' ')
	}
}

// DisplayWidth is the columns s takes in a terminal (displayWidth), for
// the command line's tables.
func DisplayWidth(s string) int { return displayWidth(s) }

// displayWidth is the columns s takes in a monospace font: two for an
// East Asian wide or fullwidth character, none for a combining mark or
// a format character (a zero-width space), one for the rest.
func displayWidth(s string) int {
	n := 0
	for _, r := range s {
		switch {
		case r < 0x300:
			n++
		case unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf):
		default:
			switch width.LookupRune(r).Kind() {
			case width.EastAsianWide, width.EastAsianFullwidth:
				n += 2
			default:
				n++
			}
		}
	}
	return n
}

// breakFences puts a zero-width space between backticks, so no text in
// a ``` block can close it early.
func breakFences(s string) string {
	if !strings.Contains(s, "``") {
		return s
	}
	var b strings.Builder
	for k := 0; k < len(s); k++ {
		b.WriteByte(s[k])
		if s[k] == '`' && k+1 < len(s) && s[k+1] == '`' {
			b.WriteString("\u200b")
		}
	}
	return b.String()
}
