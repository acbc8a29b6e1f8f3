// Package contract converts the accounting service's gRPC contract
// (proto/accounting/v1) to the ledger's domain types (accounting/ledger) and back.
//
// It is the one place where the two meet: accounting's server, extproc's ledger client,
// gatewayctl and the web console all convert here, so an enum value or a refusal reason
// added to the contract is added once, and the round-trip test over every enum value
// fails until it is.
//
// It must not import the store, the server, a client or anything with I/O: it is pure
// conversion, used on both sides of the wire.
package contract
