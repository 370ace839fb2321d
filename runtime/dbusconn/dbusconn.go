// Package dbusconn opens D-Bus connections whose lifetime is the
// caller's: the context given bounds only the dial. (godbus ties a
// connection made WithContext to that context, so a connection dialled
// under one call's deadline would close when that call returns.)
package dbusconn

import (
	"context"
	"fmt"
	"os"
	"strconv"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// Dial opens a private connection to the bus at address ("" for the
// system bus), authenticated as this process's uid (EXTERNAL: no user
// lookup, so a static binary needs no libc) and named on the bus (Hello).
// The caller closes it.
func Dial(ctx context.Context, address string) (*godbus.Conn, error) {
	return bounded(ctx, address, func() (*godbus.Conn, error) { return dial(address) },
		func(c *godbus.Conn) { c.Close() })
}

// Systemd opens go-systemd's pair of connections (calls and job signals)
// to the bus at address ("" for the system bus), each as Dial opens one.
func Systemd(ctx context.Context, address string) (*sddbus.Conn, error) {
	return bounded(ctx, address, func() (*sddbus.Conn, error) {
		return sddbus.NewConnection(func() (*godbus.Conn, error) { return dial(address) })
	}, (*sddbus.Conn).Close)
}

// bounded runs open, returning early when ctx ends; what open brings
// after that is dropped.
func bounded[C any](ctx context.Context, address string, open func() (C, error), drop func(C)) (C, error) {
	type result struct {
		c   C
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := open()
		ch <- result{c, err}
	}()
	var zero C
	select {
	case r := <-ch:
		if r.err != nil {
			return zero, fmt.Errorf("dbusconn: connect %q: %w", address, r.err)
		}
		return r.c, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.err == nil {
				drop(r.c)
			}
		}()
		return zero, fmt.Errorf("dbusconn: connect %q: %w", address, ctx.Err())
	}
}

func dial(address string) (*godbus.Conn, error) {
	var (
		c   *godbus.Conn
		err error
	)
	if address == "" {
		c, err = godbus.SystemBusPrivate()
	} else {
		c, err = godbus.Dial(address)
	}
	if err != nil {
		return nil, err
	}
	return Handshake(c)
}

// Handshake authenticates c as this process's uid (EXTERNAL: no user
// lookup, so a static binary needs no libc) and names it on the bus
// (Hello); c is closed when either fails.
func Handshake(c *godbus.Conn) (*godbus.Conn, error) {
	if err := c.Auth([]godbus.Auth{godbus.AuthExternal(strconv.Itoa(os.Getuid()))}); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.Hello(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
