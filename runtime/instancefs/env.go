package instancefs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// ErrMalformedEnv is wrapped by every env parse error (see EnvLineError).
var ErrMalformedEnv = errors.New("malformed env file")

// EnvLineError names the line of an env file that could not be parsed.
// It never carries the line's value, which may be a secret.
type EnvLineError struct {
	Line   int
	Reason string
}

func (e *EnvLineError) Error() string {
	return fmt.Sprintf("%v: line %d: %s", ErrMalformedEnv, e.Line, e.Reason)
}

func (e *EnvLineError) Unwrap() error { return ErrMalformedEnv }

// ParseEnv parses KEY=VALUE lines. Blank lines and lines starting with #
// are skipped; the value is the rest of the line, taken literally (no
// quoting), with one trailing \r dropped. Keys are [A-Za-z_][A-Za-z0-9_]*
// and may appear once: a second definition is more likely tampering than
// intent.
func ParseEnv(b []byte) (map[string]string, error) {
	env := map[string]string{}
	first := map[string]int{}
	for n, line := range bytes.Split(b, []byte("\n")) {
		num := n + 1
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 || line[0] == '#' {
			continue
		}
		k, v, ok := bytes.Cut(line, []byte("="))
		if !ok {
			return nil, &EnvLineError{Line: num, Reason: "no '=' between key and value"}
		}
		key := string(k)
		if !ValidEnvKey(key) {
			return nil, &EnvLineError{Line: num, Reason: fmt.Sprintf("invalid key %q", key)}
		}
		if bytes.IndexByte(v, 0) >= 0 {
			return nil, &EnvLineError{Line: num, Reason: fmt.Sprintf("value of %s holds a NUL byte", key)}
		}
		if at, dup := first[key]; dup {
			return nil, &EnvLineError{Line: num, Reason: fmt.Sprintf("%s already set on line %d", key, at)}
		}
		first[key] = num
		env[key] = string(v)
	}
	return env, nil
}

// ValidEnvKey reports whether k can be an env file key.
func ValidEnvKey(k string) bool {
	if k == "" {
		return false
	}
	for i, c := range []byte(k) {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// FormatEnv renders env as sorted KEY=VALUE lines that ParseEnv reads
// back to the same map. A key or value it cannot represent is an error.
func FormatEnv(env map[string]string) ([]byte, error) {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b bytes.Buffer
	for _, k := range keys {
		v := env[k]
		if !ValidEnvKey(k) {
			return nil, fmt.Errorf("env key %q cannot be written", k)
		}
		if strings.ContainsAny(v, "\n\x00") || strings.HasSuffix(v, "\r") {
			return nil, fmt.Errorf("value of env key %s holds a newline, NUL or trailing CR", k)
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// ReadEnv reads and parses the env file dir/name beneath dir. A missing
// file is an empty env: the instance has not been prepared yet.
func ReadEnv(dir, name string) (map[string]string, error) {
	b, err := ReadFile(dir, name)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	env, err := ParseEnv(b)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", dir, name, err)
	}
	return env, nil
}

// WriteEnv writes env to dir/name atomically, mode 0600.
func WriteEnv(dir, name string, env map[string]string) error {
	b, err := FormatEnv(env)
	if err != nil {
		return err
	}
	return WriteAtomic(dir, name, b, 0o600)
}
