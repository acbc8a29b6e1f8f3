package ctl

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"

	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// Projects: project create|show|list|update|delete, and a key's project and rates.

var projectLimitFlags = map[string]flagKind{
	"daily-limit": stringFlag, "monthly-limit": stringFlag, "limit": stringFlag,
	"rpm": stringFlag, "tpm": stringFlag, "models": stringFlag,
}

var projectCommands = map[string]command{
	"project create": {flags: with(projectLimitFlags, map[string]flagKind{
		"account": stringFlag, "name": stringFlag, "parent": stringFlag,
	}), entity: "account", run: projectCreate},
	"project show": {nargs: 1, entity: "project", run: projectShow},
	"project list": {flags: map[string]flagKind{"account": stringFlag}, entity: "account", run: projectList},
	"project update": {flags: with(projectLimitFlags, map[string]flagKind{
		"name": stringFlag, "no-daily-limit": boolFlag, "no-monthly-limit": boolFlag, "no-limit": boolFlag,
		"no-rpm": boolFlag, "no-tpm": boolFlag, "all-models": boolFlag,
	}), nargs: 1, entity: "project", run: projectUpdate},
	"project delete": {nargs: 1, entity: "project", run: projectDelete},
}

// keyPlacementFlags are key create's and key update's flags of projects.
var keyPlacementFlags = map[string]flagKind{"project": stringFlag, "rpm": stringFlag, "tpm": stringFlag}

// with is the union of flag sets.
func with(sets ...map[string]flagKind) map[string]flagKind {
	out := map[string]flagKind{}
	for _, s := range sets {
		for k, v := range s {
			out[k] = v
		}
	}
	return out
}

// parseRate reads a rate limit flag (a positive whole number), nil when absent.
func parseRate(p parsed, flag string) (*int64, error) {
	if !p.has(flag) {
		return nil, nil
	}
	v, err := strconv.ParseInt(strings.TrimSpace(p.flags[flag]), 10, 64)
	if err != nil || v < 1 {
		return nil, usagef("--%s wants a positive whole number, not %q", flag, p.flags[flag])
	}
	return &v, nil
}

// Project is the JSON shape of a project: limits in credits or null, "models" null for
// every model, spend and holds of the project and its descendants.
type Project struct {
	ID                 string       `json:"id"`
	AccountID          string       `json:"account_id"`
	ParentID           string       `json:"parent_id"`
	Name               string       `json:"name"`
	DailyLimit         *json.Number `json:"daily_limit"`
	DailyLimitMicros   *int64       `json:"daily_limit_micros"`
	MonthlyLimit       *json.Number `json:"monthly_limit"`
	MonthlyLimitMicros *int64       `json:"monthly_limit_micros"`
	Limit              *json.Number `json:"limit"`
	LimitMicros        *int64       `json:"limit_micros"`
	RPM                *int64       `json:"rpm"`
	TPM                *int64       `json:"tpm"`
	Models             []string     `json:"models"`
	SpentToday         json.Number  `json:"spent_today"`
	SpentTodayMicros   int64        `json:"spent_today_micros"`
	SpentMonth         json.Number  `json:"spent_month"`
	SpentMonthMicros   int64        `json:"spent_month_micros"`
	Spent              json.Number  `json:"spent"`
	SpentMicros        int64        `json:"spent_micros"`
	Reserved           json.Number  `json:"reserved"`
	ReservedMicros     int64        `json:"reserved_micros"`
	CreatedAt          *string      `json:"created_at"`
}

func projectJSON(p *accountingv1.Project) Project {
	out := Project{
		ID: p.GetId(), AccountID: p.GetAccountId(), ParentID: p.GetParentId(), Name: p.GetName(),
		RPM: p.Rpm, TPM: p.Tpm,
		SpentToday: credits(p.GetSpentTodayMicros()), SpentTodayMicros: p.GetSpentTodayMicros(),
		SpentMonth: credits(p.GetSpentMonthMicros()), SpentMonthMicros: p.GetSpentMonthMicros(),
		Spent: credits(p.GetSpentMicros()), SpentMicros: p.GetSpentMicros(),
		Reserved: credits(p.GetReservedMicros()), ReservedMicros: p.GetReservedMicros(),
		CreatedAt: timeOrNil(p.GetCreatedAt()),
	}
	if len(p.GetModels()) > 0 {
		out.Models = append([]string{}, p.GetModels()...)
	}
	out.DailyLimit, out.DailyLimitMicros = optCredits(p.DailyLimitMicros)
	out.MonthlyLimit, out.MonthlyLimitMicros = optCredits(p.MonthlyLimitMicros)
	out.Limit, out.LimitMicros = optCredits(p.LimitMicros)
	return out
}

// ProjectList is the JSON shape of project list.
type ProjectList struct {
	Projects []Project `json:"projects"`
}

func projectCreate(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	account, err := required(p, "project create", "account", "ID")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(p.flags["name"]) == "" {
		return nil, usagef("project create needs --name N")
	}
	req := &accountingv1.CreateProjectRequest{AccountId: account, Name: p.flags["name"],
		ParentId: strings.TrimSpace(p.flags["parent"])}
	for _, f := range []struct {
		flag string
		dst  **int64
	}{{"daily-limit", &req.DailyLimitMicros}, {"monthly-limit", &req.MonthlyLimitMicros}, {"limit", &req.LimitMicros}} {
		if *f.dst, err = parseLimit(p, f.flag); err != nil {
			return nil, err
		}
	}
	if req.Rpm, err = parseRate(p, "rpm"); err != nil {
		return nil, err
	}
	if req.Tpm, err = parseRate(p, "tpm"); err != nil {
		return nil, err
	}
	if p.has("models") {
		if req.Models, err = parseModels(p.flags["models"]); err != nil {
			return nil, err
		}
	}
	resp, err := c.CreateProject(ctx, req)
	if err != nil {
		return nil, err
	}
	return projectJSON(resp.GetProject()), nil
}

func projectShow(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	resp, err := c.GetProject(ctx, &accountingv1.GetProjectRequest{ProjectId: p.args[0]})
	if err != nil {
		return nil, err
	}
	return projectJSON(resp.GetProject()), nil
}

func projectList(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	account, err := required(p, "project list", "account", "ID")
	if err != nil {
		return nil, err
	}
	resp, err := c.ListProjects(ctx, &accountingv1.ListProjectsRequest{AccountId: account})
	if err != nil {
		return nil, err
	}
	out := ProjectList{Projects: []Project{}}
	for _, pr := range resp.GetProjects() {
		out.Projects = append(out.Projects, projectJSON(pr))
	}
	return out, nil
}

func projectUpdate(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	for _, pair := range [][2]string{{"daily-limit", "no-daily-limit"}, {"monthly-limit", "no-monthly-limit"},
		{"limit", "no-limit"}, {"rpm", "no-rpm"}, {"tpm", "no-tpm"}, {"models", "all-models"}} {
		if err := exclusive(p, pair[0], pair[1]); err != nil {
			return nil, err
		}
	}
	req := &accountingv1.UpdateProjectRequest{ProjectId: p.args[0]}
	if p.has("name") {
		name := p.flags["name"]
		req.Name = &name
	}
	for _, lim := range []struct {
		flag string
		dst  **accountingv1.LimitUpdate
	}{{"daily-limit", &req.DailyLimit}, {"monthly-limit", &req.MonthlyLimit}, {"limit", &req.Limit}} {
		v, err := parseLimit(p, lim.flag)
		if err != nil {
			return nil, err
		}
		if v != nil || p.flags["no-"+lim.flag] == "true" {
			*lim.dst = &accountingv1.LimitUpdate{Micros: v}
		}
	}
	var err error
	if req.Rpm, req.Tpm, err = rateUpdates(p); err != nil {
		return nil, err
	}
	switch {
	case p.has("models"):
		models, err := parseModels(p.flags["models"])
		if err != nil {
			return nil, err
		}
		req.Models = &accountingv1.ModelList{Models: models}
	case p.flags["all-models"] == "true":
		req.Models = &accountingv1.ModelList{}
	}
	resp, err := c.UpdateProject(ctx, req)
	if err != nil {
		return nil, err
	}
	return projectJSON(resp.GetProject()), nil
}

// rateUpdates reads --rpm N | --no-rpm and --tpm N | --no-tpm (nil: unchanged).
func rateUpdates(p parsed) (rpm, tpm *accountingv1.RateUpdate, err error) {
	for _, f := range []struct {
		flag string
		dst  **accountingv1.RateUpdate
	}{{"rpm", &rpm}, {"tpm", &tpm}} {
		if err := exclusive(p, f.flag, "no-"+f.flag); err != nil {
			return nil, nil, err
		}
		v, err := parseRate(p, f.flag)
		if err != nil {
			return nil, nil, err
		}
		if v != nil || p.flags["no-"+f.flag] == "true" {
			*f.dst = &accountingv1.RateUpdate{Value: v}
		}
	}
	return rpm, tpm, nil
}

func projectDelete(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	resp, err := c.DeleteProject(ctx, &accountingv1.DeleteProjectRequest{ProjectId: p.args[0]})
	if err != nil {
		return nil, err
	}
	return projectJSON(resp.GetProject()), nil
}

// keyPlacementCreate sets key create's --project, --rpm and --tpm.
func keyPlacementCreate(p parsed, req *accountingv1.CreateKeyRequest) (err error) {
	req.ProjectId = strings.TrimSpace(p.flags["project"])
	if p.has("project") && req.ProjectId == "" {
		return usagef("--project needs a project ID")
	}
	if req.Rpm, err = parseRate(p, "rpm"); err != nil {
		return err
	}
	req.Tpm, err = parseRate(p, "tpm")
	return err
}

// keyPlacementUpdate sets key update's --project PID | --no-project, --rpm N | --no-rpm
// and --tpm N | --no-tpm.
func keyPlacementUpdate(p parsed, req *accountingv1.UpdateKeyRequest) (err error) {
	if err := exclusive(p, "project", "no-project"); err != nil {
		return err
	}
	switch {
	case p.has("project"):
		id := strings.TrimSpace(p.flags["project"])
		if id == "" {
			return usagef("--project needs a project ID (--no-project takes the key out of any)")
		}
		req.ProjectId = &id
	case p.flags["no-project"] == "true":
		none := ""
		req.ProjectId = &none
	}
	req.Rpm, req.Tpm, err = rateUpdates(p)
	return err
}
