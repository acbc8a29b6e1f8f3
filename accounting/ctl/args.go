package ctl

import (
	"fmt"
	"strings"
)

// flagKind says whether a flag takes a value.
type flagKind int

const (
	stringFlag flagKind = iota
	boolFlag
)

// parsed is a command line split into flags and positional arguments.
type parsed struct {
	flags map[string]string
	args  []string
}

func (p parsed) has(name string) bool { _, ok := p.flags[name]; return ok }

// parseArgs splits args into flags and positional arguments. Unlike the flag package
// it accepts flags anywhere on the line ("topup ID --amount 10" and
// "topup --amount 10 ID" are the same); "--" ends flag parsing. Flags are written
// --name value, --name=value, or with a single dash; a bool flag takes no value
// unless written --name=true|false.
func parseArgs(args []string, spec map[string]flagKind) (parsed, error) {
	p := parsed{flags: map[string]string{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			p.args = append(p.args, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			p.args = append(p.args, a)
			continue
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		name, value, hasValue := strings.Cut(name, "=")
		kind, ok := spec[name]
		if !ok || name == "" {
			return parsed{}, fmt.Errorf("unknown flag %s", a)
		}
		switch kind {
		case boolFlag:
			if !hasValue {
				value = "true"
			} else if value != "true" && value != "false" {
				return parsed{}, fmt.Errorf("flag --%s takes true or false, not %q", name, value)
			}
		case stringFlag:
			if !hasValue {
				if i+1 >= len(args) {
					return parsed{}, fmt.Errorf("flag --%s needs a value", name)
				}
				i++
				value = args[i]
			}
		}
		p.flags[name] = value
	}
	return p, nil
}
