package wire_test

import (
	"math"
	"strings"

	"github.com/pdcgo/pdc/internal/wire"
)

// slotTypes are the messages of the data slots' moves at start, checked
// with the metadata messages (round trips, schema, fuzzing).
var slotTypes = []msgType{
	{
		name:   "SlotCopy",
		new:    func() wire.Message { return new(wire.SlotCopy) },
		fields: []field{{1, kUint32}, {2, kUint64}},
		vals:   []wire.Message{&wire.SlotCopy{}, &wire.SlotCopy{Slot: 3}, &wire.SlotCopy{Slot: math.MaxUint32, Gen: math.MaxUint64}},
	},
	{
		name:   "SlotInventory",
		new:    func() wire.Message { return new(wire.SlotInventory) },
		fields: []field{{1, kString}, {2, kMsg}, {3, kPacked}, {4, kString}, {5, kUint64}, {6, kMsg}, {7, kBytes}, {8, kPacked}, {9, kMsg}, {10, kPacked}},
		vals: []wire.Message{&wire.SlotInventory{}, &wire.SlotInventory{DirID: "d", Copies: []wire.SlotCopy{{}}, Path: "/p"},
			&wire.SlotInventory{DirID: strings.Repeat("f", 32), Copies: []wire.SlotCopy{{Slot: 1, Gen: 2}, {}, {Slot: math.MaxUint32, Gen: math.MaxUint64}},
				MetaDirs: []uint64{0, 7, math.MaxUint64}, Path: "/data/" + strings.Repeat("p", 300), MaxSeq: math.MaxUint64,
				MetaStores: []wire.MetaStoreSeen{{}, {Rank: math.MaxUint64, ID: strings.Repeat("a", 32), Adopted: true}},
				Stores:     []byte("pdcmstor\x00"), Abandon: []uint64{0, math.MaxUint64},
				Owed: []wire.OwedFile{{}, {Slot: 3, Newest: 4, Cuts: 5, Bad: "crc"}}, AbandonSlots: []uint64{0, 1 << 20}}},
	},
	{
		name:   "OwedFile",
		new:    func() wire.Message { return new(wire.OwedFile) },
		fields: []field{{1, kUint32}, {2, kUint64}, {3, kUint64}, {4, kString}},
		vals: []wire.Message{&wire.OwedFile{}, &wire.OwedFile{Slot: 1, Cuts: 2},
			&wire.OwedFile{Slot: math.MaxUint32, Newest: math.MaxUint64, Cuts: math.MaxUint64, Bad: strings.Repeat("b", 300)}},
	},
	{
		name:   "MetaStoreSeen",
		new:    func() wire.Message { return new(wire.MetaStoreSeen) },
		fields: []field{{1, kUint64}, {2, kString}, {3, kBool}},
		vals:   []wire.Message{&wire.MetaStoreSeen{}, &wire.MetaStoreSeen{Rank: 1}, &wire.MetaStoreSeen{Rank: math.MaxUint64, ID: strings.Repeat("f", 32), Adopted: true}},
	},
	{
		name:   "SlotSend",
		new:    func() wire.Message { return new(wire.SlotSend) },
		fields: []field{{1, kUint32}, {2, kUint64}, {3, kUint32}},
		vals:   []wire.Message{&wire.SlotSend{}, &wire.SlotSend{To: 1}, &wire.SlotSend{Slot: math.MaxUint32, Gen: math.MaxUint64, To: math.MaxUint32}},
	},
	{
		name:   "SlotMissing",
		new:    func() wire.Message { return new(wire.SlotMissing) },
		fields: []field{{1, kUint32}, {2, kString}, {3, kString}},
		vals: []wire.Message{&wire.SlotMissing{}, &wire.SlotMissing{Why: "gone"},
			&wire.SlotMissing{Slot: math.MaxUint32, Why: strings.Repeat("why ", 100), Owe: strings.Repeat("f", 32)}},
	},
	{
		name: "SlotPlan",
		new:  func() wire.Message { return new(wire.SlotPlan) },
		fields: []field{{1, kUint64}, {2, kUint32}, {3, kMsg}, {4, kMsg}, {5, kPacked}, {6, kMsg}, {7, kMsg}, {8, kMsg},
			{9, kPacked}, {10, kUint64}, {11, kBytes}, {12, kPacked}, {13, kPacked}, {14, kMsg}},
		vals: []wire.Message{&wire.SlotPlan{}, &wire.SlotPlan{Epoch: 2, Own: 1, Hold: []wire.SlotCopy{{Slot: 0, Gen: 1}}, Fresh: []uint64{4}},
			&wire.SlotPlan{Epoch: math.MaxUint64, Own: math.MaxUint32, Hold: []wire.SlotCopy{{}, {Slot: 2, Gen: 3}},
				Receive: []wire.SlotCopy{{Slot: 3, Gen: 3}}, Fresh: []uint64{0, math.MaxUint64},
				Missing: []wire.SlotMissing{{Slot: 5, Why: "w"}}, Send: []wire.SlotSend{{Slot: 1, Gen: 2, To: 3}, {}},
				Aside: []wire.SlotCopy{{Slot: 9, Gen: 1}}, Adopt: []uint64{2, 3}, SeqFloor: math.MaxUint64, Stores: []byte{1},
				ShipOwed: []uint64{0, math.MaxUint32}, DropOwed: []uint64{1}, Owed: []wire.OwedCuts{{}, {Slot: 2, Cuts: []wire.OwedCut{{Dims: []uint64{1}}}}}}},
	},
	{
		name:   "OwedCuts",
		new:    func() wire.Message { return new(wire.OwedCuts) },
		fields: []field{{1, kUint32}, {2, kMsg}},
		vals: []wire.Message{&wire.OwedCuts{}, &wire.OwedCuts{Slot: 1},
			&wire.OwedCuts{Slot: math.MaxUint32, Cuts: []wire.OwedCut{{}, {Epoch: math.MaxUint64, Obj: math.MaxUint64, DimsVersion: math.MaxUint64, Dims: []uint64{math.MaxUint64, 0}}}}},
	},
	{
		name:   "OwedCut",
		new:    func() wire.Message { return new(wire.OwedCut) },
		fields: []field{{1, kUint64}, {2, kUint64}, {3, kUint64}, {4, kPacked}},
		vals: []wire.Message{&wire.OwedCut{}, &wire.OwedCut{Obj: 1, Dims: []uint64{8, 8}},
			&wire.OwedCut{Epoch: math.MaxUint64, Obj: math.MaxUint64, DimsVersion: math.MaxUint64, Dims: []uint64{0, math.MaxUint64, 3}}},
	},
	{
		name:   "StartRound",
		new:    func() wire.Message { return new(wire.StartRound) },
		fields: []field{{1, kUint32}, {2, kUint32}, {3, kString}, {4, kMsg}, {5, kMsg}, {6, kMsg}},
		vals: []wire.Message{&wire.StartRound{}, &wire.StartRound{Round: wire.RoundMoved, Rank: 3, Instance: "i"},
			&wire.StartRound{Round: math.MaxUint32, Rank: math.MaxUint32, Instance: strings.Repeat("i", 16),
				Inventory: &wire.SlotInventory{DirID: "x"}, Plan: &wire.SlotPlan{Epoch: 1}, Owed: []wire.OwedCuts{{Slot: 1}, {}}}},
	},
	{
		name:   "SlotFile",
		new:    func() wire.Message { return new(wire.SlotFile) },
		fields: []field{{1, kUint32}, {2, kUint64}, {3, kString}, {4, kUint64}, {5, kBool}, {6, kUint64}, {7, kUint32}},
		vals: []wire.Message{&wire.SlotFile{}, &wire.SlotFile{Slot: 1, Name: "0000000000000001.off", Off: 4 << 20},
			&wire.SlotFile{Slot: math.MaxUint32, Gen: math.MaxUint64, Name: strings.Repeat("n", 200), Off: math.MaxUint64, Last: true,
				Size: math.MaxUint64, CRC: math.MaxUint32}},
	},
	{
		name:   "SlotFileSum",
		new:    func() wire.Message { return new(wire.SlotFileSum) },
		fields: []field{{1, kString}, {2, kUint64}, {3, kUint32}},
		vals:   []wire.Message{&wire.SlotFileSum{}, &wire.SlotFileSum{Name: "a"}, &wire.SlotFileSum{Name: "b", Size: math.MaxUint64, CRC: math.MaxUint32}},
	},
	{
		name:   "SlotCommit",
		new:    func() wire.Message { return new(wire.SlotCommit) },
		fields: []field{{1, kUint32}, {2, kUint64}, {3, kMsg}},
		vals: []wire.Message{&wire.SlotCommit{}, &wire.SlotCommit{Slot: 1, Files: []wire.SlotFileSum{{}}},
			&wire.SlotCommit{Slot: math.MaxUint32, Gen: math.MaxUint64, Files: []wire.SlotFileSum{{Name: "a", Size: 1, CRC: 2}, {}}}},
	},
}

func init() {
	metaTypes = append(metaTypes, slotTypes...)
	metaGolden = append(metaGolden, []struct {
		name string
		msg  wire.Message
		enc  string
	}{
		{"SlotCopy", &wire.SlotCopy{Slot: 3, Gen: 300}, "08 03 10 ac 02"},
		{"SlotPlan", &wire.SlotPlan{Epoch: 2, Hold: []wire.SlotCopy{{Slot: 1, Gen: 1}}, Fresh: []uint64{4}},
			"08 02 1a 04 08 01 10 01 2a 01 04"},
		{"StartRound", &wire.StartRound{Round: 2, Rank: 1, Instance: "i", Inventory: &wire.SlotInventory{DirID: "d"}},
			"08 02 10 01 1a 01 69 22 03 0a 01 64"},
		{"SlotFile", &wire.SlotFile{Slot: 1, Name: "f", Last: true, Size: 2, CRC: 3}, "08 01 1a 01 66 28 01 30 02 38 03"},
		{"SlotInventory", &wire.SlotInventory{DirID: "d", Copies: []wire.SlotCopy{{Slot: 1}}, MetaDirs: []uint64{2}}, "0a 01 64 12 02 08 01 1a 01 02"},
		{"SlotSend", &wire.SlotSend{Slot: 1, Gen: 2, To: 3}, "08 01 10 02 18 03"},
		{"MetaStoreSeen", &wire.MetaStoreSeen{Rank: 1, ID: "a", Adopted: true}, "08 01 12 01 61 18 01"},
		{"SlotMissing", &wire.SlotMissing{Slot: 1, Why: "w"}, "08 01 12 01 77"},
		{"SlotMissing", &wire.SlotMissing{Slot: 1, Why: "w", Owe: "d"}, "08 01 12 01 77 1a 01 64"},
		{"OwedFile", &wire.OwedFile{Slot: 1, Newest: 2, Cuts: 3, Bad: "b"}, "08 01 10 02 18 03 22 01 62"},
		{"OwedCut", &wire.OwedCut{Epoch: 1, Obj: 2, DimsVersion: 3, Dims: []uint64{4, 5}}, "08 01 10 02 18 03 22 02 04 05"},
		{"OwedCuts", &wire.OwedCuts{Slot: 1, Cuts: []wire.OwedCut{{Obj: 2}}}, "08 01 12 02 10 02"},
		{"SlotFileSum", &wire.SlotFileSum{Name: "a", Size: 1, CRC: 2}, "0a 01 61 10 01 18 02"},
		{"SlotCommit", &wire.SlotCommit{Slot: 1, Gen: 2, Files: []wire.SlotFileSum{{Name: "a"}}}, "08 01 10 02 1a 03 0a 01 61"},
	}...)
}
