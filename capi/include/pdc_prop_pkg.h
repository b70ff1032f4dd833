/*
 * pdc_prop_pkg.h - PDC's private property records, for programs that
 * include it: struct _pdc_cont_prop is what PDCcont_prop_get_info
 * returns. PDC's object property record (struct _pdc_obj_prop) is not
 * given out by any function here; PDCobj_prop_get_info returns the public
 * struct pdc_obj_prop.
 */
#ifndef PDC_PROP_PKG_H
#define PDC_PROP_PKG_H

#include "pdc_prop.h"

struct _pdc_class; /* PDC's connection record; pdc gives none out */

struct _pdc_cont_prop {
    struct _pdc_class *pdc; /* NULL */
    pdcid_t            cont_prop_id;
    pdc_lifetime_t     cont_life;
};

#endif /* PDC_PROP_PKG_H */
