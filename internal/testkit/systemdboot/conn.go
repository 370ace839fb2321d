package systemdboot

import (
	"context"
	"fmt"
	"os"
	"strconv"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"
)

// Conn connects to the booted systemd through the namespace's dbus-daemon
// (EXTERNAL auth, then Hello). systemd's private socket cannot be used:
// it rejects a client outside its pid namespace. ctx bounds the setup only;
// the caller closes the connection.
func (s *System) Conn(ctx context.Context) (*sddbus.Conn, error) {
	return s.ConnAt(ctx, s.BusSocket())
}

// ConnAt is Conn through socket, a path that leads to BusSocket (a proxy
// of the test's own, say).
func (s *System) ConnAt(ctx context.Context, socket string) (*sddbus.Conn, error) {
	type result struct {
		c   *sddbus.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := sddbus.NewConnection(func() (*godbus.Conn, error) { return dialBus(socket) })
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("systemdboot: connect %s: %w", socket, r.err)
		}
		return r.c, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, fmt.Errorf("systemdboot: connect %s: %w", socket, ctx.Err())
	}
}

// dialBus opens one authenticated bus connection.
func dialBus(socket string) (*godbus.Conn, error) {
	c, err := godbus.Dial("unix:path=" + socket)
	if err != nil {
		return nil, err
	}
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
