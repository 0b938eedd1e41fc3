package capture_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/spentledger/spent/internal/capture"
)

func TestStatus(t *testing.T) {
	r := capture.New(10)
	if r.Status() != http.StatusOK {
		t.Fatalf("no status written: got %d, want 200", r.Status())
	}
	r.WriteHeader(http.StatusEarlyHints) // informational, not the response's
	r.WriteHeader(http.StatusProcessing)
	r.WriteHeader(http.StatusCreated)
	r.WriteHeader(http.StatusTeapot) // a second final status is ignored, as net/http does
	if r.Status() != http.StatusCreated {
		t.Fatalf("after 103, 102, 201, 418: got %d, want 201", r.Status())
	}
	w := capture.New(10)
	w.Write([]byte("x"))
	w.WriteHeader(http.StatusNotFound)
	if w.Status() != http.StatusOK {
		t.Fatalf("WriteHeader after Write: got %d, want the implied 200", w.Status())
	}
}

func TestOverflow(t *testing.T) {
	r := capture.New(5)
	if n, err := r.Write([]byte("abc")); n != 3 || err != nil {
		t.Fatalf("within the limit: %d, %v", n, err)
	}
	if n, err := r.Write([]byte("def")); n != 0 || !errors.Is(err, capture.ErrTooLarge) {
		t.Fatalf("past the limit: %d, %v; want 0, ErrTooLarge", n, err)
	}
	// Once over, nothing more is kept, even what would fit.
	if n, err := r.Write([]byte("g")); n != 0 || !errors.Is(err, capture.ErrTooLarge) {
		t.Fatalf("after the overflow: %d, %v; want 0, ErrTooLarge", n, err)
	}
	if !r.Overflow() || string(r.Body()) != "abc" {
		t.Fatalf("got overflow %v, body %q; want true, %q", r.Overflow(), r.Body(), "abc")
	}
}

func TestSend(t *testing.T) {
	r := capture.New(100)
	r.Header().Set("X-A", "1")
	r.WriteHeader(http.StatusAccepted)
	r.Write([]byte("hello"))
	w := httptest.NewRecorder()
	w.Header().Set("X-A", "0")
	w.Header().Set("X-B", "2")
	r.Send(w)
	if w.Code != http.StatusAccepted || w.Body.String() != "hello" || w.Header().Get("Content-Length") != "5" ||
		w.Header().Get("X-A") != "1" || w.Header().Get("X-B") != "2" {
		t.Fatalf("sent %d %q with header %v", w.Code, w.Body.String(), w.Header())
	}
	n := capture.New(100)
	n.WriteHeader(http.StatusNoContent)
	w = httptest.NewRecorder()
	n.Send(w)
	if w.Code != http.StatusNoContent || w.Header().Get("Content-Length") != "" {
		t.Fatalf("204: sent %d with Content-Length %q, want none", w.Code, w.Header().Get("Content-Length"))
	}
}
