#!/usr/bin/env bash
# Installs libpdc into PREFIX (make capi uses build/capi):
#
#   PREFIX/lib/libpdc.so            the C library: a loader (capi/shim) in front of
#   PREFIX/lib/libpdc_core.so       the library that does the work (cgo, -buildmode=c-shared)
#   PREFIX/lib/libpdc_commons.so    a linker script standing for libpdc, for
#                                   PDC's link line (-lpdc -lpdc_commons)
#   PREFIX/lib/libpdc_preload.so    staging for unmodified programs, through
#                                   LD_PRELOAD (plain C; loads libpdc.so when
#                                   a path in a staging dir needs it)
#   PREFIX/include/*.h              pdc.h and PDC's header names
#   PREFIX/include/dyad.h, dyad/    DYAD's header names (dyad_* over staging)
#   PREFIX/lib/pkgconfig/pdc.pc     cc prog.c $(pkg-config --cflags --libs pdc)
#   PREFIX/bin/pdc                  the pdc binary (servers, CLI)
#   PREFIX/bin/pdc_server.exe       PDC's server command: runs `pdc server`
#   PREFIX/bin/close_server         PDC's stop command: runs `pdc down`
#   PREFIX/bin/pdc_vpicio           VPIC-IO and BD-CATS as libpdc programs
#   PREFIX/bin/pdc_bdcats           (capi/bench; `pdc bench vpic --c` runs them)
#
# Set PKG_CONFIG_PATH=PREFIX/lib/pkgconfig to build against it. pdc.pc
# links with an rpath to PREFIX/lib, so programs run without
# LD_LIBRARY_PATH.
set -euo pipefail
export LC_ALL=C # one collation for sort and comm below
prefix=${1:?usage: capi/install.sh PREFIX}
GO=${GO:-go}
cd "$(dirname "$0")/.."
mkdir -p "$prefix/lib/pkgconfig" "$prefix/include" "$prefix/bin"
prefix=$(cd "$prefix" && pwd)

CC=${CC:-$("$GO" env CC)}
# The library's work is done by libpdc_core.so (Go); libpdc.so, which
# programs link, is a loader in front of it that gives a forked child a
# fresh copy of the core (capi/shim/shim.c says why and how).
"$GO" build -buildmode=c-shared -o "$prefix/lib/libpdc_core.so" ./capi/libpdc
# cgo's generated header declares the internal pdcgo_ functions; the
# interface is pdc.h.
rm -f "$prefix/lib/libpdc_core.h"
# The loader's stubs are generated for x86-64; elsewhere the core is the
# library itself, which works in every process that does not fork after
# loading it.
if [ "$(uname -m)" = x86_64 ]; then
	stubs=$(mktemp --suffix .S)
	trap 'rm -f "$stubs"' EXIT
	capi/shim/gen-stubs.sh $(nm -D --defined-only "$prefix/lib/libpdc_core.so" |
		awk '$2 == "T" && $3 ~ /^(PDC|pdc_|dyad_|pdcgo_preload_)/ {print $3}' | sort) >"$stubs"
	# shellcheck disable=SC2086 # CC may carry flags, as cgo allows
	$CC -std=c11 -O2 -Wall -Wextra -Werror -fPIC -shared -Wl,-soname,libpdc.so -o "$prefix/lib/libpdc.so" \
		capi/shim/shim.c "$stubs" -ldl -lpthread
else
	echo "capi/install.sh: $(uname -m): libpdc.so is the core itself; a process that forks after loading it cannot use it in the child" >&2
	cp "$prefix/lib/libpdc_core.so" "$prefix/lib/libpdc.so"
fi
# The interposer is plain C with no Go runtime (docs/design/0025): it is
# loaded into every process of a job. Its NULL checks of arguments libc
# declares nonnull must stay.
# shellcheck disable=SC2086 # CC may carry flags, as cgo allows
$CC -std=c11 -O2 -U_FORTIFY_SOURCE -fno-delete-null-pointer-checks -Wno-nonnull-compare -fPIC -shared \
	-fvisibility=hidden -Wall -Wextra -Werror -o "$prefix/lib/libpdc_preload.so" capi/preload/pdc_preload.c -ldl -lpthread
# PDC's build and its examples' Makefile link programs with -lpdc
# -lpdc_commons; pdc has one library, and libpdc_commons.so is a linker
# script that stands for it.
cat >"$prefix/lib/libpdc_commons.so" <<'EOF'
/* PDC links programs with -lpdc -lpdc_commons; pdc's library is libpdc. */
INPUT(AS_NEEDED(-lpdc))
EOF
"$GO" build -o "$prefix/bin/pdc" ./cmd/pdc
install -m 0644 capi/include/*.h "$prefix/include/"
# DYAD's header names, for programs written against DYAD's headers.
for d in dyad/client dyad/common dyad/core; do
	mkdir -p "$prefix/include/$d"
	install -m 0644 "capi/include/$d"/*.h "$prefix/include/$d/"
done

# The prefix is found from where pdc.pc is, not written in: pip builds
# the Python package's copy (python/setup.py) in a build dir and installs
# it elsewhere, and an install may be moved.
cat >"$prefix/lib/pkgconfig/pdc.pc" <<EOF
# libpdc: pdc's C library (PDC's C API and file staging over pdc servers).
# Version is the PDC API release line it is compatible with.
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: pdc
Description: PDC's C API (Proactive Data Containers) and DYAD-style file staging over pdc servers
URL: https://github.com/pdcgo/pdc
Version: 0.5.0
Cflags: -I\${includedir}
Libs: -L\${libdir} -Wl,-rpath,\${libdir} -lpdc
EOF

cat >"$prefix/bin/pdc_server.exe" <<'EOF'
#!/bin/sh
# pdc_server.exe: PDC's server command, for scripts written for PDC. It runs
# one pdc server in the foreground, as PDC's does: start it in the background
# (&) or under a launcher (srun, mpirun, flux run), which gives its rank and
# the number of servers. The server list goes to $PDC_TMPDIR (default
# ./pdc_tmp), where PDCinit finds it. Arguments go to `pdc server` (see
# `pdc server -h`). `pdc up -n N` starts N servers on this machine in one
# command. PDC's `pdc_server.exe restart` resumes from the checkpoint of the
# last run; a pdc server always resumes from what its data dir holds, so
# that argument is taken and dropped.
here=$(dirname "$0")
if [ "${1:-}" = restart ]; then shift; fi
if [ -x "$here/pdc" ]; then exec "$here/pdc" server "$@"; fi
exec pdc server "$@"
EOF

cat >"$prefix/bin/close_server" <<'EOF'
#!/bin/sh
# close_server: PDC's command that stops the servers, for scripts written for
# PDC. It runs `pdc down`: every server of the cluster in $PDC_TMPDIR
# (default ./pdc_tmp) finishes its requests and exits, after transient
# containers are deleted; it returns once they are gone. Like PDC's, which
# retries its connects, it waits for servers still starting (up to 60 s:
# scripts run it right after `pdc_server.exe &`). PDC's MPI scripts run it
# with one rank per server (mpiexec -n N close_server): rank 0 stops the
# cluster and the other ranks return at once. Arguments go to `pdc down`
# (see `pdc down -h`).
here=$(dirname "$0")
if [ -x "$here/pdc" ]; then exec "$here/pdc" down --wait 60s --rank0-only "$@"; fi
exec pdc down --wait 60s --rank0-only "$@"
EOF
chmod 0755 "$prefix/bin/pdc_server.exe" "$prefix/bin/close_server"

# Every function the headers declare must be defined by the library: a
# program that compiles against pdc.h also links.
defined=$(nm -D --defined-only "$prefix/lib/libpdc.so" | awk '{print $3}' | sort -u)
declared=$(grep -hoE '^[a-z_ ]*[a-z_]+ \**(PDC[A-Za-z_]+|pdc_[a-z_]+)\(' "$prefix"/include/*.h |
	sed -E 's/.*[ *]([A-Za-z_]+)\($/\1/' | sort -u)
# The MPI variants are static inline in pdc_mpi.h (libpdc.so needs no MPI).
inline=$(grep -hoE '^static inline [a-z_]+ \**(PDC[A-Za-z_]+|pdc_[a-z_]+)\(' "$prefix"/include/*.h |
	sed -E 's/.*[ *]([A-Za-z_]+)\($/\1/' | sort -u)
declared=$(comm -23 <(echo "$declared") <(echo "$inline"))
missing=$(comm -23 <(echo "$declared") <(echo "$defined") | tr '\n' ' ')
if [ -n "$missing" ]; then
	echo "capi/install.sh: declared in the headers but not in libpdc.so: $missing" >&2
	exit 1
fi
# VPIC-IO and BD-CATS, built against the install as a user's program is
# (with the C compiler cgo used for libpdc.so).
for p in vpicio bdcats; do
	# shellcheck disable=SC2086 # CC may carry flags, as cgo allows
	$CC -std=c11 -O2 -Wall -Wextra -Werror -I"$prefix/include" -o "$prefix/bin/pdc_$p" "capi/bench/$p.c" \
		-L"$prefix/lib" -Wl,-rpath,"$prefix/lib" -lpdc
done
# pdc_config.h says whether programs get the MPI forms by default, as
# PDC's says whether PDC was built with MPI. Set last: pdc_vpicio and
# pdc_bdcats need no MPI, and with it every program that includes pdc.h
# needs mpi.h (mpicc).
if [ "${PDC_MPI:-0}" = 1 ]; then
	sed -i 's|^/\* #undef ENABLE_MPI \*/$|#define ENABLE_MPI 1|' "$prefix/include/pdc_config.h"
	grep -q '^#define ENABLE_MPI 1$' "$prefix/include/pdc_config.h" || { echo "capi/install.sh: could not set ENABLE_MPI" >&2; exit 1; }
fi
echo "installed libpdc in $prefix"
