// Package pdfpagestest writes PDFs of a chosen number of pages for tests, with pdfcpu,
// the library package pdfpages reads them with.
package pdfpagestest

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/pdfcpu/pdfcpu/pkg/api"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/model"
	"github.com/pdfcpu/pdfcpu/pkg/pdfcpu/types"
)

// Fanout is the most kids a page-tree node of Blank's files has: a file of more pages
// has a tree of several levels, as PDF writers make them.
const Fanout = 64

// Blank returns a PDF of n A4 pages that all draw one shared content stream. It is
// written the way current writers write large files: objects packed into compressed
// object streams and a cross-reference stream, so its pages are found only by
// decompressing them, and its size grows by about ten bytes a page.
func Blank(n int) ([]byte, error) { return Write(n, 0) }

// BlankBase64 is Blank in base64, as requests carry documents; it fails tb when the
// file cannot be written.
func BlankBase64(tb testing.TB, n int) string {
	tb.Helper()
	b, err := Blank(n)
	if err != nil {
		tb.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// Write is Blank with pages that each draw a content stream of their own, of
// contentBytes bytes that do not compress (0: one shared stream), as pages of text or
// pictures do.
func Write(n, contentBytes int) ([]byte, error) {
	api.DisableConfigDir()
	conf := model.NewDefaultConfiguration()
	conf.WriteObjectStream, conf.WriteXRefStream = true, true
	ctx, err := pdfcpu.CreateContextWithXRefTable(conf, types.PaperSize["A4"])
	if err != nil {
		return nil, err
	}
	xt := ctx.XRefTable
	content, err := xt.NewStreamDictForBuf([]byte("0 0 m 10 10 l S\n"))
	if err != nil {
		return nil, err
	}
	if err := content.Encode(); err != nil {
		return nil, err
	}
	contentRef, err := xt.IndRefForNewObject(*content)
	if err != nil {
		return nil, err
	}
	root, err := xt.Pages()
	if err != nil {
		return nil, err
	}
	page := func() (types.IndirectRef, error) { return *contentRef, nil }
	if contentBytes > 0 {
		rnd := rand.New(rand.NewPCG(uint64(n), uint64(contentBytes)))
		page = func() (types.IndirectRef, error) {
			b := make([]byte, contentBytes)
			for i := range b {
				b[i] = byte(rnd.Uint32())
			}
			sd, err := xt.NewStreamDictForBuf(b)
			if err == nil {
				err = sd.Encode()
			}
			if err != nil {
				return types.IndirectRef{}, err
			}
			ref, err := xt.IndRefForNewObject(*sd)
			if err != nil {
				return types.IndirectRef{}, err
			}
			return *ref, nil
		}
	}
	if err := fill(xt, *root, n, page); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := api.WriteContext(ctx, &b); err != nil {
		return nil, fmt.Errorf("write %d pages: %w", n, err)
	}
	return b.Bytes(), nil
}

// fill puts n pages under the page-tree node at ref, in subtrees of at most Fanout kids.
func fill(xt *model.XRefTable, ref types.IndirectRef, n int, content func() (types.IndirectRef, error)) error {
	node, err := xt.DereferenceDict(ref)
	if err != nil {
		return err
	}
	per := 1 // pages under each kid
	for n > per*Fanout {
		per *= Fanout
	}
	var kids types.Array
	for left := n; left > 0; left -= per {
		var kid *types.IndirectRef
		if per == 1 {
			var c types.IndirectRef
			if c, err = content(); err == nil {
				kid, err = xt.IndRefForNewObject(types.Dict{"Type": types.Name("Page"), "Parent": ref, "Contents": c})
			}
		} else {
			kid, err = xt.IndRefForNewObject(types.Dict{"Type": types.Name("Pages"), "Parent": ref, "Kids": types.Array{}, "Count": types.Integer(0)})
			if err == nil {
				err = fill(xt, *kid, min(per, left), content)
			}
		}
		if err != nil {
			return err
		}
		kids = append(kids, *kid)
	}
	node.Update("Kids", kids)
	node.Update("Count", types.Integer(n))
	return nil
}
