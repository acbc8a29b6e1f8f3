// Package pdfpages counts the pages of a PDF from its bytes. The gateway bounds what a
// provider bills for a document by its pages (the provider charges each page's text and
// its picture), so the count must come from the file itself and not from anything a
// client writes beside it.
//
// Parsing is pdfcpu's (cross-reference tables and streams, object streams, repair of
// broken cross references, decryption with the empty password). The page tree is walked
// here over pdfcpu's objects rather than through pdfcpu's validation, which refuses
// files with faults that do not change the page count (fonts, annotations, metadata) and
// that providers read all the same.
//
// The work is bounded for untrusted input of up to a request body (2 MiB). Reading costs
// a few µs of CPU per object, and objects packed in compressed object streams cost no
// bytes of the body to speak of, so: a cross-reference stream may list at most
// MaxObjects objects (which bounds the compressed ones: only such a stream can point
// into an object stream), every stream decodes to at most MaxDecodeBytes, reading stops
// at MaxTime whatever else a file tries (pdfcpu checks the deadline between objects),
// and the walk visits each page-tree node once, at most MaxDepth deep. A file beyond
// these bounds is refused as uncountable rather than counted in part.
//
// It imports nothing of the gateway.
package pdfpages

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
)

const (
	// MaxObjects is the most objects a cross-reference stream may list: thousands of
	// pages of text (each page an object, its content stream another, fonts and
	// pictures shared), far past what providers accept in one request.
	MaxObjects = 20_000
	// MaxTime is how long reading one file may take before it is refused: a backstop
	// for work the limits above do not bound, wall time rather than CPU time, so
	// several times what the largest file within them needs.
	MaxTime = time.Second
	// MaxDecodeBytes is the most one stream of the file may decode to. A cross-reference
	// or object stream of a file of a few MiB decodes to far less; the limit stops a
	// compression bomb from allocating gigabytes before the deadline is next checked.
	MaxDecodeBytes = 4 << 20
	// MaxDepth is the deepest page tree walked. PDF writers build balanced trees a few
	// levels deep; the limit stops a crafted chain from recursing without end.
	MaxDepth = 64
)

// ErrUncountable wraps every reason a file's pages cannot be counted.
var ErrUncountable = errors.New("pdfpages: the pages cannot be counted")

var confOnce sync.Once

// config is pdfcpu's default configuration with the limits above. pdfcpu's default
// configuration is otherwise read from, and first written to, a directory in the user's
// home; DisableConfigDir makes it the built-in one, without touching the disk.
func config() *model.Configuration {
	confOnce.Do(api.DisableConfigDir)
	c := model.NewDefaultConfiguration()
	c.ValidationMode = model.ValidationRelaxed
	c.Limits.MaxDecodeBytes = MaxDecodeBytes
	c.Limits.MaxStreamBytes = MaxDecodeBytes
	c.Limits.MaxRecursionDepth = MaxDepth
	c.Limits.MaxObjectCount = MaxObjects
	c.Limits.MaxXRefEntries = MaxObjects
	return c
}

// Count returns the number of pages of the PDF b: the larger of the page leaves found in
// its page tree and the tree root's /Count, so that the bound holds whichever of the two
// a reader believes when they differ. A file that is not a PDF, is damaged beyond repair,
// needs a password, has no page, or exceeds the package's bounds returns an error
// wrapping ErrUncountable.
func Count(b []byte) (n int, err error) {
	defer func() {
		// pdfcpu reports some faults of malformed input by panicking.
		if r := recover(); r != nil {
			n, err = 0, fmt.Errorf("%w: %v", ErrUncountable, r)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), MaxTime)
	defer cancel()
	pc, err := pdfcpu.ReadWithContext(ctx, bytes.NewReader(b), config())
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUncountable, err)
	}
	xt := pc.XRefTable
	root, err := xt.Pages()
	if err != nil || root == nil {
		return 0, fmt.Errorf("%w: no page tree: %v", ErrUncountable, err)
	}
	w := walk{ctx: ctx, xt: xt, seen: map[int]bool{}}
	if err := w.node(*root, 0); err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUncountable, err)
	}
	n = w.leaves
	if d, _ := xt.DereferenceDict(*root); d != nil {
		if c := d.IntEntry("Count"); c != nil && *c > n {
			n = *c
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("%w: no page", ErrUncountable)
	}
	return n, nil
}

// walk counts the leaves of a page tree.
type walk struct {
	ctx    context.Context
	xt     *model.XRefTable
	seen   map[int]bool // object numbers of the nodes visited
	leaves int
}

// node counts the page leaves under the page-tree node ref, depth levels below the root.
// A node with Kids is an intermediate node, whatever its /Type says; any other node is
// a page. A node reached twice (a cycle, or one page listed under two parents) counts
// once.
func (w *walk) node(ref types.IndirectRef, depth int) error {
	if depth > MaxDepth {
		return errors.New("page tree deeper than the limit")
	}
	if err := w.ctx.Err(); err != nil {
		return err
	}
	nr := ref.ObjectNumber.Value()
	if w.seen[nr] {
		return nil
	}
	w.seen[nr] = true
	d, err := w.xt.DereferenceDict(ref)
	if err != nil {
		return fmt.Errorf("page tree node %d: %w", nr, err)
	}
	if d == nil {
		return nil // a reference to a missing object is the null object (PDF 7.3.10)
	}
	kids, found := d.Find("Kids")
	if !found {
		w.leaves++
		return nil
	}
	arr, err := w.xt.DereferenceArray(kids)
	if err != nil {
		return fmt.Errorf("page tree node %d: kids: %w", nr, err)
	}
	for _, k := range arr {
		kr, ok := k.(types.IndirectRef)
		if !ok {
			continue // a page is an indirect object (PDF 7.7.3.3); anything else is not one
		}
		if err := w.node(kr, depth+1); err != nil {
			return err
		}
	}
	return nil
}
