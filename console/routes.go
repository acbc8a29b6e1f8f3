package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/llmgw/gateway/accounting/ledger"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

func (s *Server) routes() {
	s.mux.HandleFunc("GET /static/console.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css")
		b, _ := webFS.ReadFile("web/console.css")
		_, _ = w.Write(b)
	})
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/accounts", http.StatusSeeOther) })
	s.mux.HandleFunc("GET /signin", func(w http.ResponseWriter, r *http.Request) { s.signInPage(w, 200, "") })
	s.mux.HandleFunc("POST /signin", s.signIn)
	if s.sso != nil {
		s.mux.HandleFunc("GET /auth/signin", s.ssoSignIn)
		s.mux.HandleFunc("GET /auth/callback", s.ssoCallback)
	}
	s.mux.HandleFunc("POST /signout", s.authed(func(w http.ResponseWriter, r *http.Request, se *session) {
		s.sessions.end(w, r, se)
		s.audit(r, se, "sign out", "", nil)
		render(w, 200, "signedout", page{Title: "Signed out", Data: s.sso != nil})
	}))
	s.mux.HandleFunc("GET /accounts", s.authed(s.accounts))
	s.mux.HandleFunc("POST /accounts", s.authed(s.may("CreateAccount", "", s.createAccount)))
	s.mux.HandleFunc("GET /accounts/{id}", s.authed(s.account))
	s.mux.HandleFunc("POST /accounts/{id}/topup", s.authed(s.may("TopUp", "account", s.topUp)))
	s.mux.HandleFunc("POST /accounts/{id}/suspend", s.authed(s.may("SetAccountSuspended", "account", s.suspend)))
	s.mux.HandleFunc("POST /accounts/{id}/update", s.authed(s.may("UpdateAccount", "account", s.updateAccount)))
	s.mux.HandleFunc("POST /accounts/{id}/keys", s.authed(s.may("CreateKey", "account+project", s.createKey)))
	s.mux.HandleFunc("POST /keys/{id}/update", s.authed(s.may("UpdateKey", "key", s.updateKey)))
	s.mux.HandleFunc("POST /keys/{id}/{action}", s.authed(s.may("", "key", s.keyAction)))
	s.mux.HandleFunc("GET /accounts/{id}/usage", s.authed(s.usage))
	s.mux.HandleFunc("GET /accounts/{id}/webhooks", s.authed(s.webhooksPage))
	s.mux.HandleFunc("POST /accounts/{id}/webhooks/{webhook}/test", s.authed(s.may("TestWebhook", "account", s.testWebhook)))
	s.mux.HandleFunc("GET /accounts/{id}/statement", s.authed(s.statement))
	s.mux.HandleFunc("GET /tiers", s.authed(s.tiers))
	s.mux.HandleFunc("GET /audit", s.authed(s.auditLog))
	s.mux.HandleFunc("GET /audit.jsonl", s.authed(s.auditExport))
	s.mux.HandleFunc("POST /tiers", s.authed(s.may("SetTier", "", s.setTier)))
}

// authed wraps a page that needs a session (and, for a POST, its CSRF token).
func (s *Server) authed(h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		se, ok := s.sessions.get(r)
		if !ok {
			http.Redirect(w, r, s.signInPath(), http.StatusSeeOther)
			return
		}
		if r.Method == http.MethodPost && !se.validCSRF(r) {
			render(w, http.StatusForbidden, "error", page{Title: "Refused", Error: "The form is stale or did not come from this console: reload the page and try again."})
			return
		}
		if se.person != "" && !s.hasMembership(w, r, se) {
			return
		}
		h(w, r, se)
	}
}

// may wraps a form's handler: for a person, accounting decides the AdminService
// method the form calls (CheckAccess) on the path's {id} (an account or a key; for
// "account+project" the account and the form's project, where a new key goes)
// before anything else about the form is read, so that a role refused it gets 403
// first. An empty method is the key action's, named by the path's {action}.
func (s *Server) may(method, idKind string, h func(http.ResponseWriter, *http.Request, *session)) func(http.ResponseWriter, *http.Request, *session) {
	return func(w http.ResponseWriter, r *http.Request, se *session) {
		if se.person == "" {
			h(w, r, se)
			return
		}
		req := &accountingv1.CheckAccessRequest{Method: method}
		if method == "" {
			switch r.PathValue("action") {
			case "disable":
				req.Method, req.Disabled = "SetKeyDisabled", true
			case "enable":
				req.Method = "SetKeyDisabled"
			default:
				req.Method = "RevokeKey"
			}
		}
		switch idKind {
		case "account":
			req.AccountId = r.PathValue("id")
		case "account+project":
			req.AccountId, req.ProjectId = r.PathValue("id"), r.PostFormValue("project")
		case "key":
			req.KeyId = r.PathValue("id")
		}
		_, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.CheckAccessResponse, error) {
			return s.admin.CheckAccess(ctx, req, o)
		})
		switch status.Code(err) {
		case codes.OK:
			h(w, r, se)
		case codes.PermissionDenied:
			refused(w, err)
		case codes.NotFound:
			render(w, http.StatusNotFound, "error", page{Title: "Not found", Error: plainWords(err)})
		default:
			render(w, httpStatus(err), "error", page{Title: "Refused", Error: plainWords(err)})
		}
	}
}

// hasMembership asks accounting whether the person has any membership (every role may
// list the tiers; a person with none is refused everything). Without one the session
// ends and the person sees a page that says so, and nothing else.
func (s *Server) hasMembership(w http.ResponseWriter, r *http.Request, se *session) bool {
	_, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.ListTiersResponse, error) {
		return s.admin.ListTiers(ctx, &accountingv1.ListTiersRequest{}, o)
	})
	if status.Code(err) != codes.PermissionDenied {
		return true // allowed, or an outage the page itself reports
	}
	s.sessions.end(w, r, se)
	render(w, http.StatusForbidden, "nomembership", page{Title: "No membership", Person: se.person})
	return false
}

// signInPath is where a visit without a session goes: the provider's sign-in when
// single sign-on is configured, else the admin-token sign-in.
func (s *Server) signInPath() string {
	if s.sso != nil {
		return "/auth/signin"
	}
	return "/signin"
}

// back redirects to a page with a note or an error (plain words, no secret).
func back(w http.ResponseWriter, r *http.Request, path string, err error, note string) {
	if status.Code(err) == codes.PermissionDenied {
		refused(w, err)
		return
	}
	q := url.Values{}
	if err != nil {
		q.Set("error", plainWords(err))
	} else if note != "" {
		q.Set("note", note)
	}
	http.Redirect(w, r, path+"?"+q.Encode(), http.StatusSeeOther)
}

// accountsPage is the account list's data: a page of accounts (those whose label
// contains Label, when set) and the tiers a new account may be in.
type accountsPage struct {
	Accounts  []*accountingv1.Account
	NextAfter string
	Label     string
	Tiers     []string
}

func (s *Server) accounts(w http.ResponseWriter, r *http.Request, se *session) {
	q := r.URL.Query()
	if id := strings.TrimSpace(q.Get("id")); id != "" {
		http.Redirect(w, r, "/accounts/"+url.PathEscape(id), http.StatusSeeOther)
		return
	}
	d := accountsPage{Label: strings.TrimSpace(q.Get("label"))}
	res, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.ListAccountsResponse, error) {
		return s.admin.ListAccounts(ctx, &accountingv1.ListAccountsRequest{Limit: 20, AfterId: q.Get("after"), Label: d.Label}, o)
	})
	d.Accounts, d.NextAfter = res.GetAccounts(), res.GetNextAfterId()
	tiers, errT := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.ListTiersResponse, error) {
		return s.admin.ListTiers(ctx, &accountingv1.ListTiersRequest{}, o)
	})
	for _, t := range tiers.GetTiers() {
		d.Tiers = append(d.Tiers, t.GetName())
	}
	p := page{Title: "Accounts", CSRF: se.csrf, Person: se.person, Error: q.Get("error"), Note: q.Get("note"), Data: d}
	if err = errors.Join(err, errT); err != nil {
		p.Error = plainWords(err)
	}
	render(w, 200, "accounts", p)
}

// formLabel reads an account form's label, or says in an operator's words what is
// wrong with it.
func formLabel(r *http.Request) (string, string) {
	label := strings.TrimSpace(r.PostFormValue("label"))
	if ledger.CheckAccountLabel(label) != nil {
		return "", fmt.Sprintf("Check the label: at most %d characters, on one line.", ledger.MaxAccountLabelChars)
	}
	return label, ""
}

func (s *Server) createAccount(w http.ResponseWriter, r *http.Request, se *session) {
	label, why := formLabel(r)
	if why != "" {
		http.Redirect(w, r, "/accounts?"+url.Values{"error": {why}}.Encode(), http.StatusSeeOther)
		return
	}
	tier := r.PostFormValue("tier")
	res, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.CreateAccountResponse, error) {
		return s.admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{Tier: tier, Label: label}, o)
	})
	s.audit(r, se, "create account", res.GetAccount().GetId(), err, zap.String("tier", tier), zap.String("label", label))
	if err != nil {
		back(w, r, "/accounts", err, "")
		return
	}
	back(w, r, "/accounts/"+url.PathEscape(res.GetAccount().GetId()), nil, "Account created.")
}

// updateAccount saves the account form's settings (its label).
func (s *Server) updateAccount(w http.ResponseWriter, r *http.Request, se *session) {
	id := r.PathValue("id")
	label, why := formLabel(r)
	if why != "" {
		http.Redirect(w, r, "/accounts/"+url.PathEscape(id)+"?"+url.Values{"error": {why}}.Encode(), http.StatusSeeOther)
		return
	}
	_, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.UpdateAccountResponse, error) {
		return s.admin.UpdateAccount(ctx, &accountingv1.UpdateAccountRequest{AccountId: id, Label: &label}, o)
	})
	s.audit(r, se, "update account", id, err, zap.String("label", label))
	back(w, r, "/accounts/"+url.PathEscape(id), err, "Label saved.")
}

// accountPage is the account detail page's data.
type accountPage struct {
	Account *accountingv1.Account
	Keys    []*accountingv1.Key
	// Projects are the account's projects with the ids of their keys.
	Projects []projectRow
	// Secret is a key just created: shown on this one answer, never again.
	Secret string
	// TopUpForm and KeyForm are the one-time tokens of this page's top-up and new-key
	// forms (forms.go).
	TopUpForm, KeyForm string
	// Names are the projects' names by id, each with its ancestors ("research / vision").
	Names map[string]string
	// AccountKeys and AccountUsage say whether the session may create a key outside
	// any project and read the whole account's usage (a project's member may not: its
	// new keys go in its projects, its usage is theirs).
	AccountKeys, AccountUsage bool
}

// withForms issues the page's one-time form tokens.
func (d accountPage) withForms(se *session) accountPage {
	d.TopUpForm, d.KeyForm = se.forms.issue(), se.forms.issue()
	return d
}

// refuseForm sends the operator back to the account page with why.
func refuseForm(w http.ResponseWriter, r *http.Request, account string, why formRefusal) {
	http.Redirect(w, r, "/accounts/"+url.PathEscape(account)+"?"+url.Values{"error": {string(why)}}.Encode(), http.StatusSeeOther)
}

func (s *Server) accountData(r *http.Request, se *session, id string) (accountPage, error) {
	acc, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.GetAccountResponse, error) {
		return s.admin.GetAccount(ctx, &accountingv1.GetAccountRequest{AccountId: id}, o)
	})
	if err != nil {
		return accountPage{}, err
	}
	keys, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.ListKeysResponse, error) {
		return s.admin.ListKeys(ctx, &accountingv1.ListKeysRequest{AccountId: id}, o)
	})
	if err != nil {
		return accountPage{}, err
	}
	projects, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.ListProjectsResponse, error) {
		return s.admin.ListProjects(ctx, &accountingv1.ListProjectsRequest{AccountId: id}, o)
	})
	if err != nil {
		return accountPage{}, err
	}
	d := accountPage{Account: acc.GetAccount(), Keys: keys.GetKeys(), Projects: projectRows(projects.GetProjects(), keys.GetKeys())}
	d.Names = projectNames(projects.GetProjects())
	slices.SortStableFunc(d.Projects, func(a, b projectRow) int { return strings.Compare(d.Names[a.GetId()], d.Names[b.GetId()]) })
	d.AccountKeys = s.allowed(r, se, &accountingv1.CheckAccessRequest{Method: "CreateKey", AccountId: id})
	d.AccountUsage = s.allowed(r, se, &accountingv1.CheckAccessRequest{Method: "GetUsage", AccountId: id})
	return d, nil
}

// projectRow is a project on the account page: its spend against its limits, and the
// keys in it.
type projectRow struct {
	*accountingv1.Project
	KeyIDs []string
}

func projectRows(ps []*accountingv1.Project, keys []*accountingv1.Key) []projectRow {
	rows := make([]projectRow, 0, len(ps))
	for _, p := range ps {
		row := projectRow{Project: p}
		for _, k := range keys {
			if k.GetProjectId() == p.GetId() {
				row.KeyIDs = append(row.KeyIDs, k.GetId())
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func (s *Server) account(w http.ResponseWriter, r *http.Request, se *session) {
	d, err := s.accountData(r, se, r.PathValue("id"))
	if err != nil {
		if status.Code(err) == codes.PermissionDenied {
			refused(w, err)
			return
		}
		render(w, http.StatusNotFound, "error", page{Title: "Account", Error: plainWords(err)})
		return
	}
	render(w, 200, "account", page{Title: "Account " + d.Account.GetId(), CSRF: se.csrf, Person: se.person,
		Error: r.URL.Query().Get("error"), Note: r.URL.Query().Get("note"), Data: d.withForms(se)})
}

func (s *Server) topUp(w http.ResponseWriter, r *http.Request, se *session) {
	id := r.PathValue("id")
	amount, err := ledger.ParseCredits(r.PostFormValue("amount"))
	if err != nil || amount <= 0 {
		http.Redirect(w, r, "/accounts/"+url.PathEscape(id)+"?"+url.Values{"error": {"Enter a positive amount in credits, at most six decimals (for example 10 or 0.25)."}}.Encode(), http.StatusSeeOther)
		return
	}
	// The rendered form, its account and its amount name the top-up: accounting applies
	// one key once, so a retry after an unknown outcome cannot add it twice; the form
	// token makes a second submission of the same form refused, and two forms two
	// top-ups.
	form := r.PostFormValue("form")
	if why := se.forms.begin(form, strconv.FormatInt(amount, 10)); why != "" {
		s.auditRefused(r, se, "top up", id, why)
		refuseForm(w, r, id, why)
		return
	}
	sum := sha256.Sum256([]byte(form + "|" + id + "|" + strconv.FormatInt(amount, 10)))
	_, err = call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.TopUpResponse, error) {
		return s.admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: id, AmountMicros: amount, IdempotencyKey: "console-" + hex.EncodeToString(sum[:16])}, o)
	})
	se.forms.end(form, err == nil)
	s.audit(r, se, "top up", id, err, zap.Int64("amount_micros", amount))
	back(w, r, "/accounts/"+url.PathEscape(id), err, "Topped up "+ledger.FormatCredits6(amount)+" credits.")
}

func (s *Server) suspend(w http.ResponseWriter, r *http.Request, se *session) {
	id := r.PathValue("id")
	on := r.PostFormValue("suspended") == "true"
	_, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.SetAccountSuspendedResponse, error) {
		return s.admin.SetAccountSuspended(ctx, &accountingv1.SetAccountSuspendedRequest{AccountId: id, Suspended: on}, o)
	})
	s.audit(r, se, map[bool]string{true: "suspend", false: "unsuspend"}[on], id, err)
	back(w, r, "/accounts/"+url.PathEscape(id), err, map[bool]string{true: "Account suspended.", false: "Account unsuspended."}[on])
}

// models reads a comma-separated allowlist (empty: every model).
func models(v string) []string {
	var out []string
	for _, m := range strings.Split(v, ",") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// limit reads an optional credit limit.
func limit(v string) (*int64, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	m, err := ledger.ParseCredits(v)
	if err != nil {
		return nil, fmt.Errorf("limit: %w", err)
	}
	return &m, nil
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request, se *session) {
	id := r.PathValue("id")
	req := &accountingv1.CreateKeyRequest{AccountId: id, Name: r.PostFormValue("name"), AllowedModels: models(r.PostFormValue("models")),
		ProjectId: strings.TrimSpace(r.PostFormValue("project"))}
	if err := keyLabels(req.GetName(), req.GetAllowedModels()); err != "" {
		http.Redirect(w, r, "/accounts/"+url.PathEscape(id)+"?"+url.Values{"error": {err}}.Encode(), http.StatusSeeOther)
		return
	}
	var err error
	if req.DailyLimitMicros, err = limit(r.PostFormValue("daily")); err == nil {
		req.MonthlyLimitMicros, err = limit(r.PostFormValue("monthly"))
	}
	if err == nil {
		req.Rpm, req.Tpm, err = rates(r.PostFormValue("rpm"), r.PostFormValue("tpm"))
	}
	if err == nil && r.PostFormValue("expires") != "" {
		var t time.Time
		if t, err = time.Parse("2006-01-02", r.PostFormValue("expires")); err == nil {
			req.ExpiresAt = timestamppb.New(t)
		}
	}
	if err != nil {
		http.Redirect(w, r, "/accounts/"+url.PathEscape(id)+"?"+url.Values{"error": {"Check the limits (credits), the rpm and tpm (whole numbers, at least 1) and the expiry (YYYY-MM-DD)."}}.Encode(), http.StatusSeeOther)
		return
	}
	// A reload of the answer that showed the secret submits this form again: its token
	// makes that refused instead of minting a second live key.
	form := r.PostFormValue("form")
	if why := se.forms.begin(form, ""); why != "" {
		s.auditRefused(r, se, "create key", id, why)
		refuseForm(w, r, id, why)
		return
	}
	res, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.CreateKeyResponse, error) {
		return s.admin.CreateKey(ctx, req, o)
	})
	se.forms.end(form, err == nil)
	s.audit(r, se, "create key", id, err, zap.String("key", res.GetKey().GetId()), zap.String("name", req.GetName()),
		zap.Strings("models", req.GetAllowedModels()))
	if err != nil {
		back(w, r, "/accounts/"+url.PathEscape(id), err, "")
		return
	}
	d, err := s.accountData(r, se, id)
	if err != nil {
		render(w, 200, "error", page{Title: "Key created", Error: plainWords(err)})
		return
	}
	// The secret is rendered on this answer only (not a redirect: it never enters a URL).
	d = d.withForms(se)
	d.Secret = res.GetSecret()
	render(w, 200, "account", page{Title: "Account " + id, CSRF: se.csrf, Person: se.person, Note: "Key created: copy its secret now, it is not shown again.", Data: d})
}

func (s *Server) updateKey(w http.ResponseWriter, r *http.Request, se *session) {
	id := r.PathValue("id")
	req := &accountingv1.UpdateKeyRequest{KeyId: id, AllowedModels: &accountingv1.ModelList{Models: models(r.PostFormValue("models"))}}
	if err := keyLabels("", req.GetAllowedModels().GetModels()); err != "" {
		http.Redirect(w, r, "/accounts/"+url.PathEscape(r.PostFormValue("account"))+"?"+url.Values{"error": {err}}.Encode(), http.StatusSeeOther)
		return
	}
	d, errD := limit(r.PostFormValue("daily"))
	m, errM := limit(r.PostFormValue("monthly"))
	if errD != nil || errM != nil {
		http.Redirect(w, r, "/accounts/"+url.PathEscape(r.PostFormValue("account"))+"?"+url.Values{"error": {"Check the limits: credits, at most six decimals."}}.Encode(), http.StatusSeeOther)
		return
	}
	req.DailyLimit = &accountingv1.LimitUpdate{Micros: d}
	req.MonthlyLimit = &accountingv1.LimitUpdate{Micros: m}
	// The form shows the current expiry: kept as is, changed, or emptied (no expiry).
	req.Expiry = &accountingv1.ExpiryUpdate{}
	if v := strings.TrimSpace(r.PostFormValue("expires")); v != "" {
		t, err := time.Parse("2006-01-02", v)
		if err != nil {
			http.Redirect(w, r, "/accounts/"+url.PathEscape(r.PostFormValue("account"))+"?"+url.Values{"error": {"Check the expiry: YYYY-MM-DD, or empty for none."}}.Encode(), http.StatusSeeOther)
			return
		}
		req.Expiry.ExpiresAt = timestamppb.New(t)
	}
	_, err := call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.UpdateKeyResponse, error) {
		return s.admin.UpdateKey(ctx, req, o)
	})
	s.audit(r, se, "update key", id, err, zap.Strings("models", req.GetAllowedModels().GetModels()), zap.Int64p("daily_limit_micros", d),
		zap.Int64p("monthly_limit_micros", m), zap.Stringp("expires", nonEmpty(r.PostFormValue("expires"))))
	back(w, r, "/accounts/"+url.PathEscape(r.PostFormValue("account")), err, "Key updated: new requests follow it within 3 s.")
}

func (s *Server) keyAction(w http.ResponseWriter, r *http.Request, se *session) {
	id, action := r.PathValue("id"), r.PathValue("action")
	var err error
	switch action {
	case "disable", "enable":
		_, err = call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.SetKeyDisabledResponse, error) {
			return s.admin.SetKeyDisabled(ctx, &accountingv1.SetKeyDisabledRequest{KeyId: id, Disabled: action == "disable"}, o)
		})
	case "revoke":
		_, err = call(r, se, func(ctx context.Context, o grpc.CallOption) (*accountingv1.RevokeKeyResponse, error) {
			return s.admin.RevokeKey(ctx, &accountingv1.RevokeKeyRequest{KeyId: id}, o)
		})
	default:
		http.NotFound(w, r)
		return
	}
	s.audit(r, se, action+" key", id, err)
	back(w, r, "/accounts/"+url.PathEscape(r.PostFormValue("account")), err, "Key "+action+"d.")
}

// keyLabels says, in an operator's words, what is wrong with a key's name or allowlist
// (accounting refuses the same, for every client); empty: nothing.
func keyLabels(name string, models []string) string {
	if err := ledger.CheckKeyName(name); err != nil {
		return fmt.Sprintf("Check the name: at most %d characters.", ledger.MaxKeyNameChars)
	}
	if err := ledger.CheckAllowedModels(models); err != nil {
		return fmt.Sprintf("Check the models: at most %d, each at most %d characters.", ledger.MaxAllowedModels, ledger.MaxModelIDChars)
	}
	return ""
}

// nonEmpty is &v, or nil for "".
func nonEmpty(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}

// httpStatus is the HTTP status of a failed call: 403 refused to the role, 404 not
// found, else 502.
func httpStatus(err error) int {
	switch status.Code(err) {
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.NotFound:
		return http.StatusNotFound
	}
	return http.StatusBadGateway
}

// refused answers a request a person's role may not make: 403, in plain words.
func refused(w http.ResponseWriter, err error) {
	render(w, http.StatusForbidden, "error", page{Title: "Refused", Error: plainWords(err)})
}
