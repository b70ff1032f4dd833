/*
 * Tag search and the DART index: the public functions, each calling its
 * Go counterpart in exports_search.go.
 */
#include <stdlib.h>

#include "pdc.h"
#include "_cgo_export.h"
#include "host.h"

perr_t PDC_Client_query_kvtag(const pdc_kvtag_t *kvtag, int *n_res, uint64_t **pdc_ids)
{
    if (kvtag == NULL)
        return pdcgo_query_kvtag(NULL, 0, PDC_STRING, NULL, n_res, pdc_ids);
    return pdcgo_query_kvtag(kvtag->name, kvtag->size, kvtag->type, kvtag->value, n_res, pdc_ids);
}

perr_t pdc_query_tags(pdcid_t pdc, const char *query, int *n_res, uint64_t **pdc_ids, char **names)
{
    return pdcgo_query_tags(pdc, (char *)query, n_res, pdc_ids, names);
}

perr_t PDC_free_kvtag(pdc_kvtag_t **kvtag)
{
    if (kvtag == NULL || *kvtag == NULL)
        return SUCCEED;
    pdcgo_free((*kvtag)->name);
    pdcgo_free((*kvtag)->value);
    pdcgo_free(*kvtag);
    *kvtag = NULL;
    return SUCCEED;
}

perr_t PDC_Client_insert_obj_ref_into_dart(dart_hash_algo_t hash_algo, char *attr_key, char *attr_val,
                                           dart_object_ref_type_t ref_type, uint64_t data)
{
    return pdcgo_dart_insert((int)hash_algo, attr_key, attr_val, (int)ref_type, data);
}

perr_t PDC_Client_delete_obj_ref_from_dart(dart_hash_algo_t hash_algo, char *attr_key, char *attr_val,
                                           dart_object_ref_type_t ref_type, uint64_t data)
{
    return pdcgo_dart_delete((int)hash_algo, attr_key, attr_val, (int)ref_type, data);
}

perr_t PDC_Client_search_obj_ref_through_dart(dart_hash_algo_t hash_algo, char *query_string,
                                              dart_object_ref_type_t ref_type, int *n_res, uint64_t **out)
{
    return pdcgo_dart_search((int)hash_algo, query_string, (int)ref_type, n_res, out);
}

perr_t PDC_Client_close_all_server(void) { return pdcgo_close_all_server(); }
