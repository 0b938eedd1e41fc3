package purgecursor

import "testing"

func TestCursor(t *testing.T) {
	var c Cursor[string]
	if pos, ok := c.Start("A"); ok || pos != "" {
		t.Fatalf("first Start: got %q, %v; want the start", pos, ok)
	}
	c.Set("k1")
	c.Done()
	if pos, ok := c.Start("A"); !ok || pos != "k1" {
		t.Fatalf("Start of the same namespace: got %q, %v; want k1", pos, ok)
	}
	// A call that sets nothing leaves nothing for the next.
	c.Done()
	if pos, ok := c.Start("A"); ok || pos != "" {
		t.Fatalf("Start after a call that set nothing: got %q, %v; want the start", pos, ok)
	}
	c.Set("k2")
	c.Done()
	if pos, ok := c.Start("B"); ok || pos != "" {
		t.Fatalf("Start of another namespace: got %q, %v; want the start", pos, ok)
	}
	c.Done()
	if pos, ok := c.Start("A"); ok || pos != "" {
		t.Fatalf("Start of A after B: got %q, %v; want the start", pos, ok)
	}
	c.Done()
}
