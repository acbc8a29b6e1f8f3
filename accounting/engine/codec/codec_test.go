package codec

import (
	"bytes"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/llmgw/gateway/accounting/engine/machine"
	"github.com/llmgw/gateway/accounting/ledger"
	journalv1 "github.com/llmgw/gateway/proto/accounting/journal/v1"
)

// TestRoundTrip: every event, full or zero, decodes to a deeply equal value, and
// encodes again to the same bytes.
func TestRoundTrip(t *testing.T) {
	for _, e := range append(full(), zero()...) {
		b, err := Encode(nil, e)
		if err != nil {
			t.Fatalf("Encode(%#v): %v", e, err)
		}
		got, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(Encode(%#v)): %v", e, err)
		}
		if !reflect.DeepEqual(got, e) {
			t.Errorf("round trip:\n got %#v\nwant %#v", got, e)
		}
		again, err := Encode(nil, got)
		if err != nil || !bytes.Equal(again, b) {
			t.Errorf("%T encodes to other bytes the second time (%v)", e, err)
		}
	}
}

// TestAppends: Encode appends to dst and leaves what was there.
func TestAppends(t *testing.T) {
	e := full()[6]
	alone, err := Encode(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Encode([]byte("head"), e)
	if err != nil || string(b[:4]) != "head" || !bytes.Equal(b[4:], alone) {
		t.Fatalf("Encode(head) = %q, %v", b, err)
	}
}

// TestDeterministic: units built in different orders encode alike.
func TestDeterministic(t *testing.T) {
	names := strings.Fields("a b c d e f g h i j k l m n o p")
	var first []byte
	for i := range 20 {
		units := map[string]int64{}
		for j := range names {
			units[names[(i+j)%len(names)]] = int64(j)
		}
		for j, n := range names {
			units[n] = int64(j)
		}
		b, err := Encode(nil, machine.Committed{ReservationID: resvID, Usage: ledger.Usage{Units: units}, At: at})
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = b
		} else if !bytes.Equal(b, first) {
			t.Fatalf("the same units encode to other bytes")
		}
	}
}

// TestDecodedTimesAreUTC: a time in another location decodes as the same instant in
// UTC, which compares equal with ==.
func TestDecodedTimesAreUTC(t *testing.T) {
	paris := at.In(time.FixedZone("CEST", 2*3600))
	b, err := Encode(nil, machine.AccountCreated{ID: acctID, At: paris})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.(machine.AccountCreated).At; got != at || got.Location() != time.UTC {
		t.Fatalf("At = %v (%v), want %v", got, got.Location(), at)
	}
}

// TestEncodeRefuses: what cannot travel exactly is an error, not a different event.
func TestEncodeRefuses(t *testing.T) {
	resv := full()[6].(machine.Reserved)
	fine := resv
	fine.ExpiresAt = fine.ExpiresAt.Add(time.Nanosecond)
	limitFine := at.Add(500 * time.Nanosecond)
	for name, e := range map[string]machine.Event{
		"nil":                      nil,
		"pointer to an event":      &resv,
		"nanoseconds":              fine,
		"nanoseconds in a pointer": machine.KeyChanged{KeyID: keyID, ExpiresAt: &limitFine, At: at},
	} {
		if b, err := Encode([]byte("x"), e); err == nil || string(b) != "x" {
			t.Errorf("%s: Encode = %q, %v; want an error and dst unchanged", name, b, err)
		}
	}
}

// TestDecodeRefuses: malformed records are errors.
func TestDecodeRefuses(t *testing.T) {
	reserved := func(r *journalv1.Reserved) []byte {
		b, err := proto.Marshal(&journalv1.Event{Kind: &journalv1.Event_Reserved{Reserved: r}})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	dupUnits, err := proto.Marshal(&journalv1.Event{Kind: &journalv1.Event_Committed{Committed: &journalv1.Committed{
		Usage: &journalv1.Usage{Units: []*journalv1.Unit{{Name: []byte("s"), Count: 1}, {Name: []byte("s"), Count: 2}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	valid := reserved(&journalv1.Reserved{Id: []byte("r1"), At: 1})
	// Fields numbered 99, what newer code might write: in Reserved, and in a
	// Committed's usage.
	extra := func(b []byte) []byte {
		return protowire.AppendVarint(protowire.AppendTag(b, 99, protowire.VarintType), 7)
	}
	wrap := func(field protowire.Number, b []byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, field, protowire.BytesType), b)
	}
	unknownInKind := wrap(7, extra([]byte{0x0a, 2, 'r', '1'}))
	unknownInUsage := wrap(8, wrap(4, extra(nil)))
	for name, c := range map[string]struct {
		b    []byte
		want error
	}{
		"empty":                  {nil, errKind},
		"unknown kind":           {protowire.AppendVarint(protowire.AppendTag(nil, 13, protowire.VarintType), 1), errUnknown},
		"17-byte id, no marker":  {reserved(&journalv1.Reserved{Id: bytes.Repeat([]byte("a"), 17)}), errID},
		"unit named twice":       {dupUnits, errUnits},
		"unknown field in kind":  {unknownInKind, errUnknown},
		"unknown field in usage": {unknownInUsage, errUnknown},
		"truncated":              {valid[:len(valid)-1], nil},
		"garbage":                {[]byte{0xff, 0xff, 0xff}, nil},
	} {
		e, err := Decode(c.b)
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: Decode = %#v, %v; want %v", name, e, err, c.want)
		}
	}
	if _, err := Decode(valid); err != nil {
		t.Errorf("the valid record: %v", err)
	}
}

// TestEveryEventType: the tables hold one value of each type that has the machine's
// event() method, and every kind of the schema's Event. A new event type in the
// machine fails here until it is in full(), and full() fails TestRoundTrip until
// Encode and Decode know it.
func TestEveryEventType(t *testing.T) {
	declared := eventTypes(t)
	covered := map[string]bool{}
	for _, e := range full() {
		covered[reflect.TypeOf(e).Name()] = true
	}
	for name := range declared {
		if !covered[name] {
			t.Errorf("machine.%s is an event with no value in full()", name)
		}
	}
	for name := range covered {
		if !declared[name] {
			t.Errorf("full() holds %s, which the machine does not declare an event", name)
		}
	}
	kinds := (&journalv1.Event{}).ProtoReflect().Descriptor().Oneofs().ByName("kind").Fields().Len()
	if kinds != len(declared) || len(declared) == 0 {
		t.Errorf("the schema has %d kinds of event, the machine %d", kinds, len(declared))
	}
}

// eventTypes is the receiver type names of the event() methods in the machine's source.
func eventTypes(t *testing.T) map[string]bool {
	dir := filepath.Join("..", "machine")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	fset := token.NewFileSet()
	for _, entry := range entries {
		if !strings.HasSuffix(entry.Name(), ".go") || strings.HasSuffix(entry.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, entry.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "event" {
				continue
			}
			typ := fn.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				names[id.Name] = true
			}
		}
	}
	return names
}
