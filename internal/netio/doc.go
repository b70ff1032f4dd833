// Package netio moves bytes between sockets, files and memory with as few
// copies and system calls as the OS allows (sendfile, writev), under a
// context: a context that ends interrupts a blocked read or write at once
// instead of leaving it to a timeout.
package netio
