package demoenv

import (
	"maps"
	"slices"
	"sync"

	"github.com/llmgw/gateway/internal/cloudauth"
)

// The demo AWS access key the mock Bedrock accepts, and its region. WrongSecret is
// demo-multicloud's failing Bedrock channel: the right key id with another secret, a
// signature the mock refuses.
const (
	AWSAccessKeyID          = "AKIAMOCKDEMO0000000"
	AWSSecretAccessKey      = "mock-demo-aws-secret-access-key"
	AWSWrongSecretAccessKey = "not-" + AWSSecretAccessKey
	AWSRegion               = "us-east-1"
)

// ServiceAccountEmail is the demo service accounts' client_email.
const ServiceAccountEmail = "gateway-demo@demo-project.iam.gserviceaccount.com"

// The variables holding the demo service accounts' key files (JSON): one whose grants
// the mock's token endpoint accepts, one whose token_uri refuses every grant.
const (
	ServiceAccountVar        = "DEMO_GCP_SERVICE_ACCOUNT"
	RefusedServiceAccountVar = "DEMO_GCP_REFUSED_SERVICE_ACCOUNT"
)

// keys are the demo catalog's other credential variables. The mock providers accept
// any sk-mock-* key; sk-mock-exhausted plays an account out of funds.
var keys = map[string]string{
	"DEMO_OPENAI_KEY":                  "sk-mock-openai",
	"DEMO_ANTHROPIC_KEY":               "sk-mock-anthropic",
	"DEMO_EXHAUSTED_KEY":               "sk-mock-exhausted",
	"DEMO_VIDEO_KEY":                   "sk-mock-video",
	"DEMO_GEMINI_KEY":                  "sk-mock-gemini",
	"DEMO_AZURE_KEY":                   "sk-mock-azure",
	"DEMO_AWS_ACCESS_KEY_ID":           AWSAccessKeyID,
	"DEMO_AWS_SECRET_ACCESS_KEY":       AWSSecretAccessKey,
	"DEMO_AWS_WRONG_SECRET_ACCESS_KEY": AWSWrongSecretAccessKey,
}

// Vars are the demo catalog's credential variables, sorted.
func Vars() []string {
	v := append(slices.Collect(maps.Keys(keys)), ServiceAccountVar, RefusedServiceAccountVar)
	slices.Sort(v)
	return v
}

// Env is the demo catalog's credentials as NAME=value pairs, sorted, with the key files
// of the service account and the refused one.
func Env(serviceAccount, refusedServiceAccount []byte) []string {
	m := maps.Clone(keys)
	m[ServiceAccountVar] = string(serviceAccount)
	m[RefusedServiceAccountVar] = string(refusedServiceAccount)
	out := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return out
}

// Lookup resolves the demo catalog's credential variables for a test that loads the
// catalog without the mock providers: both service accounts are made once per process
// and their token_uri is a loopback port where nothing listens (no token is minted
// while loading).
func Lookup(name string) (string, bool) {
	if v, ok := keys[name]; ok {
		return v, true
	}
	accounts := testAccounts()
	v, ok := accounts[name]
	return v, ok
}

var testAccounts = sync.OnceValue(func() map[string]string {
	out := map[string]string{}
	for _, name := range []string{ServiceAccountVar, RefusedServiceAccountVar} {
		a, err := cloudauth.NewServiceAccount(ServiceAccountEmail, "http://127.0.0.1:1/token")
		if err != nil {
			panic("demoenv: " + err.Error()) // only crypto/rand failing
		}
		out[name] = string(a.JSON)
	}
	return out
})
