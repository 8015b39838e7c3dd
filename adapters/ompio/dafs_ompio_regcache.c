/*
 * dafs_ompio_regcache.c — memory registration for fbtl_dafs: per call, or an LRU cache
 * of registrations (the alternative the seed "MPI-IO on DAFS" found best for direct
 * transfers, with about 200 entries).
 *
 * The cache keeps up to fbtl_dafs_regcache_size page-aligned registrations. An I/O
 * whose buffer lies inside a cached registration uses it (a hit); otherwise the buffer
 * is registered and the least recently used idle entry is released (a miss, maybe an
 * eviction). Entries pinned by I/O in flight are never released.
 *
 * Invalidation: Open MPI's memory hooks (opal_mem_hooks_register_release) report every
 * munmap/free that gives memory back; entries overlapping it are marked stale and never
 * used again, and are unregistered once idle. The hook can run inside any free() or
 * munmap(), including ones made by libdafs itself while the client mutex is held, so it
 * only takes `cache_lock`, which is never held across a call into libdafs or the
 * allocator (no deadlock, no re-entry into the client).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "opal_config.h"
#include "opal/constants.h"
#include "opal/mca/base/mca_base_framework.h"
#include "opal/memoryhooks/memory.h"

/* Open MPI loads its memory hooks (the "patcher" of munmap, madvise, brk...) only for
 * components that open this framework, as its own registration caches do. */
extern mca_base_framework_t opal_memory_base_framework;

#include "dafs_ompio.h"

struct slot {
    uintptr_t base;
    size_t len;
    dafs_region_t region;
    uint64_t stamp; /* LRU clock of the last use */
    int pins;       /* I/Os in flight on it */
    bool used;
    bool stale;     /* memory released since registration: never hand out again */
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *slots;
static int nslots;
static uint64_t clock_now;
static bool hooks_registered;

static void release_hook(void *buf, size_t length, void *cbdata, bool from_alloc)
{
    (void)cbdata;
    (void)from_alloc;
    uintptr_t lo = (uintptr_t)buf, hi = lo + length;
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < nslots; i++) {
        struct slot *s = &slots[i];
        if (s->used && !s->stale && s->base < hi && lo < s->base + s->len) {
            s->stale = true;
            dafs_ompio_st.reg_invalidations++;
        }
    }
    pthread_mutex_unlock(&cache_lock);
}

void dafs_ompio_regcache_hooks_init(void)
{
    if (hooks_registered) {
        return;
    }
    (void)mca_base_framework_open(&opal_memory_base_framework, 0);
    /* Without free/munmap support a cached registration could outlive its memory:
     * cache mode then behaves like per-call registration (see dafs_ompio_reg_get). */
    int need = OPAL_MEMORY_FREE_SUPPORT | OPAL_MEMORY_MUNMAP_SUPPORT;
    if ((opal_mem_hooks_support_level() & need) == need &&
        opal_mem_hooks_register_release(release_hook, NULL) == OPAL_SUCCESS) {
        hooks_registered = true;
    }
}

static int register_alone(dafs_client_t *c, void *buf, size_t len, struct dafs_ompio_reg *out)
{
    int rc = dafs_register(c, buf, len, &out->region);
    if (rc < 0) {
        return rc;
    }
    dafs_ompio_st.registrations++;
    out->offset = 0;
    out->slot = -1;
    return 0;
}

/* Slots array on first use (outside cache_lock: calloc may run the hook). */
static void ensure_slots(void)
{
    if (slots != NULL || dafs_ompio_cfg.regcache_size <= 0) {
        return;
    }
    struct slot *s = calloc((size_t)dafs_ompio_cfg.regcache_size, sizeof *s);
    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&cache_lock);
    slots = s;
    nslots = dafs_ompio_cfg.regcache_size;
    pthread_mutex_unlock(&cache_lock);
}

/* Cache lookup (cache_lock held): a fresh slot covering [lo, hi), pinned, or -1. */
static int lookup(uintptr_t lo, uintptr_t hi)
{
    for (int i = 0; i < nslots; i++) {
        struct slot *s = &slots[i];
        if (s->used && !s->stale && s->base <= lo && hi <= s->base + s->len) {
            s->pins++;
            s->stamp = ++clock_now;
            return i;
        }
    }
    return -1;
}

/* A slot to fill (cache_lock held): a free one, else the least recently used idle one
 * (stale ones first), emptied; its old region in *old (0 if none). -1 if all pinned. */
static int victim(dafs_region_t *old, bool *had_old, bool *was_stale)
{
    int best = -1;
    *had_old = false;
    *was_stale = false;
    for (int i = 0; i < nslots; i++) {
        struct slot *s = &slots[i];
        if (!s->used) {
            return i;
        }
        if (s->pins > 0) {
            continue;
        }
        if (best < 0 || (s->stale && !slots[best].stale) ||
            (s->stale == slots[best].stale && s->stamp < slots[best].stamp)) {
            best = i;
        }
    }
    if (best >= 0) {
        *old = slots[best].region;
        *had_old = true;
        *was_stale = slots[best].stale;
        slots[best].used = false;
    }
    return best;
}

static int cache_get(dafs_client_t *c, void *buf, size_t len, struct dafs_ompio_reg *out)
{
    static size_t page;
    if (page == 0) {
        page = (size_t)sysconf(_SC_PAGESIZE);
    }
    ensure_slots();
    uintptr_t lo = (uintptr_t)buf, hi = lo + len;
    pthread_mutex_lock(&cache_lock);
    int i = nslots > 0 ? lookup(lo, hi) : -1;
    if (i >= 0) {
        dafs_ompio_st.reg_hits++;
        out->region = slots[i].region;
        out->offset = lo - slots[i].base;
        out->slot = i;
        pthread_mutex_unlock(&cache_lock);
        return 0;
    }
    dafs_ompio_st.reg_misses++;
    dafs_region_t old = 0;
    bool had_old = false, was_stale = false;
    i = nslots > 0 ? victim(&old, &had_old, &was_stale) : -1;
    if (i >= 0) {
        /* Reserve the slot while unlocked: used with a pin, no range (never matches). */
        slots[i] = (struct slot){.used = true, .pins = 1, .stale = true};
    }
    pthread_mutex_unlock(&cache_lock);
    if (had_old) {
        dafs_unregister(c, old);
        if (!was_stale) {
            dafs_ompio_st.reg_evictions++;
        }
    }
    if (i < 0) {
        dafs_ompio_st.reg_uncached++;
        return register_alone(c, buf, len, out);
    }
    /* Whole pages: later I/O on neighbouring bytes of the same buffer hits. A page
     * holding any byte of the buffer is mapped, so the widened range is too. */
    uintptr_t base = lo & ~(uintptr_t)(page - 1);
    uintptr_t end = (hi + page - 1) & ~(uintptr_t)(page - 1);
    dafs_region_t region;
    int rc = dafs_register(c, (void *)base, end - base, &region);
    pthread_mutex_lock(&cache_lock);
    if (rc < 0) {
        slots[i].used = false;
        slots[i].pins = 0;
    } else {
        dafs_ompio_st.registrations++;
        slots[i] = (struct slot){.base = base, .len = end - base, .region = region,
                                 .stamp = ++clock_now, .pins = 1, .used = true};
        out->region = region;
        out->offset = lo - base;
        out->slot = i;
    }
    pthread_mutex_unlock(&cache_lock);
    return rc;
}

int dafs_ompio_reg_get(dafs_client_t *c, void *buf, size_t len, int mode,
                       struct dafs_ompio_reg *out)
{
    if (mode == DAFS_OMPIO_MEM_CACHE && hooks_registered) {
        return cache_get(c, buf, len, out);
    }
    return register_alone(c, buf, len, out);
}

void dafs_ompio_reg_put(dafs_client_t *c, const struct dafs_ompio_reg *r)
{
    if (r->slot < 0) {
        dafs_unregister(c, r->region);
        return;
    }
    dafs_region_t drop = 0;
    bool dropping = false;
    pthread_mutex_lock(&cache_lock);
    struct slot *s = &slots[r->slot];
    if (s->pins > 0) {
        s->pins--;
    }
    if (s->pins == 0 && s->stale) {
        drop = s->region;
        dropping = true;
        s->used = false;
    }
    pthread_mutex_unlock(&cache_lock);
    if (dropping) {
        dafs_unregister(c, drop);
    }
}

void dafs_ompio_regcache_flush(dafs_client_t *c)
{
    for (int i = 0; i < nslots; i++) {
        dafs_region_t drop = 0;
        bool dropping = false;
        pthread_mutex_lock(&cache_lock);
        if (slots[i].used && slots[i].pins == 0) {
            drop = slots[i].region;
            dropping = true;
            slots[i].used = false;
        }
        pthread_mutex_unlock(&cache_lock);
        if (dropping) {
            dafs_unregister(c, drop);
        }
    }
}
