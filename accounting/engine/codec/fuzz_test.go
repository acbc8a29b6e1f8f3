package codec

import (
	"reflect"
	"testing"
)

// FuzzDecode: Decode never panics, and what it accepts encodes and decodes back to the
// same event. The seeds are every test event's record and a few broken ones; plain
// go test runs only the seeds.
func FuzzDecode(f *testing.F) {
	for _, e := range append(full(), zero()...) {
		b, err := Encode(nil, e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte{})
	f.Add([]byte{0x3a, 0x11, 0x0a, 0x11, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Encode(nil, e)
		if err != nil {
			t.Fatalf("Decode accepted %x as %#v, which does not encode: %v", b, e, err)
		}
		back, err := Decode(again)
		if err != nil || !reflect.DeepEqual(back, e) {
			t.Fatalf("%#v encodes to %x, which decodes to %#v, %v", e, again, back, err)
		}
	})
}
