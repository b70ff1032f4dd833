package wire

// ItemResults is what the replies of batch requests have in common: an
// outcome per item of the request, in order. On the wire they come in
// three shapes (docs/design/0022 says why they stay); callers read them
// all through this.
type ItemResults interface {
	// Len is the number of items answered.
	Len() int
	// Item is the outcome of item i: CodeOK, or the error's code and
	// message.
	Item(i int) (Code, string)
}

var (
	_ ItemResults = (*ObjResults)(nil)
	_ ItemResults = (*DataResults)(nil)
	_ ItemResults = (*RegionLocatedAll)(nil)
	_ ItemResults = (*TagResults)(nil)
)

func (m *ObjResults) Len() int { return len(m.Items) }

func (m *ObjResults) Item(i int) (Code, string) { return m.Items[i].Code, m.Items[i].Message }

func (m *DataResults) Len() int { return len(m.Items) }

func (m *DataResults) Item(i int) (Code, string) { return m.Items[i].Code, m.Items[i].Message }

func (m *RegionLocatedAll) Len() int { return len(m.Items) }

func (m *RegionLocatedAll) Item(i int) (Code, string) { return m.Items[i].Code, m.Items[i].Message }

// Len counts the codes: a peer may leave out the messages of the items
// that succeeded.
func (m *TagResults) Len() int { return len(m.Codes) }

// Item of TagResults: a code beyond uint32 (no peer of ours sends one) is
// CodeInternal, whose sentinel unknown codes map to.
func (m *TagResults) Item(i int) (Code, string) {
	msg := ""
	if i < len(m.Messages) {
		msg = m.Messages[i]
	}
	c := m.Codes[i]
	if c > 0xffffffff {
		return CodeInternal, msg
	}
	return Code(c), msg
}
