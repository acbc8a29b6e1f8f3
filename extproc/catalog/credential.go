package catalog

import (
	"slices"
	"strings"

	"github.com/llmgw/gateway/extproc/credential"
	"github.com/llmgw/gateway/extproc/translate"
)

// AWSCredential is a channel's AWS access key (format bedrock): each secret from an
// environment variable (…_env) or a file (…_file).
type AWSCredential struct {
	Region              string `json:"region"`
	AccessKeyIDEnv      string `json:"access_key_id_env,omitempty"`
	AccessKeyIDFile     string `json:"access_key_id_file,omitempty"`
	SecretAccessKeyEnv  string `json:"secret_access_key_env,omitempty"`
	SecretAccessKeyFile string `json:"secret_access_key_file,omitempty"`
	// SessionToken… are optional: temporary (STS) credentials.
	SessionTokenEnv  string `json:"session_token_env,omitempty"`
	SessionTokenFile string `json:"session_token_file,omitempty"`
}

// GCPCredential is a channel's Google service account (formats vertex-*): Project and
// Location also place the Vertex AI path; the key file's JSON comes from
// CredentialsFile (or CredentialsEnv).
type GCPCredential struct {
	Project         string `json:"project"`
	Location        string `json:"location"`
	CredentialsFile string `json:"credentials_file,omitempty"`
	CredentialsEnv  string `json:"credentials_env,omitempty"`
}

// secretSource reads one secret from exactly one of an environment variable and a file.
type secretSource struct {
	lookupEnv func(string) (string, bool)
	readFile  func(string) ([]byte, error)
	where     string
	bad       func(string, ...any)
}

// read is the secret named by envName/fileName (the fields env and file), "" after a
// reported problem or when neither is set and !required.
func (s secretSource) read(name, env, file string, required bool) string {
	switch {
	case env != "" && file != "":
		s.bad("%s: set only one of %s_env and %s_file", s.where, name, name)
	case env != "":
		v, found := s.lookupEnv(env)
		if !found || strings.TrimSpace(v) == "" {
			s.bad("%s: environment variable %s is not set (%s_env)", s.where, env, name)
		}
		return strings.TrimSpace(v)
	case file != "":
		b, err := s.readFile(file)
		if err != nil {
			s.bad("%s: %s_file: %w", s.where, name, err)
		} else if strings.TrimSpace(string(b)) == "" {
			s.bad("%s: %s_file %s is empty", s.where, name, file)
		}
		return strings.TrimSpace(string(b))
	case required:
		s.bad("%s: one of %s_env and %s_file is required", s.where, name, name)
	}
	return ""
}

// resolveCredential checks that the channel's credential fits its format, reads its
// secrets and builds ch's credential.Credential.
func (ch *Channel) resolveCredential(src secretSource) {
	failed := false
	report := src.bad
	bad := func(format string, args ...any) { failed = true; report(format, args...) }
	src.bad = bad
	where := src.where
	static := ch.CredentialEnv != "" || ch.CredentialFile != "" || ch.CredentialHeader != ""
	var cfg credential.Config
	// An unknown format (reported by the catalog's check of formats) is read as a key's.
	f, known := ch.Format.spec()
	if !known {
		f = &translate.Format{Credential: translate.CredentialKey}
	}
	switch f.Credential {
	case translate.CredentialAWS:
		if ch.AWS == nil {
			bad("%s: format %s needs an aws credential", where, ch.Format)
			return
		}
		if static || ch.GCP != nil {
			bad("%s: format %s takes only an aws credential (no credential_env/_file/_header, no gcp)", where, ch.Format)
			return
		}
		a := ch.AWS
		if a.Region == "" {
			bad("%s: aws.region is required", where)
		}
		cfg.AWS = &credential.AWSConfig{
			Region:          a.Region,
			AccessKeyID:     src.read("aws.access_key_id", a.AccessKeyIDEnv, a.AccessKeyIDFile, true),
			SecretAccessKey: src.read("aws.secret_access_key", a.SecretAccessKeyEnv, a.SecretAccessKeyFile, true),
			SessionToken:    src.read("aws.session_token", a.SessionTokenEnv, a.SessionTokenFile, false),
		}
	case translate.CredentialGCP:
		if ch.GCP == nil {
			bad("%s: format %s needs a gcp credential", where, ch.Format)
			return
		}
		if static || ch.AWS != nil {
			bad("%s: format %s takes only a gcp credential (no credential_env/_file/_header, no aws)", where, ch.Format)
			return
		}
		g := ch.GCP
		if g.Project == "" || g.Location == "" {
			bad("%s: gcp.project and gcp.location are required", where)
		} else if !vertexPlace.MatchString(g.Project) || !vertexPlace.MatchString(g.Location) {
			bad("%s: gcp.project and gcp.location must be lowercase ids like demo-project and us-east5", where)
		}
		cfg.GCP = &credential.GCPConfig{ServiceAccountJSON: []byte(src.read("gcp.credentials", g.CredentialsEnv, g.CredentialsFile, true))}
	default:
		if ch.AWS != nil || ch.GCP != nil {
			bad("%s: format %s takes a key (credential_env or credential_file), not an aws or gcp credential", where, ch.Format)
			return
		}
		cfg.Header = ch.CredentialHeader
		if cfg.Header == "" {
			cfg.Header = f.KeyHeader
		} else if !slices.Contains(credential.KeyHeaders, cfg.Header) {
			bad("%s: credential_header %q is not one of %s", where, cfg.Header, strings.Join(credential.KeyHeaders, ", "))
			return
		}
		cfg.Key = src.read("credential", ch.CredentialEnv, ch.CredentialFile, true)
	}
	if failed {
		return
	}
	c, err := credential.New(cfg) // its errors never carry a secret
	if err != nil {
		bad("%s: %w", where, err)
		return
	}
	ch.credential = c
}
