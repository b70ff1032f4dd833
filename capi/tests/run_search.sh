# Tag search and DART against three servers (sourced by run.sh, which
# defines run, fail, $work, $prefix, $pdc, $cflags and tmpdirs).

echo "== tag search and DART, against pdc up -n 3"
for t in search_dart search_close_all; do
	# shellcheck disable=SC2086 # cflags is a list of flags
	"$CC" -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -o "$work/$t" "$here/$t.c" $cflags
done
export PDC_TMPDIR="$work/tmp-search" PDC_DATA_LOC="$work/data-search"
tmpdirs+=("$PDC_TMPDIR")
"$pdc" up -n 3 >"$work/up-search.out"
run search_dart timeout 120 "$work/search_dart"
err="$work/search_dart.err"
sed 's/^/  search_dart: /' "$err"
expect 'libpdc: PDC_Client_search_obj_ref_through_dart(0, "a=b", 1): unknown dart_hash_algo_t 0'
expect 'PDC_Client_search_obj_ref_through_dart(3, "abcd", 1): query "abcd": want key=value'
expect 'PDC_Client_search_obj_ref_through_dart(3, "a=b", 1): n_res and pdc_ids must not be NULL'
expect 'PDC_Client_insert_obj_ref_into_dart(3, "a*", "1", 1, '
expect 'PDC_Client_delete_obj_ref_from_dart(3, "a", "1", 7, '
expect 'misplaced *'
expect 'PDC_Client_query_kvtag("", pdc_var_type_t 4, 0 bytes): the tag name is empty'
expect 'call PDCinit first'
reports search_dart 8

echo "== the _mpi searches, with mpiexec -n 2"
if command -v mpicc >/dev/null 2>&1 && command -v mpiexec >/dev/null 2>&1; then
	# shellcheck disable=SC2086 # cflags is a list of flags
	mpicc -std=c11 -D_DEFAULT_SOURCE -DENABLE_MPI -Wall -Wextra -Werror -o "$work/search_mpi" "$here/search_mpi.c" $cflags
	run search_mpi timeout 120 mpiexec -n 2 "$work/search_mpi"
	err="$work/search_mpi.err"
	expect 'libpdc: PDC_Client_search_obj_ref_through_dart(3, "nokv", 1): query "nokv": want key=value'
	expect "libpdc: PDC_Client_search_obj_ref_through_dart_mpi: rank 1: rank 0's search failed"
	[ "$(wc -l <"$err")" -eq 2 ] || { cat "$err" >&2; fail "search_mpi printed other lines"; }
else
	echo "SKIP: no mpicc or mpiexec (apt-get install libmpich-dev mpich): the _mpi searches are not tested"
fi

echo "== PDC_Client_close_all_server stops them"
pids=$(grep -o '"pid": *[0-9]*' "$PDC_TMPDIR/pdc_server_list" | grep -o '[0-9]*$')
[ "$(echo "$pids" | wc -w)" -eq 3 ] || fail "server list has pids: $pids"
run search_close_all timeout 60 "$work/search_close_all"
expect_in() { grep -qF -- "$2" "$1" || { cat "$1" >&2; fail "$1 lacks: $2"; }; }
expect_in "$work/search_close_all.err" 'libpdc: PDC_Client_close_all_server(): '
[ ! -e "$PDC_TMPDIR/pdc_server_list" ] || fail "the server list is still there"
for pid in $pids; do
	# Exited: gone, or a zombie until its parent (init) reaps it.
	state=$(ps -o stat= -p "$pid" 2>/dev/null || true)
	case $state in "" | Z*) ;; *) fail "server $pid still runs after PDC_Client_close_all_server ($state)" ;; esac
done
