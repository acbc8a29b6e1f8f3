package alerts_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/accounting/alerts"
)

func TestRetrySchedule(t *testing.T) {
	first := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := first
	var delays []time.Duration
	for n := 1; ; n++ {
		next, ok := alerts.NextAttempt(n, first, now)
		if !ok {
			break
		}
		delays = append(delays, next.Sub(now))
		now = next
	}
	want := []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}
	for i, d := range want {
		if delays[i] != d {
			t.Fatalf("delays %v, want %v then hourly", delays, want)
		}
	}
	for _, d := range delays[len(want):] {
		if d != time.Hour {
			t.Fatalf("delays %v: hourly after the fifth", delays)
		}
	}
	if end := now.Sub(first); end > 24*time.Hour || end < 23*time.Hour {
		t.Errorf("the last attempt %v after the first, want within the 24 h", end)
	}
}

func TestSignMatchesTheConvention(t *testing.T) {
	// A fixed example worked out from the convention's definition with openssl:
	// printf 'msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"test": 2432232314}' | openssl dgst -sha256 \
	//   -mac HMAC -macopt hexkey:$(echo MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw | base64 -d | xxd -p -c 100) -binary | base64
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	got, err := alerts.Sign(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("signature %s, want %s", got, want)
	}
	if _, err := alerts.Sign("nope", "id", 1, nil); err == nil {
		t.Error("a secret without whsec_ signed")
	}
}

func TestKeysSealAndRotate(t *testing.T) {
	k1 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("1", 32)))
	k2 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("2", 32)))
	old, err := alerts.ParseKeys(k1)
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := old.Seal("whsec_abc")
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := alerts.ParseKeys(k2 + "\n" + k1)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := rotated.Open(sealed); err != nil || s != "whsec_abc" {
		t.Errorf("the rotated keys open the old seal: %q, %v", s, err)
	}
	newOnly, _ := alerts.ParseKeys(k2)
	if _, err := newOnly.Open(sealed); err == nil {
		t.Error("a key that did not seal it opened it")
	}
	sealed[len(sealed)-1] ^= 1
	if _, err := old.Open(sealed); err == nil {
		t.Error("a tampered seal opened")
	}
	if _, err := alerts.ParseKeys("c2hvcnQ="); err == nil {
		t.Error("a short key parsed")
	}
	if k, err := alerts.ParseKeys(" "); k != nil || err != nil {
		t.Errorf("no keys: %v, %v", k, err)
	}
}
