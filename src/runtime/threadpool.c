/* A persistent thread pool: workers sleep on a condition variable; a job is
 * a function over chunk indices handed out by an atomic counter, the calling
 * thread taking chunks too.  No thread is started per call. */
#include <stdlib.h>
#include <unistd.h>

#include "runtime.h"

struct smelt__pool {
    int n; /* workers, not counting the caller */
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    smelt__task_fn fn;
    void *arg;
    int64_t nchunks;
    int64_t next;   /* atomic */
    int active;     /* workers still in the current job */
    unsigned gen;   /* job generation */
    bool quit;
    char *scratch;     /* smelt__pool_scratch: slots of `stride` bytes */
    size_t stride;
};

/* the slot of the thread running a task: workers 0 .. n-1, the caller n */
static __thread int cur_slot;

/* Read once: glibc's sysconf reads /sys/devices/system/cpu/online on every
 * call, an open, read and close on every run of a plan (a third of a small
 * plan's run). */
int smelt__ncpus(void)
{
    static int cached; /* 0: not read yet */
    int n = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (n)
        return n;
    long v = sysconf(_SC_NPROCESSORS_ONLN);
    n = v > 0 ? (int)v : 1;
    __atomic_store_n(&cached, n, __ATOMIC_RELAXED);
    return n;
}

static void work(smelt__pool *p, int slot)
{
    int64_t c;
    cur_slot = slot;
    while ((c = __atomic_fetch_add(&p->next, 1, __ATOMIC_RELAXED)) < p->nchunks)
        p->fn(p->arg, c);
}

typedef struct wstart {
    smelt__pool *p;
    int slot;
} wstart;

static void *worker(void *arg)
{
    wstart *w = arg;
    smelt__pool *p = w->p;
    int slot = w->slot;
    free(w);
    unsigned seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->gen == seen)
            pthread_cond_wait(&p->wake, &p->mu);
        if (p->quit)
            break;
        seen = p->gen;
        pthread_mutex_unlock(&p->mu);
        work(p, slot);
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

smelt__pool *smelt__pool_new(int threads)
{
    smelt__pool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    int want = threads > 1 ? threads - 1 : 0;
    p->th = calloc((size_t)(want ? want : 1), sizeof *p->th);
    if (!p->th) {
        free(p);
        return NULL;
    }
    for (int i = 0; i < want; i++) {
        wstart *w = malloc(sizeof *w);
        if (!w)
            break; /* fewer workers is still correct */
        *w = (wstart){p, i};
        if (pthread_create(&p->th[i], NULL, worker, w)) {
            free(w);
            break;
        }
        p->n++;
    }
    return p;
}

void smelt__raise_flag(pthread_mutex_t *mu, pthread_cond_t *cv, bool *flag)
{
    pthread_mutex_lock(mu);
    *flag = true;
    pthread_cond_broadcast(cv);
    pthread_mutex_unlock(mu);
}

void smelt__pool_free(smelt__pool *p)
{
    if (!p)
        return;
    smelt__raise_flag(&p->mu, &p->wake, &p->quit);
    for (int i = 0; i < p->n; i++)
        pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p->th);
    free(p->scratch);
    free(p);
}

char *smelt__pool_scratch(smelt__pool *p, size_t bytes, size_t *stride)
{
    bytes = (bytes + 63) & ~(size_t)63;
    if (bytes > p->stride) {
        free(p->scratch);
        p->stride = 0;
        p->scratch = smelt__aligned_alloc(bytes * (size_t)(p->n + 1));
        if (!p->scratch)
            return NULL;
        p->stride = bytes;
    }
    *stride = p->stride;
    return p->scratch;
}

int smelt__pool_slot(void) { return cur_slot; }

void smelt__pool_run(smelt__pool *p, smelt__task_fn fn, void *arg, int64_t nchunks)
{
    if (!p || p->n == 0 || nchunks <= 1) {
        cur_slot = p ? p->n : 0;
        for (int64_t c = 0; c < nchunks; c++)
            fn(arg, c);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->nchunks = nchunks;
    p->next = 0;
    p->active = p->n;
    p->gen++;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    work(p, p->n);
    pthread_mutex_lock(&p->mu);
    while (p->active > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
