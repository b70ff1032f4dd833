package wire

// Messages of a cluster's start that move data slots (see
// docs/design/0013-data-slots.md): every server reports what its data dir
// holds to rank 0 (StartRound rounds), which answers each with its part
// of the plan; slots then go from server to server as files (SlotFile,
// SlotCommit).

// Start rounds (StartRound.Round).
const (
	// RoundInventory: the request carries the server's Inventory; the
	// answer's Plan says which metadata stores it adopts.
	RoundInventory = 1
	// RoundPlan: the answer's Plan is the server's part of the data move.
	RoundPlan = 2
	// RoundMoved: answered once every server has sent its slots.
	RoundMoved = 3
	// RoundOpened: answered once every server holds its slots, and rank
	// 0 has recorded them.
	RoundOpened = 4
)

// SlotCopy is a copy of a data slot: its dir data-<Slot> under a data dir,
// at generation Gen.
type SlotCopy struct {
	Slot uint32 // 1
	Gen  uint64 // 2
}

func (m *SlotCopy) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Slot))
	return putUint(b, 2, m.Gen)
}

func (m *SlotCopy) Unmarshal(b []byte) error {
	*m = SlotCopy{}
	f := fields{b: b, msg: "SlotCopy"}
	for f.next() {
		switch f.num {
		case 1:
			m.Slot = f.uint32()
		case 2:
			m.Gen = f.uint64()
		}
	}
	return f.err
}

// SlotInventory is what a server finds in its data dir at start.
type SlotInventory struct {
	// DirID names the data dir: servers that report the same one share it.
	DirID string // 1
	// Copies are the complete data slot dirs in it.
	Copies []SlotCopy // 2
	// MetaDirs are the ranks of the metadata stores (meta-<rank>) in it.
	MetaDirs []uint64 // 3
}

func (m *SlotInventory) Marshal(b []byte) []byte {
	b = putString(b, 1, m.DirID)
	for i := range m.Copies {
		b = putMsg(b, 2, &m.Copies[i])
	}
	return putPackedUints(b, 3, m.MetaDirs)
}

func (m *SlotInventory) Unmarshal(b []byte) error {
	*m = SlotInventory{}
	f := fields{b: b, msg: "SlotInventory"}
	for f.next() {
		switch f.num {
		case 1:
			m.DirID = f.string()
		case 2:
			var x SlotCopy
			f.sub(&x)
			m.Copies = append(m.Copies, x)
		case 3:
			m.MetaDirs = f.packedUints(m.MetaDirs)
		}
	}
	return f.err
}

// SlotSend tells a server to send its copy of a slot to the server of
// rank To.
type SlotSend struct {
	Slot uint32 // 1
	Gen  uint64 // 2
	To   uint32 // 3: rank
}

func (m *SlotSend) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Slot))
	b = putUint(b, 2, m.Gen)
	return putUint(b, 3, uint64(m.To))
}

func (m *SlotSend) Unmarshal(b []byte) error {
	*m = SlotSend{}
	f := fields{b: b, msg: "SlotSend"}
	for f.next() {
		switch f.num {
		case 1:
			m.Slot = f.uint32()
		case 2:
			m.Gen = f.uint64()
		case 3:
			m.To = f.uint32()
		}
	}
	return f.err
}

// SlotMissing is a slot a server should hold whose data no server of the
// cluster can reach, and why.
type SlotMissing struct {
	Slot uint32 // 1
	Why  string // 2
}

func (m *SlotMissing) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Slot))
	return putString(b, 2, m.Why)
}

func (m *SlotMissing) Unmarshal(b []byte) error {
	*m = SlotMissing{}
	f := fields{b: b, msg: "SlotMissing"}
	for f.next() {
		switch f.num {
		case 1:
			m.Slot = f.uint32()
		case 2:
			m.Why = f.string()
		}
	}
	return f.err
}

// SlotPlan is one server's part of a start's plan.
type SlotPlan struct {
	// Epoch is the generation every slot held gets once the move is done.
	Epoch uint64 // 1
	// Own is the server's own slot plus one (0: it holds no data).
	Own uint32 // 2
	// Hold are the slots whose copy in this server's data dir it holds.
	Hold []SlotCopy // 3
	// Receive are the slots another server sends it.
	Receive []SlotCopy // 4
	// Fresh are the slots it starts empty: new, never held before.
	Fresh []uint64 // 5
	// Missing are the slots it should hold and cannot.
	Missing []SlotMissing // 6
	// Send are the copies in its data dir it sends to their holders.
	Send []SlotSend // 7
	// Aside are copies in its data dir that are out of date, or the same
	// as the one used: moved out of the way, kept for the operator.
	Aside []SlotCopy // 8
	// Adopt are the ranks of the metadata stores in its data dir that it
	// adopts (RoundInventory).
	Adopt []uint64 // 9
}

func (m *SlotPlan) Marshal(b []byte) []byte {
	b = putUint(b, 1, m.Epoch)
	b = putUint(b, 2, uint64(m.Own))
	for i := range m.Hold {
		b = putMsg(b, 3, &m.Hold[i])
	}
	for i := range m.Receive {
		b = putMsg(b, 4, &m.Receive[i])
	}
	b = putPackedUints(b, 5, m.Fresh)
	for i := range m.Missing {
		b = putMsg(b, 6, &m.Missing[i])
	}
	for i := range m.Send {
		b = putMsg(b, 7, &m.Send[i])
	}
	for i := range m.Aside {
		b = putMsg(b, 8, &m.Aside[i])
	}
	return putPackedUints(b, 9, m.Adopt)
}

func (m *SlotPlan) Unmarshal(b []byte) error {
	*m = SlotPlan{}
	f := fields{b: b, msg: "SlotPlan"}
	for f.next() {
		switch f.num {
		case 1:
			m.Epoch = f.uint64()
		case 2:
			m.Own = f.uint32()
		case 3:
			var x SlotCopy
			f.sub(&x)
			m.Hold = append(m.Hold, x)
		case 4:
			var x SlotCopy
			f.sub(&x)
			m.Receive = append(m.Receive, x)
		case 5:
			m.Fresh = f.packedUints(m.Fresh)
		case 6:
			var x SlotMissing
			f.sub(&x)
			m.Missing = append(m.Missing, x)
		case 7:
			var x SlotSend
			f.sub(&x)
			m.Send = append(m.Send, x)
		case 8:
			var x SlotCopy
			f.sub(&x)
			m.Aside = append(m.Aside, x)
		case 9:
			m.Adopt = f.packedUints(m.Adopt)
		}
	}
	return f.err
}

// StartRound is a server's step in a round of the cluster's start
// (MethodStartRound, to rank 0), and rank 0's answer once every server
// has taken it.
type StartRound struct {
	Round uint32 // 1: RoundInventory ...
	Rank  uint32 // 2
	// Instance is the reporting server's, so that rank 0 tells a server
	// that restarted from the one it replaces.
	Instance  string         // 3
	Inventory *SlotInventory // 4: RoundInventory's request
	Plan      *SlotPlan      // 5: RoundInventory's and RoundPlan's answer
}

func (m *StartRound) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Round))
	b = putUint(b, 2, uint64(m.Rank))
	b = putString(b, 3, m.Instance)
	if m.Inventory != nil {
		b = putMsg(b, 4, m.Inventory)
	}
	if m.Plan != nil {
		b = putMsg(b, 5, m.Plan)
	}
	return b
}

func (m *StartRound) Unmarshal(b []byte) error {
	*m = StartRound{}
	f := fields{b: b, msg: "StartRound"}
	for f.next() {
		switch f.num {
		case 1:
			m.Round = f.uint32()
		case 2:
			m.Rank = f.uint32()
		case 3:
			m.Instance = f.string()
		case 4:
			m.Inventory = &SlotInventory{}
			f.sub(m.Inventory)
		case 5:
			m.Plan = &SlotPlan{}
			f.sub(m.Plan)
		}
	}
	return f.err
}

// SlotFile carries a piece of one file of a slot being sent (the
// request's payload, from offset Off). The last piece carries the file's
// size and CRC-32C, which the receiver checks.
type SlotFile struct {
	Slot uint32 // 1
	Gen  uint64 // 2
	Name string // 3: the file's name in the slot's dir
	Off  uint64 // 4
	Last bool   // 5
	Size uint64 // 6: the file's size (Last)
	CRC  uint32 // 7: the file's CRC-32C (Last)
}

func (m *SlotFile) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Slot))
	b = putUint(b, 2, m.Gen)
	b = putString(b, 3, m.Name)
	b = putUint(b, 4, m.Off)
	b = putBool(b, 5, m.Last)
	b = putUint(b, 6, m.Size)
	return putUint(b, 7, uint64(m.CRC))
}

func (m *SlotFile) Unmarshal(b []byte) error {
	*m = SlotFile{}
	f := fields{b: b, msg: "SlotFile"}
	for f.next() {
		switch f.num {
		case 1:
			m.Slot = f.uint32()
		case 2:
			m.Gen = f.uint64()
		case 3:
			m.Name = f.string()
		case 4:
			m.Off = f.uint64()
		case 5:
			m.Last = f.bool()
		case 6:
			m.Size = f.uint64()
		case 7:
			m.CRC = f.uint32()
		}
	}
	return f.err
}

// SlotFileSum is a file of a slot as its sender has it.
type SlotFileSum struct {
	Name string // 1
	Size uint64 // 2
	CRC  uint32 // 3: CRC-32C
}

func (m *SlotFileSum) Marshal(b []byte) []byte {
	b = putString(b, 1, m.Name)
	b = putUint(b, 2, m.Size)
	return putUint(b, 3, uint64(m.CRC))
}

func (m *SlotFileSum) Unmarshal(b []byte) error {
	*m = SlotFileSum{}
	f := fields{b: b, msg: "SlotFileSum"}
	for f.next() {
		switch f.num {
		case 1:
			m.Name = f.string()
		case 2:
			m.Size = f.uint64()
		case 3:
			m.CRC = f.uint32()
		}
	}
	return f.err
}

// SlotCommit ends the sending of a slot: the receiver checks that it has
// every file, and no other, with its size and CRC, and makes the slot its
// own.
type SlotCommit struct {
	Slot  uint32        // 1
	Gen   uint64        // 2
	Files []SlotFileSum // 3
}

func (m *SlotCommit) Marshal(b []byte) []byte {
	b = putUint(b, 1, uint64(m.Slot))
	b = putUint(b, 2, m.Gen)
	for i := range m.Files {
		b = putMsg(b, 3, &m.Files[i])
	}
	return b
}

func (m *SlotCommit) Unmarshal(b []byte) error {
	*m = SlotCommit{}
	f := fields{b: b, msg: "SlotCommit"}
	for f.next() {
		switch f.num {
		case 1:
			m.Slot = f.uint32()
		case 2:
			m.Gen = f.uint64()
		case 3:
			var x SlotFileSum
			f.sub(&x)
			m.Files = append(m.Files, x)
		}
	}
	return f.err
}
