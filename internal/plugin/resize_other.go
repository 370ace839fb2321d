//go:build !unix

package plugin

import (
	"context"
	"os"
)

// notifyResize: no resize signal here; the size is the one at the start.
func notifyResize(context.Context) <-chan os.Signal { return nil }
