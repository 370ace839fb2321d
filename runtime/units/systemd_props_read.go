package units

import (
	"context"
	"errors"
	"fmt"
	"sync"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"golang.org/x/sync/semaphore"
)

// maxPropReads bounds the property reads in flight on the one
// connection. The system bus refuses a connection more pending replies
// than max_replies_per_connection (128 in dbus-daemon's system.conf),
// and observe asks ten at a time per unit: twenty Instances observed at
// once after a boot went over it, and reads failed with LimitsExceeded
// (a start then read as MayHaveRun). A quarter of the limit leaves room
// for the starts, stops and signals that share the connection.
const maxPropReads = 32

// propReads is the semaphore of reads in flight on a connection.
func newPropReads() *semaphore.Weighted { return semaphore.NewWeighted(maxPropReads) }

// observedProp is one property observe reads, and its interface.
type observedProp struct{ iface, name string }

var (
	propLoadState             = observedProp{"Unit", "LoadState"}
	propActiveState           = observedProp{"Unit", "ActiveState"}
	propSubState              = observedProp{"Unit", "SubState"}
	propInvocationID          = observedProp{"Unit", "InvocationID"}
	propMainPID               = observedProp{"Service", "MainPID"}
	propControlGroup          = observedProp{"Service", "ControlGroup"}
	propExecMainCode          = observedProp{"Service", "ExecMainCode"}
	propExecMainStatus        = observedProp{"Service", "ExecMainStatus"}
	propResult                = observedProp{"Service", "Result"}
	propExecMainExitTimestamp = observedProp{"Service", "ExecMainExitTimestamp"}
)

var observedProps = []observedProp{
	propLoadState, propActiveState, propSubState, propInvocationID,
	propMainPID, propControlGroup, propExecMainCode, propExecMainStatus, propResult, propExecMainExitTimestamp,
}

// propValues are the values read, and the error of each Service
// property that could not be (a unit that is not loaded has none).
type propValues map[observedProp]any

type propErr struct {
	prop observedProp
	err  error
}

func (v propValues) serviceErr() error {
	var errs []error
	for p, x := range v {
		if e, ok := x.(propErr); ok && p.iface == "Service" {
			errs = append(errs, fmt.Errorf("%s: %w", p.name, e.err))
		}
	}
	return errors.Join(errs...)
}

// getProps reads observedProps of unit, each with its own Get, all at
// once on the one connection (at most maxPropReads in flight): a GetAll of the Service interface would
// have systemd encode, and godbus decode, hundreds of properties observe
// never looks at (half the time of an observe here). An error of a Unit
// property fails the read; one of a Service property is kept in the
// result, for observe to judge once it knows whether the unit is loaded.
func getProps(ctx context.Context, c *sddbus.Conn, reads *semaphore.Weighted, unit string) (propValues, error) {
	vals := make([]any, len(observedProps))
	var wg sync.WaitGroup
	for i, p := range observedProps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := reads.Acquire(ctx, 1); err != nil {
				vals[i] = propErr{prop: p, err: err}
				return
			}
			defer reads.Release(1)
			prop, err := c.GetUnitTypePropertyContext(ctx, unit, p.iface, p.name)
			if err != nil {
				vals[i] = propErr{prop: p, err: err}
				return
			}
			vals[i] = prop.Value.Value()
		}()
	}
	wg.Wait()
	out := make(propValues, len(observedProps))
	for i, p := range observedProps {
		if e, ok := vals[i].(propErr); ok && p.iface == "Unit" {
			return nil, fmt.Errorf("%s: %w", p.name, e.err)
		}
		out[p] = vals[i]
	}
	return out, nil
}
