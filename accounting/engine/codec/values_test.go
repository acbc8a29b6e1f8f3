package codec

import (
	"bytes"
	"strings"
	"testing"

	"github.com/llmgw/gateway/accounting/engine/machine"
)

// TestIDs: every id round-trips unchanged, and travels in the form the schema says.
func TestIDs(t *testing.T) {
	uuidBytes := []byte{0x01, 0x90, 0xf8, 0xa2, 0x7c, 0x4e, 0x7d, 0x1a, 0x9b, 0x3f, 0x2e, 0x4c, 0x6a, 0x8b, 0x0d, 0x1f}
	for _, c := range []struct {
		name, id string
		want     []byte // the schema's bytes
	}{
		{"empty", "", nil},
		{"canonical UUID", acctID, uuidBytes},
		{"all-zero UUID", "00000000-0000-0000-0000-000000000000", make([]byte, 16)},
		{"all-f UUID", "ffffffff-ffff-ffff-ffff-ffffffffffff", bytes.Repeat([]byte{0xff}, 16)},
		{"uppercase UUID", strings.ToUpper(acctID), append([]byte{0}, strings.ToUpper(acctID)...)},
		{"mixed-case UUID", "0190F8a2-7c4e-7d1a-9b3f-2e4c6a8b0d1f", append([]byte{0}, "0190F8a2-7c4e-7d1a-9b3f-2e4c6a8b0d1f"...)},
		{"UUID without dashes", "0190f8a27c4e7d1a9b3f2e4c6a8b0d1f", append([]byte{0}, "0190f8a27c4e7d1a9b3f2e4c6a8b0d1f"...)},
		{"UUID in braces", "{" + acctID + "}", append([]byte{0}, "{"+acctID+"}"...)},
		{"dash misplaced", "0190f8a27-c4e-7d1a-9b3f-2e4c6a8b0d1f", append([]byte{0}, "0190f8a27-c4e-7d1a-9b3f-2e4c6a8b0d1f"...)},
		{"non-hex digit", "0190f8a2-7c4e-7d1a-9b3f-2e4c6a8b0d1g", append([]byte{0}, "0190f8a2-7c4e-7d1a-9b3f-2e4c6a8b0d1g"...)},
		{"test id", "acct_000001", []byte("acct_000001")},
		{"15 bytes", "abcdefghijklmno", []byte("abcdefghijklmno")},
		{"16 bytes, not a UUID", "acct_00000000001", append([]byte{0}, "acct_00000000001"...)},
		{"16 bytes that look raw", string(uuidBytes), append([]byte{0}, uuidBytes...)},
		{"17 bytes", "abcdefghijklmnopq", append([]byte{0}, "abcdefghijklmnopq"...)},
		{"starts with the marker", "\x00abc", []byte("\x00abc")},
		{"long, starts with the marker", "\x00" + reqID, append([]byte{0, 0}, reqID...)},
		{"request id", reqID, append([]byte{0}, reqID...)},
		{"not UTF-8", "\xff\xfe id", []byte("\xff\xfe id")},
	} {
		var en enc
		got := en.id(c.id)
		if !bytes.Equal(got, c.want) {
			t.Errorf("%s: id(%q) = %x, want %x", c.name, c.id, got, c.want)
		}
		back, err := decodeID(got)
		if err != nil || back != c.id {
			t.Errorf("%s: decodeID = %q, %v; want %q", c.name, back, err, c.id)
		}
		// And through a whole event.
		e := machine.Reserved{ID: c.id, RequestID: c.id, AccountID: c.id, KeyID: c.id}
		b, err := Encode(nil, e)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := Decode(b); err != nil || d != e {
			t.Errorf("%s: Reserved round trip = %#v, %v", c.name, d, err)
		}
	}
}

// TestText: names and other text travel unchanged, UTF-8 or not.
func TestText(t *testing.T) {
	for _, s := range []string{"", "demo-chat", "模型", "\xff\x00\xfe", strings.Repeat("x", 300)} {
		e := machine.KeyChanged{KeyID: keyID, Name: s, AllowedModels: []string{s, "", s}}
		b, err := Encode(nil, e)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		d, err := Decode(b)
		if err != nil || d.(machine.KeyChanged).Name != s || len(d.(machine.KeyChanged).AllowedModels) != 3 ||
			d.(machine.KeyChanged).AllowedModels[0] != s || d.(machine.KeyChanged).AllowedModels[1] != "" {
			t.Errorf("%q: round trip = %#v, %v", s, d, err)
		}
	}
}
