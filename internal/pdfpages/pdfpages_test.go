package pdfpages_test

import (
	"bytes"
	"compress/zlib"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/llmgw/gateway/internal/pdfpages"
	"github.com/llmgw/gateway/internal/pdfpages/pdfpagestest"
)

func blank(t testing.TB, n int) []byte {
	t.Helper()
	b, err := pdfpagestest.Blank(n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCountGenerated counts files written with compressed object streams and a
// cross-reference stream, whose page objects are not visible in the bytes.
func TestCountGenerated(t *testing.T) {
	for _, n := range []int{1, 3, 300, 3000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			b := blank(t, n)
			if bytes.Contains(b, []byte("/Type/Page")) || bytes.Contains(b, []byte("/Type /Page")) {
				t.Fatalf("the %d-page file shows its page objects: not written with object streams", n)
			}
			got, err := pdfpages.Count(b)
			if err != nil || got != n {
				t.Fatalf("Count = %d, %v; want %d (%d bytes)", got, err, n, len(b))
			}
		})
	}
}

// classic is a PDF written without object streams, with a cross-reference table at the
// offsets given (or none: readers rebuild it), its objects' texts in order.
func classic(objs ...string) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offs := make([]int, len(objs))
	for i, o := range objs {
		offs[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, o := range offs {
		fmt.Fprintf(&b, "%010d 00000 n \n", o)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

func TestCountHandWritten(t *testing.T) {
	tests := []struct {
		name string
		pdf  []byte
		want int
	}{
		{name: "flat tree", want: 2, pdf: classic(
			"<< /Type /Catalog /Pages 2 0 R >>",
			"<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>",
			"<< /Type /Page /Parent 2 0 R >>",
			"<< /Type /Page /Parent 2 0 R >>")},
		// A root /Count below the leaves: the leaves bound the bill.
		{name: "count understated", want: 3, pdf: classic(
			"<< /Type /Catalog /Pages 2 0 R >>",
			"<< /Type /Pages /Kids [3 0 R 4 0 R 5 0 R] /Count 1 >>",
			"<< /Type /Page /Parent 2 0 R >>",
			"<< /Type /Page /Parent 2 0 R >>",
			"<< /Type /Page /Parent 2 0 R >>")},
		// A root /Count above the leaves: a reader that believes it sees that many.
		{name: "count overstated", want: 40, pdf: classic(
			"<< /Type /Catalog /Pages 2 0 R >>",
			"<< /Type /Pages /Kids [3 0 R] /Count 40 >>",
			"<< /Type /Page /Parent 2 0 R >>")},
		// A kid that points back up the tree, and a page listed twice, count once.
		{name: "cycle and repeat", want: 2, pdf: classic(
			"<< /Type /Catalog /Pages 2 0 R >>",
			"<< /Type /Pages /Kids [3 0 R 4 0 R 4 0 R] /Count 2 >>",
			"<< /Type /Pages /Parent 2 0 R /Kids [2 0 R 5 0 R] /Count 1 >>",
			"<< /Type /Page /Parent 2 0 R >>",
			"<< /Type /Page /Parent 3 0 R >>")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := pdfpages.Count(tt.pdf)
			if err != nil || got != tt.want {
				t.Fatalf("Count = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

// TestCountRefuses checks that what is not a readable PDF with pages is ErrUncountable,
// never a count.
func TestCountRefuses(t *testing.T) {
	three := blank(t, 3)
	tests := []struct {
		name string
		pdf  []byte
	}{
		{name: "empty"},
		{name: "text", pdf: []byte("these are not the bytes of a PDF, only words")},
		{name: "header only", pdf: []byte("%PDF-1.7\n")},
		{name: "truncated", pdf: three[:len(three)/3]},
		{name: "no page", pdf: classic(
			"<< /Type /Catalog /Pages 2 0 R >>",
			"<< /Type /Pages /Kids [] /Count 0 >>")},
		{name: "no page tree", pdf: classic("<< /Type /Catalog >>")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := pdfpages.Count(tt.pdf)
			if !errors.Is(err, pdfpages.ErrUncountable) {
				t.Fatalf("Count = %d, %v; want ErrUncountable", n, err)
			}
		})
	}
}

// TestCountTooManyObjects checks that a file listing more than MaxObjects objects is
// refused, whatever its pages.
func TestCountTooManyObjects(t *testing.T) {
	pdf := blank(t, pdfpages.MaxObjects)
	if n, err := pdfpages.Count(pdf); !errors.Is(err, pdfpages.ErrUncountable) {
		t.Fatalf("Count = %d, %v; want ErrUncountable", n, err)
	}
}

// TestCountBomb checks that a page in an object stream that decompresses to far more
// than MaxDecodeBytes is refused, quickly and without decompressing all of it.
func TestCountBomb(t *testing.T) {
	var z bytes.Buffer
	w, _ := zlib.NewWriterLevel(&z, zlib.BestSpeed)
	w.Write([]byte("4 0 << /Type /Page /Parent 2 0 R >> "))
	zero := make([]byte, 1<<20)
	for range 256 { // 256 MiB of zeros after the page, about 1 MiB compressed
		w.Write(zero)
	}
	w.Close()
	pdf := objStm(z.Bytes())
	start := time.Now()
	n, err := pdfpages.Count(pdf)
	took := time.Since(start)
	if !errors.Is(err, pdfpages.ErrUncountable) {
		t.Fatalf("Count = %d, %v; want ErrUncountable", n, err)
	}
	t.Logf("refused in %v: %v", took, err)
	if took > pdfpages.MaxTime {
		t.Errorf("a %d KiB bomb took %v", len(pdf)>>10, took)
	}
	// The same file with an honest object stream counts its page: the refusal above is
	// the bomb's.
	z.Reset()
	w.Reset(&z)
	w.Write([]byte("4 0 << /Type /Page /Parent 2 0 R >> "))
	w.Close()
	if n, err := pdfpages.Count(objStm(z.Bytes())); err != nil || n != 1 {
		t.Fatalf("the honest file: Count = %d, %v; want 1", n, err)
	}
}

// objStm is a PDF whose one page, object 4, is in an object stream whose compressed
// bytes are z, found through a cross-reference stream.
func objStm(z []byte) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.5\n")
	var offs []int
	obj := func(body string) {
		offs = append(offs, b.Len())
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", len(offs), body)
	}
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	obj("<< /Type /Pages /Kids [4 0 R] /Count 1 >>")
	obj(fmt.Sprintf("<< /Type /ObjStm /N 1 /First 4 /Filter /FlateDecode /Length %d >>\nstream\n%s\nendstream", len(z), z))
	xref := b.Len()
	// Entries of 1 + 4 + 2 bytes: the free head, objects 1 to 3 at their offsets,
	// object 4 as the first in stream 3, and object 5, this stream, at its offset.
	var e bytes.Buffer
	e.Write([]byte{0, 0, 0, 0, 0, 0xff, 0xff})
	for _, o := range append(offs, xref) {
		e.Write([]byte{1, byte(o >> 24), byte(o >> 16), byte(o >> 8), byte(o), 0, 0})
	}
	entries := e.Bytes()
	entries = append(entries[:7*4], append([]byte{2, 0, 0, 0, 3, 0, 0}, entries[7*4:]...)...)
	fmt.Fprintf(&b, "5 0 obj\n<< /Type /XRef /Size 6 /W [1 4 2] /Root 1 0 R /Length %d >>\nstream\n%s\nendstream\nendobj\n", len(entries), entries)
	fmt.Fprintf(&b, "startxref\n%d\n%%%%EOF\n", xref)
	return b.Bytes()
}

// BenchmarkCount2MiB counts a file of 1.5 MiB, which base64 makes a 2 MiB request
// body: the largest document a request can carry, its pages each drawing 500 bytes.
func BenchmarkCount2MiB(b *testing.B) {
	bench(b, 2600, 500)
}

// BenchmarkCountMostObjects counts the file of the most objects Count accepts (pages,
// each an object in a compressed object stream, and the page-tree nodes): the costliest
// count, whatever the size.
func BenchmarkCountMostObjects(b *testing.B) {
	bench(b, pdfpages.MaxObjects*9/10, 0)
}

func bench(b *testing.B, pages, contentBytes int) {
	pdf, err := pdfpagestest.Write(pages, contentBytes)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(pdf)))
	b.ReportAllocs()
	b.ReportMetric(float64(len(pdf))/(1<<20), "MiB")
	for b.Loop() {
		if n, err := pdfpages.Count(pdf); err != nil || n != pages {
			b.Fatal(n, err)
		}
	}
}
