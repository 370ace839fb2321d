package node

import (
	"errors"
	"testing"

	"github.com/unitlet/unitlet/runtime/identity"
)

// A one-off run is a new start: it runs as its generation's named user
// only while a grant gives that user now.
func TestRunGranted(t *testing.T) {
	app := identity.Credential{UID: 1000, GID: 1000, User: "app"}
	root := identity.Credential{UID: 0, GID: 0, User: "root"}
	grants := func(g identity.Grant) func(string) (identity.Grant, error) {
		return func(string) (identity.Grant, error) { return g, nil }
	}
	unreadable := errors.New("cache not synced")
	tests := map[string]struct {
		cred    identity.Credential
		grant   func(string) (identity.Grant, error)
		wantErr error
	}{
		"an own uid needs no grant":        {cred: identity.Credential{UID: 1879048192, GID: 1879048192}},
		"a granted user":                   {cred: app, grant: grants(identity.Grant{User: "app"})},
		"a user whose grant is gone":       {cred: app, grant: grants(identity.Grant{}), wantErr: identity.ErrNotGranted},
		"no grant reader grants no user":   {cred: app, wantErr: identity.ErrNotGranted},
		"root under a grant of root":       {cred: root, grant: grants(identity.Grant{User: "root", Root: true})},
		"uid 0 without a grant of root":    {cred: root, grant: grants(identity.Grant{User: "root"}), wantErr: identity.ErrRootRefused},
		"grants unreadable: refused as is": {cred: app, grant: func(string) (identity.Grant, error) { return identity.Grant{}, unreadable }, wantErr: unreadable},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := RunRequest{Grant: tc.grant}.granted(tc.cred)
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}
