/*
 * pdc_utils.h - helpers of PDC's utility library that PDC's headers bring
 * along (pdc_client_connect.h, pdc_client_server_common.h) and PDC's own
 * test programs call. They are no part of PDC's API: they are static
 * inline here, so libpdc exports no names for them, memory they hand out
 * comes from the program's malloc, and a program that includes only pdc.h
 * does not see them (as with PDC's pdc.h) and may use their names itself.
 */
#ifndef PDC_UTILS_H
#define PDC_UTILS_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

/* PDC_get_elapsed_time_double is the seconds from *tstart to *tend. */
static inline double PDC_get_elapsed_time_double(struct timeval *tstart, struct timeval *tend)
{
    return (double)(tend->tv_sec - tstart->tv_sec) + (double)(tend->tv_usec - tstart->tv_usec) / 1e6;
}

/* println prints as printf, then a newline, and flushes stdout. */
static inline void println(const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    vprintf(format, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/*
 * gen_random_strings returns count strings (malloc'd, as is the array:
 * the caller frees them) of minlen to maxlen characters, drawn with rand()
 * from the first alphabet_size of 93 characters in PDC's order: a-z, 0-9,
 * 31 punctuation characters, A-Z (26 is a-z, 36 adds the digits; fewer
 * than 26 is 26, more than 93 is 93). NULL if count is not positive, the
 * lengths are not 0 <= minlen <= maxlen, or memory runs out.
 */
static inline char **gen_random_strings(int count, int minlen, int maxlen, int alphabet_size)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz"
                                   "0123456789"
                                   "!@#$%^&*()-_=+[]{}|;:'\",.<>?/`~"
                                   "ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    const int most = (int)(sizeof alphabet - 1);
    int       n    = alphabet_size < 26 ? 26 : alphabet_size > most ? most : alphabet_size;
    if (count <= 0 || minlen < 0 || maxlen < minlen)
        return NULL;
    char **out = (char **)calloc((size_t)count, sizeof *out);
    if (out == NULL)
        return NULL;
    for (int c = 0; c < count; c++) {
        int len = minlen + rand() % (maxlen - minlen + 1);
        out[c]  = (char *)malloc((size_t)len + 1);
        if (out[c] == NULL) {
            while (c-- > 0)
                free(out[c]);
            free(out);
            return NULL;
        }
        for (int i = 0; i < len; i++)
            out[c][i] = alphabet[rand() % n];
        out[c][len] = '\0';
    }
    return out;
}

#endif /* PDC_UTILS_H */
