package client

import (
	"context"
	"testing"
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
