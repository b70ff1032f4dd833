package wire

import "fmt"

// Method names an RPC. Values are part of the protocol: never renumber.
type Method uint32

// Methods. 1-15 are the connection and cluster methods every server has.
const (
	// MethodHello is sent by a server as the first frame of a connection
	// (header Hello).
	MethodHello Method = 1
	// MethodAuth is the client's answer to Hello (header Auth) and the
	// server's reply to it (header AuthOK).
	MethodAuth Method = 2
	// MethodPing echoes its payload.
	MethodPing Method = 3
	// MethodStatus returns a Status header.
	MethodStatus Method = 4
	// MethodRegister is sent by a starting server to rank 0 (header
	// ServerInfo); rank 0 answers once all servers have registered
	// (header ServerList).
	MethodRegister Method = 5
	// MethodShutdown asks a server to stop cleanly; it answers before it
	// stops accepting work.
	MethodShutdown Method = 6
)

var methodNames = map[Method]string{
	MethodHello:    "hello",
	MethodAuth:     "auth",
	MethodPing:     "ping",
	MethodStatus:   "status",
	MethodRegister: "register",
	MethodShutdown: "shutdown",
}

func (m Method) String() string {
	if s, ok := methodNames[m]; ok {
		return s
	}
	return fmt.Sprintf("method(%d)", uint32(m))
}
