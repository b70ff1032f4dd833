// Package bufpool recycles large byte buffers by power-of-two size class,
// so that moving region payloads does not make the kernel hand out and
// zero fresh pages for every message: on a virtual machine those page
// faults cost more than the copies themselves.
package bufpool
