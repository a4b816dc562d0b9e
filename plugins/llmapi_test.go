package plugins

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/opentalon/opentalon/core"
)

type fakeGen struct {
	gotModel string
	gotMsgs  []core.ChatMessage
	err      error
}

func (f *fakeGen) Generate(_ context.Context, r core.GenerateRequest) (core.Generated, error) {
	f.gotModel, f.gotMsgs = r.Model, r.Messages
	if f.err != nil {
		return core.Generated{}, f.err
	}
	return core.Generated{Text: "generated for " + r.Messages[len(r.Messages)-1].Content}, nil
}

func TestGenerateHandler(t *testing.T) {
	const key = "s3cret-key"
	body := `{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"llm_name":"small"}`
	tests := []struct {
		name       string
		apiKey     string
		method     string
		header     map[string]string
		body       string
		genErr     error
		wantStatus int
		wantText   string
		wantErr    string
	}{
		{"x-api-key", key, "POST", map[string]string{"X-API-Key": key}, body, nil, 200, "generated for hi", ""},
		{"bearer", key, "POST", map[string]string{"Authorization": "Bearer " + key}, body, nil, 200, "generated for hi", ""},
		{"no key", key, "POST", nil, body, nil, 401, "", "X-API-Key"},
		{"wrong key", key, "POST", map[string]string{"X-API-Key": "nope"}, body, nil, 401, "", "wrong API key"},
		{"key not configured", "", "POST", map[string]string{"X-API-Key": ""}, body, nil, 401, "", "server.api_key"},
		{"GET", key, "GET", map[string]string{"X-API-Key": key}, "", nil, 405, "", "use POST"},
		{"bad json", key, "POST", map[string]string{"X-API-Key": key}, `{"messages":`, nil, 400, "", "invalid request body"},
		{"unknown field", key, "POST", map[string]string{"X-API-Key": key}, `{"messages":[{"role":"user","content":"x"}],"model":"x"}`, nil, 400, "", "unknown field"},
		{"no messages", key, "POST", map[string]string{"X-API-Key": key}, `{"messages":[]}`, nil, 400, "", "messages"},
		{"bad role", key, "POST", map[string]string{"X-API-Key": key}, `{"messages":[{"role":"tool","content":"x"}]}`, nil, 400, "", "messages[0].role"},
		{"unknown model", key, "POST", map[string]string{"X-API-Key": key}, body, core.Errorf(core.KindNotFound, "unknown model %q", "small"), 400, "", `unknown model "small"`},
		{"provider down", key, "POST", map[string]string{"X-API-Key": key}, body, core.Errorf(core.KindUnavailable, "all models failed"), 502, "", "all models failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gen := &fakeGen{err: tt.genErr}
			srv := httptest.NewServer(NewGenerateHandler(gen, Keys{Operator: tt.apiKey}, nil))
			defer srv.Close()
			req, _ := http.NewRequest(tt.method, srv.URL+GeneratePath, strings.NewReader(tt.body))
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out GenerateResponse
			if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.wantStatus || out.Text != tt.wantText || !strings.Contains(out.Error, tt.wantErr) || (tt.wantErr == "") != (out.Error == "") {
				t.Fatalf("status %d body %+v; want %d text %q error ~%q", resp.StatusCode, out, tt.wantStatus, tt.wantText, tt.wantErr)
			}
			if strings.Contains(out.Error, key) {
				t.Fatal("the API key leaked into the error")
			}
			if tt.wantStatus == 200 {
				if gen.gotModel != "small" || len(gen.gotMsgs) != 2 || gen.gotMsgs[0].Role != core.RoleSystem {
					t.Fatalf("generator got model %q msgs %+v", gen.gotModel, gen.gotMsgs)
				}
			}
		})
	}
}

// TestGenerateResponseShape: a success always carries "text" (a client
// reads it by key, also when the model answered nothing), a failure only
// "error".
func TestGenerateResponseShape(t *testing.T) {
	for _, tc := range []struct {
		in   GenerateResponse
		want string
	}{
		{GenerateResponse{Text: "hi"}, `{"text":"hi"}`},
		{GenerateResponse{}, `{"text":""}`},
		{GenerateResponse{Error: "no"}, `{"error":"no"}`},
	} {
		b, err := json.Marshal(tc.in)
		if err != nil || string(b) != tc.want {
			t.Errorf("%+v marshals as %s (%v); want %s", tc.in, b, err, tc.want)
		}
	}
}
