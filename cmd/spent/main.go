package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// main turns SIGINT and SIGTERM into a cancelled context and hands off to
// Main. A second signal, once shutdown has begun, kills the process at once.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	code := NewMain().Execute(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
