package wire

// StageRecord is the ownership record of a produced file, kept by the
// metadata server that owns hash(Path): who serves it and what its bytes
// were when it was produced.
type StageRecord struct {
	Path     string // 1: relative to the managed dirs, cleaned, slash-separated
	Version  uint64 // 2: 1 at the first produce, +1 at each later one
	Owner    uint32 // 3: rank of the server that serves the file
	Host     string // 4: the owner's host
	Size     uint64 // 5
	MtimeNS  int64  // 6: the file's modification time at produce
	Ino      uint64 // 7: its inode at produce, to tell a replaced file
	CRC      uint32 // 8: CRC-32C (Castagnoli) of the contents
	Produced int64  // 9: Unix nanoseconds of the produce
}

func (m *StageRecord) Marshal(b []byte) []byte {
	b = putString(b, 1, m.Path)
	b = putUint(b, 2, m.Version)
	b = putUint(b, 3, uint64(m.Owner))
	b = putString(b, 4, m.Host)
	b = putUint(b, 5, m.Size)
	b = putInt(b, 6, m.MtimeNS)
	b = putUint(b, 7, m.Ino)
	b = putUint(b, 8, uint64(m.CRC))
	return putInt(b, 9, m.Produced)
}

func (m *StageRecord) Unmarshal(b []byte) error {
	*m = StageRecord{}
	f := fields{b: b, msg: "StageRecord"}
	for f.next() {
		switch f.num {
		case 1:
			m.Path = f.string()
		case 2:
			m.Version = f.uint64()
		case 3:
			m.Owner = f.uint32()
		case 4:
			m.Host = f.string()
		case 5:
			m.Size = f.uint64()
		case 6:
			m.MtimeNS = f.int64()
		case 7:
			m.Ino = f.uint64()
		case 8:
			m.CRC = f.uint32()
		case 9:
			m.Produced = f.int64()
		}
	}
	return f.err
}

// StageBatch carries records: produced files going to their metadata
// server (versions ignored), and the stored records coming back (versions
// assigned).
type StageBatch struct {
	Records []StageRecord // 1
}

func (m *StageBatch) Marshal(b []byte) []byte {
	for i := range m.Records {
		b = putMsg(b, 1, &m.Records[i])
	}
	return b
}

func (m *StageBatch) Unmarshal(b []byte) error {
	*m = StageBatch{}
	f := fields{b: b, msg: "StageBatch"}
	for f.next() {
		if f.num == 1 {
			var r StageRecord
			f.sub(&r)
			m.Records = append(m.Records, r)
		}
	}
	return f.err
}

// StageKey names a staged file. For MethodStageWait, After is the version
// the caller already has: the wait lasts until a newer one is produced (0:
// any version).
type StageKey struct {
	Path  string // 1
	After uint64 // 2
}

func (m *StageKey) Marshal(b []byte) []byte {
	b = putString(b, 1, m.Path)
	return putUint(b, 2, m.After)
}

func (m *StageKey) Unmarshal(b []byte) error {
	*m = StageKey{}
	f := fields{b: b, msg: "StageKey"}
	for f.next() {
		switch f.num {
		case 1:
			m.Path = f.string()
		case 2:
			m.After = f.uint64()
		}
	}
	return f.err
}
