package http_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	sphttp "github.com/spentledger/spent/http"
)

// TestOpenAPIServed checks that the server answers its embedded document
// at OpenAPIPath, to GET and HEAD and without a token, and refuses other
// methods with 405. cmd/spent's OpenAPI tests validate the document and
// every exchange against it.
func TestOpenAPIServed(t *testing.T) {
	e := MustServe(t, authConfig())
	a := request(t, "GET", e.url+sphttp.OpenAPIPath, nil)
	if a.status != http.StatusOK || a.header.Get("Content-Type") != "application/json" || !bytes.Equal(a.body, sphttp.OpenAPI) {
		t.Fatalf("GET: %d %s, %d bytes; want 200, application/json and http/openapi.json", a.status, a.header.Get("Content-Type"), len(a.body))
	}
	var doc struct{ OpenAPI string }
	if err := json.Unmarshal(sphttp.OpenAPI, &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("http/openapi.json: openapi %q, %v; want 3.1.0", doc.OpenAPI, err)
	}
	if a := request(t, "HEAD", e.url+sphttp.OpenAPIPath, nil); a.status != http.StatusOK || len(a.body) != 0 {
		t.Fatalf("HEAD: %d with %d bytes; want 200 without a body", a.status, len(a.body))
	}
	a = request(t, "POST", e.url+sphttp.OpenAPIPath, nil)
	if a.status != http.StatusMethodNotAllowed || a.header.Get("Allow") != "GET, HEAD" || a.json(t)["code"] != "invalid" {
		t.Fatalf("POST: %d, Allow %q, %s; want 405 invalid with Allow: GET, HEAD", a.status, a.header.Get("Allow"), a.body)
	}
}
