// Package docs holds the gateway's documentation: one Markdown page per topic, linked
// from the repository's README.md. It has no code; its test keeps the README short,
// every page reachable from it, and every relative link (and its #anchor) pointing at
// something that exists.
package docs
