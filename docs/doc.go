// Package docs holds the gateway's documentation: one Markdown page per topic, linked
// from the repository's README.md. It has no code; its tests keep the README short,
// every page reachable from it, every relative link (and its #anchor) pointing at
// something that exists, and pricing.md's price list equal to the demo and production
// catalogs, read with the gateway's own loader (extproc/catalog).
package docs
