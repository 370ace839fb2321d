package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"

	"github.com/unitlet/unitlet/internal/agentapi"
)

// ExitInterrupted is a run the plugin was interrupted in (Ctrl-C): the
// agent stops the command and proves it gone.
const ExitInterrupted = 130

func runMain(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	var c common
	var withStdin bool
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	c.register(fs)
	fs.BoolVar(&withStdin, "stdin", false, "pass this stdin to the command (default: it reads an empty one)")
	fs.BoolVar(&withStdin, "i", false, "short for --stdin")
	name, argv, err := parse(fs, args)
	if err != nil {
		return 0, err
	}
	if len(argv) == 0 {
		return 0, usageError{errors.New("name the command after --: kubectl unitlet run INSTANCE -- COMMAND [ARGS...]")}
	}
	a, err := connect(ctx, c, name)
	if err != nil {
		return 0, err
	}
	var body io.Reader = bytes.NewReader(agentapi.WriteRunRequest(agentapi.RunRequest{Command: argv, Stdin: withStdin}))
	if withStdin {
		body = io.MultiReader(body, stdin)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.url(agentapi.RunPath(a.namespace, name), ""), body)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ExitInterrupted, nil
		}
		return 0, fmt.Errorf("agent of node %s: %w", a.node, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, responseError(resp)
	}
	code, err := copyFrames(resp.Body, stdout, stderr)
	if err != nil && ctx.Err() != nil {
		fmt.Fprintln(stderr, "unitlet: interrupted; the agent stops the command")
		return ExitInterrupted, nil
	}
	return code, err
}

// copyFrames writes a run's output frames to stdout and stderr and
// returns its exit code from the last frame.
func copyFrames(r io.Reader, stdout, stderr io.Writer) (int, error) {
	for {
		kind, b, err := agentapi.ReadFrame(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, fmt.Errorf("run stream ended before its exit: %w", err)
		}
		switch kind {
		case agentapi.FrameStdout:
			_, err = stdout.Write(b)
		case agentapi.FrameStderr:
			_, err = stderr.Write(b)
		case agentapi.FrameExit:
			var e agentapi.RunExit
			if err := json.Unmarshal(b, &e); err != nil {
				return 0, fmt.Errorf("run exit: %w", err)
			}
			if e.Message != "" {
				fmt.Fprintf(stderr, "unitlet: %s: %s\n", e.Name, e.Message)
			}
			return e.ExitCode, nil
		case agentapi.FrameError:
			return 0, errors.New(string(b))
		}
		if err != nil {
			return 0, err
		}
	}
}
