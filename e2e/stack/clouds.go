package stack

import (
	"os"
	"path/filepath"

	"github.com/llmgw/gateway/e2e/mock"
	"github.com/llmgw/gateway/internal/cloudauth"
	"github.com/llmgw/gateway/internal/demoenv"
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

// cloudSecrets are the demo service accounts' key files (JSON) extproc gets.
type cloudSecrets struct {
	serviceAccount, refusedServiceAccount []byte
}

// makeCloudSecrets makes the demo service accounts: one whose grants the mock's token
// endpoint accepts, one whose token_uri refuses every grant (demo-multicloud's failing
// Vertex channel). It returns the public key file for the mock.
func (s *Stack) makeCloudSecrets() (pubKeyFile string, err error) {
	base := "http://" + s.MockAddr
	acct, err := cloudauth.NewServiceAccount(demoenv.ServiceAccountEmail, base+mock.TokenPath)
	if err != nil {
		return "", err
	}
	refused, err := cloudauth.NewServiceAccount(demoenv.ServiceAccountEmail, base+mock.RefusingTokenPath)
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
	s.clouds = cloudSecrets{acct.JSON, refused.JSON}
	return filepath.Join(s.RunDir, serviceAccountPublicKeyFile), nil
}
