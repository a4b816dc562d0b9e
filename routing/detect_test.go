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
		// new questions that mention a verdict's words (found by an audit
		// of the binary: each was re-answered as a rejection)
		{"How to regenerate an SSH key?", false},
		{"My docker container doesn't work, any idea?", false},
		{"Write a function that returns nonsense words", false},
		{"wifi does not work", false},
		{"Mein Drucker funktioniert nicht, was tun?", false},
		{"Mi impresora no funciona, ¿qué hago?", false},
		{"Мой принтер не работает, что делать?", false},
		{"Quelle est la capitale de l'Espagne, encore une fois?", false},
		{"Is this sentence grammatically not correct?", false},
		// rejections it used to miss
		{"this is incorrect", true},
		{"you're wrong", true},
		{"incorrect answer", true},
		{"c'est incorrect", true},
		{"No es lo que quería", true},
		{"vuelve a intentarlo", true},
		{"это не то", true},
		{"попробуй заново", true},
		{"it doesn't work", true},
		{"no, nonsense", true},
		{"Do it again but in French", true},
		{"That's wrong, I asked about Peru not France", true},
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

// TestIsCorrection: a rejection that says more than its verdict is
// answered with what it says (the re-answer sees it).
func TestIsCorrection(t *testing.T) {
	for _, tc := range []struct {
		text string
		want bool
	}{
		{"That's wrong, I asked about Peru not France", true},
		{"Do it again but in French", true},
		{"no, try again", false},
		{"That's wrong.", false},
		{"still doesn't work", false},
		{"nochmal bitte", false},
		{"Réessaie s'il te plaît", false},
		{"попробуй ещё раз, пожалуйста", false},
		{"wrong", false},
		{"How to regenerate an SSH key?", false}, // no rejection at all
	} {
		if got := IsCorrection(tc.text); got != tc.want {
			t.Errorf("IsCorrection(%q) = %v, want %v", tc.text, got, tc.want)
		}
	}
}
