/*
 * pdc_client_api.h - tag search, the DART index and stopping the servers:
 * the public functions of PDC's pdc_client_connect.h.
 *
 * Programs include pdc.h, which includes this header. pdc_client_connect.h
 * includes it too, with the helpers PDC's version of that header brings
 * along (pdc_utils.h), which pdc.h leaves out, as PDC's does.
 */
#ifndef PDC_CLIENT_API_H
#define PDC_CLIENT_API_H

#include "pdc_public.h"

typedef enum { DHT_FULL_HASH = 1, DHT_INITIAL_HASH = 2, DART_HASH = 3 } dart_hash_algo_t;

typedef enum { REF_PRIMARY_ID = 1, REF_SECONDARY_ID = 2, REF_SERVER_ID = 3 } dart_object_ref_type_t;

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Tag search. These functions take no connection: they search through the
 * oldest open one (PDCinit first). Results: *n_res ids in *pdc_ids, sorted,
 * allocated with malloc (the caller frees them); no match succeeds with
 * *n_res 0 and *pdc_ids NULL. Any number of searches may run in a process.
 */

/*
 * PDC_Client_query_kvtag finds the objects with a tag matching kvtag: its
 * name, and its value of kvtag->size bytes read as kvtag->type. The name
 * and a text value (PDC_STRING; a trailing NUL is ignored) may begin or
 * end with *: "ab*" (prefix), "*cd" (suffix), "*bc*" (infix). A numeric
 * value (integers of 1, 2, 4 or 8 bytes, PDC_FLOAT, PDC_DOUBLE) matches
 * numeric tags equal to it. A NULL value matches any value; a size over
 * the tag value limit (64 KiB) fails before the value is read. It reads
 * the tags themselves, so the DART functions below do not change its
 * answer.
 */
perr_t PDC_Client_query_kvtag(const pdc_kvtag_t *kvtag, int *n_res, uint64_t **pdc_ids);

/*
 * pdc_query_tags (pdc's own) finds the objects with a tag matching query,
 * in the language of `pdc query`: KEY, KEY=VALUE, either side exact,
 * prefix*, *suffix or *infix*, and KEY=LO..HI for numbers ("step=10..20",
 * either end may be left out). Unlike the functions above it names its
 * connection pdc, and uses the DART index when it can answer, else every
 * metadata server's tags. Results as above; if names is not NULL, *names
 * is one malloc'd block of the *n_res objects' names, each ended by a NUL,
 * in the order of *pdc_ids (NULL when there are none).
 */
perr_t pdc_query_tags(pdcid_t pdc, const char *query, int *n_res, uint64_t **pdc_ids, char **names);

/* PDC_free_kvtag frees (*kvtag)->name, (*kvtag)->value and *kvtag, all
 * allocated with malloc, and sets *kvtag to NULL. */
perr_t PDC_free_kvtag(pdc_kvtag_t **kvtag);

/*
 * The DART index. pdc keeps one index layout (DART with suffix trees), so
 * every hash_algo and ref_type gives the same answers; unknown values fail.
 * Tags put on objects are indexed already.
 *
 * PDC_Client_insert_obj_ref_into_dart makes queries through the index find
 * the id data by attr_key and the text attr_val (idempotent).
 * PDC_Client_delete_obj_ref_from_dart removes that entry, every prefix,
 * suffix and infix entry with it (object tags stay).
 * PDC_Client_search_obj_ref_through_dart answers key=value queries, either
 * side exact, prefix*, *suffix or *infix*: "abcd=1234", "ab*=12*",
 * "*cd=*34", "*bc*=*23*". It fails if the servers keep no index.
 */
perr_t PDC_Client_insert_obj_ref_into_dart(dart_hash_algo_t hash_algo, char *attr_key, char *attr_val,
                                           dart_object_ref_type_t ref_type, uint64_t data);
perr_t PDC_Client_delete_obj_ref_from_dart(dart_hash_algo_t hash_algo, char *attr_key, char *attr_val,
                                           dart_object_ref_type_t ref_type, uint64_t data);
perr_t PDC_Client_search_obj_ref_through_dart(dart_hash_algo_t hash_algo, char *query_string,
                                              dart_object_ref_type_t ref_type, int *n_res, uint64_t **out);

/*
 * PDC_Client_close_all_server stops the servers of the cluster in
 * $PDC_TMPDIR (default ./pdc_tmp), as `pdc down` and close_server do:
 * transient containers are deleted, every server stops, the call returns
 * once the servers on this machine have exited, and the server list is
 * removed. It needs no PDCinit (it connects on its own). Handles opened
 * before may still be closed; calls that need a server fail afterwards.
 * One process of a job calls it, once. Servers already gone are not an
 * error, though transient containers are then left as they are (the
 * listing needs every server); no server list is. It prints nothing unless
 * it fails.
 */
perr_t PDC_Client_close_all_server(void);

#ifdef __cplusplus
}
#endif

#endif /* PDC_CLIENT_API_H */
