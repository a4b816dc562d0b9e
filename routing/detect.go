package routing

import (
	"strings"
	"sync"
	"unicode"
)

// Implicit quality signals: a follow-up that rejects the previous answer
// ("no, try again", "das ist falsch", "c'est faux", "otra vez",
// "неправильно") and a rephrase of the previous question right after an
// answer. Both err on the side of silence: a false rejection costs an
// unwanted re-answer, a missed one only a lost data point.

// rejectPhrases are verdicts on the answer: a rejection anywhere in a
// short follow-up that is not a question, or opening any follow-up.
// Lower case; apostrophes are normalized to '.
var rejectPhrases = []string{
	// English
	"try again", "that's wrong", "that is wrong", "thats wrong", "this is wrong", "it's wrong", "wrong answer", "you're wrong",
	"you are wrong", "not what i meant", "not what i asked", "not what i wanted", "that's not right", "that is not right",
	"not correct", "that's incorrect", "that is incorrect", "this is incorrect", "incorrect answer", "you misunderstood",
	"that's not it", "thats not it", "not helpful", "still wrong", "still not right", "still incorrect",
	// German
	"versuch es erneut", "versuch es nochmal", "das ist falsch", "ist falsch", "stimmt nicht", "nicht was ich meinte",
	"das meinte ich nicht", "nicht das, was ich", "falsche antwort",
	// French
	"réessaie", "reessaie", "réessaye", "essaie encore", "essaye encore", "c'est faux", "c'est incorrect", "c'est pas ça",
	"c'est pas ca", "ce n'est pas ça", "ce n'est pas ce que", "pas ce que je voulais", "pas ce que je voulais dire",
	"mauvaise réponse",
	// Spanish
	"inténtalo de nuevo", "intentalo de nuevo", "inténtalo otra vez", "intentalo otra vez", "vuelve a intentarlo",
	"eso está mal", "eso esta mal", "está mal", "esta mal", "es incorrecto", "no es lo que quise decir", "no es lo que pedí",
	"no es lo que pedi", "no es lo que quería", "no es lo que queria", "respuesta incorrecta",
	// Russian
	"попробуй ещё", "попробуй еще", "попробуй снова", "попробуй заново", "неправильно", "это не так", "это не то", "неверно",
	"не то, что", "не то что", "ты не понял", "не понял вопрос",
}

// openingPhrases are what a new request says too ("How do I regenerate
// an SSH key?", "my printer doesn't work", "¿la capital de España, otra
// vez?"): a rejection only when they open the follow-up, after nothing
// but fillers ("no, still doesn't work", "nochmal bitte").
var openingPhrases = []string{
	"doesn't work", "does not work", "didn't work", "did not work", "doesn't answer", "one more time", "do it again",
	"regenerate", "redo it", "nonsense",
	"nochmal", "noch mal", "noch einmal", "funktioniert nicht", "quatsch",
	"encore une fois", "ça ne marche pas", "ca ne marche pas", "n'importe quoi",
	"otra vez", "de nuevo", "no funciona",
	"ещё раз", "еще раз", "не работает", "ерунда", "чушь",
}

// fillers may come before an opening phrase, and are no correction
// after a verdict: "no", "still", "please", "sorry" (built at the first
// use, not at start).
var fillers = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`no nope nah hmm hm sorry but it it's its that that's thats this still again please pls just ok okay well
	wrong incorrect answer try retry
	nein aber es das immer noch bitte doch
	non mais ça ca toujours encore s'il il te plaît plait vous
	pero eso sigue todavía todavia por favor
	нет но это всё все опять пожалуйста снова`) {
		m[normalize(w)] = true
	}
	return m
})

// rejectWords reject only as (nearly) the whole message.
var rejectWords = []string{"wrong", "incorrect", "no", "nope", "falsch", "nein", "faux", "non", "mal", "incorrecto", "нет", "не то", "неверно", "retry", "again"}

// notReject words turn a match into something else: a later plan ("try
// again tomorrow"), thanks, or a question about the wording itself.
var notReject = []string{
	"tomorrow", "later", "next week", "tonight", "in an hour", "thank", "thanks", "morgen", "später", "danke",
	"demain", "plus tard", "merci", "mañana", "manana", "más tarde", "gracias", "завтра", "позже", "спасибо",
	"how do i say", "what does", "translate",
}

var apostrophes = strings.NewReplacer("’", "'", "`", "'", "ё", "е")

// The phrase lists in normalized form, built once (read-only after init).
var normRejectPhrases, normOpeningPhrases, normRejectWords, normNotReject = normalizeAll(rejectPhrases), normalizeAll(openingPhrases), normalizeAll(rejectWords), normalizeAll(notReject)

func normalizeAll(in []string) []string {
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = normalize(s)
	}
	return out
}

// normalize lower-cases s, unifies apostrophes and trims punctuation.
func normalize(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	s = apostrophes.Replace(s)
	return strings.TrimFunc(s, func(r rune) bool { return unicode.IsPunct(r) && r != '\'' || unicode.IsSpace(r) })
}

// IsCorrection reports whether a follow-up that rejects the previous
// answer also says something of its own ("that's wrong, I asked about
// Peru", "do it again but in French"): the re-answer must see it, not
// only the question again.
func IsCorrection(text string) bool {
	if !IsReject(text) {
		return false
	}
	// The words of every verdict in it ("попробуй ещё раз": two).
	t := normalize(text)
	said := map[string]bool{}
	for _, list := range [][]string{normRejectPhrases, normOpeningPhrases} {
		for _, p := range list {
			if phraseAt(t, p) >= 0 {
				for w := range contentWords(p) {
					said[w] = true
				}
			}
		}
	}
	for w := range contentWords(text) {
		if !said[w] && !fillers()[w] {
			return true
		}
	}
	return false
}

// IsReject reports whether a follow-up rejects the previous answer.
func IsReject(text string) bool {
	t := normalize(text)
	if t == "" || strings.HasPrefix(strings.TrimSpace(text), "/") {
		return false
	}
	for _, n := range normNotReject {
		if strings.Contains(t, n) {
			return false
		}
	}
	words := strings.Fields(t)
	if len(words) <= 3 {
		bare := strings.TrimFunc(t, func(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) })
		for _, w := range normRejectWords {
			if bare == w {
				return true
			}
		}
	}
	question := strings.HasSuffix(strings.TrimSpace(text), "?")
	for _, p := range normRejectPhrases {
		i := phraseAt(t, p)
		// In a short statement the verdict may be anywhere; in a longer
		// message or a question it must open it, so that a new question
		// mentioning "not correct" is not read as one.
		if i >= 0 && (opens(t, i) || len(words) <= 12 && !question) {
			return true
		}
	}
	for _, p := range normOpeningPhrases {
		if i := phraseAt(t, p); i >= 0 && opens(t, i) {
			return true
		}
	}
	return false
}

// phraseAt returns where phrase p stands in t as whole words, or -1.
func phraseAt(t, p string) int {
	for from := 0; from < len(t); {
		i := strings.Index(t[from:], p)
		if i < 0 {
			return -1
		}
		if wordBoundary(t, from+i, len(p)) {
			return from + i
		}
		from += i + len(p)
	}
	return -1
}

// opens reports whether only fillers come before position i of t.
func opens(t string, i int) bool {
	for _, w := range strings.FieldsFunc(t[:i], func(r rune) bool { return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '\'') }) {
		if !fillers()[w] {
			return false
		}
	}
	return true
}

func wordBoundary(s string, i, n int) bool {
	isWord := func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }
	if i > 0 {
		r := []rune(s[:i])
		if isWord(r[len(r)-1]) {
			return false
		}
	}
	if j := i + n; j < len(s) {
		r := []rune(s[j:])
		if isWord(r[0]) {
			return false
		}
	}
	return true
}

// stopwords are dropped before comparing two questions (built at the
// first comparison, not at start).
var stopwords = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the is are was were be been am do does did can could would should will shall may might must
	i you he she it we they me my your our their this that these those what which who whom whose how why when where
	of in on at to for from by with about as into like than then so and or but if not no yes please tell explain give show
	me some any there here just also very much many more most again now ok okay hey hi
	der die das ein eine ist sind wie was warum wo wer und oder nicht mit von zu für auf ich du es kann bitte
	le la les un une est sont comment quoi pourquoi où qui et ou pas avec de du des pour sur je tu il peux
	el los las uno una es son cómo como qué que por dónde quién y o con del para en yo tú puedes
	и в во на с со как что почему где кто это не ли же бы по за из у о об мне ты я можешь пожалуйста`) {
		m[w] = true
	}
	return m
})

// contentWords returns the set of non-stopwords, crudely stemmed.
func contentWords(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(normalize(s), func(r rune) bool { return !(unicode.IsLetter(r) || unicode.IsDigit(r)) }) {
		if stopwords()[w] || len([]rune(w)) < 2 {
			continue
		}
		out[stem(w)] = true
	}
	return out
}

func stem(w string) string {
	for _, suf := range []string{"ing", "es", "s", "ed"} {
		if len(w) > len(suf)+3 && strings.HasSuffix(w, suf) {
			return w[:len(w)-len(suf)]
		}
	}
	return w
}

// Similarity is the Jaccard index of two questions' content words.
func Similarity(a, b string) float64 { return jaccard(contentWords(a), contentWords(b)) }

// jaccard is the Jaccard index of two sets of words (0 when one is
// empty).
func jaccard(wa, wb map[string]bool) float64 {
	if len(wa) == 0 || len(wb) == 0 {
		return 0
	}
	inter := 0
	for w := range wa {
		if wb[w] {
			inter++
		}
	}
	return float64(inter) / float64(len(wa)+len(wb)-inter)
}

// RephraseThreshold is the similarity from which a follow-up counts as a
// rephrase of the previous question.
const RephraseThreshold = 0.6

// IsRephrase reports whether next asks prev again in other words. Both
// need at least two content words, so "and why?" after anything is not
// a rephrase, and a new subject (capital of France → of Germany) drops
// the overlap below the threshold.
func IsRephrase(prev, next string) bool {
	if strings.HasPrefix(strings.TrimSpace(next), "/") {
		return false
	}
	wp := contentWords(prev)
	if len(wp) < 2 {
		return false
	}
	wn := contentWords(next)
	if len(wn) < 2 {
		return false
	}
	return jaccard(wp, wn) >= RephraseThreshold
}
