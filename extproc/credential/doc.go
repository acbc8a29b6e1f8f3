// Package credential authenticates the gateway to an upstream channel: one signer per
// credential style, behind one interface (Credential) that the request lifecycle calls
// after its last rewrite of a request, with the exact method, host, path and body bytes
// the upstream will receive.
//
// Styles:
//   - a static key sent in one header (Static): "authorization" as a bearer token,
//     "x-api-key", "api-key" (Azure OpenAI) or "x-goog-api-key" (Gemini);
//   - AWS Signature Version 4 for service "bedrock" (AWS), computed by the AWS SDK for
//     Go v2 signer over the body's SHA-256, with x-amz-date and x-amz-content-sha256
//     signed, so a body changed after signing fails the upstream's check;
//   - a Google service account (GCP): OAuth2 access tokens minted with
//     golang.org/x/oauth2/google (the JWT bearer grant against the key file's token_uri),
//     cached and refreshed in the background before they expire, sent as a bearer token.
//
// Secrets arrive resolved (the catalog reads them from environment variables or files);
// they never appear in an error or a String of this package's values.
//
// It must not import the lifecycle, the catalog, the Envoy adapter or any protobuf: it
// sees a request as four plain values and answers headers.
package credential
