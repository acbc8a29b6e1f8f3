// Package demoenv is the one home of the demo catalog's credentials
// (deploy/local/catalog.yaml): the values the local stack gives extproc for each
// credential variable, and the demo AWS key and service account the mock providers
// check them against (e2e/mock).
//
// It is test and demo support: no production request path imports it.
package demoenv
