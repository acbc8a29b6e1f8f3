package replay

import "github.com/llmgw/gateway/accounting/ledger"

// Keys of DemoLedger, one per kind of grant admission tells apart. KeyUnknown is well
// formed but unknown to the ledger.
const (
	KeyPaid       = "gw-paid0000000000000000000000000000000000000000"
	KeyNew        = "gw-new00000000000000000000000000000000000000000"
	KeySuspended  = "gw-susp0000000000000000000000000000000000000000"
	KeyScoped     = "gw-scope000000000000000000000000000000000000000"
	KeyUnknown    = "gw-unknown0000000000000000000000000000000000000"
	KeyEnterprise = "gw-enterp00000000000000000000000000000000000000"
)

// DemoLedger is a fake ledger knowing the keys above: a topped-up account (KeyPaid), one
// never topped up (KeyNew), a suspended one, a key allowed only demo-free (KeyScoped, on
// KeyPaid's account) and an enterprise-tier account.
func DemoLedger() *FakeLedger {
	f := &FakeLedger{}
	f.AddKey(KeyPaid, ledger.Grant{KeyID: "k-paid", AccountID: "a1", Tier: "default", AccountToppedUp: true})
	f.AddKey(KeyNew, ledger.Grant{KeyID: "k-new", AccountID: "a2", Tier: "default"})
	f.AddKey(KeySuspended, ledger.Grant{KeyID: "k-susp", AccountID: "a3", Tier: "default", AccountToppedUp: true, AccountSuspended: true})
	f.AddKey(KeyScoped, ledger.Grant{KeyID: "k-scope", AccountID: "a1", Tier: "default", AccountToppedUp: true, AllowedModels: []string{"demo-free"}})
	f.AddKey(KeyEnterprise, ledger.Grant{KeyID: "k-ent", AccountID: "a4", Tier: "enterprise", AccountToppedUp: true})
	return f
}
