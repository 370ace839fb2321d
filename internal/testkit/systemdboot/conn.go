package systemdboot

import (
	"context"
	"fmt"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	godbus "github.com/godbus/dbus/v5"

	"github.com/unitlet/unitlet/runtime/dbusconn"
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
	c, err := dbusconn.Systemd(ctx, "unix:path="+socket)
	if err != nil {
		return nil, fmt.Errorf("systemdboot: %w", err)
	}
	return c, nil
}

// Bus is one plain connection to the namespace's bus, as a listener of
// systemd's signals uses; ctx bounds the setup only.
func (s *System) Bus(ctx context.Context) (*godbus.Conn, error) {
	c, err := dbusconn.Dial(ctx, "unix:path="+s.BusSocket())
	if err != nil {
		return nil, fmt.Errorf("systemdboot: %w", err)
	}
	return c, nil
}
