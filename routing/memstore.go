package routing

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/opentalon/opentalon/core"
)

// MemStore is an in-memory Store for tests and the route simulator.
type MemStore struct {
	mu       sync.Mutex
	signals  []core.Signal
	affinity map[[2]string]core.Affinity
	profiles map[[2]string]core.ProfileState
	usage    []core.UsageRecord
	arms     map[[2]string]core.RouterArm
	tasks    map[string]core.RouterTask
	settings map[string]core.Setting
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{affinity: map[[2]string]core.Affinity{}, profiles: map[[2]string]core.ProfileState{},
		arms: map[[2]string]core.RouterArm{}, tasks: map[string]core.RouterTask{}}
}

var (
	_ Store         = (*MemStore)(nil)
	_ SettingsStore = (*MemStore)(nil)
)

// Settings implements SettingsStore.
func (m *MemStore) Settings(context.Context) ([]core.Setting, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]core.Setting, 0, len(m.settings))
	for _, s := range m.settings {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// SetSetting implements SettingsStore.
func (m *MemStore) SetSetting(_ context.Context, s core.Setting) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.settings == nil {
		m.settings = map[string]core.Setting{}
	}
	m.settings[s.Key] = s
	return nil
}

// DeleteSetting implements SettingsStore.
func (m *MemStore) DeleteSetting(_ context.Context, key string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, had := m.settings[key]
	delete(m.settings, key)
	return had, nil
}

// AddSignal implements Store.
func (m *MemStore) AddSignal(_ context.Context, s core.Signal) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.signals = append(m.signals, s)
	return int64(len(m.signals)), nil
}

// Signals returns a copy of the recorded signals.
func (m *MemStore) Signals() []core.Signal {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]core.Signal(nil), m.signals...)
}

// UpdateAffinity implements Store.
func (m *MemStore) UpdateAffinity(_ context.Context, task, model string, fn func(core.Affinity) core.Affinity) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{task, model}
	a, ok := m.affinity[k]
	if !ok {
		a = core.Affinity{Task: task, Model: model}
	}
	a = fn(a)
	a.Task, a.Model = task, model
	m.affinity[k] = a
	return nil
}

// Affinities implements Store.
func (m *MemStore) Affinities(context.Context) ([]core.Affinity, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]core.Affinity, 0, len(m.affinity))
	for _, a := range m.affinity {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Task != out[j].Task {
			return out[i].Task < out[j].Task
		}
		return out[i].Model < out[j].Model
	})
	return out, nil
}

// ResetAffinity deletes rows matching task and model ("" = any).
func (m *MemStore) ResetAffinity(_ context.Context, task, model string) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var n int64
	for k := range m.affinity {
		if (task == "" || k[0] == task) && (model == "" || k[1] == model) {
			delete(m.affinity, k)
			n++
		}
	}
	return n, nil
}

// ProfileStates implements Store.
func (m *MemStore) ProfileStates(context.Context) ([]core.ProfileState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]core.ProfileState, 0, len(m.profiles))
	for _, p := range m.profiles {
		out = append(out, p)
	}
	return out, nil
}

// SaveProfileState implements Store.
func (m *MemStore) SaveProfileState(_ context.Context, st core.ProfileState) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.profiles[[2]string{st.Provider, st.ID}] = st
	return nil
}

// AddUsage implements Store.
func (m *MemStore) AddUsage(_ context.Context, u core.UsageRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.usage = append(m.usage, u)
	return nil
}

// Usage returns a copy of the ledger.
func (m *MemStore) Usage() []core.UsageRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]core.UsageRecord(nil), m.usage...)
}

// SpentSince implements Store.
func (m *MemStore) SpentSince(_ context.Context, since time.Time, conversation string) (float64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sum float64
	for _, u := range m.usage {
		if !u.At.Before(since) && (conversation == "" || u.Conversation == conversation) {
			sum += u.CostUSD
		}
	}
	return sum, nil
}

// LearningState implements LearningStore.
func (m *MemStore) LearningState(context.Context) ([]core.RouterArm, []core.RouterTask, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	arms := make([]core.RouterArm, 0, len(m.arms))
	for _, a := range m.arms {
		arms = append(arms, a)
	}
	sort.Slice(arms, func(i, j int) bool {
		if arms[i].Task != arms[j].Task {
			return arms[i].Task < arms[j].Task
		}
		return arms[i].Model < arms[j].Model
	})
	tasks := make([]core.RouterTask, 0, len(m.tasks))
	for _, t := range m.tasks {
		tasks = append(tasks, t)
	}
	sort.Slice(tasks, func(i, j int) bool { return tasks[i].Task < tasks[j].Task })
	return arms, tasks, nil
}

// AddSignalAndLearn implements LearningStore. Every signal is new to a
// MemStore.
func (m *MemStore) AddSignalAndLearn(ctx context.Context, s core.Signal, task, model string, fn func(core.Affinity) core.Affinity,
	arms []core.RouterArm, tasks []core.RouterTask) (int64, error) {
	id, _ := m.AddSignal(ctx, s)
	m.UpdateAffinity(ctx, task, model, fn)
	return id, m.SaveLearning(ctx, arms, tasks)
}

// SaveLearning implements LearningStore.
func (m *MemStore) SaveLearning(_ context.Context, arms []core.RouterArm, tasks []core.RouterTask) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range arms {
		m.arms[[2]string{a.Task, a.Model}] = a
	}
	for _, t := range tasks {
		m.tasks[t.Task] = t
	}
	return nil
}

// ExploreSpentSince implements LearningStore.
func (m *MemStore) ExploreSpentSince(_ context.Context, since time.Time) (float64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var sum float64
	for _, u := range m.usage {
		if !u.At.Before(since) && u.Purpose == PurposeExplore {
			sum += u.CostUSD
		}
	}
	return sum, nil
}
