package gen

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Names returns the names of the table's messages, in table order.
func (s *Schema) Names() []string {
	var out []string
	for _, it := range s.Items {
		if it.Msg != nil {
			out = append(out, it.Msg.Name)
		}
	}
	return out
}

// Parse reads a table.
func Parse(src []byte) (*Schema, error) {
	p := &parser{s: &Schema{Scalars: map[string]string{}, Messages: map[string]*Message{}}}
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		p.n++
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "#") {
			continue // a comment on the table itself
		}
		var err error
		if p.cur != nil {
			err = p.inMessage(line)
		} else {
			err = p.topLevel(line)
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", p.n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if p.cur != nil {
		return nil, fmt.Errorf("message %s not closed", p.cur.Name)
	}
	if len(p.pending) > 0 {
		p.s.Items = append(p.s.Items, Item{Comment: p.pending})
	}
	return p.s, p.s.check()
}

// parser is Parse's state between lines.
type parser struct {
	s       *Schema
	n       int      // the line number
	pending []string // comment lines not yet attached
	cur     *Message // the message being read; nil between messages
	lines   []string // inside a message: lines before the next field
}

// inMessage reads a line inside a message's braces: a field, a comment or
// blank line kept for the next field, or the closing brace.
func (p *parser) inMessage(line string) error {
	switch {
	case line == "}":
		if len(p.lines) > 0 && p.lines[len(p.lines)-1] == "" {
			p.lines = p.lines[:len(p.lines)-1]
		}
		if len(p.lines) > 0 {
			return fmt.Errorf("comment at the end of message %s", p.cur.Name)
		}
		p.s.Items = append(p.s.Items, Item{Msg: p.cur})
		p.cur = nil
	case line == "" || strings.HasPrefix(line, "//"):
		p.lines = append(p.lines, line)
	default:
		fd, err := parseField(line)
		if err != nil {
			return err
		}
		fd.Lines, fd.Line = p.lines, p.n
		p.lines = nil
		p.cur.Fields = append(p.cur.Fields, fd)
	}
	return nil
}

// topLevel reads a line between messages: a comment, a blank line that
// ends a free comment block, or a declaration.
func (p *parser) topLevel(line string) error {
	switch {
	case line == "":
		if len(p.pending) > 0 {
			p.s.Items = append(p.s.Items, Item{Comment: p.pending})
			p.pending = nil
		}
	case strings.HasPrefix(line, "//"):
		p.pending = append(p.pending, line)
	case strings.HasPrefix(line, "type "):
		f := strings.Fields(line)
		if len(f) != 3 || !isScalar(f[2]) {
			return fmt.Errorf("want: type Name uint32|uint64|int32|int64")
		}
		if len(p.pending) > 0 {
			return fmt.Errorf("doc comment on a type the table does not declare")
		}
		p.s.Scalars[f[1]] = f[2]
	case strings.HasPrefix(line, "message "):
		return p.message(line)
	case strings.HasPrefix(line, "rpc "):
		c, err := parseCall(line)
		if err != nil {
			return err
		}
		c.Doc, c.Line = p.pending, p.n
		p.pending = nil
		p.s.Calls = append(p.s.Calls, c)
	default:
		return fmt.Errorf("unexpected %q", line)
	}
	return nil
}

// message reads "message Name [options] {" and starts the message.
func (p *parser) message(line string) error {
	if !strings.HasSuffix(line, "{") {
		return fmt.Errorf("want: message Name [options] {")
	}
	f := strings.Fields(strings.TrimSuffix(line, "{"))
	m := &Message{Name: f[1], Doc: p.pending, Options: map[string]string{}, Line: p.n}
	p.pending = nil
	for _, o := range f[2:] {
		o = strings.Trim(o, "[],")
		k, v, _ := strings.Cut(o, "=")
		switch k {
		case "unmarshal", "sizehint", "check", "slab":
		default:
			return fmt.Errorf("unknown message option %q", k)
		}
		m.Options[k] = v
	}
	if _, dup := p.s.Messages[m.Name]; dup {
		return fmt.Errorf("message %s declared twice", m.Name)
	}
	p.s.Messages[m.Name] = m
	p.cur, p.lines = m, nil
	return nil
}

// parseField reads "Name Type = N [opts] // comment".
func parseField(line string) (*Field, error) {
	fd := &Field{Options: map[string]bool{}}
	if i := strings.Index(line, "//"); i >= 0 {
		fd.Comment = strings.TrimSpace(line[i+2:])
		line = strings.TrimSpace(line[:i])
	}
	if i := strings.LastIndex(line, "["); i > strings.Index(line, "=") {
		if !strings.HasSuffix(line, "]") {
			return nil, fmt.Errorf("options not closed")
		}
		for _, o := range strings.Split(line[i+1:len(line)-1], ",") {
			o = strings.TrimSpace(o)
			if o != "alias" && o != "presize" {
				return nil, fmt.Errorf("unknown field option %q", o)
			}
			fd.Options[o] = true
		}
		line = strings.TrimSpace(line[:i])
	}
	decl, num, ok := strings.Cut(line, "=")
	if !ok {
		return nil, fmt.Errorf("want: Name Type = N")
	}
	f := strings.Fields(decl)
	if len(f) != 2 {
		return nil, fmt.Errorf("want: Name Type = N")
	}
	fd.Name, fd.Type = f[0], f[1]
	v, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || v < 1 || v > 1<<29-1 || (v >= 19000 && v <= 19999) {
		return nil, fmt.Errorf("field %s: bad field number %q", fd.Name, num)
	}
	fd.Num = v
	return fd, nil
}

func isScalar(t string) bool {
	switch t {
	case "uint64", "uint32", "int64", "int32":
		return true
	}
	return false
}

func (s *Schema) check() error {
	for _, it := range s.Items {
		m := it.Msg
		if m == nil {
			continue
		}
		nums := map[int]string{}
		names := map[string]bool{}
		for _, fd := range m.Fields {
			if prev, ok := nums[fd.Num]; ok {
				return fmt.Errorf("line %d: %s: field %s reuses number %d of %s", fd.Line, m.Name, fd.Name, fd.Num, prev)
			}
			if names[fd.Name] {
				return fmt.Errorf("line %d: %s: field %s declared twice", fd.Line, m.Name, fd.Name)
			}
			nums[fd.Num], names[fd.Name] = fd.Name, true
			k, _, _, err := s.kindOf(fd)
			if err != nil {
				return err
			}
			if fd.Options["alias"] && k != kBytes {
				return fmt.Errorf("line %d: %s.%s: alias applies to []byte only", fd.Line, m.Name, fd.Name)
			}
			if fd.Options["presize"] && k != kRepeated {
				return fmt.Errorf("line %d: %s.%s: presize applies to []message only", fd.Line, m.Name, fd.Name)
			}
		}
		if !slices.IsSortedFunc(m.Fields, func(a, b *Field) int { return a.Num - b.Num }) {
			// Marshal writes in table order; keeping it the field order
			// keeps the encoding canonical.
			return fmt.Errorf("line %d: %s: fields out of number order", m.Line, m.Name)
		}
		if u := m.Options["unmarshal"]; u != "" && u != "custom" {
			return fmt.Errorf("line %d: %s: unmarshal=%s, want custom", m.Line, m.Name, u)
		}
	}
	return s.checkCalls()
}
