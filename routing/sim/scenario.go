package sim

import (
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"sort"

	"gopkg.in/yaml.v3"
)

//go:embed default.yaml
var defaultScenario []byte

// Scenario is one simulation setup (YAML).
type Scenario struct {
	HorizonDays    float64 `yaml:"horizon_days"`
	Requests       int     `yaml:"requests"`
	Seeds          int     `yaml:"seeds"`
	MaxEscalations int     `yaml:"max_escalations"`
	DecayDays      float64 `yaml:"decay_days"`
	// CostWeight is λ of the utility p(accept) − λ·price/max price, used
	// by the oracle and the regret; the router uses its own default
	// unless this is set.
	CostWeight float64                       `yaml:"cost_weight"`
	Models     []SimModel                    `yaml:"models"`
	Tasks      map[string]TaskMix            `yaml:"tasks"`
	Acceptance map[string]map[string]float64 `yaml:"acceptance"`
	Changes    []Change                      `yaml:"changes"`
	Users      Users                         `yaml:"users"`
	Overrides  Overrides                     `yaml:"overrides"`
	// Judge is the optional LLM judge (routing.judge), simulated: off
	// without a rate.
	Judge Judge `yaml:"judge"`
	// Router tunes the learning router (0 = its defaults).
	Router RouterTuning `yaml:"router"`
}

// RouterTuning exposes the router's learning knobs to experiments (0 =
// the router's default).
type RouterTuning struct {
	EvidenceCap float64 `yaml:"evidence_cap"`
	Explore     float64 `yaml:"explore"`
	StaleDays   float64 `yaml:"stale_days"`
	// SettleZ, ChangeShift, DropThreshold, RiseThreshold: routing.Options.
	SettleZ       float64 `yaml:"settle_z"`
	ChangeShift   float64 `yaml:"change_shift"`
	DropThreshold float64 `yaml:"drop_threshold"`
	RiseThreshold float64 `yaml:"rise_threshold"`
	// IncumbentZ is the incumbent's hysteresis (routing.Options).
	IncumbentZ float64 `yaml:"incumbent_z"`
	// NoChangeDetection, NoProbes and NoValueOfInformation turn
	// mechanisms off, to measure what each brings.
	NoChangeDetection    bool `yaml:"no_change_detection"`
	NoProbes             bool `yaml:"no_probes"`
	NoValueOfInformation bool `yaml:"no_value_of_information"`
	// Probe budget: routing.explore.rate, .daily_usd and .stale_after
	// (hours here).
	ProbeRate       float64 `yaml:"probe_rate"`
	ProbeBurst      float64 `yaml:"probe_burst"`
	ProbeDailyUSD   float64 `yaml:"probe_daily_usd"`
	ProbeStaleHours float64 `yaml:"probe_stale_hours"`
	// SignalWeights overrides the weight of signal kinds (accepted,
	// returned, thanks, ...) for calibration.
	SignalWeights map[string]float64 `yaml:"signal_weights"`
}

// SimModel is a simulated model.
type SimModel struct {
	Ref    string `yaml:"ref"`
	Alias  string `yaml:"alias"`
	Weight int    `yaml:"weight"`
	Cost   struct {
		Input  float64 `yaml:"input"`
		Output float64 `yaml:"output"`
	} `yaml:"cost"`
}

// TaskMix is one task type's share of the traffic and its token sizes.
type TaskMix struct {
	Share        float64 `yaml:"share"`
	InputTokens  int     `yaml:"input_tokens"`
	OutputTokens int     `yaml:"output_tokens"`
}

// Change sets the acceptance probability of (task, model) from a day on.
type Change struct {
	Day   float64 `yaml:"day"`
	Task  string  `yaml:"task"`
	Model string  `yaml:"model"`
	P     float64 `yaml:"p"`
	Note  string  `yaml:"note"`
}

// Users is how simulated users react.
type Users struct {
	// Rejection: how a rejected answer shows (shares, normalized).
	Rejection struct {
		ThumbsDown float64 `yaml:"thumbs_down"`
		Retry      float64 `yaml:"retry"`
		FollowUp   float64 `yaml:"followup"`
		Rephrase   float64 `yaml:"rephrase"`
		Silence    float64 `yaml:"silence"`
	} `yaml:"rejection"`
	// ThumbsUp is the chance an accepted answer gets a positive reaction;
	// MovesOn the chance it is followed by another message (an implicit
	// acceptance). Noise is the chance an accepted answer is rejected
	// anyway (a wrong signal).
	ThumbsUp float64 `yaml:"thumbs_up"`
	// Thanks is the chance an accepted answer is thanked for (or copied)
	// in a follow-up, before the moves-on chance applies.
	Thanks  float64 `yaml:"thanks"`
	MovesOn float64 `yaml:"moves_on"`
	// Returns is the chance that a silently rejected answer's user comes
	// back later with the same question.
	Returns            float64 `yaml:"returns"`
	Noise              float64 `yaml:"noise"`
	EscalateOnReaction bool    `yaml:"escalate_on_reaction"`
}

// Judge simulates routing.judge: a share of the router's answers is
// graded by a small model whose grade agrees with the user's verdict with
// the given accuracy; each grade costs the judge model's price for the
// task's tokens read and a few written.
type Judge struct {
	Rate     float64 `yaml:"rate"`
	Accuracy float64 `yaml:"accuracy"`
	Model    string  `yaml:"model"`
}

// Overrides: the share of requests where the user picks the model with
// /model (they pick the oracle's model, recorded as an explicit choice).
type Overrides struct {
	Rate float64 `yaml:"rate"`
}

// Default returns the shipped scenario (bench/route/default.yaml).
func Default() (*Scenario, error) { return parse(defaultScenario, "bench/route/default.yaml") }

// Load reads and checks a scenario file.
func Load(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	return parse(b, path)
}

func parse(b []byte, name string) (*Scenario, error) {
	var sc Scenario
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&sc); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", name, err)
	}
	if err := sc.check(); err != nil {
		return nil, fmt.Errorf("scenario %s: %w", name, err)
	}
	return &sc, nil
}

func (sc *Scenario) check() error {
	if sc.HorizonDays <= 0 || sc.Requests <= 0 {
		return fmt.Errorf("horizon_days and requests must be positive")
	}
	if sc.Seeds <= 0 {
		sc.Seeds = 1
	}
	if sc.MaxEscalations <= 0 {
		sc.MaxEscalations = 2
	}
	if sc.DecayDays <= 0 {
		sc.DecayDays = 30
	}
	if len(sc.Models) < 2 {
		return fmt.Errorf("models: need at least two")
	}
	refs := map[string]bool{}
	for _, m := range sc.Models {
		refs[m.Ref] = true
	}
	var share float64
	for task, t := range sc.Tasks {
		if t.Share < 0 {
			return fmt.Errorf("tasks.%s.share is negative", task)
		}
		share += t.Share
		acc, ok := sc.Acceptance[task]
		if !ok {
			return fmt.Errorf("acceptance.%s is missing", task)
		}
		for _, m := range sc.Models {
			p, ok := acc[m.Ref]
			if !ok || p < 0 || p > 1 {
				return fmt.Errorf("acceptance.%s.%s must be a probability (0..1)", task, m.Ref)
			}
		}
	}
	if share <= 0 {
		return fmt.Errorf("tasks: the shares must add up to more than 0")
	}
	for i, c := range sc.Changes {
		if !refs[c.Model] || sc.Tasks[c.Task].Share == 0 && sc.Acceptance[c.Task] == nil {
			return fmt.Errorf("changes[%d]: unknown task %q or model %q", i, c.Task, c.Model)
		}
		if c.P < 0 || c.P > 1 || c.Day < 0 {
			return fmt.Errorf("changes[%d]: p must be 0..1 and day ≥ 0", i)
		}
	}
	for _, u := range []struct {
		key string
		p   float64
	}{{"thumbs_up", sc.Users.ThumbsUp}, {"thanks", sc.Users.Thanks}, {"moves_on", sc.Users.MovesOn}, {"returns", sc.Users.Returns}, {"noise", sc.Users.Noise}, {"overrides.rate", sc.Overrides.Rate}, {"router.probe_rate", sc.Router.ProbeRate}} {
		if u.p < 0 || u.p > 1 {
			return fmt.Errorf("users.%s must be a probability (0..1)", u.key)
		}
	}
	if sc.Judge.Rate > 0 {
		if !refs[sc.Judge.Model] {
			return fmt.Errorf("judge.model: %q is not one of the models", sc.Judge.Model)
		}
		if sc.Judge.Rate > 1 || sc.Judge.Accuracy < 0.5 || sc.Judge.Accuracy > 1 {
			return fmt.Errorf("judge: rate must be 0..1 and accuracy 0.5..1")
		}
	}
	sort.SliceStable(sc.Changes, func(i, j int) bool { return sc.Changes[i].Day < sc.Changes[j].Day })
	return nil
}

// taskNames returns the task types in a stable order.
func (sc *Scenario) taskNames() []string {
	out := make([]string, 0, len(sc.Tasks))
	for t := range sc.Tasks {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}
