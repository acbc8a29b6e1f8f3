package contract_test

import (
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/llmgw/gateway/accounting/contract"
	accountingv1 "github.com/llmgw/gateway/proto/accounting/v1"
)

func TestOpErrorRoundTrip(t *testing.T) {
	refused, err := status.New(codes.ResourceExhausted, "key daily limit reached").WithDetails(&accountingv1.Refusal{
		Reason: accountingv1.Reason_REASON_KEY_LIMIT_REACHED, RetryAfterSeconds: 60, Limit: "daily"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want *status.Status // what the round trip gives back
	}{
		{"refusal", refused.Err(), refused},
		{"no detail", status.Error(codes.Unavailable, "account busy"), status.New(codes.Unavailable, "account busy")},
		{"plain error", errors.New("boom"), status.New(codes.Unknown, "boom")},
		{"OK is not an error", status.Error(codes.OK, ""), status.New(codes.Unknown, "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := contract.OpErrorOf(tc.err)
			// Through the wire, as an Apply result carries it.
			b, err := proto.Marshal(e)
			if err != nil {
				t.Fatal(err)
			}
			var got accountingv1.OpError
			if err := proto.Unmarshal(b, &got); err != nil {
				t.Fatal(err)
			}
			st := status.Convert(contract.OpStatus(&got))
			if !proto.Equal(st.Proto(), tc.want.Proto()) {
				t.Fatalf("round trip: got %v, want %v", st.Proto(), tc.want.Proto())
			}
		})
	}
}
