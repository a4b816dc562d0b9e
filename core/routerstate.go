package core

import "time"

// RouterArm is the learning state the router keeps beside the affinity
// row of one (task type, model) arm: its change detector, its running
// probe sequence, when it was last probed and settled, and the newest
// change detected on it. Task "" is the model across every task type
// (the detector that sees one model drop on several task types at once).
// One row per arm, so replicas update rows, not a whole state.
type RouterArm struct {
	Task, Model string
	// Drop and Rise are the two runs of the change detector.
	Drop, Rise RouterRun
	// PoolPos and PoolNeg are the arm's evidence since the model-wide
	// drop run (the Task "" row's Drop) began.
	PoolPos, PoolNeg float64
	// Seq is the running probe sequence (Seq.Active false = none).
	Seq RouterSeq
	// LastProbe is the arm's newest probe; SettledVs the incumbent it was
	// settled against at SettledAt ("" = not settled).
	LastProbe time.Time
	SettledVs string
	SettledAt time.Time
	// ChangeAt, ChangeDir (−1 drop, +1 rise) and ChangeScope ("task",
	// "model" or "probe") describe the newest change detected.
	ChangeAt    time.Time
	ChangeDir   int
	ChangeScope string
	UpdatedAt   time.Time
}

// RouterRun is one run of a CUSUM change detector: its log-likelihood
// ratio, the reference acceptance it began with and the signal weights
// seen since.
type RouterRun struct {
	LLR, Ref, Pos, Neg float64
}

// RouterSeq is a running probe sequence of an arm: the acceptances it
// tests (P0 unchanged, P1 improved), its log-likelihood ratio, the signal
// weights seen, the probes sent (N) and judged (Seen).
type RouterSeq struct {
	Active                bool
	P0, P1, LLR, Pos, Neg float64
	N, Seen               int
}

// RouterTask is the router's state for one task type: the probe budget
// (probes and cost saved up), the decayed count of learned choices with
// when it was counted and when the task was first seen (the horizon of
// the value of information), and the incumbent model.
type RouterTask struct {
	Task                   string
	ProbeTokens, ProbeCost float64
	Choices                float64
	ChoicesAt, FirstSeen   time.Time
	Incumbent              string
	UpdatedAt              time.Time
}
