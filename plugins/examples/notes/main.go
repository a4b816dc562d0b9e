package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/opentalon/opentalon/plugins/sdk"
)

// maxNoteBytes caps one note.
const maxNoteBytes = 4096

// notes serializes adds so two concurrent calls never take one number.
type notes struct {
	st *sdk.State
	mu sync.Mutex
}

func (n *notes) Capabilities() sdk.Capabilities {
	return sdk.Capabilities{
		Name:        "notes",
		Description: "Keep short notes for the user: add, list and delete them.",
		Actions: []sdk.Action{
			{Name: "add", Description: "Save a note.", Params: []sdk.Param{{Name: "text", Description: "the note", Required: true}}},
			{Name: "list", Description: "List all saved notes with their numbers."},
			{Name: "delete", Description: "Delete a note by its number.", Params: []sdk.Param{{Name: "id", Description: "the note's number from list", Type: "integer", Required: true}}},
		},
	}
}

func (n *notes) Execute(ctx context.Context, c sdk.Call) (string, error) {
	switch c.Action {
	case "add":
		return n.add(ctx, c.Args["text"])
	case "list":
		return n.list(ctx)
	case "delete":
		return n.delete(ctx, c.Args["id"])
	}
	return "", fmt.Errorf("unknown action %q: use add, list or delete", c.Action)
}

func key(id int) string { return fmt.Sprintf("note/%08d", id) }

func (n *notes) add(ctx context.Context, text string) (string, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return "", fmt.Errorf("the note is empty: pass the text to save in the text argument")
	}
	if len(text) > maxNoteBytes {
		return "", fmt.Errorf("the note is %d bytes; notes are limited to %d", len(text), maxNoteBytes)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	seq, _, err := n.st.Get(ctx, "seq")
	if err != nil {
		return "", err
	}
	id, _ := strconv.Atoi(seq)
	id++
	if err := n.st.Set(ctx, key(id), text); err != nil {
		return "", err
	}
	if err := n.st.Set(ctx, "seq", strconv.Itoa(id)); err != nil {
		return "", err
	}
	return fmt.Sprintf("Saved note %d.", id), nil
}

func (n *notes) list(ctx context.Context) (string, error) {
	keys, err := n.st.Keys(ctx, "note/")
	if err != nil {
		return "", err
	}
	if len(keys) == 0 {
		return "There are no notes.", nil
	}
	var b strings.Builder
	for _, k := range keys {
		v, ok, err := n.st.Get(ctx, k)
		if err != nil {
			return "", err
		}
		if !ok {
			continue
		}
		id, _ := strconv.Atoi(strings.TrimPrefix(k, "note/"))
		fmt.Fprintf(&b, "%d. %s\n", id, v)
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

func (n *notes) delete(ctx context.Context, arg string) (string, error) {
	id, err := strconv.Atoi(strings.TrimSpace(arg))
	if err != nil || id <= 0 {
		return "", fmt.Errorf("id %q is not a note number: use the number shown by list", arg)
	}
	if _, ok, err := n.st.Get(ctx, key(id)); err != nil {
		return "", err
	} else if !ok {
		return "", fmt.Errorf("there is no note %d", id)
	}
	if err := n.st.Delete(ctx, key(id)); err != nil {
		return "", err
	}
	return fmt.Sprintf("Deleted note %d.", id), nil
}

func main() {
	st, err := sdk.OpenState()
	if err != nil {
		fmt.Fprintln(os.Stderr, "notes:", err)
		os.Exit(1)
	}
	defer st.Close()
	if err := sdk.Serve(&notes{st: st}); err != nil {
		fmt.Fprintln(os.Stderr, "notes:", err)
		os.Exit(1)
	}
}
