/*
 * vrmpingpong.c: proves the sandbox's RDMA plumbing between two hosts
 *
 * The server listens with rdma_cm and offers one registered buffer in its
 * accept private data. The client connects, exchanges SEND/RECV pings,
 * RDMA-WRITEs a pseudo-random payload into the server's buffer and then
 * SENDs its length and SHA-256. The server hashes what landed and answers
 * with the verdict. --corrupt flips one byte after the client hashed the
 * payload: the server must see the mismatch.
 *
 * Exit status: 0 verified, 1 error, 3 checksum mismatch.
 */
#include <config.h>

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <glib.h>

#define PP_EXIT_MISMATCH 3

/* Private data of the server's accept: where the client may write. */
typedef struct {
    uint64_t addr;      /* big-endian */
    uint32_t rkey;      /* big-endian */
    uint32_t length;    /* big-endian */
} __attribute__((packed)) ppBufferDesc;

/* The one message type of this test, sent both ways. */
typedef struct {
    uint32_t kind;      /* PP_MSG_* (big-endian) */
    uint32_t seq;       /* ping sequence number */
    uint64_t length;    /* payload length for PP_MSG_WRITTEN */
    uint8_t digest[32]; /* SHA-256 of the payload */
} __attribute__((packed)) ppMessage;

enum {
    PP_MSG_PING = 1,
    PP_MSG_PONG,
    PP_MSG_WRITTEN,
    PP_MSG_VERDICT_OK,
    PP_MSG_VERDICT_BAD,
};

enum {
    PP_WR_SEND = 1,
    PP_WR_RECV,
    PP_WR_WRITE,
};

typedef struct {
    struct rdma_event_channel *ec;   /* rdma_cm events */
    struct rdma_cm_id *listen_id;    /* server only */
    struct rdma_cm_id *id;           /* the connection */
    struct ibv_pd *pd;
    struct ibv_comp_channel *cc;     /* CQ notifications: waits have deadlines */
    struct ibv_cq *cq;
    struct ibv_mr *msg_mr;           /* sendMsg + recvMsg */
    struct ibv_mr *buf_mr;           /* payload buffer */
    ppMessage msgs[2];               /* [0] send, [1] recv */
    uint8_t *buf;
    size_t bufLen;
    gint64 deadline;                 /* monotonic microseconds */
} ppContext;

static char *optServer;
static char *optConnect;
static int optPort = 18515;
static int optSize = 4 * 1024 * 1024;
static int optPings = 100;
static int optTimeout = 60;
static gboolean optCorrupt;

static GOptionEntry ppOptions[] = {
    { "server", 0, 0, G_OPTION_ARG_STRING, &optServer, "Listen on ADDR", "ADDR" },
    { "connect", 0, 0, G_OPTION_ARG_STRING, &optConnect, "Connect to ADDR", "ADDR" },
    { "port", 0, 0, G_OPTION_ARG_INT, &optPort, "rdma_cm port", "PORT" },
    { "size", 0, 0, G_OPTION_ARG_INT, &optSize, "Payload bytes for the RDMA WRITE", "N" },
    { "pings", 0, 0, G_OPTION_ARG_INT, &optPings, "SEND/RECV round trips", "N" },
    { "timeout", 0, 0, G_OPTION_ARG_INT, &optTimeout, "Deadline in seconds", "SEC" },
    { "corrupt", 0, 0, G_OPTION_ARG_NONE, &optCorrupt, "Flip one payload byte after hashing it", NULL },
    { NULL, 0, 0, 0, NULL, NULL, NULL },
};

static int
ppFail(const char *what, int err)
{
    fprintf(stderr, "pingpong: %s: %s\n", what, err ? g_strerror(err) : "failed");
    return -1;
}

static int
ppRemainingMs(ppContext *ctx)
{
    gint64 left = ctx->deadline - g_get_monotonic_time();

    return left > 0 ? (int)(left / 1000) : 0;
}

/* Wait for the next rdma_cm event, within the deadline. */
static int
ppGetCmEvent(ppContext *ctx, struct rdma_cm_event **ev)
{
    struct pollfd pfd = { .fd = ctx->ec->fd, .events = POLLIN };
    int rc;

    do {
        rc = poll(&pfd, 1, ppRemainingMs(ctx));
    } while (rc < 0 && errno == EINTR);
    if (rc == 0) {
        fprintf(stderr, "pingpong: no rdma_cm event before the deadline\n");
        return -1;
    }
    if (rc < 0 || rdma_get_cm_event(ctx->ec, ev) < 0)
        return ppFail("rdma_get_cm_event", errno);
    return 0;
}

static int
ppExpectCmEvent(ppContext *ctx, enum rdma_cm_event_type want,
                struct rdma_cm_event *copy)
{
    struct rdma_cm_event *ev;

    if (ppGetCmEvent(ctx, &ev) < 0)
        return -1;
    if (ev->event != want) {
        fprintf(stderr, "pingpong: expected %s, got %s (status %d)\n",
                rdma_event_str(want), rdma_event_str(ev->event), ev->status);
        rdma_ack_cm_event(ev);
        return -1;
    }
    if (copy)
        *copy = *ev;
    rdma_ack_cm_event(ev);
    return 0;
}

static int
ppCreateResources(ppContext *ctx, struct rdma_cm_id *id)
{
    struct ibv_qp_init_attr qpa = {
        .cap = { .max_send_wr = 8, .max_recv_wr = 8,
                 .max_send_sge = 1, .max_recv_sge = 1 },
        .qp_type = IBV_QPT_RC,
    };

    if (!(ctx->pd = ibv_alloc_pd(id->verbs)))
        return ppFail("ibv_alloc_pd", errno);
    if (!(ctx->cc = ibv_create_comp_channel(id->verbs)))
        return ppFail("ibv_create_comp_channel", errno);
    if (!(ctx->cq = ibv_create_cq(id->verbs, 16, ctx, ctx->cc, 0)))
        return ppFail("ibv_create_cq", errno);
    qpa.send_cq = ctx->cq;
    qpa.recv_cq = ctx->cq;
    if (rdma_create_qp(id, ctx->pd, &qpa) < 0)
        return ppFail("rdma_create_qp", errno);
    ctx->msg_mr = ibv_reg_mr(ctx->pd, ctx->msgs, sizeof(ctx->msgs),
                             IBV_ACCESS_LOCAL_WRITE);
    if (!ctx->msg_mr)
        return ppFail("ibv_reg_mr (messages)", errno);
    ctx->buf = g_malloc0(ctx->bufLen);
    ctx->buf_mr = ibv_reg_mr(ctx->pd, ctx->buf, ctx->bufLen,
                             IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!ctx->buf_mr)
        return ppFail("ibv_reg_mr (payload)", errno);
    return 0;
}

static int
ppPostRecv(ppContext *ctx)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t)&ctx->msgs[1],
        .length = sizeof(ppMessage),
        .lkey = ctx->msg_mr->lkey,
    };
    struct ibv_recv_wr wr = { .wr_id = PP_WR_RECV, .sg_list = &sge, .num_sge = 1 };
    struct ibv_recv_wr *bad;
    int rc;

    if ((rc = ibv_post_recv(ctx->id->qp, &wr, &bad)))
        return ppFail("ibv_post_recv", rc);
    return 0;
}

static int
ppPostSend(ppContext *ctx, uint32_t kind, uint32_t seq)
{
    struct ibv_sge sge = {
        .addr = (uintptr_t)&ctx->msgs[0],
        .length = sizeof(ppMessage),
        .lkey = ctx->msg_mr->lkey,
    };
    struct ibv_send_wr wr = {
        .wr_id = PP_WR_SEND, .sg_list = &sge, .num_sge = 1,
        .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
    };
    struct ibv_send_wr *bad;
    int rc;

    ctx->msgs[0].kind = htobe32(kind);
    ctx->msgs[0].seq = htobe32(seq);
    if ((rc = ibv_post_send(ctx->id->qp, &wr, &bad)))
        return ppFail("ibv_post_send", rc);
    return 0;
}

/* Wait for a completion of the given work request kind, within the deadline. */
static int
ppWaitCompletion(ppContext *ctx, uint64_t wrId)
{
    struct ibv_wc wc;
    struct ibv_cq *evCq;
    void *evCtx;
    int n;

    for (;;) {
        if (ibv_req_notify_cq(ctx->cq, 0))
            return ppFail("ibv_req_notify_cq", errno);
        while ((n = ibv_poll_cq(ctx->cq, 1, &wc)) > 0) {
            if (wc.status != IBV_WC_SUCCESS) {
                fprintf(stderr, "pingpong: work request %" G_GUINT64_FORMAT " failed: %s\n",
                        (guint64)wc.wr_id, ibv_wc_status_str(wc.status));
                return -1;
            }
            if (wc.wr_id == wrId)
                return 0;
        }
        if (n < 0)
            return ppFail("ibv_poll_cq", errno);

        struct pollfd pfd = { .fd = ctx->cc->fd, .events = POLLIN };
        int rc = poll(&pfd, 1, ppRemainingMs(ctx));
        if (rc == 0) {
            fprintf(stderr, "pingpong: no completion before the deadline\n");
            return -1;
        }
        if (rc < 0 && errno != EINTR)
            return ppFail("poll", errno);
        if (rc > 0) {
            if (ibv_get_cq_event(ctx->cc, &evCq, &evCtx))
                return ppFail("ibv_get_cq_event", errno);
            ibv_ack_cq_events(evCq, 1);
        }
    }
}

static int
ppResolve(const char *addr, struct sockaddr_storage *ss)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_flags = AI_NUMERICHOST };
    struct addrinfo *res;
    g_autofree char *port = g_strdup_printf("%d", optPort);

    if (getaddrinfo(addr, port, &hints, &res) != 0) {
        fprintf(stderr, "pingpong: '%s' is not a numeric address\n", addr);
        return -1;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

static void
ppFillPayload(uint8_t *buf, size_t len)
{
    guint32 x = 0x9e3779b9;
    size_t i;

    for (i = 0; i < len; i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        buf[i] = x & 0xff;
    }
}

static void
ppDigest(const uint8_t *buf, size_t len, uint8_t out[32])
{
    g_autoptr(GChecksum) sum = g_checksum_new(G_CHECKSUM_SHA256);
    gsize outLen = 32;

    g_checksum_update(sum, buf, len);
    g_checksum_get_digest(sum, out, &outLen);
}

static int
ppRunServer(ppContext *ctx)
{
    struct sockaddr_storage ss;
    struct rdma_cm_event *ev;
    struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1 };
    ppBufferDesc desc;
    uint8_t digest[32];
    uint64_t len;
    int i;

    if (ppResolve(optServer, &ss) < 0)
        return -1;
    if (rdma_create_id(ctx->ec, &ctx->listen_id, ctx, RDMA_PS_TCP) < 0)
        return ppFail("rdma_create_id", errno);
    if (rdma_bind_addr(ctx->listen_id, (struct sockaddr *)&ss) < 0)
        return ppFail("rdma_bind_addr", errno);
    if (rdma_listen(ctx->listen_id, 1) < 0)
        return ppFail("rdma_listen", errno);
    printf("server: listening on %s port %d\n", optServer, optPort);
    fflush(stdout);

    if (ppGetCmEvent(ctx, &ev) < 0)
        return -1;
    if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
        fprintf(stderr, "pingpong: expected a connect request, got %s\n",
                rdma_event_str(ev->event));
        rdma_ack_cm_event(ev);
        return -1;
    }
    ctx->id = ev->id;
    rdma_ack_cm_event(ev);

    if (ppCreateResources(ctx, ctx->id) < 0 || ppPostRecv(ctx) < 0)
        return -1;
    desc.addr = htobe64((uintptr_t)ctx->buf);
    desc.rkey = htobe32(ctx->buf_mr->rkey);
    desc.length = htobe32(ctx->bufLen);
    param.private_data = &desc;
    param.private_data_len = sizeof(desc);
    if (rdma_accept(ctx->id, &param) < 0)
        return ppFail("rdma_accept", errno);
    if (ppExpectCmEvent(ctx, RDMA_CM_EVENT_ESTABLISHED, NULL) < 0)
        return -1;
    printf("server: connection established\n");

    for (i = 0; i < optPings; i++) {
        if (ppWaitCompletion(ctx, PP_WR_RECV) < 0)
            return -1;
        if (be32toh(ctx->msgs[1].kind) != PP_MSG_PING ||
            be32toh(ctx->msgs[1].seq) != (uint32_t)i) {
            fprintf(stderr, "pingpong: ping %d arrived out of order\n", i);
            return -1;
        }
        if (ppPostRecv(ctx) < 0 || ppPostSend(ctx, PP_MSG_PONG, i) < 0 ||
            ppWaitCompletion(ctx, PP_WR_SEND) < 0)
            return -1;
    }
    printf("server: %d SEND/RECV round trips\n", optPings);

    if (ppWaitCompletion(ctx, PP_WR_RECV) < 0)
        return -1;
    if (be32toh(ctx->msgs[1].kind) != PP_MSG_WRITTEN) {
        fprintf(stderr, "pingpong: expected the WRITTEN message\n");
        return -1;
    }
    len = be64toh(ctx->msgs[1].length);
    if (len > ctx->bufLen) {
        fprintf(stderr, "pingpong: peer claims %" G_GUINT64_FORMAT " bytes, buffer has %zu\n",
                (guint64)len, ctx->bufLen);
        return -1;
    }
    ppDigest(ctx->buf, len, digest);
    if (memcmp(digest, ctx->msgs[1].digest, sizeof(digest)) != 0) {
        printf("server: checksum mismatch over %" G_GUINT64_FORMAT " bytes written by RDMA WRITE\n",
               (guint64)len);
        ppPostSend(ctx, PP_MSG_VERDICT_BAD, 0);
        ppWaitCompletion(ctx, PP_WR_SEND);
        return PP_EXIT_MISMATCH;
    }
    if (ppPostSend(ctx, PP_MSG_VERDICT_OK, 0) < 0 || ppWaitCompletion(ctx, PP_WR_SEND) < 0)
        return -1;
    printf("server: RDMA WRITE of %" G_GUINT64_FORMAT " bytes verified (sha256 matches)\n",
           (guint64)len);
    return 0;
}

static int
ppConnectOnce(ppContext *ctx, struct sockaddr_storage *ss, ppBufferDesc *desc)
{
    struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
                                     .retry_count = 7, .rnr_retry_count = 7 };
    struct rdma_cm_event *ev;
    int rc = -1;

    if (rdma_create_id(ctx->ec, &ctx->id, ctx, RDMA_PS_TCP) < 0)
        return ppFail("rdma_create_id", errno);
    if (rdma_resolve_addr(ctx->id, NULL, (struct sockaddr *)ss, 2000) < 0)
        return ppFail("rdma_resolve_addr", errno);
    if (ppExpectCmEvent(ctx, RDMA_CM_EVENT_ADDR_RESOLVED, NULL) < 0)
        goto retry;
    if (rdma_resolve_route(ctx->id, 2000) < 0)
        return ppFail("rdma_resolve_route", errno);
    if (ppExpectCmEvent(ctx, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL) < 0)
        goto retry;
    if (ppCreateResources(ctx, ctx->id) < 0 || ppPostRecv(ctx) < 0)
        return -1;
    if (rdma_connect(ctx->id, &param) < 0)
        return ppFail("rdma_connect", errno);
    if (ppGetCmEvent(ctx, &ev) < 0)
        return -1;
    if (ev->event == RDMA_CM_EVENT_ESTABLISHED &&
        ev->param.conn.private_data_len >= sizeof(*desc)) {
        memcpy(desc, ev->param.conn.private_data, sizeof(*desc));
        rc = 0;
    } else {
        fprintf(stderr, "pingpong: connect: %s (status %d), retrying\n",
                rdma_event_str(ev->event), ev->status);
    }
    rdma_ack_cm_event(ev);
    if (rc == 0)
        return 0;

 retry:
    return 1;
}

static void
ppDestroy(ppContext *ctx)
{
    if (ctx->buf_mr)
        ibv_dereg_mr(ctx->buf_mr);
    if (ctx->msg_mr)
        ibv_dereg_mr(ctx->msg_mr);
    if (ctx->id && ctx->id->qp)
        rdma_destroy_qp(ctx->id);
    if (ctx->cq)
        ibv_destroy_cq(ctx->cq);
    if (ctx->cc)
        ibv_destroy_comp_channel(ctx->cc);
    if (ctx->pd)
        ibv_dealloc_pd(ctx->pd);
    if (ctx->id)
        rdma_destroy_id(ctx->id);
    if (ctx->listen_id)
        rdma_destroy_id(ctx->listen_id);
    g_clear_pointer(&ctx->buf, g_free);
    ctx->buf_mr = NULL;
    ctx->msg_mr = NULL;
    ctx->cq = NULL;
    ctx->cc = NULL;
    ctx->pd = NULL;
    ctx->id = NULL;
    ctx->listen_id = NULL;
}

static int
ppRunClient(ppContext *ctx)
{
    struct sockaddr_storage ss;
    ppBufferDesc desc;
    uint64_t raddr;
    uint32_t rkey, rlen;
    size_t len = optSize;
    int rc, i;

    if (ppResolve(optConnect, &ss) < 0)
        return -1;
    /* The server may still be booting: retry until the deadline. */
    while ((rc = ppConnectOnce(ctx, &ss, &desc)) == 1) {
        ppDestroy(ctx);
        if (ppRemainingMs(ctx) == 0) {
            fprintf(stderr, "pingpong: could not connect to %s before the deadline\n", optConnect);
            return -1;
        }
        g_usleep(G_USEC_PER_SEC / 2);
    }
    if (rc < 0)
        return -1;
    raddr = be64toh(desc.addr);
    rkey = be32toh(desc.rkey);
    rlen = be32toh(desc.length);
    printf("client: connected, server buffer %u bytes\n", rlen);

    for (i = 0; i < optPings; i++) {
        if (ppPostSend(ctx, PP_MSG_PING, i) < 0 || ppWaitCompletion(ctx, PP_WR_RECV) < 0)
            return -1;
        if (be32toh(ctx->msgs[1].kind) != PP_MSG_PONG || be32toh(ctx->msgs[1].seq) != (uint32_t)i) {
            fprintf(stderr, "pingpong: pong %d missing\n", i);
            return -1;
        }
        if (ppPostRecv(ctx) < 0)
            return -1;
    }
    printf("client: %d SEND/RECV round trips\n", optPings);

    if (len > rlen || len > ctx->bufLen) {
        fprintf(stderr, "pingpong: payload of %zu bytes does not fit\n", len);
        return -1;
    }
    ppFillPayload(ctx->buf, len);
    ppDigest(ctx->buf, len, ctx->msgs[0].digest);
    if (optCorrupt && len > 0)
        ctx->buf[len / 2] ^= 0x01;

    struct ibv_sge sge = { .addr = (uintptr_t)ctx->buf, .length = len,
                           .lkey = ctx->buf_mr->lkey };
    struct ibv_send_wr wr = {
        .wr_id = PP_WR_WRITE, .sg_list = &sge, .num_sge = 1,
        .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
        .wr.rdma = { .remote_addr = raddr, .rkey = rkey },
    };
    struct ibv_send_wr *bad;
    if ((rc = ibv_post_send(ctx->id->qp, &wr, &bad)))
        return ppFail("ibv_post_send (RDMA WRITE)", rc);
    if (ppWaitCompletion(ctx, PP_WR_WRITE) < 0)
        return -1;
    ctx->msgs[0].length = htobe64(len);
    if (ppPostSend(ctx, PP_MSG_WRITTEN, 0) < 0 || ppWaitCompletion(ctx, PP_WR_RECV) < 0)
        return -1;
    if (be32toh(ctx->msgs[1].kind) == PP_MSG_VERDICT_BAD) {
        printf("client: server reports a checksum mismatch\n");
        return PP_EXIT_MISMATCH;
    }
    if (be32toh(ctx->msgs[1].kind) != PP_MSG_VERDICT_OK) {
        fprintf(stderr, "pingpong: no verdict from the server\n");
        return -1;
    }
    printf("client: RDMA WRITE of %zu bytes verified by the server\n", len);
    rdma_disconnect(ctx->id);
    return 0;
}

int
main(int argc, char **argv)
{
    g_autoptr(GOptionContext) oc = g_option_context_new("- RDMA ping-pong and verified RDMA WRITE");
    g_autoptr(GError) err = NULL;
    ppContext ctx = { 0 };
    int rc;

    g_option_context_add_main_entries(oc, ppOptions, NULL);
    if (!g_option_context_parse(oc, &argc, &argv, &err)) {
        fprintf(stderr, "pingpong: %s\n", err->message);
        return 1;
    }
    if (!!optServer == !!optConnect || optSize < 0 || optPings < 0) {
        fprintf(stderr, "pingpong: give exactly one of --server ADDR or --connect ADDR\n");
        return 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    ctx.deadline = g_get_monotonic_time() + (gint64)optTimeout * G_USEC_PER_SEC;
    ctx.bufLen = optSize > 0 ? optSize : 1;
    if (!(ctx.ec = rdma_create_event_channel())) {
        ppFail("rdma_create_event_channel", errno);
        return 1;
    }
    rc = optServer ? ppRunServer(&ctx) : ppRunClient(&ctx);
    ppDestroy(&ctx);
    rdma_destroy_event_channel(ctx.ec);
    return rc < 0 ? 1 : rc;
}
