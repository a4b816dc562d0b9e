package routing

import "testing"

func TestIsReject(t *testing.T) {
	for _, tc := range []struct {
		text string
		want bool
	}{
		{"no, try again", true},
		{"That's wrong.", true},
		{"that’s not what I meant", true},
		{"Not what I asked for", true},
		{"wrong", true},
		{"nope", true},
		{"still doesn't work", true},
		{"Das ist falsch", true},
		{"nochmal bitte", true},
		{"Nein, das meinte ich nicht", true},
		{"c'est faux", true},
		{"Réessaie s'il te plaît", true},
		{"ce n'est pas ce que je voulais dire", true},
		{"inténtalo de nuevo", true},
		{"Eso está mal", true},
		{"no es lo que quise decir", true},
		{"Неправильно", true},
		{"попробуй ещё раз", true},
		{"это не так", true},
		// tricky negatives
		{"try again tomorrow", false},
		{"I'll try again later, thanks!", false},
		{"No worries! Now tell me about Paris.", false},
		{"no, I want a recipe for pancakes with blueberries and maple syrup", false},
		{"Nothing wrong with that, what about the second point?", false},
		{"My build does not work when I enable cgo on linux with musl, what flags do I need to pass to the linker?", false},
		{"How do I say 'that's wrong' in German?", false},
		{"Danke, das funktioniert", false},
		{"merci, c'est parfait", false},
		{"otra pregunta: ¿qué hora es en Tokio?", false},
		{"Спасибо, попробую ещё раз завтра", false},
		{"/retry", false},
		{"", false},
		{"Great answer", false},
	} {
		if got := IsReject(tc.text); got != tc.want {
			t.Errorf("IsReject(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}

func TestIsRephrase(t *testing.T) {
	for _, tc := range []struct {
		prev, next string
		want       bool
	}{
		{"How do I reverse a list in Python?", "How can I reverse a Python list?", true},
		{"What is the boiling point of water at high altitude?", "boiling point of water at altitude?", true},
		{"Explain how TCP congestion control works", "Can you explain TCP congestion control works please", true},
		{"Wie kann ich eine Liste in Python umdrehen?", "Liste in Python umdrehen wie?", true},
		// topic changes and follow-ups
		{"What is the capital of France?", "What is the capital of Germany?", false},
		{"How do I reverse a list in Python?", "And how do I sort a dictionary by value?", false},
		{"How do I reverse a list in Python?", "why?", false},
		{"Summarize this article about climate policy", "Now translate the summary into French", false},
		{"Write a haiku about autumn", "Write a limerick about a cat", false},
	} {
		if got := IsRephrase(tc.prev, tc.next); got != tc.want {
			t.Errorf("IsRephrase(%q, %q) = %v (sim %.2f), want %v", tc.prev, tc.next, got, Similarity(tc.prev, tc.next), tc.want)
		}
	}
}
