package nodevm

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"time"
)

// qmp is a connection to QEMU's machine protocol (JSON lines on a unix
// socket): the few commands a snapshot needs.
type qmp struct {
	conn net.Conn
	r    *bufio.Reader
}

// dialQMP connects to the socket QEMU serves at path (it creates it as
// it starts) and negotiates capabilities.
func dialQMP(ctx context.Context, path string, exited <-chan struct{}) (*qmp, error) {
	for {
		conn, err := net.Dial("unix", path)
		if err == nil {
			q := &qmp{conn: conn, r: bufio.NewReader(conn)}
			if _, err := q.r.ReadBytes('\n'); err != nil { // the greeting
				conn.Close()
				return nil, fmt.Errorf("nodevm: qmp greeting: %w", err)
			}
			if err := q.do("qmp_capabilities", nil, nil); err != nil {
				conn.Close()
				return nil, err
			}
			return q, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("nodevm: qmp %s: %w", path, err)
		case <-exited:
			return nil, fmt.Errorf("nodevm: qemu exited before its qmp socket answered: %w", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// do runs command with args and decodes its answer into ret (when not
// nil); events that arrive meanwhile are skipped.
func (q *qmp) do(command string, args, ret any) error {
	req := map[string]any{"execute": command}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if _, err := q.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("nodevm: qmp %s: %w", command, err)
	}
	for {
		line, err := q.r.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("nodevm: qmp %s: %w", command, err)
		}
		var resp struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Desc string `json:"desc"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &resp); err != nil {
			return fmt.Errorf("nodevm: qmp %s: %q: %w", command, line, err)
		}
		switch {
		case resp.Error != nil:
			return fmt.Errorf("nodevm: qmp %s: %s", command, resp.Error.Desc)
		case resp.Return == nil: // an event
			continue
		case ret != nil:
			return json.Unmarshal(resp.Return, ret)
		default:
			return nil
		}
	}
}

// migrated waits until the migration in either direction has completed;
// a failed or cancelled one is an error.
func (q *qmp) migrated(ctx context.Context) error {
	for {
		var st struct {
			Status    string `json:"status"`
			ErrorDesc string `json:"error-desc"`
		}
		if err := q.do("query-migrate", nil, &st); err != nil {
			return err
		}
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("nodevm: migration %s: %s", st.Status, st.ErrorDesc)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("nodevm: migration %s: %w", st.Status, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (q *qmp) Close() error { return q.conn.Close() }
