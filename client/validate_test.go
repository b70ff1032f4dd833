package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// What a server would refuse fails in the client, before any request,
// with the server's message (issue 25, case 9), and nothing is stored.
func TestClientRefusesBadInput(t *testing.T) {
	s := startServers(t, t.TempDir(), 2)
	c := s.connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ct, _, err := c.CreateContainer(ctx, "checked", client.Persistent)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.CreateContainer(ctx, "two\nlines", client.Persistent)
	wantErr(t, "container name with a newline", err, pdc.ErrInvalid, `container name "two\nlines" has a control character (U+000A)`)

	ok := client.ObjectProps{Dims: []uint64{4, 4}, Type: region.Int64}
	for _, tc := range []struct {
		what  string
		name  string
		props func(p *client.ObjectProps)
		is    error
		want  string
	}{
		{"an unknown storage mode", "s", func(p *client.ObjectProps) { p.Storage = 7 }, pdc.ErrInvalid, `object "s": unknown storage mode 7`},
		{"dims past 2^63 bytes", "big", func(p *client.ObjectProps) { p.Dims = []uint64{1 << 40, 1 << 21} }, pdc.ErrOutOfRange, "pass 2^63 bytes"},
		{"a row of an unlimited object past 2^63 bytes", "row", func(p *client.ObjectProps) { p.Dims = []uint64{client.Unlimited, 1 << 61} }, pdc.ErrOutOfRange, "pass 2^63 bytes"},
		{"an escape sequence in the name", "\x1b[31mred", nil, pdc.ErrInvalid, "control character (U+001B)"},
		{"a C1 control in the name", "next\u0085line", nil, pdc.ErrInvalid, "control character (U+0085)"},
		{"invalid UTF-8", "bad\xff", nil, pdc.ErrInvalid, "not valid UTF-8 (byte 3 is 0xff)"},
		{"an app name with a newline", "app", func(p *client.ObjectProps) { p.AppName = "a\nb" }, pdc.ErrInvalid, "app name"},
	} {
		p := ok.Clone()
		if tc.props != nil {
			tc.props(&p)
		}
		_, err := ct.CreateObject(ctx, tc.name, p)
		wantErr(t, "create with "+tc.what, err, tc.is, tc.want)
	}
	// One bad spec of a batch fails it whole, before any request.
	_, err = ct.CreateObjects(ctx, []client.ObjectSpec{{Name: "fine", Props: ok}, {Name: "bad\tname", Props: ok}})
	wantErr(t, "a batch with one bad name", err, pdc.ErrInvalid, `"bad\tname"`)
	wantObjects(t, ctx, ct)

	// An unlimited first dim is fine; set-dims and tag puts are checked.
	grows := ok.Clone()
	grows.Dims[0] = client.Unlimited
	if _, err := ct.CreateObject(ctx, "grows", grows); err != nil {
		t.Fatal(err)
	}
	o, err := ct.CreateObject(ctx, "good", ok)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close(ctx)
	wantErr(t, "set-dims past 2^63 bytes", o.SetDims(ctx, []uint64{1 << 59, 4}), pdc.ErrOutOfRange, `object "good"`, "pass 2^63 bytes")
	wantErr(t, "a 4-byte int64 tag", o.PutTag(ctx, "n", client.Typed(region.Int64, []byte{1, 2, 3, 4})), pdc.ErrInvalid,
		`tag "n": a int64 value is 8 bytes, this one is 4`)
	wantErr(t, "a tag name with a newline", o.PutTag(ctx, "a\nb", client.String("v")), pdc.ErrInvalid, "control character")
	wantErr(t, "a batch with a bad tag", c.PutTags(ctx, []client.TagPut{{Object: o, Name: "x", Value: client.Int64(1)},
		{Object: o, Name: "y", Value: client.Typed(region.Double, make([]byte, 3))}}), pdc.ErrInvalid, `tag "y"`)
	if names, err := o.Tags(ctx); err != nil || len(names) != 0 {
		t.Fatalf("tags after refused puts: %v %v", names, err)
	}
	if err := o.PutTag(ctx, "n", client.Int64(5)); err != nil {
		t.Fatal(err)
	}
	wantObjects(t, ctx, ct, "good", "grows")
}
