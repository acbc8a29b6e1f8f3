package mock_test

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"

	"github.com/llmgw/gateway/e2e/mock"
)

func getProbe(t *testing.T, base, id string) (int, mock.Probe) {
	t.Helper()
	resp, err := http.Get(base + "/mock/probes/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p mock.Probe
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode, p
}

func TestProbeCountsAttempts(t *testing.T) {
	srv := newServer(t)
	body := func(model string) string {
		return `{"model":"` + model + `","messages":[{"role":"user","content":"hi [[mock:probe=p1]]"}]}`
	}
	tests := []struct {
		name    string
		headers map[string]string
		model   string
		status  int
	}{
		{name: "answered", headers: map[string]string{"Authorization": "Bearer sk-mock-openai", "X-Envoy-Retry-On": "5xx"}, model: "mock-gpt", status: 200},
		{name: "out of funds", headers: map[string]string{"Authorization": "Bearer sk-mock-exhausted"}, model: "mock-gpt", status: 429},
		{name: "broken model", headers: map[string]string{"Authorization": "Bearer sk-mock-openai"}, model: "mock-broken", status: 200},
		{name: "no credential", headers: map[string]string{}, model: "mock-gpt", status: 401},
	}
	for _, tt := range tests {
		if status, _, b := post(t, srv.URL+"/v1/chat/completions", tt.headers, body(tt.model)); status != tt.status {
			t.Fatalf("%s: status %d %s", tt.name, status, b)
		}
	}
	status, p := getProbe(t, srv.URL, "p1")
	want := mock.Probe{Attempts: 4, Uncredentialed: 1, EnvoyHeaders: map[string][]string{"x-envoy-retry-on": {"5xx"}}}
	if status != 200 || !reflect.DeepEqual(p, want) {
		t.Errorf("probe = %d %+v, want %+v", status, p, want)
	}
	if status, _ := getProbe(t, srv.URL, "never-sent"); status != http.StatusNotFound {
		t.Errorf("unknown probe status %d", status)
	}
}
