#!/usr/bin/env bash
# Tests libpdc_preload.so (docs/design/0025) against an install of libpdc
# (capi/install.sh PREFIX): programs that know nothing of pdc -- cat, cp,
# python3, a shell's echo, C programs using fopen/fread/fwrite -- run with
# LD_PRELOAD against two real pdc servers standing for node-a (producer)
# and node-b (consumer):
#
#   - cat and cp of files a producer on the other node makes later;
#   - python3's open().read(); a C program's fopen/fread; relative paths
#     and openat's;
#   - producers: a shell's `echo > file` and `prog > file` (the file
#     crosses exec), C's fwrite/fclose, a C program
#     that leaves its file (and its stream's buffer) to exit, and mv of a
#     temporary file into place;
#   - a forked child consuming after its parent did: through its own copy
#     of libpdc (libpdc.so's loader gives it one), and through `pdc stage
#     consume` when libpdc.so has no loader (as libpdc_core.so alone);
#     two threads consuming at once;
#   - a consume that times out fails the open with ETIMEDOUT and a line
#     saying why, and does not wait past its timeout;
#   - paths outside the dirs, and directories inside them, never load
#     libpdc;
#   - pdc bench preload runs a round.
#
# usage: capi/tests/run_preload.sh PREFIX
set -euo pipefail
prefix=$(cd "${1:?usage: capi/tests/run_preload.sh PREFIX}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
CC=${CC:-gcc}
pdc="$prefix/bin/pdc"
preload="$prefix/lib/libpdc_preload.so"
work=$(mktemp -d "${TMPDIR:-/tmp}/libpdc-preload-XXXXXX")
cleanup() {
	[ -f "$work/tmp/pdc_server_list" ] && "$pdc" down --tmpdir "$work/tmp" --timeout 10s >/dev/null 2>&1
	rm -rf "$work"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	exit 1
}
[ -f "$preload" ] || fail "$preload is not installed (capi/install.sh)"

echo "== build the test programs with $CC (no pdc headers or library: they know nothing of pdc)"
for t in preload_read preload_write preload_fork preload_vfork preload_threads preload_untouched; do
	"$CC" -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -pthread -o "$work/$t" "$here/$t.c"
done

echo "== two servers standing for node-a and node-b"
export PDC_TMPDIR="$work/tmp" PDC_DATA_LOC="$work/data" PDC_TIMEOUT=60
mkdir -p "$work/prod-node-a" "$work/prod-node-b"
"$pdc" up -n 2 --hosts node-a,node-b --stage-producer-dir "$work/prod-{host}" >"$work/up.out"
prod="$work/prod-node-a"
cons="$work/cons-node-b"
mkdir -p "$cons"
producer=(env PDC_HOST=node-a "PDC_STAGE_PRODUCER_DIR=$prod" "LD_PRELOAD=$preload")
consumer=(env PDC_HOST=node-b "PDC_STAGE_CONSUMER_DIR=$cons" "LD_PRELOAD=$preload")
py=$(command -v python3 || true)

# waiting PID NAME: waits until process PID (timeout) has a child that has
# loaded libpdc, which the interposer does only when a path in a staging
# dir needs a staging call: the consumer is then in its consume, waiting
# for the file.
waiting() {
	local kids
	for _ in $(seq 1200); do
		kids=$(cat /proc/"$1"/task/*/children 2>/dev/null || true)
		for k in $kids; do
			grep -q '/libpdc\.so' "/proc/$k/maps" 2>/dev/null && return 0
		done
		kill -0 "$1" 2>/dev/null || break
		sleep 0.05
	done
	fail "$2 did not start consuming (exited, or never loaded libpdc)"
}

# finish PID NAME: waits for a background consumer and fails with its
# stderr if it failed.
finish() {
	wait "$1" || {
		cat "$work/$2.err" >&2
		fail "$2"
	}
}

echo "== cat waits for a file a shell on node-a makes later with echo >"
"${consumer[@]}" timeout 120 cat "$cons/shell/hello.txt" >"$work/cat.out" 2>"$work/cat.err" &
cpid=$!
waiting "$cpid" "cat"
"${producer[@]}" timeout 60 bash -c "mkdir -p '$prod/shell' && echo 'hello from node-a' > '$prod/shell/hello.txt'"
finish "$cpid" cat
[ "$(cat "$work/cat.out")" = "hello from node-a" ] || fail "cat printed: $(cat "$work/cat.out")"

echo "== cp waits for a 1 MiB file a C program on node-a writes later with fwrite and fclose"
"${consumer[@]}" timeout 120 cp "$cons/c/one.bin" "$work/cp-copy.bin" 2>"$work/cp.err" &
cpid=$!
waiting "$cpid" "cp"
mkdir -p "$prod/c"
"${producer[@]}" timeout 60 "$work/preload_write" "$prod/c/one.bin" one.bin 1048576
finish "$cpid" cp
cmp "$prod/c/one.bin" "$work/cp-copy.bin" || fail "cp's copy differs"

echo "== a shell's redirect of a program it execs: prog > file is produced when prog closes it or exits"
mkdir -p "$prod/ext"
# Forked and exec'd (the ; keeps bash from exec'ing directly), and
# exec'd in place (the last command of -c); seq exits without closing.
"${producer[@]}" timeout 60 bash -c "/bin/echo external > '$prod/ext/echo.txt'; true"
"${producer[@]}" timeout 60 bash -c "seq 1 20000 > '$prod/ext/seq.txt'"
"${consumer[@]}" PDC_TIMEOUT=30 timeout 60 cat "$cons/ext/echo.txt" >"$work/ext.out" 2>"$work/ext.err" || {
	cat "$work/ext.err" >&2
	fail "the output of /bin/echo > file was not produced"
}
[ "$(cat "$work/ext.out")" = external ] || fail "cat printed: $(cat "$work/ext.out")"
"${consumer[@]}" PDC_TIMEOUT=30 timeout 60 cmp "$cons/ext/seq.txt" "$prod/ext/seq.txt" 2>"$work/ext.err" || {
	cat "$work/ext.err" >&2
	fail "the output of seq > file was not produced whole"
}

echo "== a FIFO in the producer dir is written through and not produced: its close neither hangs nor fails"
if [ -n "$py" ]; then
	mkfifo "$prod/ext/fifo"
	timeout 60 cat "$prod/ext/fifo" >"$work/fifo.out" &
	fpid=$!
	"${producer[@]}" timeout 30 "$py" -c "
import sys
f = open(sys.argv[1], 'w')
f.write('through the pipe\\n')
f.close()" "$prod/ext/fifo" 2>"$work/fifo.err" || {
		cat "$work/fifo.err" >&2
		fail "a write to a FIFO in the producer dir failed or hung at its close"
	}
	wait "$fpid" || fail "the FIFO's reader failed"
	[ "$(cat "$work/fifo.out")" = "through the pipe" ] || fail "the FIFO's reader got: $(cat "$work/fifo.out")"
	rm -f "$prod/ext/fifo"
fi

echo "== a file that a child (Python's subprocess, vfork) writes to as well is produced at the parent's close"
if [ -n "$py" ]; then
	"${producer[@]}" timeout 60 "$py" -c "
import subprocess, sys
f = open(sys.argv[1], 'w')
f.write('parent\n')
f.flush()
subprocess.run(['echo', 'child'], stdout=f, check=True)
f.close()
r = subprocess.run([sys.argv[2], 'stage', 'lookup', 'ext/sub.txt'], capture_output=True, text=True)
sys.exit(r.returncode and 'not produced at close: ' + r.stderr)" "$prod/ext/sub.txt" "$pdc" 2>"$work/sub.err" || {
		cat "$work/sub.err" >&2
		fail "the file python3 and its subprocess wrote"
	}
	"${consumer[@]}" PDC_TIMEOUT=30 timeout 60 cmp "$cons/ext/sub.txt" "$prod/ext/sub.txt" || fail "the consumed copy of ext/sub.txt differs"
fi

echo "== a file written under a temporary name and renamed into place (mv) is produced under its name"
"${consumer[@]}" timeout 120 cat "$cons/mv/final.txt" >"$work/mv.out" 2>"$work/mv.err" &
cpid=$!
waiting "$cpid" "cat"
mkdir -p "$prod/mv"
"${producer[@]}" timeout 60 bash -c "echo 'moved into place' > '$prod/mv/.final.tmp' && mv '$prod/mv/.final.tmp' '$prod/mv/final.txt'"
finish "$cpid" mv
[ "$(cat "$work/mv.out")" = "moved into place" ] || fail "cat printed: $(cat "$work/mv.out")"

echo "== python3's open().read(), of a file whose producer leaves it to exit to close"
if [ -n "$py" ]; then
	"${consumer[@]}" timeout 120 "$py" -c "import sys; sys.stdout.write(str(len(open(sys.argv[1], 'rb').read())))" \
		"$cons/c/exit.bin" >"$work/py.out" 2>"$work/py.err" &
	cpid=$!
	waiting "$cpid" "python3"
	"${producer[@]}" timeout 60 "$work/preload_write" "$prod/c/exit.bin" exit.bin 100000 exit
	finish "$cpid" py
	[ "$(cat "$work/py.out")" = 100000 ] || fail "python3 read $(cat "$work/py.out") bytes, want 100000"
	cmp "$prod/c/exit.bin" "$cons/c/exit.bin" || fail "the consumed copy of exit.bin differs"
else
	echo "SKIP: no python3"
fi

echo "== a C program's fopen and fread; O_WRONLY in the consumer dir and reads in the producer dir are left alone"
"${consumer[@]}" timeout 120 "$work/preload_read" "$cons/c/fread.bin" fread.bin 300000 >/dev/null 2>"$work/fread.err" &
cpid=$!
waiting "$cpid" "preload_read"
"${producer[@]}" timeout 60 "$work/preload_write" "$prod/c/fread.bin" fread.bin 300000
finish "$cpid" fread
# A file written in the consumer dir is not consumed first (that would
# wait for nobody); read back in the producer dir, nothing is produced
# (libpdc is not loaded by reads there).
"${consumer[@]}" PDC_TIMEOUT=1 timeout 60 bash -c "echo local > '$cons/local.txt'" || fail "a write in the consumer dir failed"
"${producer[@]}" timeout 60 "$work/preload_untouched" 10 "$prod/c/one.bin" >/dev/null || fail "reads in the producer dir loaded libpdc"

echo "== a forked child consumes after its parent did"
for n in parent child parent2 child2; do
	"${producer[@]}" timeout 60 "$work/preload_write" "$prod/c/$n.bin" "$n.bin" 5000
done
# pdc, logging its arguments: what runs it is seen.
printf '#!/bin/sh\necho "$*" >>"%s"\nexec "%s" "$@"\n' "$work/pdc-calls" "$pdc" >"$work/pdc-logged"
chmod +x "$work/pdc-logged"
# fork_read NAME1 NAME2 [ENV...]: preload_fork reads NAME1, forks, the child reads NAME2.
fork_read() {
	"${consumer[@]}" PDC_BIN="$work/pdc-logged" "${@:3}" timeout 120 "$work/preload_fork" "$cons/c/$1.bin" "$1.bin" "$cons/c/$2.bin" "$2.bin" 5000 \
		>"$work/fork.out" 2>"$work/fork.err" || {
		cat "$work/fork.err" >&2
		fail "preload_fork $1 $2"
	}
	grep -q "^child read " "$work/fork.out" || fail "the forked child did not read $2"
}
# libpdc.so's loader gives the child its own copy of libpdc: no subprocess.
fork_read parent child
[ ! -e "$work/pdc-calls" ] || fail "the child ran pdc although libpdc.so can serve it: $(cat "$work/pdc-calls")"
# A libpdc without the loader (the Go library alone) cannot serve a forked
# child: the child consumes through pdc stage consume, and does not hang,
# and pdc's own report stays out of the program's output.
fork_read parent2 child2 PDC_LIBPDC="$prefix/lib/libpdc_core.so"
[ "$(grep -vc -e '^child read ' -e '^parent read ' "$work/fork.out")" = 0 ] || fail "the program's output has more than its own lines: $(cat "$work/fork.out")"
grep -q "^stage consume --timeout .* --consumer-dir $cons c/child2.bin$" "$work/pdc-calls" ||
	fail "the forked child did not consume through pdc stage consume: $(cat "$work/pdc-calls" 2>/dev/null)"
[ "$(wc -l <"$work/pdc-calls")" = 1 ] || fail "pdc ran more than once (the parent must use libpdc): $(cat "$work/pdc-calls")"

echo "== a relative path (against the working directory) and openat's (against its dirfd)"
mkdir -p "$prod/rel"
"${producer[@]}" timeout 60 "$work/preload_write" "$prod/rel/r.bin" r.bin 3000
"${producer[@]}" timeout 60 "$work/preload_write" "$prod/rel/at.bin" at.bin 4000
"${consumer[@]}" timeout 60 bash -c "cd '$cons' && wc -c < rel/r.bin" >"$work/rel.out" 2>"$work/rel.err" || {
	cat "$work/rel.err" >&2
	fail "cat of a relative path in the consumer dir"
}
[ "$(cat "$work/rel.out")" = 3000 ] || fail "read $(cat "$work/rel.out") bytes of rel/r.bin, want 3000"
if [ -n "$py" ]; then
	"${consumer[@]}" timeout 60 "$py" -c "
import os, sys
d = os.open(sys.argv[1], os.O_RDONLY)
f = os.open('rel/at.bin', os.O_RDONLY, dir_fd=d)
print(len(os.read(f, 10000)))" "$cons" >"$work/at.out" 2>"$work/at.err" || {
		cat "$work/at.err" >&2
		fail "openat of a path in the consumer dir"
	}
	[ "$(cat "$work/at.out")" = 4000 ] || fail "read $(cat "$work/at.out") bytes of rel/at.bin, want 4000"
fi

echo "== a vfork child, sharing its parent's memory, leaves the parent's connection alone"
for n in v1 v2 v3; do
	"${producer[@]}" timeout 60 "$work/preload_write" "$prod/c/$n.bin" "$n.bin" 5000
done
"${consumer[@]}" PDC_BIN="$work/pdc-logged" timeout 120 "$work/preload_vfork" "$cons/c/v1.bin" v1.bin "$cons/c/v2.bin" v2.bin "$cons/c/v3.bin" v3.bin 5000 \
	>"$work/vfork.out" 2>"$work/vfork.err" || {
	cat "$work/vfork.err" >&2
	fail "preload_vfork"
}
# The child cannot use the parent's Go runtime (its threads are the
# parent's; its descriptors a copy): it consumes through pdc. The parent's
# own consumes stay in libpdc.
grep -q " --consumer-dir $cons c/v2.bin$" "$work/pdc-calls" ||
	fail "the vfork child did not consume through pdc stage consume: $(cat "$work/pdc-calls")"
! grep -q "c/v3.bin$" "$work/pdc-calls" || fail "the parent consumed through pdc after its vfork child: $(cat "$work/pdc-calls")"

echo "== two threads consume at once, before either file is produced"
"${consumer[@]}" timeout 120 "$work/preload_threads" "$cons/t/1.bin" t1.bin "$cons/t/2.bin" t2.bin 70000 >/dev/null 2>"$work/threads.err" &
cpid=$!
waiting "$cpid" "preload_threads"
mkdir -p "$prod/t"
"${producer[@]}" timeout 60 "$work/preload_write" "$prod/t/2.bin" t2.bin 70000
"${producer[@]}" timeout 60 "$work/preload_write" "$prod/t/1.bin" t1.bin 70000
finish "$cpid" threads

echo "== a consume that times out fails the open, saying so, within its timeout"
start=$(date +%s)
if "${consumer[@]}" PDC_TIMEOUT=1 timeout 60 cat "$cons/never.txt" >/dev/null 2>"$work/timeout.err"; then
	fail "cat of a file never produced succeeded"
fi
took=$(($(date +%s) - start))
[ "$took" -lt 30 ] || fail "a 1 s consume took ${took}s"
grep -qF "cat: $cons/never.txt: Connection timed out" "$work/timeout.err" || { cat "$work/timeout.err" >&2; fail "cat did not fail with ETIMEDOUT"; }
grep -qF 'libpdc: pdc_stage_consume(pdc ' "$work/timeout.err" || { cat "$work/timeout.err" >&2; fail "no line saying why the consume failed"; }
grep -qF 'gave up after' "$work/timeout.err" || { cat "$work/timeout.err" >&2; fail "the line does not say it gave up"; }
sed 's/^/  cat: /' "$work/timeout.err"

echo "== paths outside the dirs, and directories inside them, never load libpdc"
mkdir -p "$cons/adir"
# No servers there: were libpdc used, the calls would fail.
"${consumer[@]}" PDC_TMPDIR="$work/nowhere" timeout 60 "$work/preload_untouched" 20000 /etc/hostname "$cons/adir" "$cons" |
	sed 's/^/  with the interposer: /'
timeout 60 "$work/preload_untouched" 20000 /etc/hostname | sed 's/^/  without it:         /'
"${consumer[@]}" PDC_TMPDIR="$work/nowhere" timeout 60 ls "$cons/adir" >/dev/null || fail "ls of a directory in the consumer dir"

"$pdc" down --tmpdir "$PDC_TMPDIR" >/dev/null

echo "== pdc bench preload: one round of 1 KiB, each way, with its ratio"
"$pdc" bench preload --c-prefix "$prefix" --dir "$work" --sizes 1KiB --rounds 1 >"$work/bench.out" 2>&1 || {
	cat "$work/bench.out" >&2
	fail "pdc bench preload"
}
sed 's/^/  /' "$work/bench.out"
grep -qE '^1 KiB .* [0-9]+\.[0-9]{2}$' "$work/bench.out" || fail "pdc bench preload printed no 1 KiB line with a ratio"
echo "PASS: libpdc_preload.so tests"
