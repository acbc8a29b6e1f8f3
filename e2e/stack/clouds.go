package stack

import (
	"os"
	"path/filepath"

	"github.com/llmgw/gateway/e2e/mock"
	"github.com/llmgw/gateway/internal/cloudauth"
)

// The demo clouds' credentials (shared/design/LOCAL-STACK.md, "Models on every cloud").
// The service account is made anew at every start, so no private key is ever committed:
// its key file goes to the run directory (ServiceAccountFile) and to extproc, its public
// key to the mock providers' token endpoint.
const (
	ServiceAccountFile          = "demo-service-account.json"
	refusedServiceAccountFile   = "demo-service-account-refused.json"
	serviceAccountPublicKeyFile = "demo-service-account.pub.pem"
)

// cloudSecrets are the demo clouds' credentials extproc gets.
type cloudSecrets struct {
	serviceAccount, refusedServiceAccount string // key files' JSON
}

// makeCloudSecrets makes the demo service accounts: one whose grants the mock's token
// endpoint accepts, one whose token_uri refuses every grant (demo-multicloud's failing
// Vertex channel). It returns the public key file for the mock.
func (s *Stack) makeCloudSecrets() (pubKeyFile string, err error) {
	base := "http://" + s.MockAddr
	acct, err := cloudauth.NewServiceAccount(mock.DemoServiceAccountEmail, base+mock.TokenPath)
	if err != nil {
		return "", err
	}
	refused, err := cloudauth.NewServiceAccount(mock.DemoServiceAccountEmail, base+mock.RefusingTokenPath)
	if err != nil {
		return "", err
	}
	pub, err := acct.PublicKeyPEM()
	if err != nil {
		return "", err
	}
	for name, b := range map[string][]byte{ServiceAccountFile: acct.JSON, refusedServiceAccountFile: refused.JSON, serviceAccountPublicKeyFile: pub} {
		if err := os.WriteFile(filepath.Join(s.RunDir, name), b, 0o600); err != nil {
			return "", err
		}
	}
	s.clouds = cloudSecrets{string(acct.JSON), string(refused.JSON)}
	return filepath.Join(s.RunDir, serviceAccountPublicKeyFile), nil
}

// cloudEnv is extproc's share of the demo clouds' credentials: the demo AWS key (and a
// wrong secret for demo-multicloud's failing Bedrock channel) and both service accounts.
func (s *Stack) cloudEnv() []string {
	return []string{
		"DEMO_AWS_ACCESS_KEY_ID=" + mock.DemoAWSAccessKeyID,
		"DEMO_AWS_SECRET_ACCESS_KEY=" + mock.DemoAWSSecretAccessKey,
		"DEMO_AWS_WRONG_SECRET_ACCESS_KEY=not-" + mock.DemoAWSSecretAccessKey,
		"DEMO_GCP_SERVICE_ACCOUNT=" + s.clouds.serviceAccount,
		"DEMO_GCP_REFUSED_SERVICE_ACCOUNT=" + s.clouds.refusedServiceAccount,
		"DEMO_GEMINI_KEY=sk-mock-gemini",
		"DEMO_AZURE_KEY=sk-mock-azure",
	}
}

// cloudSecretVars are the variables cloudEnv sets.
var cloudSecretVars = []string{
	"DEMO_AWS_ACCESS_KEY_ID", "DEMO_AWS_SECRET_ACCESS_KEY", "DEMO_AWS_WRONG_SECRET_ACCESS_KEY",
	"DEMO_GCP_SERVICE_ACCOUNT", "DEMO_GCP_REFUSED_SERVICE_ACCOUNT", "DEMO_GEMINI_KEY", "DEMO_AZURE_KEY",
}
