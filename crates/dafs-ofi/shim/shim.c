/* dafs-ofi shim: the few libfabric calls the Rust provider needs, behind an opaque
 * interface. libfabric 1.17 keeps most of its API (fi_endpoint, fi_mr_reg, fi_send,
 * fi_write, fi_cq_read, ...) `static inline` in its headers, so Rust cannot link to it
 * directly; this file is compiled by the `cc` crate (see build.rs) and exports plain
 * functions. Every function returns 0 / a count on success and a negative libfabric
 * error code (-FI_E*) on failure; dofi_strerror() turns a code into text.
 *
 * One `dofi_ep` owns a whole fabric stack (info, fabric, domain, CQ, AV, endpoint) for
 * one peer: each connection is used by one thread at a time (FI_THREAD_DOMAIN), and a
 * client keeps its domain (and so its memory registrations) across reconnects by
 * reopening only the endpoint part (dofi_ep_reopen). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#define DOFI_API FI_VERSION(1, 17)
/* Completions one dofi_poll call reads at most (the caller's array is this big). */
#define DOFI_CQ_SIZE 1024

struct dofi_ep {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_cq *cq;
    struct fid_av *av;
    struct fid_ep *ep;
    fi_addr_t peer;
    int wait_fd;
    /* The provider orders a send after the writes posted before it (FI_ORDER_SAW). */
    int saw;
};

struct dofi_comp {
    uint64_t ctx;
    uint64_t flags;
    uint64_t len;
    uint64_t data;
    int32_t err; /* 0, or a positive errno-style libfabric error */
    int32_t prov_err;
};

const char *dofi_strerror(int err) { return fi_strerror(err < 0 ? -err : err); }

static void close_ep_part(struct dofi_ep *e) {
    if (e->ep) fi_close(&e->ep->fid);
    if (e->av) fi_close(&e->av->fid);
    if (e->cq) fi_close(&e->cq->fid);
    e->ep = NULL;
    e->av = NULL;
    e->cq = NULL;
    e->wait_fd = -1;
    e->peer = FI_ADDR_UNSPEC;
}

void dofi_close(struct dofi_ep *e) {
    if (!e) return;
    close_ep_part(e);
    if (e->domain) fi_close(&e->domain->fid);
    if (e->fabric) fi_close(&e->fabric->fid);
    if (e->info) fi_freeinfo(e->info);
    free(e);
}

/* libfabric 1.17's shm names an endpoint without a source address "PID:DOMAIN:EP" and
 * creates /dev/shm/NAME exclusively. A process killed with SIGKILL leaves its regions
 * behind, so a later process that gets a recycled pid failed with EBUSY ("Device or
 * resource busy"). Each shm endpoint is given a name no other endpoint has had instead:
 * pid, a clock reading and a per-process count. */
static int shm_unique_name(struct fi_info *info) {
    static unsigned count;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char name[64];
    int n = snprintf(name, sizeof name, "dafs-%d-%llx-%u", (int)getpid(),
                     (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec,
                     __atomic_add_fetch(&count, 1, __ATOMIC_RELAXED));
    if (n < 0 || (size_t)n >= sizeof name) return -FI_EINVAL;
    char *copy = strdup(name);
    if (!copy) return -FI_ENOMEM;
    free(info->src_addr);
    info->src_addr = copy;
    info->src_addrlen = (size_t)n + 1;
    return 0;
}

static int open_ep_part(struct dofi_ep *e) {
    /* A wait fd where the provider has one (tcp;ofi_rxm): the owner sleeps in poll(2)
     * on it after fi_trywait. Providers without (shm) are woken by doorbells. */
    struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_FD,
                            .size = DOFI_CQ_SIZE};
    int r = fi_cq_open(e->domain, &ca, &e->cq, NULL);
    if (r) {
        ca.wait_obj = FI_WAIT_NONE;
        r = fi_cq_open(e->domain, &ca, &e->cq, NULL);
        if (r) return r;
    } else if (fi_control(&e->cq->fid, FI_GETWAIT, &e->wait_fd) != 0) {
        e->wait_fd = -1;
    }
    struct fi_av_attr aa = {.type = FI_AV_TABLE, .count = 1};
    if ((r = fi_av_open(e->domain, &aa, &e->av, NULL))) return r;
    if (strcmp(e->info->fabric_attr->prov_name, "shm") == 0 && (r = shm_unique_name(e->info)))
        return r;
    if ((r = fi_endpoint(e->domain, e->info, &e->ep, NULL))) return r;
    if ((r = fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV))) return r;
    if ((r = fi_ep_bind(e->ep, &e->av->fid, 0))) return r;
    return fi_enable(e->ep);
}

static struct fi_info *hints(const char *prov, int saw) {
    struct fi_info *h = fi_allocinfo();
    if (!h) return NULL;
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    h->mode = 0;
    h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    uint64_t order = FI_ORDER_SAS | (saw ? FI_ORDER_SAW : 0);
    h->tx_attr->msg_order = order;
    h->rx_attr->msg_order = order;
    h->tx_attr->op_flags = saw ? FI_TRANSMIT_COMPLETE : FI_DELIVERY_COMPLETE;
    h->fabric_attr->prov_name = strdup(prov);
    if (!h->fabric_attr->prov_name) {
        fi_freeinfo(h);
        return NULL;
    }
    return h;
}

/* Open provider `prov` ("tcp;ofi_rxm", "shm", ...): a reliable datagram endpoint with
 * messages (ordered send after send) and RMA.
 *
 * Where the provider orders a send after earlier writes (FI_ORDER_SAW: tcp;ofi_rxm and
 * shm do), the server's reply may follow its placements at once and an operation
 * completes once transmitted (FI_TRANSMIT_COMPLETE): the client then takes the data
 * and the reply in one progress pass (`shm` still moves an RMA through the target's
 * progress, one process_vm_readv/writev there), instead of the server waiting for the
 * write's delivery (one more round of the client's progress) before it may reply.
 * Elsewhere, completions come only once data is visible at the target
 * (FI_DELIVERY_COMPLETE) and the server holds a reply until its placements complete. */
int dofi_open(const char *prov, struct dofi_ep **out) {
    struct dofi_ep *e = calloc(1, sizeof *e);
    if (!e) return -FI_ENOMEM;
    e->wait_fd = -1;
    e->peer = FI_ADDR_UNSPEC;
    int r = -FI_ENODATA;
    for (int saw = 1; saw >= 0 && r == -FI_ENODATA; saw--) {
        struct fi_info *h = hints(prov, saw);
        if (!h) {
            free(e);
            return -FI_ENOMEM;
        }
        r = fi_getinfo(DOFI_API, NULL, NULL, 0, h, &e->info);
        fi_freeinfo(h);
        if (r == 0) e->saw = saw && (e->info->tx_attr->msg_order & FI_ORDER_SAW);
    }
    if (r) {
        e->info = NULL;
        dofi_close(e);
        return r;
    }
    if ((r = fi_fabric(e->info->fabric_attr, &e->fabric, NULL)) ||
        (r = fi_domain(e->fabric, e->info, &e->domain, NULL)) || (r = open_ep_part(e))) {
        dofi_close(e);
        return r;
    }
    *out = e;
    return 0;
}

/* A fresh endpoint (CQ, AV, endpoint) in the same domain: registrations survive. */
int dofi_reopen(struct dofi_ep *e) {
    close_ep_part(e);
    return open_ep_part(e);
}

const char *dofi_prov_name(const struct dofi_ep *e) { return e->info->fabric_attr->prov_name; }
int dofi_virt_addr(const struct dofi_ep *e) {
    return (e->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
}
int dofi_wait_fd(const struct dofi_ep *e) { return e->wait_fd; }
int dofi_sends_after_writes(const struct dofi_ep *e) { return e->saw; }

int dofi_getname(struct dofi_ep *e, void *buf, size_t *len) {
    return fi_getname(&e->ep->fid, buf, len);
}

int dofi_set_peer(struct dofi_ep *e, const void *name) {
    int n = fi_av_insert(e->av, name, 1, &e->peer, 0, NULL);
    return n == 1 ? 0 : (n < 0 ? n : -FI_EINVAL);
}

/* 0: nothing pending, the caller may sleep on the wait fd; -FI_EAGAIN: poll again. */
int dofi_trywait(struct dofi_ep *e) {
    if (e->wait_fd < 0) return 0;
    struct fid *f = &e->cq->fid;
    return fi_trywait(e->fabric, &f, 1);
}

ssize_t dofi_send(struct dofi_ep *e, const void *buf, size_t len, uint64_t data, int with_data,
                  uint64_t ctx) {
    if (with_data)
        return fi_senddata(e->ep, buf, len, NULL, data, e->peer, (void *)(uintptr_t)ctx);
    return fi_send(e->ep, buf, len, NULL, e->peer, (void *)(uintptr_t)ctx);
}

ssize_t dofi_recv(struct dofi_ep *e, void *buf, size_t len, uint64_t ctx) {
    return fi_recv(e->ep, buf, len, NULL, e->peer, (void *)(uintptr_t)ctx);
}

ssize_t dofi_write(struct dofi_ep *e, const void *buf, size_t len, uint64_t raddr, uint64_t key,
                   uint64_t ctx) {
    return fi_write(e->ep, buf, len, NULL, e->peer, raddr, key, (void *)(uintptr_t)ctx);
}

ssize_t dofi_read(struct dofi_ep *e, void *buf, size_t len, uint64_t raddr, uint64_t key,
                  uint64_t ctx) {
    return fi_read(e->ep, buf, len, NULL, e->peer, raddr, key, (void *)(uintptr_t)ctx);
}

/* Progress and read up to `n` completions (errors included, with err set). */
int dofi_poll(struct dofi_ep *e, struct dofi_comp *out, int n) {
    struct fi_cq_data_entry ent[64];
    int got = 0;
    while (got < n) {
        size_t want = (size_t)(n - got) < 64 ? (size_t)(n - got) : 64;
        ssize_t r = fi_cq_read(e->cq, ent, want);
        if (r == -FI_EAGAIN) break;
        if (r == -FI_EAVAIL) {
            struct fi_cq_err_entry ee;
            memset(&ee, 0, sizeof ee);
            ssize_t k = fi_cq_readerr(e->cq, &ee, 0);
            if (k < 0) return (int)k;
            out[got].ctx = (uint64_t)(uintptr_t)ee.op_context;
            out[got].flags = ee.flags;
            out[got].len = ee.len;
            out[got].data = ee.data;
            out[got].err = ee.err ? ee.err : FI_EIO;
            out[got].prov_err = ee.prov_errno;
            got++;
            continue;
        }
        if (r < 0) return (int)r;
        for (ssize_t i = 0; i < r; i++) {
            out[got].ctx = (uint64_t)(uintptr_t)ent[i].op_context;
            out[got].flags = ent[i].flags;
            out[got].len = ent[i].len;
            out[got].data = ent[i].data;
            out[got].err = 0;
            out[got].prov_err = 0;
            got++;
        }
        if ((size_t)r < want) break;
    }
    return got;
}

/* Completion flag bits the Rust side tells apart. */
uint64_t dofi_flag_recv(void) { return FI_RECV; }
uint64_t dofi_flag_send(void) { return FI_SEND; }
uint64_t dofi_flag_rma(void) { return FI_RMA; }
uint64_t dofi_flag_remote_cq_data(void) { return FI_REMOTE_CQ_DATA; }
int dofi_eagain(void) { return -FI_EAGAIN; }

/* Register `len` bytes at `buf` for remote access; `remote_write` / `remote_read` say
 * which. `want_key` is used where the application picks keys (no FI_MR_PROV_KEY). */
int dofi_mr_reg(struct dofi_ep *e, void *buf, size_t len, int remote_write, int remote_read,
                uint64_t want_key, struct fid_mr **mr, uint64_t *key) {
    uint64_t acc = 0;
    if (remote_write) acc |= FI_REMOTE_WRITE;
    if (remote_read) acc |= FI_REMOTE_READ;
    int r = fi_mr_reg(e->domain, buf, len, acc, 0, want_key, 0, mr, NULL);
    if (r) return r;
    *key = fi_mr_key(*mr);
    if (*key == FI_KEY_NOTAVAIL) {
        fi_close(&(*mr)->fid);
        return -FI_ENOKEY;
    }
    return 0;
}

void dofi_mr_close(struct fid_mr *mr) { fi_close(&mr->fid); }
