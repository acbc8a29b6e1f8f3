package ledgerclient_test

import (
	"context"
	"testing"

	"github.com/llmgw/gateway/accounting/tables/tablestest"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

// TestMain drops the template database the PostgreSQL tests made.
func TestMain(m *testing.M) { tablestest.Main(m) }

// wideTier is a tier whose rate and in-flight limits no test reaches.
const wideTier = "wide"

// accountsWithKeys creates n accounts on tier (wideTier is created first; "" is the
// default tier), each topped up with topUp and given one key without limits; it
// returns their ids and their keys' ids.
func accountsWithKeys(tb testing.TB, admin accountingv1.AdminServiceClient, tier string, n int, topUp int64) (accounts, keys []string) {
	tb.Helper()
	ctx := context.Background()
	if tier == wideTier {
		if _, err := admin.SetTier(ctx, &accountingv1.SetTierRequest{Tier: &accountingv1.Tier{
			Name: wideTier, RpmBeforeTopup: 1 << 30, RpmAfterTopup: 1 << 30, InFlightGeneral: 1 << 20, InFlightHighCost: 1 << 20,
		}}); err != nil {
			tb.Fatal(err)
		}
	}
	accounts, keys = make([]string, n), make([]string, n)
	for i := range n {
		a, err := admin.CreateAccount(ctx, &accountingv1.CreateAccountRequest{Tier: tier})
		if err != nil {
			tb.Fatal(err)
		}
		accounts[i] = a.GetAccount().GetId()
		if _, err := admin.TopUp(ctx, &accountingv1.TopUpRequest{AccountId: accounts[i], AmountMicros: topUp}); err != nil {
			tb.Fatal(err)
		}
		k, err := admin.CreateKey(ctx, &accountingv1.CreateKeyRequest{AccountId: accounts[i]})
		if err != nil {
			tb.Fatal(err)
		}
		keys[i] = k.GetKey().GetId()
	}
	return accounts, keys
}
