package engine

import (
	"context"

	"github.com/google/uuid"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
)

// Projects are decided and read on the owner: their spend and holds are its state.

func (s Store) CreateProject(ctx context.Context, p ledger.NewProject) (ledger.Project, error) {
	a, err := s.change(ctx, machine.CreateProject{ID: uuid.NewString(), Project: p, At: s.now()})
	return a.Project, err
}

func (s Store) GetProject(ctx context.Context, id string) (ledger.Project, error) {
	a, err := s.do(ctx, machine.GetProject{ProjectID: id, At: s.now()})
	return a.Project, err
}

func (s Store) ListProjects(ctx context.Context, accountID string) ([]ledger.Project, error) {
	a, err := s.do(ctx, machine.ListProjects{AccountID: accountID, At: s.now()})
	return a.Projects, err
}

func (s Store) UpdateProject(ctx context.Context, u ledger.ProjectUpdate) (ledger.Project, error) {
	a, err := s.change(ctx, machine.UpdateProject{Update: u, At: s.now()})
	return a.Project, err
}

func (s Store) DeleteProject(ctx context.Context, id string) (ledger.Project, error) {
	a, err := s.change(ctx, machine.DeleteProject{ProjectID: id, At: s.now()})
	return a.Project, err
}
