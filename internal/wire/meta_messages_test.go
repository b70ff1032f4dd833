package wire_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/pdcgo/pdc"
	"github.com/pdcgo/pdc/internal/wire"
)

// Field kinds of the metadata messages beyond those of messages_test.go.
// Repeated strings and messages use kString and kMsg: each element is one
// field of that wire type.
const (
	kInt32  kind = 100 + iota // zigzag, must fit in int32
	kPacked                   // repeated uint64: packed, or one varint field per element
)

// accepts reports the wire types a field of kind k decodes from.
func accepts(k kind) []protowire.Type {
	if k == kPacked {
		return []protowire.Type{protowire.BytesType, protowire.VarintType}
	}
	return []protowire.Type{k.wireType()}
}

// dims32 has 32 entries, among them the extremes of uint64 and 2^63.
var dims32 = func() []uint64 {
	d := make([]uint64, 32)
	for i := range d {
		d[i] = uint64(i) << (2 * i)
	}
	d[0], d[1], d[2], d[3], d[31] = 0, 1, 1<<63, math.MaxUint64, math.MaxUint64
	return d
}()

var fullProps = wire.ObjectProps{Dims: []uint64{1024, 512, 0}, Type: 8, Partition: 2, Consistency: 1,
	AppName: "vpic", TimeStep: 42, UserID: 1000, DataLoc: "/scratch/pdc", Tags: "a=1,b=2",
	Storage: 2, Home: 3, Block: 1 << 20, Spread: 4}

// bigProps encodes to well over 127 bytes.
var bigProps = wire.ObjectProps{Dims: dims32, Type: math.MinInt32, Partition: math.MaxUint32, Consistency: math.MaxUint32,
	AppName: strings.Repeat("a", 130), TimeStep: math.MaxUint32, UserID: math.MaxUint32,
	DataLoc: strings.Repeat("/d", 70), Tags: strings.Repeat("t", 200),
	Storage: math.MaxUint32, Home: math.MaxUint32, Block: math.MaxUint64, Spread: math.MaxUint32}

var fullMeta = wire.ObjectMeta{ID: 1 << 40, Name: "particles/x", ContID: 7, Props: fullProps,
	CreatedUnix: 1_700_000_000_123_456_789, DimsVersion: 3}

var bigMeta = wire.ObjectMeta{ID: math.MaxUint64, Name: strings.Repeat("n", 300), ContID: math.MaxUint64, Props: bigProps,
	CreatedUnix: math.MinInt64, DimsVersion: math.MaxUint64}

var bigCont = wire.ContainerMeta{ID: math.MaxUint64, Name: strings.Repeat("c", 200), Lifetime: math.MaxUint32,
	CreatedUnix: math.MinInt64, Deleting: true}

var bigKey = wire.ObjKey{ID: math.MaxUint64, Name: strings.Repeat("k", 150), TimeStep: math.MaxUint32,
	UserID: math.MaxUint32, AppName: strings.Repeat("a", 40), Exact: true, Peek: true}

var bigPut = wire.TagPut{Kind: math.MaxUint32, ID: math.MaxUint64, Name: strings.Repeat("tag", 50), Type: math.MinInt32,
	Value: bytes.Repeat([]byte{0, 0xff}, 150)}

// hundred returns 100 items made by small, but item 50 is big.
func hundred[T any](small func(i int) T, big T) []T {
	out := make([]T, 100)
	for i := range out {
		out[i] = small(i)
	}
	out[50] = big
	return out
}

func smallMeta(i int) wire.ObjectMeta {
	return wire.ObjectMeta{ID: uint64(i), Name: fmt.Sprint("o", i), ContID: 1, Props: wire.ObjectProps{Dims: []uint64{uint64(i)}, Type: int32(i%3 - 1)}}
}

func smallCont(i int) wire.ContainerMeta {
	return wire.ContainerMeta{ID: uint64(i), Name: fmt.Sprint("c", i), CreatedUnix: int64(-i)}
}

// tagNames100 has empty names at the start, in the middle and at the end,
// and one name longer than 127 bytes.
var tagNames100 = hundred(func(i int) string {
	if i%7 == 0 || i == 99 {
		return ""
	}
	return fmt.Sprint("tag", i)
}, strings.Repeat("L", 200))

var tagCodes100 = hundred(func(i int) uint64 { return uint64(i % 3 * int(wire.CodeNotFound)) }, math.MaxUint64)

// metaTypes describes the metadata messages as msgTypes does the others:
// the zero value first, the fullest sample last.
var metaTypes = []msgType{
	{
		name: "ObjectProps",
		new:  func() wire.Message { return new(wire.ObjectProps) },
		fields: []field{{1, kPacked}, {2, kInt32}, {3, kUint32}, {4, kUint32}, {5, kString}, {6, kUint32}, {7, kUint32},
			{8, kString}, {9, kString}, {10, kUint32}, {11, kUint32}, {12, kUint64}, {13, kUint32}},
		vals: []wire.Message{
			&wire.ObjectProps{},
			&wire.ObjectProps{Dims: []uint64{0}},
			&wire.ObjectProps{Dims: []uint64{1}, Type: -1},
			&wire.ObjectProps{Dims: []uint64{1 << 63}, Type: 1},
			&wire.ObjectProps{Dims: []uint64{math.MaxUint64}, Type: math.MaxInt32},
			&wire.ObjectProps{Dims: []uint64{0, 1, 1 << 63, math.MaxUint64}, Type: math.MinInt32},
			&wire.ObjectProps{AppName: "only app"},
			ptr(fullProps),
			ptr(bigProps),
		},
	},
	{
		name:   "ObjectMeta",
		new:    func() wire.Message { return new(wire.ObjectMeta) },
		fields: []field{{1, kUint64}, {2, kString}, {3, kUint64}, {4, kMsg}, {5, kInt64}, {6, kUint64}},
		vals: []wire.Message{
			&wire.ObjectMeta{},
			&wire.ObjectMeta{ID: 1, Name: "x"},
			&wire.ObjectMeta{CreatedUnix: -1, Props: wire.ObjectProps{Type: -1}},
			ptr(fullMeta),
			ptr(bigMeta),
		},
	},
	{
		name:   "ContainerMeta",
		new:    func() wire.Message { return new(wire.ContainerMeta) },
		fields: []field{{1, kUint64}, {2, kString}, {3, kUint32}, {4, kInt64}, {5, kBool}},
		vals: []wire.Message{
			&wire.ContainerMeta{},
			&wire.ContainerMeta{ID: 1, Name: "c", Lifetime: 1, CreatedUnix: 1_700_000_000_000_000_000},
			&wire.ContainerMeta{CreatedUnix: math.MaxInt64},
			ptr(bigCont),
		},
	},
	{
		name:   "ContCreate",
		new:    func() wire.Message { return new(wire.ContCreate) },
		fields: []field{{1, kString}, {2, kUint32}},
		vals: []wire.Message{
			&wire.ContCreate{},
			&wire.ContCreate{Name: "c"},
			&wire.ContCreate{Name: strings.Repeat("é", 100), Lifetime: math.MaxUint32},
		},
	},
	{
		name:   "ContReply",
		new:    func() wire.Message { return new(wire.ContReply) },
		fields: []field{{1, kMsg}, {2, kBool}},
		vals: []wire.Message{
			&wire.ContReply{},
			&wire.ContReply{Created: true},
			&wire.ContReply{Meta: smallCont(3)},
			&wire.ContReply{Meta: bigCont, Created: true},
		},
	},
	{
		name:   "ContKey",
		new:    func() wire.Message { return new(wire.ContKey) },
		fields: []field{{1, kString}, {2, kUint64}},
		vals: []wire.Message{
			&wire.ContKey{},
			&wire.ContKey{Name: "c"},
			&wire.ContKey{ID: 1},
			&wire.ContKey{Name: strings.Repeat("x", 300), ID: math.MaxUint64},
		},
	},
	{
		name:   "ContList",
		new:    func() wire.Message { return new(wire.ContList) },
		fields: []field{{1, kMsg}},
		vals: []wire.Message{
			&wire.ContList{},
			&wire.ContList{Items: []wire.ContainerMeta{{}}},
			&wire.ContList{Items: []wire.ContainerMeta{bigCont}},
			&wire.ContList{Items: hundred(smallCont, bigCont)},
		},
	},
	{
		name:   "ObjCreate",
		new:    func() wire.Message { return new(wire.ObjCreate) },
		fields: []field{{1, kUint64}, {2, kString}, {3, kMsg}},
		vals: []wire.Message{
			&wire.ObjCreate{},
			&wire.ObjCreate{ContID: 1, Name: "o", Props: fullProps},
			&wire.ObjCreate{ContID: math.MaxUint64, Name: strings.Repeat("o", 200), Props: bigProps},
		},
	},
	{
		name:   "ObjKey",
		new:    func() wire.Message { return new(wire.ObjKey) },
		fields: []field{{1, kUint64}, {2, kString}, {3, kUint32}, {4, kUint32}, {5, kString}, {6, kBool}, {7, kBool}},
		vals: []wire.Message{
			&wire.ObjKey{},
			&wire.ObjKey{ID: 9},
			&wire.ObjKey{Name: "o", TimeStep: 3, UserID: 1000, AppName: "vpic", Exact: true},
			ptr(bigKey),
		},
	},
	{
		name:   "ObjBatch",
		new:    func() wire.Message { return new(wire.ObjBatch) },
		fields: []field{{1, kMsg}, {2, kMsg}},
		vals: []wire.Message{
			&wire.ObjBatch{},
			&wire.ObjBatch{Creates: []wire.ObjCreate{{}}},
			&wire.ObjBatch{Opens: []wire.ObjKey{{}}},
			&wire.ObjBatch{Creates: []wire.ObjCreate{{ContID: 1, Name: "a", Props: fullProps}}},
			&wire.ObjBatch{Opens: hundred(func(i int) wire.ObjKey { return wire.ObjKey{ID: uint64(i)} }, bigKey)},
			&wire.ObjBatch{
				Creates: hundred(func(i int) wire.ObjCreate { return wire.ObjCreate{ContID: 2, Name: fmt.Sprint("o", i)} },
					wire.ObjCreate{ContID: 2, Name: "big", Props: bigProps}),
				Opens: []wire.ObjKey{bigKey, {}, {Name: "x"}},
			},
		},
	},
	{
		name:   "ObjResult",
		new:    func() wire.Message { return new(wire.ObjResult) },
		fields: []field{{1, kMsg}, {2, kUint32}, {3, kString}},
		vals: []wire.Message{
			&wire.ObjResult{},
			&wire.ObjResult{Meta: fullMeta},
			&wire.ObjResult{Code: wire.CodeExists, Message: `object "x" exists`},
			&wire.ObjResult{Meta: bigMeta, Code: math.MaxUint32, Message: strings.Repeat("m", 200)},
		},
	},
	{
		name:   "ObjResults",
		new:    func() wire.Message { return new(wire.ObjResults) },
		fields: []field{{1, kMsg}},
		vals: []wire.Message{
			&wire.ObjResults{},
			&wire.ObjResults{Items: []wire.ObjResult{{}}},
			&wire.ObjResults{Items: []wire.ObjResult{{Meta: bigMeta}}},
			&wire.ObjResults{Items: hundred(func(i int) wire.ObjResult {
				if i%2 == 1 {
					return wire.ObjResult{Code: wire.CodeNotFound, Message: fmt.Sprint("no ", i)}
				}
				return wire.ObjResult{Meta: smallMeta(i)}
			}, wire.ObjResult{Meta: bigMeta, Code: wire.CodeInternal, Message: "big"})},
		},
	},
	{
		name:   "ObjList",
		new:    func() wire.Message { return new(wire.ObjList) },
		fields: []field{{1, kMsg}},
		vals: []wire.Message{
			&wire.ObjList{},
			&wire.ObjList{Items: []wire.ObjectMeta{{}}},
			&wire.ObjList{Items: []wire.ObjectMeta{bigMeta}},
			&wire.ObjList{Items: hundred(smallMeta, bigMeta)},
		},
	},
	{
		name:   "SetDims",
		new:    func() wire.Message { return new(wire.SetDims) },
		fields: []field{{1, kUint64}, {2, kPacked}},
		vals: []wire.Message{
			&wire.SetDims{},
			&wire.SetDims{ID: 1},
			&wire.SetDims{Dims: []uint64{0}},
			&wire.SetDims{Dims: []uint64{1}},
			&wire.SetDims{Dims: []uint64{1 << 63}},
			&wire.SetDims{Dims: []uint64{math.MaxUint64}},
			&wire.SetDims{ID: 5, Dims: []uint64{0, 0, 0}},
			&wire.SetDims{ID: math.MaxUint64, Dims: dims32},
		},
	},
	{
		name:   "IDArg",
		new:    func() wire.Message { return new(wire.IDArg) },
		fields: []field{{1, kUint64}, {2, kBool}},
		vals: []wire.Message{
			&wire.IDArg{},
			&wire.IDArg{ID: 1},
			&wire.IDArg{Force: true},
			&wire.IDArg{ID: math.MaxUint64, Force: true},
		},
	},
	{
		name:   "Count",
		new:    func() wire.Message { return new(wire.Count) },
		fields: []field{{1, kUint64}},
		vals: []wire.Message{
			&wire.Count{},
			&wire.Count{N: 1},
			&wire.Count{N: math.MaxUint64},
		},
	},
	{
		name:   "TagPut",
		new:    func() wire.Message { return new(wire.TagPut) },
		fields: []field{{1, kUint32}, {2, kUint64}, {3, kString}, {4, kInt32}, {5, kBytes}},
		vals: []wire.Message{
			&wire.TagPut{},
			&wire.TagPut{Type: -1},
			&wire.TagPut{Type: math.MaxInt32, Value: []byte{0}},
			&wire.TagPut{Kind: 1, ID: 7, Name: "units", Type: 11, Value: []byte("m/s")},
			ptr(bigPut),
		},
	},
	{
		name:   "TagBatch",
		new:    func() wire.Message { return new(wire.TagBatch) },
		fields: []field{{1, kMsg}},
		vals: []wire.Message{
			&wire.TagBatch{},
			&wire.TagBatch{Puts: []wire.TagPut{{}}},
			&wire.TagBatch{Puts: []wire.TagPut{bigPut}},
			&wire.TagBatch{Puts: hundred(func(i int) wire.TagPut {
				return wire.TagPut{Kind: uint32(i % 2), ID: uint64(i), Name: fmt.Sprint("t", i), Type: int32(i%5 - 2)}
			}, bigPut)},
		},
	},
	{
		name:   "TagResults",
		new:    func() wire.Message { return new(wire.TagResults) },
		fields: []field{{1, kPacked}, {2, kString}},
		vals: []wire.Message{
			&wire.TagResults{},
			&wire.TagResults{Codes: []uint64{0}, Messages: []string{""}},
			&wire.TagResults{Codes: []uint64{2}, Messages: []string{"not found"}},
			&wire.TagResults{Codes: []uint64{0, 2, 0}, Messages: []string{"", "not found", ""}},
			&wire.TagResults{Messages: []string{"", "", ""}},
			&wire.TagResults{Codes: tagCodes100, Messages: tagNames100},
		},
	},
	{
		name:   "TagKey",
		new:    func() wire.Message { return new(wire.TagKey) },
		fields: []field{{1, kUint32}, {2, kUint64}, {3, kString}},
		vals: []wire.Message{
			&wire.TagKey{},
			&wire.TagKey{Name: "units"},
			&wire.TagKey{Kind: math.MaxUint32, ID: math.MaxUint64, Name: strings.Repeat("k", 200)},
		},
	},
	{
		name:   "TagValue",
		new:    func() wire.Message { return new(wire.TagValue) },
		fields: []field{{1, kInt32}, {2, kBytes}},
		vals: []wire.Message{
			&wire.TagValue{},
			&wire.TagValue{Type: -1},
			&wire.TagValue{Type: math.MaxInt32},
			&wire.TagValue{Type: math.MinInt32, Value: bytes.Repeat([]byte{0xa5}, 300)},
		},
	},
	{
		name:   "TagNames",
		new:    func() wire.Message { return new(wire.TagNames) },
		fields: []field{{1, kString}},
		vals: []wire.Message{
			&wire.TagNames{},
			&wire.TagNames{Names: []string{""}},
			&wire.TagNames{Names: []string{"units"}},
			&wire.TagNames{Names: []string{"a", "", "b"}},
			&wire.TagNames{Names: []string{"", ""}},
			&wire.TagNames{Names: tagNames100},
		},
	},
	{
		name:   "Checkpoint",
		new:    func() wire.Message { return new(wire.Checkpoint) },
		fields: []field{{1, kString}},
		vals: []wire.Message{
			&wire.Checkpoint{},
			&wire.Checkpoint{Path: "/scratch/pdc/ckpt-0001"},
			&wire.Checkpoint{Path: strings.Repeat("/p", 200)},
		},
	},
	{
		name: "FetchRequest",
		new:  func() wire.Message { return new(wire.FetchRequest) },
		fields: []field{{1, kBytes}, {2, kUint32}, {3, kString}, {4, kUint64}, {5, kBytes}, {6, kUint64}, {7, kUint64},
			{8, kUint64}, {9, kBytes}, {10, kBool}},
		vals: []wire.Message{
			&wire.FetchRequest{},
			&wire.FetchRequest{Key: []byte("pattern:4096:7"), Mode: 2},
			&wire.FetchRequest{Key: []byte{0}, Mode: math.MaxUint32, PushAddr: "127.0.0.1:9", PushID: math.MaxUint64,
				Token: bytes.Repeat([]byte{0xff}, 16), Cap: 5 << 30, Off: 1 << 40, Len: math.MaxUint64, PullToken: []byte{7}, Map: true},
		},
	},
	{
		name:   "FetchReply",
		new:    func() wire.Message { return new(wire.FetchReply) },
		fields: []field{{1, kUint64}, {2, kUint32}, {3, kString}, {4, kUint64}, {5, kBytes}, {6, kUint64}},
		vals: []wire.Message{
			&wire.FetchReply{},
			&wire.FetchReply{Size: 5 << 30, Mode: 1},
			&wire.FetchReply{Size: math.MaxUint64, Mode: 4, Addr: "/tmp/pdc_tmp/shm-0.sock", Handle: math.MaxUint64,
				Token: []byte{1, 2, 3}, TTL: uint64(math.MaxInt64)},
		},
	},
	{
		name: "DataItem",
		new:  func() wire.Message { return new(wire.DataItem) },
		fields: []field{{1, kUint64}, {2, kBool}, {3, kPacked}, {4, kPacked}, {5, kPacked}, {6, kUint64}, {7, kUint32},
			{8, kUint32}, {9, kUint64}, {10, kUint32}},
		vals: []wire.Message{
			&wire.DataItem{},
			&wire.DataItem{Obj: 3, Write: true, Off: []uint64{0}, Size: []uint64{4096}, Dims: []uint64{1 << 20}, Elem: 1, Lane: 1 << 20},
			&wire.DataItem{Obj: 1 << 40, Write: true, Off: []uint64{0, 64}, Size: []uint64{1024, 64}, Dims: []uint64{1 << 20, 128},
				DimsVersion: 2, Elem: 4, Storage: 1},
			&wire.DataItem{Obj: math.MaxUint64, Write: true, Off: dims32, Size: dims32, Dims: dims32, DimsVersion: math.MaxUint64,
				Elem: math.MaxUint32, Storage: math.MaxUint32, Lane: math.MaxUint64, Slot: math.MaxUint32},
		},
	},
	{
		name:   "DataStart",
		new:    func() wire.Message { return new(wire.DataStart) },
		fields: []field{{1, kMsg}, {2, kBool}, {3, kUint64}},
		vals: []wire.Message{
			&wire.DataStart{},
			&wire.DataStart{Items: []wire.DataItem{{Obj: 1, Write: true, Lane: 4097}}, Lane: math.MaxUint64},
			&wire.DataStart{Items: []wire.DataItem{{Obj: 1, Write: true, Off: []uint64{0}, Size: []uint64{8}, Dims: []uint64{8}, Elem: 8}}, Wait: true},
			&wire.DataStart{Items: []wire.DataItem{{}, {Obj: 2}, {Obj: math.MaxUint64, Dims: dims32}}, Wait: true, Lane: 1},
		},
	},
	{
		name:   "DataIDs",
		new:    func() wire.Message { return new(wire.DataIDs) },
		fields: []field{{1, kPacked}, {2, kUint64}, {3, kPacked}},
		vals: []wire.Message{
			&wire.DataIDs{},
			&wire.DataIDs{IDs: []uint64{1}},
			&wire.DataIDs{IDs: []uint64{1, 2}, Lane: 9, LaneOffs: []uint64{0, 8193}},
			&wire.DataIDs{IDs: dims32, Lane: math.MaxUint64, LaneOffs: dims32},
		},
	},
	{
		name:   "DataResult",
		new:    func() wire.Message { return new(wire.DataResult) },
		fields: []field{{1, kUint32}, {2, kString}, {3, kUint64}, {4, kUint32}, {5, kBool}},
		vals: []wire.Message{
			&wire.DataResult{},
			&wire.DataResult{Size: 4096, InLane: true},
			&wire.DataResult{Size: 1 << 20, State: wire.StatePending},
			&wire.DataResult{Code: math.MaxUint32, Message: strings.Repeat("m", 300), Size: math.MaxUint64, State: math.MaxUint32, InLane: true},
		},
	},
	{
		name:   "DataLaneReq",
		new:    func() wire.Message { return new(wire.DataLaneReq) },
		fields: []field{{1, kUint64}},
		vals:   []wire.Message{&wire.DataLaneReq{}, &wire.DataLaneReq{Size: 64 << 20}},
	},
	{
		name:   "DataLane",
		new:    func() wire.Message { return new(wire.DataLane) },
		fields: []field{{1, kUint64}, {2, kString}, {3, kBytes}, {4, kUint64}},
		vals: []wire.Message{
			&wire.DataLane{},
			&wire.DataLane{ID: math.MaxUint64, Path: "/tmp/pdc-lane-1.sock", Token: []byte("0123456789abcdef"), Size: 64 << 20},
		},
	},
	{
		name:   "DataResults",
		new:    func() wire.Message { return new(wire.DataResults) },
		fields: []field{{1, kMsg}, {2, kPacked}},
		vals: []wire.Message{
			&wire.DataResults{},
			&wire.DataResults{Items: []wire.DataResult{{}, {Size: 4}}, IDs: []uint64{7, 8}},
			&wire.DataResults{Items: []wire.DataResult{{Code: 5, Message: "region 0:8 outside dims 4"}}, IDs: dims32},
		},
	},
	{
		name:   "RegionReq",
		new:    func() wire.Message { return new(wire.RegionReq) },
		fields: []field{{1, kUint64}, {2, kPacked}, {3, kPacked}, {4, kPacked}, {5, kUint32}},
		vals: []wire.Message{
			&wire.RegionReq{},
			&wire.RegionReq{Obj: 3, Off: []uint64{0, 0}, Size: []uint64{4, 4}, Candidates: []uint64{0, 1, 2}, Elem: 4},
			&wire.RegionReq{Obj: math.MaxUint64, Off: dims32, Size: dims32, Candidates: dims32, Elem: math.MaxUint32},
		},
	},
	{
		name:   "RegionBatch",
		new:    func() wire.Message { return new(wire.RegionBatch) },
		fields: []field{{1, kMsg}},
		vals: []wire.Message{
			&wire.RegionBatch{},
			&wire.RegionBatch{Items: []wire.RegionReq{{Obj: 1, Off: []uint64{0}, Size: []uint64{1}}}},
			&wire.RegionBatch{Items: []wire.RegionReq{{}, {Obj: math.MaxUint64, Off: dims32, Size: dims32, Candidates: dims32}}},
		},
	},
	{
		name:   "RegionPiece",
		new:    func() wire.Message { return new(wire.RegionPiece) },
		fields: []field{{1, kPacked}, {2, kPacked}, {3, kUint32}},
		vals: []wire.Message{
			&wire.RegionPiece{},
			&wire.RegionPiece{Off: []uint64{0, 8}, Size: []uint64{8, 8}, Server: 2},
			&wire.RegionPiece{Off: dims32, Size: dims32, Server: math.MaxUint32},
		},
	},
	{
		name:   "RegionPieces",
		new:    func() wire.Message { return new(wire.RegionPieces) },
		fields: []field{{1, kMsg}},
		vals: []wire.Message{
			&wire.RegionPieces{},
			&wire.RegionPieces{Items: []wire.RegionPiece{{Off: []uint64{0}, Size: []uint64{4}, Server: 1}}},
			&wire.RegionPieces{Items: []wire.RegionPiece{{}, {Off: dims32, Size: dims32, Server: math.MaxUint32}}},
		},
	}, {
		name:   "RegionLocated",
		new:    func() wire.Message { return new(wire.RegionLocated) },
		fields: []field{{1, kUint32}, {2, kString}, {3, kMsg}},
		vals: []wire.Message{
			&wire.RegionLocated{},
			&wire.RegionLocated{Pieces: []wire.RegionPiece{{Off: []uint64{0}, Size: []uint64{4}, Server: 1}, {}}},
			&wire.RegionLocated{Code: wire.CodeNotFound, Message: "object 7: not found", Pieces: []wire.RegionPiece{{Server: 2}}},
		},
	}, {
		name:   "RegionLocatedAll",
		new:    func() wire.Message { return new(wire.RegionLocatedAll) },
		fields: []field{{1, kMsg}},
		vals: []wire.Message{
			&wire.RegionLocatedAll{},
			&wire.RegionLocatedAll{Items: []wire.RegionLocated{{}, {Code: wire.CodeInvalid, Message: "x", Pieces: []wire.RegionPiece{{Server: 3}}}}},
		},
	}, {
		name:   "TagQuery",
		new:    func() wire.Message { return new(wire.TagQuery) },
		fields: []field{{1, kString}, {2, kUint32}, {3, kString}, {4, kBool}, {5, kBool}},
		vals: []wire.Message{
			&wire.TagQuery{},
			&wire.TagQuery{Query: "*bc*=*23*"},
			&wire.TagQuery{Query: "k", Step: 2, Terms: []string{"a", "", "b"}},
			&wire.TagQuery{Query: strings.Repeat("q", 300), Step: math.MaxUint32, Terms: tagNames100, Names: true, NoSuffix: true},
		},
	},
	{
		name:   "TagQueryResult",
		new:    func() wire.Message { return new(wire.TagQueryResult) },
		fields: []field{{1, kUint64}, {2, kUint64}, {3, kUint32}, {4, kBool}},
		vals: []wire.Message{
			&wire.TagQueryResult{},
			&wire.TagQueryResult{Count: 3},
			&wire.TagQueryResult{Unsupported: true},
			&wire.TagQueryResult{Count: math.MaxUint64, Strings: math.MaxUint64, Flags: math.MaxUint32, Unsupported: true},
		},
	},
	{
		name:   "IndexOp",
		new:    func() wire.Message { return new(wire.IndexOp) },
		fields: []field{{1, kBytes}, {2, kBytes}, {3, kBool}},
		vals: []wire.Message{
			&wire.IndexOp{},
			&wire.IndexOp{Key: []byte("XKk\x00\x01s1\x00\x01"), Value: []byte{1}},
			&wire.IndexOp{Key: bytes.Repeat([]byte{0, 0xff}, 200), Value: bytes.Repeat([]byte{1}, 300), Del: true},
		},
	},
	{
		name:   "IndexOps",
		new:    func() wire.Message { return new(wire.IndexOps) },
		fields: []field{{1, kUint32}, {2, kMsg}, {3, kUint64}, {4, kBytes}, {5, kMsg}, {6, kBool}, {7, kUint32}, {8, kUint32}},
		vals: []wire.Message{
			&wire.IndexOps{},
			&wire.IndexOps{Version: 1, Ops: []wire.IndexOp{{}}},
			&wire.IndexOps{Version: wire.IndexOpsPacked, Packed: []byte{1, 0, 1, 'k', 1, 1}},
			&wire.IndexOps{Version: math.MaxUint32, Ops: hundred(func(i int) wire.IndexOp {
				return wire.IndexOp{Key: []byte(fmt.Sprint("k", i)), Value: []byte{1}, Del: i%2 == 0}
			}, wire.IndexOp{Key: bytes.Repeat([]byte("K"), 300), Value: []byte{1, 2}, Del: true}), Object: math.MaxUint64,
				Packed: bytes.Repeat([]byte{1, 0, 1, 'k', 1, 1}, 50)},
			&wire.IndexOps{Version: wire.IndexOpsChanges, Changes: []wire.TagChange{{}}},
			&wire.IndexOps{Version: wire.IndexOpsChanges, Suffix: true, Count: math.MaxUint32, Self: math.MaxUint32,
				Ops: []wire.IndexOp{{Key: []byte("k")}}, Object: 1, Packed: []byte{1},
				Changes: hundred(func(i int) wire.TagChange {
					return wire.TagChange{ID: uint64(i) << 40, Key: fmt.Sprint("k", i), New: &wire.TagValue{Type: int32(i), Value: []byte(fmt.Sprint(i))}}
				}, wire.TagChange{ID: math.MaxUint64, Key: strings.Repeat("é", 200), Old: &wire.TagValue{}, New: &wire.TagValue{Type: -1, Value: bytes.Repeat([]byte{0}, 300)}})},
		},
	},
	{
		name:   "TagChange",
		new:    func() wire.Message { return new(wire.TagChange) },
		fields: []field{{1, kUint64}, {2, kString}, {3, kMsg}, {4, kMsg}, {5, kBool}},
		vals: []wire.Message{
			&wire.TagChange{},
			&wire.TagChange{ID: 1, Key: "k", Old: &wire.TagValue{}},
			&wire.TagChange{ID: math.MaxUint64, Key: strings.Repeat("k", 300), Old: &wire.TagValue{Type: 1, Value: []byte("a")}, New: &wire.TagValue{Type: -3, Value: bytes.Repeat([]byte{7}, 300)}, Dict: true},
		},
	},
	{
		name:   "StageRecord",
		new:    func() wire.Message { return new(wire.StageRecord) },
		fields: []field{{1, kString}, {2, kUint64}, {3, kUint32}, {4, kString}, {5, kUint64}, {6, kInt64}, {7, kUint64}, {8, kUint32}, {9, kInt64}, {10, kString}, {11, kUint32}, {12, kBytes}},
		vals: []wire.Message{
			&wire.StageRecord{},
			&wire.StageRecord{Path: strings.Repeat("é/", 300), Version: math.MaxUint64, Owner: math.MaxUint32, MtimeNS: math.MinInt64},
			&wire.StageRecord{Path: "a/b.dat", Version: 1, Owner: 2, Host: "node-a", Size: 1 << 30, MtimeNS: -1, Ino: 7, CRC: math.MaxUint32, Produced: math.MaxInt64, Namespace: "run-7"},
			&wire.StageRecord{Path: "a/b.dat", Version: 1, Owner: 2, Host: "node-a", Size: 3, MtimeNS: -1, Ino: 7, CRC: math.MaxUint32, Produced: math.MaxInt64, Namespace: "run-7",
				Format: wire.StageFormatInline, Data: []byte("abc")},
		},
	},
	{
		name:   "QueryNode",
		new:    func() wire.Message { return new(wire.QueryNode) },
		fields: []field{{1, kUint32}, {2, kBytes}},
		vals: []wire.Message{
			&wire.QueryNode{},
			&wire.QueryNode{Op: wire.QueryAND},
			&wire.QueryNode{Op: math.MaxUint32, Value: bytes.Repeat([]byte{0xff}, 300)},
		},
	},
	{
		name:   "QueryBox",
		new:    func() wire.Message { return new(wire.QueryBox) },
		fields: []field{{1, kPacked}, {2, kPacked}},
		vals: []wire.Message{
			&wire.QueryBox{},
			&wire.QueryBox{Size: []uint64{4}},
			&wire.QueryBox{Off: dims32, Size: dims32},
		},
	},
	{
		name: "DataQuery",
		new:  func() wire.Message { return new(wire.DataQuery) },
		fields: []field{{1, kUint32}, {2, kUint64}, {3, kPacked}, {4, kUint64}, {5, kUint32}, {6, kUint32}, {7, kMsg},
			{8, kMsg}, {9, kMsg}, {10, kUint32}, {11, kUint32}},
		vals: []wire.Message{
			&wire.DataQuery{},
			&wire.DataQuery{Version: 1, Obj: 7, Dims: []uint64{8, 8}, Type: 1, Nodes: []wire.QueryNode{{Op: wire.QueryGT, Value: []byte{0, 0, 0, 63}}},
				Boxes: []wire.QueryBox{{Off: []uint64{0, 0}, Size: []uint64{4, 8}}}},
			&wire.DataQuery{Version: math.MaxUint32, Obj: math.MaxUint64, Dims: dims32, DimsVersion: math.MaxUint64, Type: math.MaxUint32,
				Storage: math.MaxUint32, Nodes: []wire.QueryNode{{}, {Op: 2, Value: []byte{1}}, {Op: wire.QueryOR}},
				Boxes: []wire.QueryBox{{}, {Off: dims32, Size: dims32}}, Within: &wire.QueryBox{Off: dims32, Size: dims32},
				Return: math.MaxUint32, Slot: math.MaxUint32},
		},
	},
	{
		name:   "DataQueryResult",
		new:    func() wire.Message { return new(wire.DataQueryResult) },
		fields: []field{{1, kUint64}, {2, kBool}, {3, kUint32}},
		vals: []wire.Message{
			&wire.DataQueryResult{},
			&wire.DataQueryResult{Hits: 3, Selection: true},
			&wire.DataQueryResult{Hits: math.MaxUint64, Selection: true, ValueSize: math.MaxUint32},
		},
	},
	{
		name:   "StageBatch",
		new:    func() wire.Message { return new(wire.StageBatch) },
		fields: []field{{1, kMsg}, {2, kUint32}},
		vals: []wire.Message{
			&wire.StageBatch{},
			&wire.StageBatch{Records: []wire.StageRecord{{}}},
			&wire.StageBatch{Records: hundred(func(i int) wire.StageRecord {
				return wire.StageRecord{Path: fmt.Sprint("f", i), Version: uint64(i), CRC: uint32(i)}
			}, wire.StageRecord{Path: strings.Repeat("p", 300), Size: math.MaxUint64}), Version: wire.StageVersion},
		},
	},
	{
		name:   "StageKey",
		new:    func() wire.Message { return new(wire.StageKey) },
		fields: []field{{1, kString}, {2, kUint64}, {3, kString}, {4, kUint32}},
		vals: []wire.Message{
			&wire.StageKey{},
			&wire.StageKey{Path: "x"},
			&wire.StageKey{Path: strings.Repeat("d/", 500), After: math.MaxUint64, Namespace: strings.Repeat("n", 128), Version: math.MaxUint32},
		},
	},
	{
		name:   "StageListReq",
		new:    func() wire.Message { return new(wire.StageListReq) },
		fields: []field{{1, kUint32}, {2, kString}, {3, kString}, {4, kString}, {5, kUint32}},
		vals: []wire.Message{
			&wire.StageListReq{},
			&wire.StageListReq{Version: 2, Namespace: "n"},
			&wire.StageListReq{Version: math.MaxUint32, Namespace: "run-1", Prefix: "out/", After: strings.Repeat("d/", 500), Limit: math.MaxUint32},
		},
	},
	{
		name:   "StageList",
		new:    func() wire.Message { return new(wire.StageList) },
		fields: []field{{1, kUint32}, {2, kMsg}, {3, kString}},
		vals: []wire.Message{
			&wire.StageList{},
			&wire.StageList{Records: []wire.StageRecord{{}}},
			&wire.StageList{Version: 2, Records: hundred(func(i int) wire.StageRecord {
				return wire.StageRecord{Path: fmt.Sprint("f", i), Version: uint64(i), Namespace: "n"}
			}, wire.StageRecord{Path: strings.Repeat("p", 300)}), Next: "f99"},
		},
	},
	{
		name:   "StageRemoveReq",
		new:    func() wire.Message { return new(wire.StageRemoveReq) },
		fields: []field{{1, kUint32}, {2, kString}, {3, kString}, {4, kString}, {5, kBool}, {6, kString}, {7, kUint32}, {8, kUint64}, {9, kInt64}, {10, kMsg}},
		vals: []wire.Message{
			&wire.StageRemoveReq{},
			&wire.StageRemoveReq{Version: 2, Path: "a"},
			&wire.StageRemoveReq{Version: 4, Path: "a", Record: 1, Produced: -1},
			&wire.StageRemoveReq{Version: 5, Prefix: "b/", Produces: []wire.StageProduce{{Path: "b/a", Record: 1, Produced: 2}, {}}},
			&wire.StageRemoveReq{Version: math.MaxUint32, Namespace: "n", Path: "a", Prefix: "b/", All: true, After: strings.Repeat("d/", 500), Limit: math.MaxUint32, Record: math.MaxUint64, Produced: math.MaxInt64,
				Produces: hundred(func(i int) wire.StageProduce {
					return wire.StageProduce{Path: fmt.Sprint("b/", i), Record: uint64(i), Produced: -int64(i)}
				}, wire.StageProduce{Path: strings.Repeat("p", 300), Record: math.MaxUint64, Produced: math.MinInt64})},
		},
	},
	{
		name:   "StageProduce",
		new:    func() wire.Message { return new(wire.StageProduce) },
		fields: []field{{1, kString}, {2, kUint64}, {3, kInt64}},
		vals: []wire.Message{
			&wire.StageProduce{},
			&wire.StageProduce{Path: "a", Record: 1, Produced: 1},
			&wire.StageProduce{Path: strings.Repeat("d/", 500), Record: math.MaxUint64, Produced: math.MinInt64},
		},
	},
	{
		name:   "StageRemoved",
		new:    func() wire.Message { return new(wire.StageRemoved) },
		fields: []field{{1, kUint32}, {2, kUint64}, {3, kString}},
		vals: []wire.Message{
			&wire.StageRemoved{},
			&wire.StageRemoved{N: 1},
			&wire.StageRemoved{Version: math.MaxUint32, N: math.MaxUint64, Next: strings.Repeat("d/", 500)},
		},
	},
	{
		name:   "Members",
		new:    func() wire.Message { return new(wire.Members) },
		fields: []field{{1, kUint32}, {2, kUint64}, {3, kPacked}, {4, kBool}, {5, kBool}},
		vals: []wire.Message{
			&wire.Members{},
			&wire.Members{Version: wire.MembersVersion, ContID: 1, ObjIDs: []uint64{2}},
			&wire.Members{ObjIDs: []uint64{0}, Remove: true},
			&wire.Members{Version: 1, ContID: 7, ObjIDs: []uint64{1 << 40, 3, 1 << 40}, Check: true},
			&wire.Members{Version: math.MaxUint32, ContID: math.MaxUint64, ObjIDs: dims32, Remove: true, Check: true},
		},
	},
	{
		name:   "MembersReply",
		new:    func() wire.Message { return new(wire.MembersReply) },
		fields: []field{{1, kUint32}, {2, kUint64}},
		vals: []wire.Message{
			&wire.MembersReply{},
			&wire.MembersReply{Version: wire.MembersVersion},
			&wire.MembersReply{Changed: 3},
			&wire.MembersReply{Version: math.MaxUint32, Changed: math.MaxUint64},
		},
	},
	{
		name:   "ObjPageReq",
		new:    func() wire.Message { return new(wire.ObjPageReq) },
		fields: []field{{1, kUint32}, {2, kUint64}, {3, kUint64}, {4, kUint32}, {5, kBool}, {6, kBool}},
		vals: []wire.Message{
			&wire.ObjPageReq{},
			&wire.ObjPageReq{Version: wire.PageVersion, ContID: 1},
			&wire.ObjPageReq{ContID: 7, After: 1 << 40, IDsOnly: true},
			&wire.ObjPageReq{Version: math.MaxUint32, ContID: math.MaxUint64, After: math.MaxUint64, Limit: math.MaxUint32,
				IDsOnly: true, Count: true},
		},
	},
	{
		name:   "ObjPage",
		new:    func() wire.Message { return new(wire.ObjPage) },
		fields: []field{{1, kUint32}, {2, kMsg}, {3, kPacked}, {4, kPacked}, {5, kUint64}, {6, kUint64}},
		vals: []wire.Message{
			&wire.ObjPage{},
			&wire.ObjPage{Version: wire.PageVersion, Items: []wire.ObjectMeta{{}}},
			&wire.ObjPage{IDs: []uint64{1, 2, 1 << 40}, Added: []uint64{2}, Next: 1 << 40},
			&wire.ObjPage{N: 300},
			&wire.ObjPage{Version: math.MaxUint32, Items: hundred(smallMeta, bigMeta), IDs: dims32, Added: dims32,
				N: math.MaxUint64, Next: math.MaxUint64},
		},
	},
	{
		name:   "ContPageReq",
		new:    func() wire.Message { return new(wire.ContPageReq) },
		fields: []field{{1, kUint32}, {2, kString}, {3, kUint32}},
		vals: []wire.Message{
			&wire.ContPageReq{},
			&wire.ContPageReq{Version: wire.PageVersion, After: "c"},
			&wire.ContPageReq{Version: math.MaxUint32, After: strings.Repeat("a", 300), Limit: math.MaxUint32},
		},
	},
	{
		name:   "ContPage",
		new:    func() wire.Message { return new(wire.ContPage) },
		fields: []field{{1, kUint32}, {2, kMsg}, {3, kString}},
		vals: []wire.Message{
			&wire.ContPage{},
			&wire.ContPage{Version: wire.PageVersion, Items: []wire.ContainerMeta{{}}},
			&wire.ContPage{Version: math.MaxUint32, Items: hundred(smallCont, bigCont), Next: strings.Repeat("n", 200)},
		},
	},
	{
		name:   "ObjPurge",
		new:    func() wire.Message { return new(wire.ObjPurge) },
		fields: []field{{1, kUint32}, {2, kUint64}, {3, kPacked}, {4, kBool}},
		vals: []wire.Message{
			&wire.ObjPurge{},
			&wire.ObjPurge{Version: wire.PageVersion, ContID: 1, IDs: []uint64{2}},
			&wire.ObjPurge{Version: math.MaxUint32, ContID: math.MaxUint64, IDs: dims32, Force: true},
		},
	},
	{
		name:   "ObjIDs",
		new:    func() wire.Message { return new(wire.ObjIDs) },
		fields: []field{{1, kUint32}, {2, kPacked}},
		vals: []wire.Message{
			&wire.ObjIDs{},
			&wire.ObjIDs{Version: wire.PageVersion, IDs: []uint64{1}},
			&wire.ObjIDs{Version: math.MaxUint32, IDs: dims32},
		},
	},
}

func metaNamed(name string) msgType {
	for _, mt := range metaTypes {
		if mt.name == name {
			return mt
		}
	}
	panic("no metadata message type " + name)
}

// metaGolden pins the schema of the metadata messages in bytes written by
// hand.
var metaGolden = []struct {
	name string
	msg  wire.Message
	enc  string
}{
	{"FetchRequest", &wire.FetchRequest{Key: []byte("k"), Mode: 2}, "0a 01 6b 10 02"},
	{"DataLaneReq", &wire.DataLaneReq{Size: 300}, "08 ac 02"},
	{"RegionLocated", &wire.RegionLocated{Code: 1, Message: "m", Pieces: []wire.RegionPiece{{Server: 2}}}, "08 01 12 01 6d 1a 02 18 02"},
	{"RegionLocatedAll", &wire.RegionLocatedAll{Items: []wire.RegionLocated{{Code: 1}}}, "0a 02 08 01"},
	{"DataLane", &wire.DataLane{ID: 1, Path: "p", Token: []byte{9}, Size: 2}, "08 01 12 01 70 1a 01 09 20 02"},
	{"StageRecord", &wire.StageRecord{Path: "a", Version: 1, Owner: 2, Host: "h", Size: 3, MtimeNS: -1, Ino: 4, CRC: 5, Produced: 1},
		"0a 01 61 10 01 18 02 22 01 68 28 03 30 01 38 04 40 05 48 02"},
	{"StageRecord", &wire.StageRecord{Path: "a", Version: 1, Size: 1, CRC: 5, Format: wire.StageFormatInline, Data: []byte("x")},
		"0a 01 61 10 01 28 01 40 05 58 03 62 01 78"},
	{"StageBatch", &wire.StageBatch{Records: []wire.StageRecord{{Path: "a"}}}, "0a 03 0a 01 61"},
	{"StageKey", &wire.StageKey{Path: "p", After: 2}, "0a 01 70 10 02"},
	{"StageKey", &wire.StageKey{Path: "p", Namespace: "n", Version: 2}, "0a 01 70 1a 01 6e 20 02"},
	{"StageListReq", &wire.StageListReq{Version: 2, Namespace: "n", Prefix: "a", After: "b", Limit: 3}, "08 02 12 01 6e 1a 01 61 22 01 62 28 03"},
	{"StageList", &wire.StageList{Version: 2, Records: []wire.StageRecord{{Path: "a"}}, Next: "a"}, "08 02 12 03 0a 01 61 1a 01 61"},
	{"StageRemoveReq", &wire.StageRemoveReq{Version: 2, Namespace: "n", Path: "p", Prefix: "q", All: true, After: "a", Limit: 3},
		"08 02 12 01 6e 1a 01 70 22 01 71 28 01 32 01 61 38 03"},
	{"StageRemoved", &wire.StageRemoved{Version: 2, N: 3, Next: "z"}, "08 02 10 03 1a 01 7a"},
	{"StageProduce", &wire.StageProduce{Path: "q/a", Record: 7, Produced: 5}, "0a 03 71 2f 61 10 07 18 0a"},
	{"DataItem", &wire.DataItem{Obj: 1, Write: true, Off: []uint64{2}, Size: []uint64{3}, Dims: []uint64{300}, DimsVersion: 4, Elem: 5, Storage: 2},
		"08 01 10 01 1a 01 02 22 01 03 2a 02 ac 02 30 04 38 05 40 02"},
	{"DataItem", &wire.DataItem{Obj: 1, Slot: 3}, "08 01 50 03"},
	{"DataQuery", &wire.DataQuery{Obj: 2, Slot: 3}, "10 02 58 03"},
	{"DataStart", &wire.DataStart{Items: []wire.DataItem{{Obj: 1}}, Wait: true}, "0a 02 08 01 10 01"},
	{"DataIDs", &wire.DataIDs{IDs: []uint64{1, 300}}, "0a 03 01 ac 02"},
	{"DataResult", &wire.DataResult{Code: 3, Message: "m", Size: 4, State: 1}, "08 03 12 01 6d 18 04 20 01"},
	{"DataResults", &wire.DataResults{Items: []wire.DataResult{{Size: 1}}, IDs: []uint64{9}}, "0a 02 18 01 12 01 09"},
	{"RegionReq", &wire.RegionReq{Obj: 1, Off: []uint64{2}, Size: []uint64{3}, Candidates: []uint64{0, 1}, Elem: 4},
		"08 01 12 01 02 1a 01 03 22 02 00 01 28 04"},
	{"RegionBatch", &wire.RegionBatch{Items: []wire.RegionReq{{Obj: 1}}}, "0a 02 08 01"},
	{"RegionPiece", &wire.RegionPiece{Off: []uint64{1}, Size: []uint64{2}, Server: 3}, "0a 01 01 12 01 02 18 03"},
	{"RegionPieces", &wire.RegionPieces{Items: []wire.RegionPiece{{Server: 3}}}, "0a 02 18 03"},
	{"FetchReply", &wire.FetchReply{Size: 5, Mode: 1, Addr: "a", Handle: 2, Token: []byte{1}, TTL: 3},
		"08 05 10 01 1a 01 61 20 02 2a 01 01 30 03"},
	{"ObjectProps", &wire.ObjectProps{Dims: []uint64{1, 300}, Type: -1, Partition: 3, Consistency: 4, AppName: "a", TimeStep: 6,
		UserID: 7, DataLoc: "d", Tags: "t"}, "0a 03 01 ac 02 10 01 18 03 20 04 2a 01 61 30 06 38 07 42 01 64 4a 01 74"},
	{"ObjectProps", &wire.ObjectProps{Type: 1}, "10 02"},
	{"ObjectProps", &wire.ObjectProps{Storage: 2, Home: 1, Block: 300, Spread: 4}, "50 02 58 01 60 ac 02 68 04"},
	{"ObjectProps", &wire.ObjectProps{Type: math.MinInt32}, "10 ff ff ff ff 0f"},
	{"ObjectProps", &wire.ObjectProps{Type: math.MaxInt32}, "10 fe ff ff ff 0f"},
	{"ObjectProps", &wire.ObjectProps{Dims: []uint64{0, 0}}, "0a 02 00 00"},
	{"ObjectMeta", &wire.ObjectMeta{ID: 1, Name: "n", ContID: 3, Props: wire.ObjectProps{Type: 1}, CreatedUnix: -3, DimsVersion: 6},
		"08 01 12 01 6e 18 03 22 02 10 02 28 05 30 06"},
	{"ObjectMeta", &wire.ObjectMeta{}, "22 00"},
	{"ContainerMeta", &wire.ContainerMeta{ID: 1, Name: "c", Lifetime: 1, CreatedUnix: 2}, "08 01 12 01 63 18 01 20 04"},
	{"ContCreate", &wire.ContCreate{Name: "c", Lifetime: 1}, "0a 01 63 10 01"},
	{"ContReply", &wire.ContReply{Meta: wire.ContainerMeta{ID: 1}, Created: true}, "0a 02 08 01 10 01"},
	{"ContReply", &wire.ContReply{}, "0a 00"},
	{"ContKey", &wire.ContKey{Name: "c", ID: 2}, "0a 01 63 10 02"},
	{"ContList", &wire.ContList{Items: []wire.ContainerMeta{{ID: 1}, {}}}, "0a 02 08 01 0a 00"},
	{"ObjCreate", &wire.ObjCreate{ContID: 1, Name: "o", Props: wire.ObjectProps{Dims: []uint64{5}}}, "08 01 12 01 6f 1a 03 0a 01 05"},
	{"ObjCreate", &wire.ObjCreate{}, "1a 00"},
	{"ObjKey", &wire.ObjKey{ID: 1, Name: "o", TimeStep: 3, UserID: 4, AppName: "a", Exact: true},
		"08 01 12 01 6f 18 03 20 04 2a 01 61 30 01"},
	{"ObjKey", &wire.ObjKey{ID: 1, Peek: true}, "08 01 38 01"},
	{"ObjBatch", &wire.ObjBatch{Creates: []wire.ObjCreate{{ContID: 1}}, Opens: []wire.ObjKey{{ID: 2}, {}}},
		"0a 04 08 01 1a 00 12 02 08 02 12 00"},
	{"ObjResult", &wire.ObjResult{Meta: wire.ObjectMeta{ID: 1}, Code: 2, Message: "m"}, "0a 04 08 01 22 00 10 02 1a 01 6d"},
	{"ObjResult", &wire.ObjResult{}, "0a 02 22 00"},
	{"ObjResults", &wire.ObjResults{Items: []wire.ObjResult{{}}}, "0a 04 0a 02 22 00"},
	{"ObjList", &wire.ObjList{Items: []wire.ObjectMeta{{ID: 1}}}, "0a 04 08 01 22 00"},
	{"SetDims", &wire.SetDims{ID: 1, Dims: []uint64{0, 1 << 63}}, "08 01 12 0b 00 80 80 80 80 80 80 80 80 80 01"},
	{"SetDims", &wire.SetDims{Dims: []uint64{math.MaxUint64}}, "12 0a ff ff ff ff ff ff ff ff ff 01"},
	{"IDArg", &wire.IDArg{ID: 1, Force: true}, "08 01 10 01"},
	{"Count", &wire.Count{N: 300}, "08 ac 02"},
	{"TagPut", &wire.TagPut{Kind: 1, ID: 2, Name: "n", Type: -2, Value: []byte{0xff}}, "08 01 10 02 1a 01 6e 20 03 2a 01 ff"},
	{"TagBatch", &wire.TagBatch{Puts: []wire.TagPut{{Kind: 1}, {}}}, "0a 02 08 01 0a 00"},
	{"TagResults", &wire.TagResults{Codes: []uint64{0, 2, 0}, Messages: []string{"", "bad", ""}},
		"0a 03 00 02 00 12 00 12 03 62 61 64 12 00"},
	{"TagKey", &wire.TagKey{Kind: 1, ID: 2, Name: "n"}, "08 01 10 02 1a 01 6e"},
	{"TagValue", &wire.TagValue{Type: 3, Value: []byte("v")}, "08 06 12 01 76"},
	{"TagChange", &wire.TagChange{ID: 2, Key: "k", New: &wire.TagValue{Type: 3, Value: []byte("v")}, Dict: true}, "08 02 12 01 6b 22 05 08 06 12 01 76 28 01"},
	{"TagNames", &wire.TagNames{Names: []string{"a", "", "b"}}, "0a 01 61 0a 00 0a 01 62"},
	{"TagNames", &wire.TagNames{Names: []string{""}}, "0a 00"},
	{"Checkpoint", &wire.Checkpoint{Path: "/p"}, "0a 02 2f 70"},
	{"TagQuery", &wire.TagQuery{Query: "k", Step: 2, Terms: []string{"a", ""}, Names: true}, "0a 01 6b 10 02 1a 01 61 1a 00 20 01"},
	{"TagQueryResult", &wire.TagQueryResult{Count: 300, Strings: 2, Flags: 3, Unsupported: true}, "08 ac 02 10 02 18 03 20 01"},
	{"IndexOp", &wire.IndexOp{Key: []byte("k"), Value: []byte{1}, Del: true}, "0a 01 6b 12 01 01 18 01"},
	{"IndexOps", &wire.IndexOps{Version: 1, Ops: []wire.IndexOp{{Del: true}}, Object: 2}, "08 01 12 02 18 01 18 02"},
	{"IndexOps", &wire.IndexOps{Version: 2, Packed: []byte{1, 1, 1, 'k'}}, "08 02 22 04 01 01 01 6b"},
	{"QueryNode", &wire.QueryNode{Op: 5, Value: []byte{1, 2}}, "08 05 12 02 01 02"},
	{"QueryBox", &wire.QueryBox{Off: []uint64{1}, Size: []uint64{300}}, "0a 01 01 12 02 ac 02"},
	{"DataQuery", &wire.DataQuery{Version: 1, Obj: 2, Dims: []uint64{8}, DimsVersion: 3, Type: 4, Storage: 2,
		Nodes: []wire.QueryNode{{Op: 1, Value: []byte{9}}}, Boxes: []wire.QueryBox{{Size: []uint64{8}}},
		Within: &wire.QueryBox{Off: []uint64{1}, Size: []uint64{2}}, Return: 2},
		"08 01 10 02 1a 01 08 20 03 28 04 30 02 3a 05 08 01 12 01 09 42 03 12 01 08 4a 06 0a 01 01 12 01 02 50 02"},
	{"DataQueryResult", &wire.DataQueryResult{Hits: 300, Selection: true, ValueSize: 4}, "08 ac 02 10 01 18 04"},
	{"Members", &wire.Members{Version: 1, ContID: 2, ObjIDs: []uint64{3, 300}, Remove: true, Check: true},
		"08 01 10 02 1a 03 03 ac 02 20 01 28 01"},
	{"Members", &wire.Members{ContID: 300}, "10 ac 02"},
	{"MembersReply", &wire.MembersReply{Version: 1, Changed: 300}, "08 01 10 ac 02"},
	{"ContainerMeta", &wire.ContainerMeta{ID: 1, Deleting: true}, "08 01 28 01"},
	{"ObjPageReq", &wire.ObjPageReq{Version: 1, ContID: 2, After: 300, Limit: 4, IDsOnly: true, Count: true},
		"08 01 10 02 18 ac 02 20 04 28 01 30 01"},
	{"ObjPage", &wire.ObjPage{Version: 1, Items: []wire.ObjectMeta{{ID: 1}}, IDs: []uint64{2, 300}, Added: []uint64{2}, N: 3, Next: 300},
		"08 01 12 04 08 01 22 00 1a 03 02 ac 02 22 01 02 28 03 30 ac 02"},
	{"ContPageReq", &wire.ContPageReq{Version: 1, After: "c", Limit: 2}, "08 01 12 01 63 18 02"},
	{"ContPage", &wire.ContPage{Version: 1, Items: []wire.ContainerMeta{{ID: 1}}, Next: "n"}, "08 01 12 02 08 01 1a 01 6e"},
	{"ObjPurge", &wire.ObjPurge{Version: 1, ContID: 2, IDs: []uint64{3, 300}, Force: true}, "08 01 10 02 1a 03 03 ac 02 20 01"},
	{"ObjIDs", &wire.ObjIDs{Version: 1, IDs: []uint64{300}}, "08 01 12 02 ac 02"},
}

func TestMetaGolden(t *testing.T) {
	for _, g := range metaGolden {
		want := unhex(g.enc)
		if got := g.msg.Marshal(nil); !bytes.Equal(got, want) {
			t.Fatalf("%s %+v:\n got % x\nwant % x", g.name, g.msg, got, want)
		}
		m := metaNamed(g.name).new()
		if err := m.Unmarshal(want); err != nil {
			t.Fatalf("%s: %v", g.name, err)
		}
		if !reflect.DeepEqual(m, g.msg) {
			t.Fatalf("%s: decoded %+v, want %+v", g.name, m, g.msg)
		}
	}
}

// Every metadata message has samples, a full one among them, and golden
// bytes.
func TestMetaTypesCovered(t *testing.T) {
	golden := map[string]bool{}
	for _, g := range metaGolden {
		golden[g.name] = true
	}
	seen := map[string]bool{}
	for _, mt := range metaTypes {
		if seen[mt.name] {
			t.Fatalf("%s listed twice", mt.name)
		}
		seen[mt.name] = true
		if !golden[mt.name] {
			t.Errorf("%s has no golden encoding", mt.name)
		}
		if len(mt.vals) < 2 || !reflect.ValueOf(mt.vals[0]).Elem().IsZero() {
			t.Errorf("%s: want the zero value first and at least one other sample", mt.name)
		}
		// The last sample sets every field.
		full := reflect.ValueOf(mt.vals[len(mt.vals)-1]).Elem()
		for i := range full.NumField() {
			if full.Field(i).IsZero() {
				t.Errorf("%s: last sample leaves %s unset", mt.name, full.Type().Field(i).Name)
			}
		}
		if n := reflect.TypeOf(mt.new()).Elem().NumField(); n != len(mt.fields) {
			t.Errorf("%s: %d fields described, the struct has %d", mt.name, len(mt.fields), n)
		}
	}
	if want := 63 + len(slotTypes); len(metaTypes) != want {
		t.Fatalf("%d metadata message types, want %d", len(metaTypes), want)
	}
}

func TestMetaRoundTrip(t *testing.T) {
	for _, mt := range metaTypes {
		full := mt.vals[len(mt.vals)-1]
		for _, v := range mt.vals {
			b := v.Marshal(nil)
			m := mt.new()
			if err := m.Unmarshal(b); err != nil {
				t.Fatalf("%s %+v: %v", mt.name, v, err)
			}
			if !reflect.DeepEqual(m, v) {
				t.Fatalf("%s round trip:\n got %+v\nwant %+v", mt.name, m, v)
			}
			// Marshal appends.
			withPrefix := v.Marshal([]byte("prefix"))
			if !bytes.HasPrefix(withPrefix, []byte("prefix")) || !bytes.Equal(withPrefix[6:], b) {
				t.Fatalf("%s: Marshal after a prefix:\n got % x\nwant prefix + % x", mt.name, withPrefix, b)
			}
			// Unmarshal resets what was there, repeated fields included.
			m = mt.new()
			if err := m.Unmarshal(full.Marshal(nil)); err != nil {
				t.Fatal(err)
			}
			if err := m.Unmarshal(b); err != nil || !reflect.DeepEqual(m, v) {
				t.Fatalf("%s: Unmarshal into a used message: got %+v, %v; want %+v", mt.name, m, err, v)
			}
		}
	}
}

// Empty repeated fields are not written, and empty-but-present packed and
// bytes fields decode as nil: the decoder never yields an empty non-nil
// slice, so the fuzz property needs no nil/empty normalisation.
func TestMetaEmptyRepeatedDecodeNil(t *testing.T) {
	for _, m := range []wire.Message{
		&wire.SetDims{Dims: []uint64{}}, &wire.ObjectProps{Dims: []uint64{}}, &wire.TagResults{Codes: []uint64{}, Messages: []string{}},
		&wire.TagNames{Names: []string{}}, &wire.ContList{Items: []wire.ContainerMeta{}}, &wire.ObjList{Items: []wire.ObjectMeta{}},
		&wire.ObjResults{Items: []wire.ObjResult{}}, &wire.ObjBatch{Creates: []wire.ObjCreate{}, Opens: []wire.ObjKey{}},
		&wire.TagBatch{Puts: []wire.TagPut{}}, &wire.TagPut{Value: []byte{}}, &wire.TagValue{Value: []byte{}},
		&wire.TagQuery{Terms: []string{}},
		&wire.IndexOps{Ops: []wire.IndexOp{}}, &wire.IndexOp{Key: []byte{}, Value: []byte{}},
		&wire.Members{ObjIDs: []uint64{}},
	} {
		if b := m.Marshal(nil); len(b) != 0 {
			t.Fatalf("%T with empty slices encodes to % x", m, b)
		}
	}
	var sd wire.SetDims
	if err := sd.Unmarshal(unhex("12 00")); err != nil || sd.Dims != nil {
		t.Fatalf("SetDims with empty packed dims: %#v, %v", sd.Dims, err)
	}
	var op wire.ObjectProps
	if err := op.Unmarshal(unhex("0a 00")); err != nil || op.Dims != nil {
		t.Fatalf("ObjectProps with empty packed dims: %#v, %v", op.Dims, err)
	}
	var tr wire.TagResults
	if err := tr.Unmarshal(unhex("0a 00")); err != nil || tr.Codes != nil || tr.Messages != nil {
		t.Fatalf("TagResults with empty packed codes: %#v, %v", tr, err)
	}
	var tp wire.TagPut
	if err := tp.Unmarshal(unhex("2a 00")); err != nil || tp.Value != nil {
		t.Fatalf("TagPut with empty value: %#v, %v", tp.Value, err)
	}
	var tv wire.TagValue
	if err := tv.Unmarshal(unhex("12 00")); err != nil || tv.Value != nil {
		t.Fatalf("TagValue with empty value: %#v, %v", tv.Value, err)
	}
}

// An empty string is an element of a repeated string field: it is written
// and read back in place, so TagResults.Messages stays parallel to Codes.
func TestMetaRepeatedEmptyStrings(t *testing.T) {
	names := []string{"", "a", "", "", "b", ""}
	b := (&wire.TagNames{Names: names}).Marshal(nil)
	if got := bytes.Count(b, []byte{0x0a}); got != len(names) {
		t.Fatalf("TagNames % x: %d tags for %d names", b, got, len(names))
	}
	var tn wire.TagNames
	if err := tn.Unmarshal(b); err != nil || !reflect.DeepEqual(tn.Names, names) {
		t.Fatalf("TagNames: %q, %v; want %q", tn.Names, err, names)
	}
	tr := wire.TagResults{Codes: []uint64{0, 4, 0, 0, 2, 0}, Messages: []string{"", "invalid", "", "", "not found", ""}}
	var back wire.TagResults
	if err := back.Unmarshal(tr.Marshal(nil)); err != nil || !reflect.DeepEqual(back, tr) {
		t.Fatalf("TagResults: %+v, %v; want %+v", back, err, tr)
	}
	if len(back.Messages) != len(back.Codes) {
		t.Fatalf("TagResults: %d messages for %d codes", len(back.Messages), len(back.Codes))
	}
}

// appendUnpacked encodes vs as one varint field per element.
func appendUnpacked(b []byte, n protowire.Number, vs []uint64) []byte {
	for _, v := range vs {
		b = protowire.AppendTag(b, n, protowire.VarintType)
		b = protowire.AppendVarint(b, v)
	}
	return b
}

// appendPacked encodes vs as a packed field, independently of the package.
func appendPacked(b []byte, n protowire.Number, vs []uint64) []byte {
	var p []byte
	for _, v := range vs {
		p = protowire.AppendVarint(p, v)
	}
	return protowire.AppendBytes(protowire.AppendTag(b, n, protowire.BytesType), p)
}

// Protobuf lets a repeated varint field arrive packed, unpacked or as a mix
// of both; every form decodes to the elements in order.
func TestMetaPackedAndUnpacked(t *testing.T) {
	all := append([]uint64{0, 1, 1 << 63, math.MaxUint64, 300}, dims32...)
	for _, dims := range [][]uint64{{0}, {1}, {1 << 63}, {math.MaxUint64}, {0, 1, 1 << 63, math.MaxUint64}, dims32, all} {
		id := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 77)
		want := wire.SetDims{ID: 77, Dims: dims}
		if got := want.Marshal(nil); !bytes.Equal(got, appendPacked(bytes.Clone(id), 2, dims)) {
			t.Fatalf("SetDims %v: encoding % x is not packed", dims, got)
		}
		half := len(dims) / 2
		forms := map[string][]byte{
			"packed":              appendPacked(bytes.Clone(id), 2, dims),
			"unpacked":            appendUnpacked(bytes.Clone(id), 2, dims),
			"unpacked, id at end": appendUnpacked(nil, 2, dims),
			"mixed":               appendUnpacked(appendPacked(bytes.Clone(id), 2, dims[:half]), 2, dims[half:]),
			"mixed other way":     appendPacked(appendUnpacked(bytes.Clone(id), 2, dims[:half]), 2, dims[half:]),
			"packed in parts":     appendPacked(appendPacked(appendPacked(bytes.Clone(id), 2, nil), 2, dims[:half]), 2, dims[half:]),
		}
		forms["unpacked, id at end"] = append(forms["unpacked, id at end"], id...)
		for name, b := range forms {
			var sd wire.SetDims
			if err := sd.Unmarshal(b); err != nil || !reflect.DeepEqual(sd, want) {
				t.Fatalf("SetDims %s % x: got %+v, %v; want %+v", name, b, sd, err, want)
			}
		}
		// The same for ObjectProps.Dims and TagResults.Codes (field 1).
		var op wire.ObjectProps
		if err := op.Unmarshal(appendUnpacked(nil, 1, dims)); err != nil || !reflect.DeepEqual(op.Dims, dims) {
			t.Fatalf("ObjectProps unpacked dims: %v, %v; want %v", op.Dims, err, dims)
		}
		var tr wire.TagResults
		b := appendPacked(appendUnpacked(nil, 1, dims[:half]), 1, dims[half:])
		if err := tr.Unmarshal(b); err != nil || !reflect.DeepEqual(tr.Codes, dims) {
			t.Fatalf("TagResults mixed codes: %v, %v; want %v", tr.Codes, err, dims)
		}
	}
}

// A packed field whose payload is not a run of whole varints is refused.
func TestMetaPackedMalformed(t *testing.T) {
	for _, c := range []struct{ name, enc string }{
		{"truncated varint", "12 01 80"},
		{"varint cut by the length", "12 02 01 80 01"},
		{"overlong varint", "12 0b ff ff ff ff ff ff ff ff ff ff 01"},
		{"varint overflows 64 bits", "12 0a ff ff ff ff ff ff ff ff ff 02"},
		{"length beyond input", "12 05 01"},
	} {
		wantProtocolError(t, "SetDims "+c.name, new(wire.SetDims).Unmarshal(unhex(c.enc)))
		// Field 1 in ObjectProps and TagResults.
		b := unhex(c.enc)
		b[0] = 0x0a
		wantProtocolError(t, "ObjectProps "+c.name, new(wire.ObjectProps).Unmarshal(b))
		wantProtocolError(t, "TagResults "+c.name, new(wire.TagResults).Unmarshal(b))
	}
}

func zigzagField(n protowire.Number, v int64) []byte {
	return protowire.AppendVarint(protowire.AppendTag(nil, n, protowire.VarintType), protowire.EncodeZigZag(v))
}

// int32 fields are zigzag varints; a value outside int32 is a protocol
// error, also inside a nested message.
func TestMetaInt32Overflow(t *testing.T) {
	n := 0
	for _, mt := range metaTypes {
		for _, f := range mt.fields {
			if f.kind != kInt32 {
				continue
			}
			n++
			for _, v := range []int64{math.MinInt32, -1, 0, 1, math.MaxInt32} {
				m := mt.new()
				if err := m.Unmarshal(zigzagField(f.num, v)); err != nil {
					t.Fatalf("%s field %d = %d: %v", mt.name, f.num, v, err)
				}
				if got := reflect.ValueOf(m).Elem().Field(int(f.num) - 1).Int(); got != v {
					t.Fatalf("%s field %d = %d decoded as %d", mt.name, f.num, v, got)
				}
			}
			for _, v := range []int64{math.MaxInt32 + 1, math.MinInt32 - 1, math.MaxInt64, math.MinInt64, 1 << 40, -1 << 40} {
				err := mt.new().Unmarshal(zigzagField(f.num, v))
				wantProtocolError(t, fmt.Sprintf("%s field %d = %d", mt.name, f.num, v), err)
				if !strings.Contains(err.Error(), "overflows int32") {
					t.Fatalf("%s: error %q does not say what overflowed", mt.name, err)
				}
			}
		}
	}
	if n != 3 {
		t.Fatalf("%d int32 fields, want 3 (ObjectProps.Type, TagPut.Type, TagValue.Type)", n)
	}
	// Nested: ObjectProps inside ObjectMeta, ObjCreate, and two levels down.
	props := zigzagField(2, math.MaxInt32+1)
	inMeta := protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), props)
	for _, c := range []struct {
		name string
		m    wire.Message
		b    []byte
	}{
		{"ObjectMeta", new(wire.ObjectMeta), inMeta},
		{"ObjCreate", new(wire.ObjCreate), protowire.AppendBytes(protowire.AppendTag(nil, 3, protowire.BytesType), props)},
		{"ObjList", new(wire.ObjList), protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), inMeta)},
		{"ObjResult", new(wire.ObjResult), protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), inMeta)},
	} {
		err := c.m.Unmarshal(c.b)
		wantProtocolError(t, c.name+" with nested int32 overflow", err)
		if !strings.Contains(err.Error(), "decode ObjectProps") {
			t.Fatalf("%s: error %q does not name the inner message", c.name, err)
		}
	}
}

func TestMetaUint32Overflow(t *testing.T) {
	for _, mt := range metaTypes {
		for _, f := range mt.fields {
			if f.kind != kUint32 {
				continue
			}
			at := protowire.AppendVarint(protowire.AppendTag(nil, f.num, protowire.VarintType), math.MaxUint32)
			if err := mt.new().Unmarshal(at); err != nil {
				t.Fatalf("%s field %d = MaxUint32: %v", mt.name, f.num, err)
			}
			over := protowire.AppendVarint(protowire.AppendTag(nil, f.num, protowire.VarintType), math.MaxUint32+1)
			wantProtocolError(t, mt.name+" uint32 overflow", mt.new().Unmarshal(over))
		}
	}
}

// The length prefix of a nested or repeated message is fixed up after the
// element is written; where an element takes more than 127 bytes it must
// still equal protowire's encoding.
func TestMetaNestedLengthPrefix(t *testing.T) {
	sub := func(b []byte, n protowire.Number, m wire.Message) []byte {
		return protowire.AppendBytes(protowire.AppendTag(b, n, protowire.BytesType), m.Marshal(nil))
	}
	for _, m := range []wire.Message{&bigProps, &bigMeta, &bigCont, &bigKey, &bigPut} {
		if size := len(m.Marshal(nil)); size < 128 {
			t.Fatalf("%T encodes to %d bytes; want over 127", m, size)
		}
	}
	cases := []struct {
		name string
		m    wire.Message
		want []byte
	}{
		{"ObjResult.Meta", &wire.ObjResult{Meta: bigMeta}, sub(nil, 1, &bigMeta)},
		{"ContReply.Meta", &wire.ContReply{Meta: bigCont}, sub(nil, 1, &bigCont)},
		{"ObjCreate.Props", &wire.ObjCreate{Props: bigProps}, sub(nil, 3, &bigProps)},
		{"ContList", &wire.ContList{Items: []wire.ContainerMeta{{}, bigCont, {ID: 1}}},
			sub(sub(sub(nil, 1, &wire.ContainerMeta{}), 1, &bigCont), 1, &wire.ContainerMeta{ID: 1})},
		{"ObjList", &wire.ObjList{Items: []wire.ObjectMeta{bigMeta, {}}}, sub(sub(nil, 1, &bigMeta), 1, &wire.ObjectMeta{})},
		{"ObjResults", &wire.ObjResults{Items: []wire.ObjResult{{Meta: bigMeta}}}, sub(nil, 1, &wire.ObjResult{Meta: bigMeta})},
		{"ObjBatch", &wire.ObjBatch{Creates: []wire.ObjCreate{{Props: bigProps}}, Opens: []wire.ObjKey{bigKey}},
			sub(sub(nil, 1, &wire.ObjCreate{Props: bigProps}), 2, &bigKey)},
		{"TagBatch", &wire.TagBatch{Puts: []wire.TagPut{{}, bigPut}}, sub(sub(nil, 1, &wire.TagPut{}), 1, &bigPut)},
	}
	// ObjectMeta.Props by hand: the fields before and after it are small.
	om := wire.ObjectMeta{ID: 1, Props: bigProps, DimsVersion: 2}
	omWant := sub(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 1), 4, &bigProps)
	omWant = protowire.AppendVarint(protowire.AppendTag(omWant, 6, protowire.VarintType), 2)
	cases = append(cases, struct {
		name string
		m    wire.Message
		want []byte
	}{"ObjectMeta.Props", &om, omWant})
	for _, c := range cases {
		got := c.m.Marshal([]byte("dst"))
		if !bytes.Equal(got[3:], c.want) {
			t.Fatalf("%s: encoding differs from protowire's:\n got % x\nwant % x", c.name, got[3:], c.want)
		}
		if !bytes.HasPrefix(got, []byte("dst")) {
			t.Fatalf("%s: Marshal overwrote dst", c.name)
		}
	}
}

// metaWrongTypeFields returns, for each known field of mt, encodings of that
// field number with every wire type it does not accept.
func metaWrongTypeFields(mt msgType) [][]byte {
	var out [][]byte
	for _, f := range mt.fields {
		for _, typ := range []protowire.Type{protowire.VarintType, protowire.Fixed32Type, protowire.Fixed64Type,
			protowire.BytesType, protowire.StartGroupType} {
			ok := false
			for _, a := range accepts(f.kind) {
				ok = ok || a == typ
			}
			if !ok {
				out = append(out, fieldOfType(f.num, typ))
			}
		}
	}
	return out
}

func TestMetaWrongWireType(t *testing.T) {
	for _, mt := range metaTypes {
		for _, v := range mt.vals {
			b := v.Marshal(nil)
			for _, w := range metaWrongTypeFields(mt) {
				for _, in := range [][]byte{cat(b, w), cat(w, b)} {
					err := mt.new().Unmarshal(in)
					wantProtocolError(t, mt.name+" with "+hex.EncodeToString(w), err)
					if !strings.Contains(err.Error(), "decode "+mt.name) {
						t.Fatalf("%s: error %q does not name the message", mt.name, err)
					}
				}
			}
		}
	}
}

func TestMetaUnknownFieldsSkipped(t *testing.T) {
	for _, mt := range metaTypes {
		for _, v := range mt.vals {
			b := v.Marshal(nil)
			for _, u := range unknownFields {
				for _, in := range [][]byte{cat(b, u), cat(u, b)} {
					m := mt.new()
					if err := m.Unmarshal(in); err != nil {
						t.Fatalf("%s with unknown field % x: %v", mt.name, u, err)
					}
					if !reflect.DeepEqual(m, v) {
						t.Fatalf("%s with unknown field % x:\n got %+v\nwant %+v", mt.name, u, m, v)
					}
				}
			}
		}
	}
}

// Unknown fields and wrong wire types inside a nested ObjectProps.
func TestMetaNestedUnknownAndWrongType(t *testing.T) {
	inner := cat(unknownFields[4], fullProps.Marshal(nil), unknownFields[0])
	b := protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), inner)
	var om wire.ObjectMeta
	if err := om.Unmarshal(b); err != nil || !reflect.DeepEqual(om, wire.ObjectMeta{Props: fullProps}) {
		t.Fatalf("ObjectMeta with unknown fields in Props: %+v, %v", om, err)
	}
	for _, w := range metaWrongTypeFields(metaNamed("ObjectProps")) {
		b := protowire.AppendBytes(protowire.AppendTag(nil, 4, protowire.BytesType), w)
		err := new(wire.ObjectMeta).Unmarshal(b)
		wantProtocolError(t, "ObjectMeta with inner "+hex.EncodeToString(w), err)
		if !strings.Contains(err.Error(), "decode ObjectProps") {
			t.Fatalf("error %q does not name the inner message", err)
		}
	}
}

func TestMetaMalformed(t *testing.T) {
	for _, mt := range metaTypes {
		for _, c := range malformed {
			wantProtocolError(t, mt.name+" "+c.name, mt.new().Unmarshal(c.b))
			wantProtocolError(t, mt.name+" valid then "+c.name, mt.new().Unmarshal(cat(mt.vals[1].Marshal(nil), c.b)))
		}
	}
}

func TestMetaDecodedBytesDoNotAlias(t *testing.T) {
	in := (&wire.TagPut{Name: "n", Value: []byte("put value")}).Marshal(nil)
	in2 := (&wire.TagValue{Value: []byte("tag value")}).Marshal(nil)
	in3 := (&wire.TagBatch{Puts: []wire.TagPut{{Value: []byte("batch value")}}}).Marshal(nil)
	var tp wire.TagPut
	var tv wire.TagValue
	var tb wire.TagBatch
	for _, c := range []struct {
		m wire.Message
		b []byte
	}{{&tp, in}, {&tv, in2}, {&tb, in3}} {
		if err := c.m.Unmarshal(c.b); err != nil {
			t.Fatal(err)
		}
		for i := range c.b {
			c.b[i] = 0xff
		}
	}
	if string(tp.Value) != "put value" || tp.Name != "n" || string(tv.Value) != "tag value" || string(tb.Puts[0].Value) != "batch value" {
		t.Fatalf("decoded bytes alias the input: %q %q %q %q", tp.Name, tp.Value, tv.Value, tb.Puts[0].Value)
	}
}

// Every prefix of an encoding decodes, to a message that round-trips, if it
// ends on a top-level field boundary, and is a protocol error otherwise.
func TestMetaTruncated(t *testing.T) {
	for _, mt := range metaTypes {
		for _, v := range mt.vals {
			b := cat(v.Marshal(nil), bytes.Join(unknownFields[:5], nil))
			ends := fieldEnds(t, b)
			for i := range len(b) + 1 {
				m := mt.new()
				err := m.Unmarshal(b[:i])
				if !ends[i] {
					wantProtocolError(t, fmt.Sprintf("%s truncated to %d of %d bytes", mt.name, i, len(b)), err)
					continue
				}
				if err != nil {
					t.Fatalf("%s: prefix of %d bytes ends on a field boundary but fails: %v", mt.name, i, err)
				}
				m2 := mt.new()
				if err := m2.Unmarshal(m.Marshal(nil)); err != nil || !reflect.DeepEqual(m, m2) {
					t.Fatalf("%s: prefix of %d bytes decodes to %+v, which re-decodes to %+v, %v", mt.name, i, m, m2, err)
				}
			}
		}
	}
}

// FuzzMetaMessages decodes the input after its first byte as the metadata
// message that byte selects. Decoding never panics and fails only with
// pdc.ErrProtocol; a decoded message re-encodes canonically:
// decode(encode(decode(x))) is reflect.DeepEqual to decode(x) (the decoder
// never yields empty non-nil slices, so no normalisation is needed) and
// encode(decode(encode(decode(x)))) == encode(decode(x)).
func FuzzMetaMessages(f *testing.F) {
	add := func(i int, b []byte) { f.Add(cat([]byte{byte(i)}, b)) }
	for i, mt := range metaTypes {
		for _, v := range mt.vals {
			b := v.Marshal(nil)
			if len(b) > 4096 {
				continue // the 100-item samples; keep the corpus small
			}
			add(i, b)
			add(i, cat(b, bytes.Join(unknownFields, nil)))
			if len(b) > 1 {
				add(i, b[:len(b)-1])
			}
		}
		for _, g := range metaGolden {
			if g.name == mt.name {
				add(i, unhex(g.enc))
			}
		}
		for _, w := range metaWrongTypeFields(mt) {
			add(i, w)
		}
		for _, fd := range mt.fields {
			switch fd.kind {
			case kPacked:
				add(i, appendUnpacked(nil, fd.num, []uint64{0, 1, math.MaxUint64}))
			case kInt32:
				add(i, zigzagField(fd.num, math.MaxInt32+1))
			}
		}
		for _, c := range malformed {
			add(i, c.b)
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		mt := metaTypes[int(in[0])%len(metaTypes)]
		b := in[1:]
		m := mt.new()
		if err := m.Unmarshal(b); err != nil {
			if !errors.Is(err, pdc.ErrProtocol) {
				t.Fatalf("%s: error %q does not wrap pdc.ErrProtocol", mt.name, err)
			}
			return
		}
		enc := m.Marshal(nil)
		m2 := mt.new()
		if err := m2.Unmarshal(enc); err != nil {
			t.Fatalf("%s: re-encoding % x of %+v does not decode: %v", mt.name, enc, m, err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("%s: decode(encode(decode(x))) differs:\n got %+v\nwant %+v", mt.name, m2, m)
		}
		if enc2 := m2.Marshal(nil); !bytes.Equal(enc, enc2) {
			t.Fatalf("%s: encoding not stable:\n% x\n% x", mt.name, enc, enc2)
		}
	})
}

// A stage record written before records carried files (no Format, no
// Data: the golden bytes of that format) still reads, as a record that
// does not carry its file; one of the inline format carries it only if
// Data is the whole file.
func TestStageRecordFormats(t *testing.T) {
	old, err := hex.DecodeString("0a01611001180222016828033001380440054802")
	if err != nil {
		t.Fatal(err)
	}
	var r wire.StageRecord
	if err := r.Unmarshal(old); err != nil {
		t.Fatal(err)
	}
	want := wire.StageRecord{Path: "a", Version: 1, Owner: 2, Host: "h", Size: 3, MtimeNS: -1, Ino: 4, CRC: 5, Produced: 1}
	if !reflect.DeepEqual(r, want) || r.Inline() {
		t.Fatalf("a record of the first format reads as %+v (inline %v), want %+v, not inline", r, r.Inline(), want)
	}
	for _, tc := range []struct {
		r    wire.StageRecord
		want bool
	}{
		{wire.StageRecord{Format: wire.StageFormatInline, Size: 3, Data: []byte("abc")}, true},
		{wire.StageRecord{Format: wire.StageFormatInline}, true}, // an empty file
		{wire.StageRecord{Format: wire.StageFormatInline, Size: 1 << 20}, false},
		{wire.StageRecord{Format: wire.StageFormatInline, Size: 4, Data: []byte("abc")}, false},
		{wire.StageRecord{Format: wire.StageVersionNamespaces, Size: 3, Data: []byte("abc")}, false},
		{wire.StageRecord{Size: 3, Data: []byte("abc")}, false}, // no format: data is not trusted to be the file
		{wire.StageRecord{}, false},
	} {
		if got := tc.r.Inline(); got != tc.want {
			t.Errorf("%+v: Inline() = %v, want %v", tc.r, got, tc.want)
		}
	}
}
