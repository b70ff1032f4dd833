/*
 * pdc_generic.h - element and value types of pdc's C API (libpdc).
 *
 * Programs include pdc.h; this header exists so that code written for PDC,
 * which includes it by name, compiles unchanged.
 */
#ifndef PDC_GENERIC_H
#define PDC_GENERIC_H

#include <stddef.h>
#include <stdint.h>
#ifndef __cplusplus
#include <stdbool.h>
#endif

/*
 * The type of an object's elements and of a tag's value. The numbers are
 * PDC's (release line 0.5): they are stored with objects and tags, so a
 * value written by one program reads back as the same type in another.
 */
typedef enum {
    PDC_UNKNOWN    = -1,
    PDC_INT        = 0,  /* int (32 bits) */
    PDC_FLOAT      = 1,  /* float */
    PDC_DOUBLE     = 2,  /* double */
    PDC_CHAR       = 3,  /* char */
    PDC_STRING     = 4,  /* text; a tag's size counts its bytes */
    PDC_BOOLEAN    = 5,  /* one byte, 0 or 1 */
    PDC_SHORT      = 6,  /* short (16 bits) */
    PDC_UINT       = 7,  /* unsigned int (32 bits) */
    PDC_INT64      = 8,  /* int64_t */
    PDC_UINT64     = 9,  /* uint64_t */
    PDC_INT16      = 10, /* int16_t */
    PDC_INT8       = 11, /* int8_t */
    PDC_UINT8      = 12, /* uint8_t */
    PDC_UINT16     = 13, /* uint16_t */
    PDC_INT32      = 14, /* int32_t */
    PDC_UINT32     = 15, /* uint32_t */
    PDC_LONG       = 16, /* long (64 bits on LP64) */
    PDC_VOID_PTR   = 17, /* raw bytes */
    PDC_SIZE_T     = 18, /* size_t (64 bits on LP64) */
    PDC_TYPE_COUNT = 19  /* the number of types, not a type */
} pdc_var_type_t;

#endif /* PDC_GENERIC_H */
