/*
 * pdc.h - the C API of pdc (libpdc), compatible with PDC's (Proactive Data
 * Containers, release line 0.5): programs written for PDC compile against
 * these headers and link with -lpdc. Build flags: pkg-config --cflags --libs pdc.
 *
 * Here: connections, container and object properties, containers and
 * objects with their tags and iterators, container membership by id
 * (PDCcont_put/get/del_objids, pdc_cont.h), regions and transfers, buffer
 * maps and region locks (pdc_region.h), tag search and the DART functions
 * (pdc_client_api.h), data queries (pdc_query.h), the MPI forms
 * (pdc_mpi.h, with ENABLE_MPI, which pdc_config.h defines when libpdc was
 * installed for MPI), and file staging (pdc_stage.h). PDC's analysis and
 * transform registration (pdc_analysis.h, pdc_transform.h) are declared
 * and fail with a report naming the call: pdc does not implement them.
 * PDC's _pkg.h headers exist for programs that include them.
 *
 * Conventions of every function:
 *  - handles (pdcid_t) are numbers; 0 is never a handle;
 *  - a failing call returns FAIL (or 0 for a handle, NULL for a pointer)
 *    and prints one line to stderr: "libpdc: CALL(ARGS): REASON", naming
 *    what it acted on. It never aborts the process;
 *  - no call waits longer than $PDC_TIMEOUT (default 30 s; a number of
 *    seconds, or a duration like 90s or 2m), read by PDCinit, in total,
 *    waiting for other threads' calls on the same handle included, unless
 *    it takes a timeout of its own;
 *  - memory a call hands out was allocated with malloc and is the caller's
 *    to free; memory the caller passes in is not kept after the call;
 *  - every function is safe to call from any thread.
 *
 * Servers: `pdc server` (or the pdc_server.exe script installed with
 * libpdc) runs one server, `pdc up -n N` a local cluster of N, and
 * `pdc down` (or close_server) stops them.
 *
 * Examples: pdc_vpicio and pdc_bdcats, installed beside pdc, are PDC's
 * VPIC-IO and BD-CATS benchmarks written against these headers only
 * (sources in pdc's capi/bench; -h for their flags).
 */
#ifndef PDC_H
#define PDC_H

#include <stddef.h>

#include "pdc_config.h"
#include "pdc_public.h"
#include "pdc_generic.h"
#include "pdc_prop.h"
#include "pdc_cont.h"
#include "pdc_obj.h"
#include "pdc_region.h"
#include "pdc_query.h"
#include "pdc_client_api.h"
#include "pdc_mpi.h"
#include "pdc_stage.h"
#include "pdc_analysis.h"
#include "pdc_transform.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * PDC_timing_report prints the timers PDC keeps when built with
 * PDC_TIMING; pdc keeps none (see `pdc status` and the servers' logs), so
 * it prints nothing and returns 0.
 */
int PDC_timing_report(const char *prefix);

/*
 * PDCinit connects to the pdc servers whose server list is in $PDC_TMPDIR
 * (default ./pdc_tmp), as PDC's client does. If the list is not there yet
 * (servers still starting), it waits for it, up to $PDC_TIMEOUT, printing
 * nothing unless it gives up. It checks that rank 0 answers. pdc_name names this client
 * in the servers' logs; any string, NULL too. The cluster secret comes from
 * the file $PDC_SECRET_FILE names, else from $PDC_TMPDIR/pdc_secret if it
 * exists.
 *
 * Several connections may be open at once; each has its own handles.
 *
 * Returns the connection's handle, or 0.
 */
pdcid_t PDCinit(const char *pdc_name);

/*
 * PDCclose closes the connection and every handle opened through it
 * (properties, containers, objects, regions, transfers). Transfers
 * started and not yet waited are waited first (a read has filled its
 * buffer when PDCclose returns), and objects are closed, which flushes
 * them. If one of those fails, PDCclose reports it and returns FAIL, and
 * still closes the rest. Closing a handle that is not an open connection
 * fails.
 */
perr_t PDCclose(pdcid_t pdc);

/*
 * pdc_last_error copies the most recent report line (the one printed to
 * stderr, without "\n") into buf, cut to len-1 bytes and NUL-terminated,
 * and returns its full length; "" (0) if no call has failed. With buf
 * NULL (or len 0) it only returns the length. It is the
 * process's last report: bindings (pdc's Python package) read it right
 * after a call fails to raise an exception carrying the message. With
 * calls failing on several threads at once it is one of them.
 */
size_t pdc_last_error(char *buf, size_t len);

/*
 * pdc_report_errors (pdc's own) says whether a failing call prints its
 * report line on stderr (on, the default) or only keeps it for
 * pdc_last_error (0): for bindings that raise every failure as an
 * exception, where the line on stderr would say it twice, and say it for
 * failures the program expects and handles.
 */
void pdc_report_errors(int on);

#ifdef __cplusplus
}
#endif

#endif /* PDC_H */
