// Command barehttp is the baseline of bench/http.sh: a net/http server whose
// every answer is a fixed claim answer of the size and shape spent's
// POST /v1/claim gives, after reading the request body. It does no other
// work, so the load generator's figure against it is the ceiling of HTTP on
// the machine, measured in the same run as spent itself.
//
//	go run ./bench/barehttp --listen 127.0.0.1:7076
package main

import (
	"flag"
	"io"
	"log"
	"net/http"
	"strconv"
)

// answer has the fields and length of a fresh one-step claim's answer.
const answer = `{"outcome":"fresh","namespace":"default","hash":"e17cee21c9d7bc4f6add0cccb5f1dba5",` +
	`"state":"complete","first_seen":"2026-12-01T05:45:27.902715318Z","place":"",` +
	`"expires_at":"2026-12-02T05:45:27.902715318Z","seq":"1:65542"}`

func main() {
	listen := flag.String("listen", "127.0.0.1:7076", "address to listen on")
	flag.Parse()
	length := strconv.Itoa(len(answer))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20)); err != nil {
			http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", length)
		io.WriteString(w, answer)
	})
	log.Printf("barehttp: listening on %s", *listen)
	log.Fatal(http.ListenAndServe(*listen, h))
}
