package server_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/llmgw/gateway/accounting/ledger"
	"github.com/llmgw/gateway/accounting/server/servertest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// Key names and allowlists are bounded at the gRPC boundary, which gatewayctl reaches
// directly: an oversized value is refused with a message naming the field, whether it
// comes with CreateKey or UpdateKey, and changes nothing.
func TestKeyLabelsAreBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	admin := servertest.Start(t, servertest.NewMemory(), servertest.Options{}).Admin(t, servertest.AdminToken)
	acc, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
	if err != nil {
		t.Fatal(err)
	}
	accID := acc.GetAccount().GetId()
	longest := strings.Repeat("é", ledger.MaxKeyNameChars) // characters, not bytes
	k, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: accID, Name: longest,
		AllowedModels: []string{strings.Repeat("m", ledger.MaxModelIDChars)}})
	if err != nil {
		t.Fatalf("the longest name and model: %v", err)
	}
	keyID := k.GetKey().GetId()
	tooMany := make([]string, ledger.MaxAllowedModels+1)
	for i := range tooMany {
		tooMany[i] = "m"
	}
	for _, c := range []struct {
		name, field string
		keyName     string
		models      []string
	}{
		{"3 MB name", "name", strings.Repeat("n", 3<<20), nil},
		{"one character over", "name", longest + "x", nil},
		{"too many models", "allowed_models", "", tooMany},
		{"long model", "allowed_models[1]", "", []string{"demo-chat", strings.Repeat("m", ledger.MaxModelIDChars+1)}},
		{"empty model", "allowed_models", "", []string{""}},
	} {
		_, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: accID, Name: c.keyName, AllowedModels: c.models})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.field) {
			t.Errorf("create, %s: %v, want InvalidArgument naming %s", c.name, err, c.field)
		}
		u := &accountingv1.UpdateKeyRequest{KeyId: keyID}
		if c.models != nil {
			u.AllowedModels = &accountingv1.ModelList{Models: c.models}
		} else {
			u.Name = &c.keyName
		}
		if _, err := admin.UpdateKey(ctx, u); status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), c.field) {
			t.Errorf("update, %s: %v, want InvalidArgument naming %s", c.name, err, c.field)
		}
	}
	keys, err := admin.ListKeys(ctx, &accountingv1.ListKeysRequest{AccountId: accID})
	if err != nil || len(keys.GetKeys()) != 1 || keys.GetKeys()[0].GetName() != longest {
		t.Fatalf("refused calls changed the keys: %d keys, %v", len(keys.GetKeys()), err)
	}
}
