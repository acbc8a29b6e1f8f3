package servertest

import (
	"context"
	"slices"
	"time"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// CreateProject implements ledger.Store. Its ids are proj_ and a sequence number.
func (m *Memory) CreateProject(_ context.Context, p ledger.NewProject) (ledger.Project, error) {
	a, err := m.decide("proj", func(id string, at time.Time) machine.Command {
		return machine.CreateProject{ID: id, Project: p, At: at}
	})
	return ownProject(a.Project), err
}

// GetProject implements ledger.Store.
func (m *Memory) GetProject(_ context.Context, id string) (ledger.Project, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.GetProject{ProjectID: id, At: at}
	})
	return ownProject(a.Project), err
}

// ListProjects implements ledger.Store.
func (m *Memory) ListProjects(_ context.Context, accountID string) ([]ledger.Project, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.ListProjects{AccountID: accountID, At: at}
	})
	out := make([]ledger.Project, 0, len(a.Projects))
	for _, p := range a.Projects {
		out = append(out, ownProject(p))
	}
	return out, err
}

// UpdateProject implements ledger.Store.
func (m *Memory) UpdateProject(_ context.Context, u ledger.ProjectUpdate) (ledger.Project, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.UpdateProject{Update: u, At: at}
	})
	return ownProject(a.Project), err
}

// DeleteProject implements ledger.Store.
func (m *Memory) DeleteProject(_ context.Context, id string) (ledger.Project, error) {
	a, err := m.decide("", func(_ string, at time.Time) machine.Command {
		return machine.DeleteProject{ProjectID: id, At: at}
	})
	return ownProject(a.Project), err
}

// ownProject copies what an answer's project shares with the state.
func ownProject(p ledger.Project) ledger.Project {
	p.DailyLimit, p.MonthlyLimit, p.Limit = clone(p.DailyLimit), clone(p.MonthlyLimit), clone(p.Limit)
	p.RPM, p.TPM, p.Models = clone(p.RPM), clone(p.TPM), slices.Clone(p.Models)
	return p
}
