package cli

import "syscall"

var sigZero = syscall.Signal(0)
