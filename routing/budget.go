package routing

import "strings"

// warnUnpriced warns, when a budget is set, about the models that have no
// price and are not local: the budget counts them as free, so they keep
// answering (and billing) when it is used up.
func warnUnpriced(o Options, models []Model) {
	if o.DailyUSD <= 0 && o.ChatDailyUSD <= 0 {
		return
	}
	var refs []string
	for _, m := range models {
		if m.Price() == 0 && !m.Local {
			refs = append(refs, m.Ref)
		}
	}
	if len(refs) > 0 {
		o.Log.Warn("routing.budget is set but these models have no price, so the budget counts them as free and they answer even when it is used up; give each a cost (models.catalog.<ref>.cost) if it is paid",
			"component", "routing", "models", strings.Join(refs, ", "))
	}
}
