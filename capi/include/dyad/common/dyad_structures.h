/* dyad/common/dyad_structures.h - DYAD's context type (see dyad.h). */
#ifndef DYAD_COMMON_STRUCTURES_H
#define DYAD_COMMON_STRUCTURES_H

struct dyad_ctx;
typedef struct dyad_ctx dyad_ctx_t;

#endif /* DYAD_COMMON_STRUCTURES_H */
