/* The backend registry: the one list of backends.  A new backend is a
 * folder beside tcc/, cc/ and cuda/ and a line here. */
#include "backends.h"

const smelt__backend_info smelt__backend_table[] = {
    {.name = "TCC", .about = "TinyCC, in-process", .create = smelt__backend_tcc_new,
     .auto_pref = 1, .tier_up = "CC"},
    {.name = "CC", .about = "the system C compiler, optimising", .create = smelt__backend_cc_new,
     .disk_cache = true},
    {.name = "NVRTC", .about = "CUDA (NVRTC and the driver API)", .create = smelt__backend_cuda_new,
     .present = smelt__cuda_present, .auto_pref = 2, .device = true, .disk_cache = true,
     .compile_only = true},
};
const int smelt__backend_count = (int)(sizeof smelt__backend_table / sizeof smelt__backend_table[0]);
_Static_assert(sizeof smelt__backend_table / sizeof smelt__backend_table[0] <= SMELT__MAX_BACKENDS,
               "raise SMELT__MAX_BACKENDS");
