// Package cloudauth checks the gateway's cloud credentials the way the clouds do, for
// the mock providers (e2e/mock) and the tests of extproc/credential: an AWS Signature
// Version 4 recomputed with the AWS SDK for Go v2 signer over the bytes received
// (VerifySigV4), an OAuth2 JWT bearer grant verified with a service account's public
// key and the opaque access tokens issued for it (TokenIssuer), and demo service
// accounts whose private key exists only in memory and in the file the caller writes
// (NewServiceAccount).
//
// It is test and demo support: no production request path imports it. It depends on
// the standard library, the AWS SDK signer (and smithy-go's path escaping, the
// SDK's own) and golang-jwt only.
package cloudauth
