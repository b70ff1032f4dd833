package clitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"time"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/client"
	"github.com/pdcgo/pdc/region"
)

// survivorRole is a client that keeps running while servers die and come
// back. It reads commands from stdin, one a line, and answers each with one
// line (after "ready" once it has made its container):
//
//	write NAME: creates object NAME, spread over every data server
//	            (RegionStatic), and writes it whole with NAME's pattern.
//	read NAME:  opens NAME and reads it whole.
//
// The answer is "ok NAME", "bad NAME WHY" (read back wrong) or
// "fail NAME unavailable=BOOL ERROR".
func survivorRole(ctx context.Context, c *client.Client, out *bufio.Writer) error {
	ct, _, err := c.CreateContainer(ctx, "survivor", client.Persistent)
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "ready")
	out.Flush()
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		op, name, _ := strings.Cut(sc.Text(), " ")
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var err error
		bad := ""
		switch op {
		case "write":
			err = SurvivorWrite(cctx, ct, name)
		case "read":
			bad, err = SurvivorRead(cctx, c, name)
		default:
			err = fmt.Errorf("unknown command %q", op)
		}
		cancel()
		switch {
		case err != nil:
			fmt.Fprintf(out, "fail %s unavailable=%t %s\n", name, errors.Is(err, pdc.ErrUnavailable), strings.ReplaceAll(err.Error(), "\n", " "))
		case bad != "":
			fmt.Fprintf(out, "bad %s %s\n", name, bad)
		default:
			fmt.Fprintf(out, "ok %s\n", name)
		}
		out.Flush()
	}
	return sc.Err()
}

var survivorDims = []uint64{48, 64}

// survivorData is NAME's contents: int32s that differ from object to
// object.
func survivorData(name string) []byte {
	h := fnv.New32a()
	h.Write([]byte(name))
	seed := h.Sum32()
	n := survivorDims[0] * survivorDims[1]
	out := make([]byte, 4*n)
	for i := range n {
		binary.LittleEndian.PutUint32(out[4*i:], seed*2654435761+uint32(i))
	}
	return out
}

// SurvivorWrite creates object name in ct, spread over every data server,
// and writes it whole with name's data; the survivor role's write.
func SurvivorWrite(ctx context.Context, ct *client.Container, name string) error {
	o, err := ct.CreateObject(ctx, name, client.ObjectProps{Dims: survivorDims, Type: region.Int32, Partition: client.RegionStatic})
	if err != nil {
		return err
	}
	defer o.Close(ctx)
	if err := o.Write(ctx, region.Shape(survivorDims...), survivorData(name)); err != nil {
		return err
	}
	// Its index entry may go to a dead server: delivered once it is back.
	return o.PutTag(ctx, "survivor", client.String("yes"))
}

// SurvivorRead reads object name whole, as the survivor role's read: it
// returns why the bytes are wrong, or the error that stopped the read.
func SurvivorRead(ctx context.Context, c *client.Client, name string) (string, error) {
	o, err := c.OpenObject(ctx, name)
	if err != nil {
		return "", err
	}
	defer o.Close(ctx)
	buf := make([]byte, 4*survivorDims[0]*survivorDims[1])
	if err := o.Read(ctx, region.Shape(survivorDims...), buf); err != nil {
		return "", err
	}
	if !bytes.Equal(buf, survivorData(name)) {
		return "read back other bytes than written", nil
	}
	return "", nil
}
