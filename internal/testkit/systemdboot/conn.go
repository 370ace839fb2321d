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
	type result struct {
		c   *sddbus.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := sddbus.NewConnection(s.dialBus)
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("systemdboot: connect %s: %w", s.BusSocket(), r.err)
		}
		return r.c, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			}
		}()
		return nil, fmt.Errorf("systemdboot: connect %s: %w", s.BusSocket(), ctx.Err())
	}
}

// dialBus opens one authenticated bus connection.
func (s *System) dialBus() (*godbus.Conn, error) {
	c, err := godbus.Dial("unix:path=" + s.BusSocket())
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
