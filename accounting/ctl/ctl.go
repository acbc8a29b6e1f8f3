// Package ctl is gatewayctl: the console's operations on accounts and keys, as a
// command line over the accounting AdminService.
//
// Every command prints exactly one JSON object on stdout on success and nothing on
// stdout on failure, where a one-line message goes to stderr and the exit code is 2
// for usage errors (with a second line pointing at --help) and 1 for everything else.
// --help, -h and help print the usage on stdout and exit 0. Amounts are decimal
// credits both ways, printed as exact JSON numbers beside their integer "_micros"
// twins.
//
// The package talks only to the gRPC API (through accounting/client, with authn's
// token loading); it never sees the store. From the local stack it reads only what
// internal/runfiles names.
package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/authn"
	"github.com/llmgw/gateway/accounting/client"
	"github.com/llmgw/gateway/accounting/contract"
	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/internal/runfiles"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// Defaults and environment variables.
const (
	DefaultAccountingAddr = "127.0.0.1:50052"
	EnvAccountingAddr     = "GATEWAY_ACCOUNTING_ADDR"
	EnvAdminToken         = authn.EnvAdminToken
	// DefaultAdminTokenFile is where the local stack writes the admin token, relative
	// to the working directory (the repository root).
	DefaultAdminTokenFile = runfiles.Dir + "/" + runfiles.AdminTokenFile
	// callTimeout bounds each command's call to accounting.
	callTimeout = 15 * time.Second
)

const usageText = `usage: gatewayctl [--accounting-addr HOST:PORT] [--admin-token-file PATH] COMMAND
       gatewayctl help | --help | -h

  account create [--tier NAME] [--label L]
  account show ID
  account update ID [--label L] [--low-balance CREDITS | --no-low-balance]
                                          (--label "": no label; --low-balance: the
                                           balance.low alert's threshold)
  account topup ID --amount CREDITS
  account suspend ID | unsuspend ID
  key create --account ID [--name N] [--models m1,m2] [--daily-limit CREDITS]
             [--monthly-limit CREDITS] [--expires RFC3339] [--admin]
             [--project PID] [--rpm N] [--tpm N]
  key show KEYID | disable KEYID | enable KEYID | revoke KEYID
  account list [--label TEXT] [--limit N] [--after ID]
                                          (newest first; --label: those whose label contains
                                           TEXT, ignoring case; --after: the next_after printed)
  key list --account ID
  key update KEYID [--name N] [--models m1,m2 | --all-models]
             [--daily-limit CREDITS | --no-daily-limit]
             [--monthly-limit CREDITS | --no-monthly-limit]
             [--expires RFC3339 | --no-expiry]
             [--project PID | --no-project] [--rpm N | --no-rpm] [--tpm N | --no-tpm]
  project create --account ID --name N [--parent PID] [--daily-limit CREDITS]
             [--monthly-limit CREDITS] [--limit CREDITS] [--rpm N] [--tpm N] [--models m1,m2]
  project show PID | delete PID   (delete: refused while it has keys or child projects)
  project list --account ID
  project update PID [--name N] [--daily-limit CREDITS | --no-daily-limit]
             [--monthly-limit CREDITS | --no-monthly-limit] [--limit CREDITS | --no-limit]
             [--rpm N | --no-rpm] [--tpm N | --no-tpm] [--models m1,m2 | --all-models]
  usage --account ID [--key KEYID] [--project PID] [--from YYYY-MM-DD] [--to YYYY-MM-DD]
             [--by model|key|day|channel|project]
  ledger --account ID [--limit N] [--before ENTRY_ID]
  reconcile --from YYYY-MM-DD --to YYYY-MM-DD
  tier list
  tier set NAME --rpm-before N --rpm-after N --in-flight N --in-flight-high-cost N
  webhook create --account ID --url URL [--events e1,e2] [--allow-private]
                                          (the secret is printed once; default events: all)
  webhook list --account ID
  webhook delete WID | test WID
  webhook deliveries WID [--limit N]
  member add --email E --role admin|operator|billing|viewer|member [--account ID] [--project PID]
                                          (--project alone is enough: the project names its account)
  member list [--account ID]
  member remove MID
  audit list [--account ID] [--actor EMAIL] [--limit N] [--before AID]
  audit export [--account ID] [--actor EMAIL] [--before AID]
                                          (every entry, newest first, one JSON object a line)

The admin token comes from --admin-token-file, else $GATEWAY_ADMIN_TOKEN, else
.run/admin-token. The address defaults to $GATEWAY_ACCOUNTING_ADDR, else the one make
run wrote to .run/accounting-addr, else 127.0.0.1:50052 (both files relative to the
working directory: run from the repository root).
Every command prints one JSON object on stdout; audit export prints one per line.
`

// Main runs gatewayctl with os.Stdout and the process environment.
func Main(ctx context.Context, args []string, stderr io.Writer) int {
	return Run(ctx, args, os.Stdout, stderr, os.Getenv)
}

// usageError is a mistake on the command line (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return usageError{fmt.Sprintf(format, a...)} }

// command is one gatewayctl operation.
type command struct {
	flags map[string]flagKind
	// nargs is the number of positional arguments after the command words.
	nargs int
	// entity names what a NotFound refers to.
	entity string
	run    func(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error)
	// stream, instead of run, writes its output itself (JSON lines), each of its
	// calls within callTimeout.
	stream func(ctx context.Context, c accountingv1.AdminServiceClient, p parsed, w io.Writer) error
}

var globalFlags = map[string]flagKind{"accounting-addr": stringFlag, "admin-token-file": stringFlag, "help": boolFlag, "h": boolFlag}

var commands = map[string]command{
	"account create": {flags: map[string]flagKind{"tier": stringFlag, "label": stringFlag}, entity: "account", run: accountCreate},
	"account update": {flags: map[string]flagKind{"label": stringFlag, "low-balance": stringFlag, "no-low-balance": boolFlag},
		nargs: 1, entity: "account", run: accountUpdate},
	"account show":      {nargs: 1, entity: "account", run: accountShow},
	"account topup":     {flags: map[string]flagKind{"amount": stringFlag}, nargs: 1, entity: "account", run: accountTopUp},
	"account suspend":   {nargs: 1, entity: "account", run: accountSuspend(true)},
	"account unsuspend": {nargs: 1, entity: "account", run: accountSuspend(false)},
	"key create": {flags: with(keyPlacementFlags, map[string]flagKind{
		"account": stringFlag, "name": stringFlag, "models": stringFlag, "daily-limit": stringFlag,
		"monthly-limit": stringFlag, "expires": stringFlag, "admin": boolFlag,
	}), entity: "account", run: keyCreate},
	"key show":     {nargs: 1, entity: "key", run: keyShow},
	"key disable":  {nargs: 1, entity: "key", run: keyDisable(true)},
	"key enable":   {nargs: 1, entity: "key", run: keyDisable(false)},
	"key revoke":   {nargs: 1, entity: "key", run: keyRevoke},
	"account list": {flags: map[string]flagKind{"limit": stringFlag, "after": stringFlag, "label": stringFlag}, entity: "account", run: accountList},
	"key list":     {flags: map[string]flagKind{"account": stringFlag}, entity: "account", run: keyList},
	"key update": {flags: with(keyPlacementFlags, map[string]flagKind{
		"name": stringFlag, "models": stringFlag, "all-models": boolFlag,
		"daily-limit": stringFlag, "no-daily-limit": boolFlag, "monthly-limit": stringFlag,
		"no-monthly-limit": boolFlag, "expires": stringFlag, "no-expiry": boolFlag,
		"no-project": boolFlag, "no-rpm": boolFlag, "no-tpm": boolFlag,
	}), nargs: 1, entity: "key", run: keyUpdate},
	"usage": {flags: map[string]flagKind{
		"account": stringFlag, "key": stringFlag, "project": stringFlag, "from": stringFlag, "to": stringFlag,
		"by": stringFlag,
	}, entity: "account, key or project", run: usage},
	"ledger":    {flags: map[string]flagKind{"account": stringFlag, "limit": stringFlag, "before": stringFlag}, entity: "account", run: ledgerList},
	"reconcile": {flags: map[string]flagKind{"from": stringFlag, "to": stringFlag}, entity: "range", run: reconcile},
	"tier list": {entity: "tier", run: tierList},
	"webhook create": {flags: map[string]flagKind{"account": stringFlag, "url": stringFlag, "events": stringFlag,
		"allow-private": boolFlag}, entity: "account", run: webhookCreate},
	"webhook list":       {flags: map[string]flagKind{"account": stringFlag}, entity: "account", run: webhookList},
	"webhook delete":     {nargs: 1, entity: "webhook", run: webhookDelete},
	"webhook test":       {nargs: 1, entity: "webhook", run: webhookTest},
	"webhook deliveries": {flags: map[string]flagKind{"limit": stringFlag}, nargs: 1, entity: "webhook", run: webhookDeliveries},
	"tier set": {flags: map[string]flagKind{
		"rpm-before": stringFlag, "rpm-after": stringFlag, "in-flight": stringFlag, "in-flight-high-cost": stringFlag,
	}, nargs: 1, entity: "tier", run: tierSet},
}

func init() {
	for _, set := range []map[string]command{projectCommands, memberCommands, auditCommands} {
		for name, c := range set {
			commands[name] = c
		}
	}
}

// Run executes one gatewayctl command line (without the program name).
func Run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "gatewayctl: %v\n", err)
		if code == 2 {
			fmt.Fprint(stderr, "run gatewayctl --help for usage\n")
		}
		return code
	}
	cmd, p, err := parseCommandLine(args)
	if errors.Is(err, errHelp) {
		if _, err := fmt.Fprint(stdout, usageText); err != nil {
			return fail(1, err)
		}
		return 0
	}
	if err != nil {
		return fail(2, err)
	}
	addr, err := accountingAddr(p.flags["accounting-addr"], getenv)
	if err != nil {
		return fail(1, err)
	}
	token, err := adminToken(p.flags["admin-token-file"], getenv)
	if err != nil {
		return fail(1, err)
	}
	conn, err := client.Dial(ctx, addr, token)
	if err != nil {
		return fail(1, err)
	}
	defer conn.Close()
	// The audit log records changes made with gatewayctl as such.
	ctx = metadata.AppendToOutgoingContext(ctx, client.ViaMetadata, "gatewayctl")
	failed := func(err error) int {
		var ue usageError
		if errors.As(err, &ue) {
			return fail(2, err)
		}
		return fail(1, describe(err, cmd.entity, addr))
	}
	if cmd.stream != nil {
		if err := cmd.stream(ctx, accountingv1.NewAdminServiceClient(conn), p, stdout); err != nil {
			return failed(err)
		}
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	out, err := cmd.run(ctx, accountingv1.NewAdminServiceClient(conn), p)
	if err != nil {
		return failed(err)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fail(1, err)
	}
	if _, err := fmt.Fprintf(stdout, "%s\n", b); err != nil {
		return fail(1, err)
	}
	return 0
}

var errHelp = errors.New("help requested")

// parseCommandLine finds the command words and parses every flag (global and the
// command's) wherever it appears.
func parseCommandLine(args []string) (command, parsed, error) {
	// First pass with every known flag, to find the command words among positionals.
	all := map[string]flagKind{}
	for k, v := range globalFlags {
		all[k] = v
	}
	for _, c := range commands {
		for k, v := range c.flags {
			all[k] = v
		}
	}
	p, err := parseArgs(args, all)
	if err != nil {
		return command{}, parsed{}, usageError{err.Error()}
	}
	if p.has("help") || p.has("h") || (len(p.args) > 0 && p.args[0] == "help") {
		return command{}, parsed{}, errHelp
	}
	if len(p.args) == 0 {
		return command{}, parsed{}, usagef("missing command")
	}
	// A command is one word ("usage") or two ("key show").
	words := 1
	name := p.args[0]
	cmd, ok := commands[name]
	if !ok {
		subs := subcommands(p.args[0])
		switch {
		case len(subs) == 0:
			return command{}, parsed{}, usagef("unknown command %q", strings.Join(p.args[:min(2, len(p.args))], " "))
		case len(p.args) < 2:
			return command{}, parsed{}, usagef("%s needs a subcommand: %s", p.args[0], orList(subs))
		}
		words, name = 2, p.args[0]+" "+p.args[1]
		if cmd, ok = commands[name]; !ok {
			return command{}, parsed{}, usagef("unknown command %q", name)
		}
	}
	// Second pass with only this command's flags, so that a flag of another command
	// is refused.
	spec := map[string]flagKind{}
	for k, v := range globalFlags {
		spec[k] = v
	}
	for k, v := range cmd.flags {
		spec[k] = v
	}
	if p, err = parseArgs(args, spec); err != nil {
		return command{}, parsed{}, usageError{err.Error() + " for " + name}
	}
	p.args = p.args[words:]
	if len(p.args) != cmd.nargs {
		if cmd.nargs == 0 {
			return command{}, parsed{}, usagef("%s takes no arguments, got %q", name, p.args)
		}
		return command{}, parsed{}, usagef("%s needs exactly one ID, got %d arguments", name, len(p.args))
	}
	for _, a := range p.args {
		if strings.TrimSpace(a) == "" {
			return command{}, parsed{}, usagef("%s: empty ID", name)
		}
	}
	return cmd, p, nil
}

// subcommands lists, sorted, the second words of the commands whose first word is
// group ("account": create, list, …); none when group is no command's first word.
func subcommands(group string) []string {
	var subs []string
	for name := range commands {
		if g, sub, ok := strings.Cut(name, " "); ok && g == group {
			subs = append(subs, sub)
		}
	}
	slices.Sort(subs)
	return subs
}

// orList joins words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// accountingAddr resolves accounting's address: the flag, else the environment, else
// the local stack's file (so that gatewayctl follows a stack moved with
// ACCOUNTING_ADDR), else the default.
func accountingAddr(flag string, getenv func(string) string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := strings.TrimSpace(getenv(EnvAccountingAddr)); env != "" {
		return env, nil
	}
	addr, err := runfiles.Read(runfiles.AccountingAddrFile)
	if err != nil {
		return "", fmt.Errorf("accounting address: %w", err)
	}
	if addr == "" {
		addr = DefaultAccountingAddr
	}
	return addr, nil
}

// adminToken resolves the admin token: the flag's file, else the environment, else
// the local stack's file.
func adminToken(file string, getenv func(string) string) (string, error) {
	if file == "" && strings.TrimSpace(getenv(EnvAdminToken)) == "" {
		if _, err := os.Stat(DefaultAdminTokenFile); err != nil {
			wd, _ := os.Getwd()
			return "", fmt.Errorf("no admin token: set %s, pass --admin-token-file, or run from the repository root while make run is up (no %s)",
				EnvAdminToken, filepath.Join(wd, DefaultAdminTokenFile))
		}
		file = DefaultAdminTokenFile
	}
	tok, err := authn.LoadToken(file, EnvAdminToken, getenv)
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	return tok, nil
}

// reasonText is how each refusal reads on the console.
var reasonText = map[ledger.Reason]string{
	ledger.ReasonInvalidAPIKey:            "invalid API key",
	ledger.ReasonAccountSuspended:         "account suspended",
	ledger.ReasonInsufficientCredits:      "insufficient credits",
	ledger.ReasonKeyLimitReached:          "key limit reached",
	ledger.ReasonConcurrencyLimitExceeded: "concurrency limit exceeded",
	ledger.ReasonRateLimitExceeded:        "rate limit exceeded",
	ledger.ReasonReservationSettled:       "reservation already settled",
	ledger.ReasonAlreadyExists:            "already exists",
	ledger.ReasonModelNotAllowed:          "model not allowed",
	ledger.ReasonInUse:                    "in use",
}

// describe turns a failed call into the one line the operator reads.
func describe(err error, entity, addr string) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	var r *ledger.Refusal
	switch domain := contract.FromStatus(err); {
	case errors.Is(domain, ledger.ErrNotFound):
		return fmt.Errorf("%s not found", entity)
	case errors.As(domain, &r) && r.Reason == ledger.ReasonInvalidArgument:
		return fmt.Errorf("invalid argument: %s", refusalDetail(st.Message(), r))
	case r != nil && reasonText[r.Reason] != "":
		if d := refusalDetail(st.Message(), r); d != "" {
			return fmt.Errorf("%s: %s", reasonText[r.Reason], d)
		}
		return errors.New(reasonText[r.Reason])
	}
	switch st.Code() {
	case codes.Unauthenticated:
		return fmt.Errorf("accounting at %s refused the admin token (check %s or --admin-token-file)", addr, EnvAdminToken)
	case codes.Unavailable:
		return fmt.Errorf("accounting unavailable at %s: %s", addr, st.Message())
	case codes.DeadlineExceeded:
		return fmt.Errorf("accounting at %s did not answer in %s", addr, callTimeout)
	}
	return fmt.Errorf("accounting error (%s): %s", st.Code(), st.Message())
}

// refusalDetail is what a refusal's status message says beyond its reason: the
// message is the refusal's own text ("refused: REASON (LIMIT): DETAIL", see
// ledger.Refusal), whose reason the operator reads once, in words, from describe.
func refusalDetail(msg string, r *ledger.Refusal) string {
	head := (&ledger.Refusal{Reason: r.Reason, Limit: r.Limit}).Error()
	if msg == head {
		return ""
	}
	if d, ok := strings.CutPrefix(msg, head+": "); ok {
		return d
	}
	return msg
}

func accountCreate(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	resp, err := c.CreateAccount(ctx, &accountingv1.CreateAccountRequest{Tier: p.flags["tier"], Label: p.flags["label"]})
	if err != nil {
		return nil, err
	}
	return accountJSON(resp.GetAccount()), nil
}

func accountShow(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	resp, err := c.GetAccount(ctx, &accountingv1.GetAccountRequest{AccountId: p.args[0]})
	if err != nil {
		return nil, err
	}
	return accountJSON(resp.GetAccount()), nil
}

func accountTopUp(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	if !p.has("amount") {
		return nil, usagef("account topup needs --amount CREDITS")
	}
	amount, err := ledger.ParseCredits(p.flags["amount"])
	if err != nil {
		return nil, usagef("--amount: %v", err)
	}
	if amount <= 0 {
		return nil, usagef("--amount must be positive")
	}
	resp, err := c.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: p.args[0], AmountMicros: amount})
	if err != nil {
		return nil, err
	}
	return accountJSON(resp.GetAccount()), nil
}

func accountSuspend(suspended bool) func(context.Context, accountingv1.AdminServiceClient, parsed) (any, error) {
	return func(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
		resp, err := c.SetAccountSuspended(ctx, &accountingv1.SetAccountSuspendedRequest{AccountId: p.args[0], Suspended: suspended})
		if err != nil {
			return nil, err
		}
		return accountJSON(resp.GetAccount()), nil
	}
}

func keyCreate(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	req := &accountingv1.CreateKeyRequest{
		AccountId:    strings.TrimSpace(p.flags["account"]),
		Name:         p.flags["name"],
		AdminCreated: p.flags["admin"] == "true",
	}
	if req.AccountId == "" {
		return nil, usagef("key create needs --account ID")
	}
	if p.has("models") {
		models, err := parseModels(p.flags["models"])
		if err != nil {
			return nil, err
		}
		req.AllowedModels = models
	}
	var err error
	if req.DailyLimitMicros, err = parseLimit(p, "daily-limit"); err != nil {
		return nil, err
	}
	if req.MonthlyLimitMicros, err = parseLimit(p, "monthly-limit"); err != nil {
		return nil, err
	}
	if p.has("expires") {
		if req.ExpiresAt, err = parseExpires(p.flags["expires"]); err != nil {
			return nil, err
		}
	}
	if err := keyPlacementCreate(p, req); err != nil {
		return nil, err
	}
	resp, err := c.CreateKey(ctx, req)
	if err != nil {
		return nil, err
	}
	k := keyJSON(resp.GetKey())
	k.Secret = resp.GetSecret()
	return k, nil
}

func keyShow(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	resp, err := c.GetKey(ctx, &accountingv1.GetKeyRequest{KeyId: p.args[0]})
	if err != nil {
		return nil, err
	}
	return keyJSON(resp.GetKey()), nil
}

func keyDisable(disabled bool) func(context.Context, accountingv1.AdminServiceClient, parsed) (any, error) {
	return func(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
		resp, err := c.SetKeyDisabled(ctx, &accountingv1.SetKeyDisabledRequest{KeyId: p.args[0], Disabled: disabled})
		if err != nil {
			return nil, err
		}
		return keyJSON(resp.GetKey()), nil
	}
}

func keyRevoke(ctx context.Context, c accountingv1.AdminServiceClient, p parsed) (any, error) {
	resp, err := c.RevokeKey(ctx, &accountingv1.RevokeKeyRequest{KeyId: p.args[0]})
	if err != nil {
		return nil, err
	}
	return keyJSON(resp.GetKey()), nil
}
