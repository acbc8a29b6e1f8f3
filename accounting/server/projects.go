package server

import (
	"context"

	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// CreateProject adds a project to an account's tree.
func (a *AdminServer) CreateProject(ctx context.Context, req *accountingv1.CreateProjectRequest) (*accountingv1.CreateProjectResponse, error) {
	np, err := newProjectFromProto(req)
	if err != nil {
		return nil, err
	}
	p, err := a.s.store.CreateProject(ctx, np)
	if err != nil {
		return nil, a.s.fail(ctx, "CreateProject", err)
	}
	return &accountingv1.CreateProjectResponse{Project: contract.ProjectToProto(p)}, nil
}

// GetProject returns a project with its spend and holds now.
func (a *AdminServer) GetProject(ctx context.Context, req *accountingv1.GetProjectRequest) (*accountingv1.GetProjectResponse, error) {
	if req.GetProjectId() == "" {
		return nil, invalidArgument("project_id is required")
	}
	p, err := a.s.store.GetProject(ctx, req.GetProjectId())
	if err != nil {
		return nil, a.s.fail(ctx, "GetProject", err)
	}
	return &accountingv1.GetProjectResponse{Project: contract.ProjectToProto(p)}, nil
}

// ListProjects returns an account's projects, by id.
func (a *AdminServer) ListProjects(ctx context.Context, req *accountingv1.ListProjectsRequest) (*accountingv1.ListProjectsResponse, error) {
	if req.GetAccountId() == "" {
		return nil, invalidArgument("account_id is required")
	}
	ps, err := a.s.store.ListProjects(ctx, req.GetAccountId())
	if err != nil {
		return nil, a.s.fail(ctx, "ListProjects", err)
	}
	resp := &accountingv1.ListProjectsResponse{}
	for _, p := range ps {
		resp.Projects = append(resp.Projects, contract.ProjectToProto(p))
	}
	return resp, nil
}

// UpdateProject changes the settings the request carries.
func (a *AdminServer) UpdateProject(ctx context.Context, req *accountingv1.UpdateProjectRequest) (*accountingv1.UpdateProjectResponse, error) {
	u, err := projectUpdateFromProto(req)
	if err != nil {
		return nil, err
	}
	p, err := a.s.store.UpdateProject(ctx, u)
	if err != nil {
		return nil, a.s.fail(ctx, "UpdateProject", err)
	}
	return &accountingv1.UpdateProjectResponse{Project: contract.ProjectToProto(p)}, nil
}

// DeleteProject removes a project without keys, child projects or requests in flight.
func (a *AdminServer) DeleteProject(ctx context.Context, req *accountingv1.DeleteProjectRequest) (*accountingv1.DeleteProjectResponse, error) {
	if req.GetProjectId() == "" {
		return nil, invalidArgument("project_id is required")
	}
	p, err := a.s.store.DeleteProject(ctx, req.GetProjectId())
	if err != nil {
		return nil, a.s.fail(ctx, "DeleteProject", err)
	}
	return &accountingv1.DeleteProjectResponse{Project: contract.ProjectToProto(p)}, nil
}

// fitsProjects refuses a key whose own limits or allowlist go beyond its project's or
// an ancestor's (ledger.KeyFitsProjects), for every caller. A project that is missing
// or of another account is left to the store, which refuses it.
func (a *AdminServer) fitsProjects(ctx context.Context, k ledger.NewKey) error {
	var path []ledger.Project
	for cur := k.ProjectID; cur != "" && len(path) <= ledger.MaxProjectLevels; {
		p, err := a.s.store.GetProject(ctx, cur)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return a.s.fail(ctx, "GetProject", err)
		}
		if p.AccountID != k.AccountID {
			return nil
		}
		path = append(path, p)
		cur = p.ParentID
	}
	if err := ledger.KeyFitsProjects(k, path); err != nil {
		return invalidArgument(err.Error())
	}
	return nil
}

// updateFits refuses a key update that would take the key's settings beyond its
// project's: the limits, rates and allowlist the update sets, or all of them when it
// moves the key to another project. A setting left as it was is not checked again (a
// project's limit lowered since does not block a rename).
func (a *AdminServer) updateFits(ctx context.Context, u ledger.KeyUpdate) error {
	if !(u.DailyLimit.Set || u.MonthlyLimit.Set || u.RPM.Set || u.TPM.Set || u.AllowedModels.Set || u.ProjectID.Set) {
		return nil
	}
	k, err := a.s.store.GetKey(ctx, u.ID)
	if isNotFound(err) {
		return nil // the update itself answers for a missing key
	}
	if err != nil {
		return a.s.fail(ctx, "GetKey", err) // unchecked, the update would not be held to its projects
	}
	nk := ledger.NewKey{AccountID: k.AccountID, ProjectID: k.ProjectID}
	if u.ProjectID.Set {
		nk = ledger.NewKey{AccountID: k.AccountID, ProjectID: u.ProjectID.Value, DailyLimit: k.DailyLimit, MonthlyLimit: k.MonthlyLimit,
			RPM: k.RPM, TPM: k.TPM, AllowedModels: k.AllowedModels}
	}
	if u.DailyLimit.Set {
		nk.DailyLimit = u.DailyLimit.Value
	}
	if u.MonthlyLimit.Set {
		nk.MonthlyLimit = u.MonthlyLimit.Value
	}
	if u.RPM.Set {
		nk.RPM = u.RPM.Value
	}
	if u.TPM.Set {
		nk.TPM = u.TPM.Value
	}
	if u.AllowedModels.Set {
		nk.AllowedModels = u.AllowedModels.Value
	}
	return a.fitsProjects(ctx, nk)
}
