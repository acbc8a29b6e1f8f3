package client

import (
	"context"
	"testing"

	"google.golang.org/grpc/resolver"
)

func TestDialArguments(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name    string
		ctx     context.Context
		addr    string
		token   string
		wantErr bool
	}{
		{"ok", context.Background(), "127.0.0.1:50052", "tok", false},
		{"no address", context.Background(), "", "tok", true},
		{"no token", context.Background(), "127.0.0.1:50052", "", true},
		{"canceled", canceled, "127.0.0.1:50052", "tok", true},
		{"list", context.Background(), "127.0.0.1:50052, 127.0.0.1:50053", "tok", false},
		{"list with a name", context.Background(), "accounting-0.accounting:50052,accounting-1.accounting:50052", "tok", false},
		{"list with an empty address", context.Background(), "127.0.0.1:50052,", "tok", true},
		{"list with no port", context.Background(), "127.0.0.1:50052,127.0.0.1", "tok", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cc, err := Dial(tc.ctx, tc.addr, tc.token)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if cc != nil {
				_ = cc.Close()
			}
		})
	}
}

func TestTokenCredentials(t *testing.T) {
	md, err := TokenCredentials("s3cret").GetRequestMetadata(context.Background())
	if err != nil || md["authorization"] != "Bearer s3cret" {
		t.Fatalf("metadata = %v, %v", md, err)
	}
}

// A list's addresses keep their order, lose surrounding space and are each checked by
// TLS against their own host.
func TestListAddresses(t *testing.T) {
	got, err := listAddresses(" accounting-0.accounting:50052,10.0.0.7:50052 ")
	if err != nil {
		t.Fatal(err)
	}
	want := []resolver.Address{{Addr: "accounting-0.accounting:50052", ServerName: "accounting-0.accounting"}, {Addr: "10.0.0.7:50052", ServerName: "10.0.0.7"}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i].Addr != want[i].Addr || got[i].ServerName != want[i].ServerName {
			t.Errorf("address %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	for _, bad := range []string{"a:1,,b:2", ":50052,b:2", "a:1,b"} {
		if _, err := listAddresses(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
