package server_test

import (
	"context"
	"errors"
	"testing"

	"github.com/llmgw/gateway/accounting/server/servertest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestKeyUpdateFitsWhenTheKeyCannotBeRead: an update whose key the store fails to
// read (not a missing key: an error) is refused, not let through unchecked against
// its project's limits.
func TestKeyUpdateFitsWhenTheKeyCannotBeRead(t *testing.T) {
	st := servertest.NewMemory()
	admin := servertest.Start(t, st, servertest.Options{}).Admin(t, servertest.AdminToken)
	ctx := context.Background()
	acct, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{})
	if err != nil {
		t.Fatal(err)
	}
	a := acct.GetAccount().GetId()
	p, err := admin.CreateProject(ctx, &accountingv1.CreateProjectRequest{AccountId: a, Name: "research", Tpm: i64(1000)})
	if err != nil {
		t.Fatal(err)
	}
	k, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: a, ProjectId: p.GetProject().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	kid := k.GetKey().GetId()
	// The authorizer's read of the key fails (an admin-token call goes on to its
	// handler), then the handler's.
	down := errors.New("store unavailable")
	st.FailNext(down, down)
	if _, err := admin.UpdateKey(ctx, &accountingv1.UpdateKeyRequest{KeyId: kid, Tpm: &accountingv1.RateUpdate{Value: i64(5000)}}); err == nil {
		t.Error("a tpm above the project's was set while the key could not be read")
	}
	got, err := admin.GetKey(ctx, &accountingv1.GetKeyRequest{KeyId: kid})
	if err != nil || got.GetKey().Tpm != nil {
		t.Errorf("the key after the refused update: %v %v", got.GetKey(), err)
	}
}
