package cli

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// tagUsage is the usage of cont tag and obj tag.
const tagUsage = "put NAME KEY VALUE [TYPE] | get NAME KEY | rm NAME KEY | ls NAME"

// tagger is what has tags: objects and containers.
type tagger interface {
	PutTag(ctx context.Context, name string, v client.TagValue) error
	GetTag(ctx context.Context, name string) (client.TagValue, error)
	DeleteTag(ctx context.Context, name string) error
	Tags(ctx context.Context) ([]string, error)
}

// runTag runs the tag verbs of pdc cont and pdc obj on what open opens.
func runTag(ctx context.Context, e *env, args []string, open func(context.Context, string) (tagger, error), kind string) error {
	if len(args) < 2 {
		return fmt.Errorf("%s tag: usage: %s tag put NAME KEY VALUE [TYPE] | get NAME KEY | rm NAME KEY | ls NAME: %w", kind, kind, errUsage)
	}
	verb, name := args[0], args[1]
	t, err := open(ctx, name)
	if err != nil {
		return err
	}
	if c, ok := t.(*client.Object); ok {
		defer c.Close(ctx)
	}
	switch {
	case verb == "ls":
		names, err := t.Tags(ctx)
		if err != nil {
			return err
		}
		for _, n := range names {
			fmt.Fprintln(e.stdout, n)
		}
		return nil
	case verb == "get" && len(args) == 3:
		v, err := t.GetTag(ctx, args[2])
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s\t%s\t%s\n", args[2], v.Type, v)
		return nil
	case verb == "rm" && len(args) == 3:
		if err := t.DeleteTag(ctx, args[2]); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "removed tag %s of %s %s\n", args[2], tagKind(kind), name)
		return nil
	case verb == "put" && (len(args) == 4 || len(args) == 5):
		typ := "string"
		if len(args) == 5 {
			typ = args[4]
		}
		v, err := parseTagValue(args[3], typ)
		if err != nil {
			return fmt.Errorf("%s tag put: %v: %w", kind, err, errUsage)
		}
		if err := t.PutTag(ctx, args[2], v); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "put tag %s = %s (%s) on %s %s\n", args[2], v, v.Type, tagKind(kind), name)
		return nil
	}
	return fmt.Errorf("%s tag: usage: %s tag put NAME KEY VALUE [TYPE] | get NAME KEY | rm NAME KEY | ls NAME: %w", kind, kind, errUsage)
}

func tagKind(kind string) string {
	if kind == "cont" {
		return "container"
	}
	return "object"
}

// parseTagValue reads a tag value written on the command line as type typ.
func parseTagValue(s, typ string) (client.TagValue, error) {
	t, err := region.ParseType(typ)
	if err != nil {
		return client.TagValue{}, err
	}
	le := binary.LittleEndian
	switch {
	case t == region.String || t == region.Char:
		return client.Typed(t, []byte(s)), nil
	case t == region.VoidPtr:
		return client.Typed(t, []byte(s)), nil
	case t == region.Boolean:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return client.TagValue{}, fmt.Errorf("%q is not a bool: want true or false (or 1 or 0)", s)
		}
		v := byte(0)
		if b {
			v = 1
		}
		return client.Typed(t, []byte{v}), nil
	case t.FloatingPoint():
		f, err := strconv.ParseFloat(s, 8*t.Size())
		if err != nil {
			return client.TagValue{}, numberError(s, t, err)
		}
		if t == region.Float {
			return client.Typed(t, le.AppendUint32(nil, math.Float32bits(float32(f)))), nil
		}
		return client.Typed(t, le.AppendUint64(nil, math.Float64bits(f))), nil
	case t.Integer():
		size := t.Size()
		var u uint64
		if t.Signed() {
			i, err := strconv.ParseInt(s, 0, 8*size)
			if err != nil {
				return client.TagValue{}, numberError(s, t, err)
			}
			u = uint64(i)
		} else {
			v, err := strconv.ParseUint(s, 0, 8*size)
			if err != nil {
				return client.TagValue{}, numberError(s, t, err)
			}
			u = v
		}
		b := le.AppendUint64(nil, u)
		return client.Typed(t, b[:size]), nil
	}
	return client.TagValue{}, fmt.Errorf("cannot write a %s tag on the command line", t)
}

// numberError says why s is no value of type t: out of its range (1e40
// was stored as a float32 +Inf, 300 refused as "not a uint8"), or not
// a number.
func numberError(s string, t region.Type, err error) error {
	if errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("%q is out of the range of type %s", s, t)
	}
	return fmt.Errorf("%q is not a number of type %s", s, t)
}

// checkTagArgs checks the arguments of cont tag and obj tag before
// anything connects.
func checkTagArgs(kind, verb string, args []string) error {
	if verb != "tag" {
		return nil
	}
	ok := len(args) >= 2
	if ok {
		switch args[0] {
		case "ls":
			ok = len(args) == 2
		case "get", "rm":
			ok = len(args) == 3
		case "put":
			ok = len(args) == 4 || len(args) == 5
		default:
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("%s tag: usage: pdc %s tag %s: %w", kind, kind, tagUsage, errUsage)
	}
	return nil
}
