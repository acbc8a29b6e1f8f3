package metrics

import (
	"context"

	"github.com/llmgw/gateway/accounting/ledger"
)

// The project methods of countingStore.

func (s *countingStore) CreateProject(ctx context.Context, p ledger.NewProject) (ledger.Project, error) {
	v, err := s.st.CreateProject(ctx, p)
	s.m.failed(ctx, "CreateProject", err)
	return v, err
}

func (s *countingStore) GetProject(ctx context.Context, id string) (ledger.Project, error) {
	v, err := s.st.GetProject(ctx, id)
	s.m.failed(ctx, "GetProject", err)
	return v, err
}

func (s *countingStore) ListProjects(ctx context.Context, accountID string) ([]ledger.Project, error) {
	v, err := s.st.ListProjects(ctx, accountID)
	s.m.failed(ctx, "ListProjects", err)
	return v, err
}

func (s *countingStore) UpdateProject(ctx context.Context, u ledger.ProjectUpdate) (ledger.Project, error) {
	v, err := s.st.UpdateProject(ctx, u)
	s.m.failed(ctx, "UpdateProject", err)
	return v, err
}

func (s *countingStore) DeleteProject(ctx context.Context, id string) (ledger.Project, error) {
	v, err := s.st.DeleteProject(ctx, id)
	s.m.failed(ctx, "DeleteProject", err)
	return v, err
}
