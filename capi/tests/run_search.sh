# Tag search and DART against three servers (sourced by run.sh, which
# defines run, fail, $work, $prefix, $pdc, $cflags and tmpdirs).

echo "== tag search and DART, against pdc up -n 3"
# shellcheck disable=SC2086 # cflags is a list of flags
"$CC" -std=c11 -D_DEFAULT_SOURCE -Wall -Wextra -Werror -o "$work/search_dart" "$here/search_dart.c" $cflags
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
lines=$(grep -c '^libpdc: ' "$err")
[ "$lines" -eq 8 ] && [ "$(wc -l <"$err")" -eq 8 ] || { cat "$err" >&2; fail "search_dart printed $lines lines, want 8, one per failing call"; }
"$pdc" down --tmpdir "$PDC_TMPDIR" >/dev/null
