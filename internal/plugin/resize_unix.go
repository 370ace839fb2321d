//go:build unix

package plugin

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// notifyResize signals each resize of the terminal until ctx ends.
func notifyResize(ctx context.Context) <-chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGWINCH)
	go func() {
		<-ctx.Done()
		signal.Stop(ch)
	}()
	return ch
}
