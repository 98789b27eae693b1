/* Dead-code elimination: keep what the requested outputs need (and every
 * graph input, so that a plan's input numbering never changes). */
#include <stdlib.h>

#include "passes.h"

int smelt__pass_dce(smelt__prog *p)
{
    bool *live = calloc((size_t)(p->n ? p->n : 1), sizeof *live);
    int *remap = malloc(sizeof(int) * (size_t)(p->n ? p->n : 1));
    if (!live || !remap) {
        free(live);
        free(remap);
        return 0;
    }
    for (int i = 0; i < p->nout; i++)
        live[p->outputs[i]] = true;
    for (int i = p->n - 1; i >= 0; i--) {
        if (p->v[i].op == SMELT_OP_INPUT)
            live[i] = true;
        if (live[i])
            for (int j = 0; j < p->v[i].nin; j++)
                live[p->v[i].in[j]] = true;
    }
    int k = 0, removed = 0;
    for (int i = 0; i < p->n; i++) {
        if (!live[i]) {
            removed++;
            remap[i] = -1;
            continue;
        }
        smelt__inst in = p->v[i];
        for (int j = 0; j < in.nin; j++)
            in.in[j] = remap[in.in[j]];
        remap[i] = k;
        p->v[k++] = in;
    }
    p->n = k;
    for (int i = 0; i < p->nout; i++)
        p->outputs[i] = remap[p->outputs[i]];
    free(live);
    free(remap);
    smelt__prog_uses(p);
    return removed;
}
