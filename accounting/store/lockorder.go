package store

import "slices"

// Lock order across replicas. Each PL/pgSQL function locks its account row when it
// runs, so a small batch run as the functions (decideLone) would lock its accounts in
// queue order: with two accounting replicas (extproc spreads its calls over them), a
// batch of A then B on one and of B then A on the other each held one row and waited
// for the other's until the writer's short lock wait failed both, and every operation
// of both batches ran again alone. Under two busy tenants that was most batches. So a
// batch that will lock two accounts or more first locks them all in id order, in the
// same round trip; a larger batch locks its accounts in id order too (readGroup). Every
// writer then takes account rows in one order and only waits for another's
// transaction, never for a cycle.
//
// A batch's accounts come from the owners caches (a key's account, and a held
// reservation's account remembered from its Reserve in this process); an operation whose
// account is not cached (a reservation another replica made, a key not seen yet) has it
// read by the locking statement itself.

const (
	lockAccounts = `SELECT 1 FROM accounts WHERE id = ANY ($1::text[]::uuid[]) ORDER BY id FOR UPDATE`
	// lockAccountsOf also locks the accounts of the keys $2 and the reservations $3.
	lockAccountsOf = `SELECT 1 FROM accounts
		WHERE id = ANY ($1::text[]::uuid[]
			|| ARRAY(SELECT account_id FROM api_keys WHERE id = ANY ($2::text[]::uuid[]))
			|| ARRAY(SELECT account_id FROM reservations WHERE id = ANY ($3::text[]::uuid[])))
		ORDER BY id FOR UPDATE`
)

// accountLocks returns the statement and arguments that lock batch's accounts in id
// order, or "" when the batch locks one account at most (nothing to order).
func (s *Store) accountLocks(batch []*batchOp) (string, []any) {
	if len(batch) < 2 {
		return "", nil
	}
	var accounts, keys, res []string
	for _, op := range batch {
		var a string
		var ok bool
		switch op.kind {
		case opReserve:
			if a, ok = s.keyOwners.get(op.reserve.KeyID); !ok {
				keys = append(keys, op.reserve.KeyID)
			}
		case opCommit:
			if a, ok = s.resOwners.get(op.commit.ReservationID); !ok {
				res = append(res, op.commit.ReservationID)
			}
		default:
			if a, ok = s.resOwners.get(op.resID); !ok {
				res = append(res, op.resID)
			}
		}
		if ok && !slices.Contains(accounts, a) {
			accounts = append(accounts, a)
		}
	}
	switch {
	case len(keys) > 0 || len(res) > 0:
		return lockAccountsOf, []any{accounts, keys, res}
	case len(accounts) > 1:
		return lockAccounts, []any{accounts}
	}
	return "", nil
}
