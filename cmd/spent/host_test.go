package main_test

import (
	"net/http"
	"strings"
	"testing"
)

// hostRequest sends a claim to path to the server at addr with the given
// Host header and returns the status and body.
func hostRequest(t *testing.T, addr, host, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, addr+path, strings.NewReader(`{"namespace":"default","key":"k"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp.StatusCode, b.String()
}

// TestForeignHostRefusedWithoutAuth serves without tokens and sends
// requests whose Host header names another site, as a web page that
// rebinds its DNS name to 127.0.0.1 would: they are refused, while
// loopback names are served.
func TestForeignHostRefusedWithoutAuth(t *testing.T) {
	s := MustServe(t, t.TempDir(), nil, nil)
	port := s.Addr[strings.LastIndex(s.Addr, ":"):]
	for _, host := range []string{"evil.example" + port, "evil.example", "127.0.0.1.evil.example" + port, "localhost.evil.example", "10.0.0.1" + port, "[::2]" + port, "0.0.0.0" + port} {
		status, body := hostRequest(t, s.Addr, host, "/v1/claim")
		if status != http.StatusMisdirectedRequest || !strings.Contains(body, `"host_not_allowed"`) {
			t.Fatalf("Host %s: got %d %s, want 421 host_not_allowed", host, status, body)
		}
	}
}

// TestLoopbackHostsServedWithoutAuth: the names a local client uses pass.
func TestLoopbackHostsServedWithoutAuth(t *testing.T) {
	s := MustServe(t, t.TempDir(), nil, nil)
	port := s.Addr[strings.LastIndex(s.Addr, ":"):]
	for _, host := range []string{"127.0.0.1" + port, "localhost" + port, "localhost", "LocalHost.", "api.localhost" + port, "127.0.0.2" + port, "[::1]" + port} {
		if status, body := hostRequest(t, s.Addr, host, "/v1/claim"); status != http.StatusOK {
			t.Fatalf("Host %s: got %d %s, want 200", host, status, body)
		}
	}
}

// TestForeignHostServedWithAuth: with tokens, the server may sit behind any
// name, and the check is off.
func TestForeignHostServedWithAuth(t *testing.T) {
	const token = "claim-token-0123456789"
	cfg := WriteConfig(t, "[[tokens]]\ntoken = \""+token+"\"\nscopes = [\"claim\"]\n")
	s := MustServe(t, t.TempDir(), nil, nil, "--config", cfg)
	req, err := http.NewRequest(http.MethodPost, s.Addr+"/v1/claim", strings.NewReader(`{"namespace":"default","key":"k"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Host = "spent.example.com"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("Host spent.example.com with a token: got %d, want 200", resp.StatusCode)
	}
}
