/*
 * vrm-rxe-retry: the smallest verbs program that shows Soft-RoCE's
 * retransmission bug behind issue 39, and the engine's way around it
 *
 *   vrm-rxe-retry --server ADDR [--port P] [--count N] [--size BYTES] [--depth D]
 *   vrm-rxe-retry --client ADDR [--port P] [--count N] [--size BYTES] [--depth D]
 *                 [--split BYTES|mtu]
 *
 * One RC queue pair (rdma_cm). The server exposes a ring of DEPTH buffers
 * of SIZE bytes; the client writes COUNT messages into it with RDMA
 * WRITE_WITH_IMM, message k into buffer k % DEPTH with k as the immediate
 * data and a pattern of k as its bytes, at most DEPTH unanswered; the
 * server checks each arrival (the immediate in order, every byte) and
 * answers with a SEND that frees the buffer. Nothing else: no engine, no
 * sockets.
 *
 * On a lossy wire (tc netem with delay and loss) rxe of Linux 6.1 fails
 * this with "remote invalid request error" (or a wrong immediate): a retry
 * can skip every packet of a message whose last packet was acknowledged
 * while the retry re-sent it, and send an empty packet in its place under
 * the next message's first PSN, so the rest of the stream is shifted by
 * one packet (docs/reliability.rst). With --split mtu the client sends
 * each message as plain WRITEs of at most MTU bytes and the immediate on
 * the last, one packet each, which no retry can cut: that passes.
 *
 * Exit status: 0 every message arrived intact; 3 the server saw a wrong
 * immediate or a wrong byte; 1 any other failure (a failed work request,
 * a timeout of 120 s, set-up errors), always with a line saying which.
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <glib.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define DEADLINE_S 120
#define LINGER_S 5      /* several of rxe's ACK timeouts (0.54 s) and RTTs */

/* What the server tells the client in its accept (big-endian) */
typedef struct {
    guint64 addr;
    guint32 rkey;
    guint32 depth;
    guint32 size;
} __attribute__((packed)) RingInfo;

typedef struct {
    bool server;
    const char *addr;
    const char *port;
    guint32 count;
    guint32 size;
    guint32 depth;
    guint32 split;          /* --split BYTES: the most one work request carries */
    bool splitMtu;          /* --split mtu: the port's MTU, one packet each */
} Options;

typedef struct {
    struct rdma_event_channel *ec;
    struct rdma_cm_id *listen;
    struct rdma_cm_id *id;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    guint8 *ring;               /* server: DEPTH * SIZE; client: one message */
    struct ibv_mr *ringMr;
    guint32 *ctl;               /* DEPTH * 2 credit words (receive and send) */
    struct ibv_mr *ctlMr;
} Context;

static void
fill(guint8 *buf, guint32 size, guint32 k)
{
    guint32 i;

    for (i = 0; i < size; i++)
        buf[i] = (guint8)(k * 131 + i * 7 + (i >> 12));
}

static int
check(const guint8 *buf, guint32 size, guint32 k)
{
    guint32 i;

    for (i = 0; i < size; i++) {
        if (buf[i] != (guint8)(k * 131 + i * 7 + (i >> 12)))
            return (int)i;
    }
    return -1;
}

static struct rdma_cm_event *
waitEvent(Context *c, enum rdma_cm_event_type want)
{
    struct rdma_cm_event *ev = NULL;
    struct pollfd pfd = { .fd = c->ec->fd, .events = POLLIN };

    if (poll(&pfd, 1, DEADLINE_S * 1000) != 1 || rdma_get_cm_event(c->ec, &ev) < 0) {
        fprintf(stderr, "vrm-rxe-retry: no %s within %d s\n", rdma_event_str(want), DEADLINE_S);
        return NULL;
    }
    if (ev->event != want) {
        fprintf(stderr, "vrm-rxe-retry: %s instead of %s (status %d)\n",
                rdma_event_str(ev->event), rdma_event_str(want), ev->status);
        rdma_ack_cm_event(ev);
        return NULL;
    }
    return ev;
}

static int
makeQP(Context *c, struct rdma_cm_id *id, guint32 sendWr)
{
    struct ibv_qp_init_attr attr = {
        .cap = { .max_send_wr = sendWr, .max_recv_wr = 64,
                 .max_send_sge = 1, .max_recv_sge = 1 },
        .qp_type = IBV_QPT_RC,
        .sq_sig_all = 0,
    };

    c->pd = ibv_alloc_pd(id->verbs);
    c->cq = c->pd ? ibv_create_cq(id->verbs, sendWr + 128, NULL, NULL, 0) : NULL;
    if (!c->cq) {
        fprintf(stderr, "vrm-rxe-retry: cannot make a PD and CQ: %s\n", g_strerror(errno));
        return -1;
    }
    attr.send_cq = attr.recv_cq = c->cq;
    if (rdma_create_qp(id, c->pd, &attr) < 0) {
        fprintf(stderr, "vrm-rxe-retry: cannot make a QP: %s\n", g_strerror(errno));
        return -1;
    }
    return 0;
}

static int
postRecv(Context *c, guint32 i)
{
    struct ibv_sge sge = { (uintptr_t)&c->ctl[i], 4, c->ctlMr->lkey };
    struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

    return ibv_post_recv(c->id->qp, &wr, &bad);
}

/* The next completion, by the deadline; -1 with a line if it failed */
static int
nextWC(Context *c, struct ibv_wc *wc, gint64 deadline)
{
    int n;

    while ((n = ibv_poll_cq(c->cq, 1, wc)) == 0) {
        if (g_get_monotonic_time() > deadline) {
            fprintf(stderr, "vrm-rxe-retry: no completion within %d s\n", DEADLINE_S);
            return -1;
        }
        /* a busy loop would take the one emulated CPU from rxe itself */
        g_usleep(200);
    }
    if (n < 0 || wc->status != IBV_WC_SUCCESS) {
        fprintf(stderr, "vrm-rxe-retry: a work request failed: %s (wr_id %llu)\n",
                n < 0 ? "poll failed" : ibv_wc_status_str(wc->status),
                (unsigned long long)wc->wr_id);
        return -1;
    }
    return 0;
}

static int
runServer(Context *c, const Options *o)
{
    struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP }, *ai;
    struct rdma_cm_event *ev;
    struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
                                     .rnr_retry_count = 7 };
    RingInfo info;
    gint64 deadline = g_get_monotonic_time() + (gint64)DEADLINE_S * G_USEC_PER_SEC;
    guint32 k, i, credited = 0;

    if (rdma_getaddrinfo(o->addr, o->port, &hints, &ai) != 0 ||
        rdma_create_id(c->ec, &c->listen, NULL, RDMA_PS_TCP) < 0 ||
        rdma_bind_addr(c->listen, ai->ai_src_addr) < 0 || rdma_listen(c->listen, 1) < 0) {
        fprintf(stderr, "vrm-rxe-retry: cannot listen on %s:%s: %s\n", o->addr, o->port,
                g_strerror(errno));
        return 1;
    }
    rdma_freeaddrinfo(ai);
    if (!(ev = waitEvent(c, RDMA_CM_EVENT_CONNECT_REQUEST)))
        return 1;
    c->id = ev->id;
    rdma_ack_cm_event(ev);
    if (makeQP(c, c->id, 2 * o->depth + 8) < 0)
        return 1;
    c->ring = g_malloc0((gsize)o->depth * o->size);
    c->ctl = g_new0(guint32, 2 * o->depth);
    c->ringMr = ibv_reg_mr(c->pd, c->ring, (gsize)o->depth * o->size,
                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    c->ctlMr = ibv_reg_mr(c->pd, c->ctl, 8 * o->depth, IBV_ACCESS_LOCAL_WRITE);
    if (!c->ringMr || !c->ctlMr) {
        fprintf(stderr, "vrm-rxe-retry: cannot register memory: %s\n", g_strerror(errno));
        return 1;
    }
    for (i = 0; i < o->depth; i++) {
        if (postRecv(c, i) != 0) {
            fprintf(stderr, "vrm-rxe-retry: cannot post a receive\n");
            return 1;
        }
    }
    info = (RingInfo) { GUINT64_TO_BE((uintptr_t)c->ring), GUINT32_TO_BE(c->ringMr->rkey),
                        GUINT32_TO_BE(o->depth), GUINT32_TO_BE(o->size) };
    param.private_data = &info;
    param.private_data_len = sizeof(info);
    if (rdma_accept(c->id, &param) < 0 || !(ev = waitEvent(c, RDMA_CM_EVENT_ESTABLISHED))) {
        fprintf(stderr, "vrm-rxe-retry: the connection was not established\n");
        return 1;
    }
    rdma_ack_cm_event(ev);

    for (k = 0; k < o->count || credited < k;) {
        struct ibv_wc wc;
        int bad;

        if (nextWC(c, &wc, deadline) < 0)
            return 1;
        if (wc.opcode == IBV_WC_SEND) {
            /* a credit went out, acknowledged: the server stays until
             * the last one is (its queue pair goes when it exits, and a
             * credit still to be retransmitted would be lost with it) */
            credited++;
            continue;
        }
        if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM) {
            fprintf(stderr, "vrm-rxe-retry: unexpected completion opcode %d\n", wc.opcode);
            return 3;
        }
        if (ntohl(wc.imm_data) != k) {
            fprintf(stderr, "vrm-rxe-retry: message %u arrived with the immediate of message %u\n",
                    k, ntohl(wc.imm_data));
            return 3;
        }
        if ((bad = check(c->ring + (gsize)(k % o->depth) * o->size, o->size, k)) >= 0) {
            fprintf(stderr, "vrm-rxe-retry: message %u: byte %d is wrong\n", k, bad);
            return 3;
        }
        /* the buffer is free again: a receive for the next write into it,
         * and a credit that says so */
        {
            guint32 s = o->depth + (k % o->depth);
            struct ibv_sge sge = { (uintptr_t)&c->ctl[s], 4, c->ctlMr->lkey };
            struct ibv_send_wr wr = { .wr_id = G_MAXUINT32, .sg_list = &sge, .num_sge = 1,
                                      .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *badwr;

            c->ctl[s] = htonl(k);
            if (postRecv(c, (guint32)wc.wr_id) != 0 || ibv_post_send(c->id->qp, &wr, &badwr) != 0) {
                fprintf(stderr, "vrm-rxe-retry: cannot post\n");
                return 1;
            }
        }
        k++;
    }
    printf("vrm-rxe-retry server: %u messages of %u bytes arrived intact\n", o->count, o->size);
    return 0;
}

static int
runClient(Context *c, const Options *o)
{
    struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP }, *ai;
    struct rdma_cm_event *ev;
    struct rdma_conn_param param = { .responder_resources = 1, .initiator_depth = 1,
                                     .retry_count = 7, .rnr_retry_count = 7 };
    RingInfo info;
    guint32 split = o->split, pieces;
    gint64 deadline = g_get_monotonic_time() + (gint64)DEADLINE_S * G_USEC_PER_SEC;
    guint64 raddr;
    guint32 rkey, k, sent = 0, done = 0, i;
    guint8 timeout = 17;       /* the engine's ACK timeout (0.54 s) */

    if (rdma_getaddrinfo(o->addr, o->port, &hints, &ai) != 0 ||
        rdma_create_id(c->ec, &c->id, NULL, RDMA_PS_TCP) < 0 ||
        rdma_resolve_addr(c->id, NULL, ai->ai_dst_addr, 2000) < 0) {
        fprintf(stderr, "vrm-rxe-retry: cannot resolve %s:%s: %s\n", o->addr, o->port,
                g_strerror(errno));
        return 1;
    }
    rdma_freeaddrinfo(ai);
    if (!(ev = waitEvent(c, RDMA_CM_EVENT_ADDR_RESOLVED)))
        return 1;
    rdma_ack_cm_event(ev);
    rdma_set_option(c->id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout, sizeof(timeout));
    if (rdma_resolve_route(c->id, 2000) < 0 || !(ev = waitEvent(c, RDMA_CM_EVENT_ROUTE_RESOLVED)))
        return 1;
    rdma_ack_cm_event(ev);
    if (o->splitMtu) {
        struct ibv_port_attr pa;

        /* one packet per work request: the port's MTU (the path's is no
         * larger between two rxe hosts on one wire) */
        if (ibv_query_port(c->id->verbs, c->id->port_num, &pa) != 0 ||
            pa.active_mtu < IBV_MTU_256 || pa.active_mtu > IBV_MTU_4096) {
            fprintf(stderr, "vrm-rxe-retry: cannot read the port's MTU\n");
            return 1;
        }
        split = 128u << pa.active_mtu;
    }
    pieces = split ? (o->size + split - 1) / split : 1;
    if (makeQP(c, c->id, o->depth * (pieces + 1) + 8) < 0)
        return 1;
    /* one source buffer per ring slot, and the credit words */
    c->ring = g_malloc0((gsize)o->depth * o->size);
    c->ctl = g_new0(guint32, 2 * o->depth);
    c->ringMr = ibv_reg_mr(c->pd, c->ring, (gsize)o->depth * o->size, IBV_ACCESS_LOCAL_WRITE);
    c->ctlMr = ibv_reg_mr(c->pd, c->ctl, 8 * o->depth, IBV_ACCESS_LOCAL_WRITE);
    if (!c->ringMr || !c->ctlMr) {
        fprintf(stderr, "vrm-rxe-retry: cannot register memory: %s\n", g_strerror(errno));
        return 1;
    }
    for (i = 0; i < o->depth; i++)
        postRecv(c, i);
    if (rdma_connect(c->id, &param) < 0 || !(ev = waitEvent(c, RDMA_CM_EVENT_ESTABLISHED)))
        return 1;
    if (ev->param.conn.private_data_len < sizeof(info)) {
        fprintf(stderr, "vrm-rxe-retry: the server sent no ring description\n");
        return 1;
    }
    memcpy(&info, ev->param.conn.private_data, sizeof(info));
    rdma_ack_cm_event(ev);
    raddr = GUINT64_FROM_BE(info.addr);
    rkey = GUINT32_FROM_BE(info.rkey);
    if (GUINT32_FROM_BE(info.depth) != o->depth || GUINT32_FROM_BE(info.size) != o->size) {
        fprintf(stderr, "vrm-rxe-retry: the server's ring differs from ours (--depth, --size)\n");
        return 1;
    }

    while (done < o->count) {
        struct ibv_wc wc;

        /* keep the ring full: message k into slot k % depth */
        while (sent < o->count && sent - done < o->depth) {
            guint8 *buf = c->ring + (gsize)(sent % o->depth) * o->size;
            g_autofree struct ibv_send_wr *wrs = g_new0(struct ibv_send_wr, pieces);
            g_autofree struct ibv_sge *sges = g_new0(struct ibv_sge, pieces);
            struct ibv_send_wr *bad;
            guint32 off = 0;

            fill(buf, o->size, sent);
            for (i = 0; i < pieces; i++) {
                guint32 len = split ? MIN(split, o->size - off) : o->size;

                sges[i] = (struct ibv_sge) { (uintptr_t)(buf + off), len, c->ringMr->lkey };
                wrs[i] = (struct ibv_send_wr) {
                    .wr_id = sent, .sg_list = &sges[i], .num_sge = 1,
                    .opcode = i == pieces - 1 ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE,
                    .send_flags = i == pieces - 1 ? IBV_SEND_SIGNALED : 0,
                    .imm_data = htonl(sent),
                    .next = i + 1 < pieces ? &wrs[i + 1] : NULL,
                };
                wrs[i].wr.rdma.remote_addr = raddr + (guint64)(sent % o->depth) * o->size + off;
                wrs[i].wr.rdma.rkey = rkey;
                off += len;
            }
            if (ibv_post_send(c->id->qp, wrs, &bad) != 0) {
                fprintf(stderr, "vrm-rxe-retry: cannot post message %u\n", sent);
                return 1;
            }
            sent++;
        }
        if (nextWC(c, &wc, deadline) < 0)
            return 1;
        if (wc.opcode == IBV_WC_RECV) {
            k = ntohl(c->ctl[wc.wr_id]);
            if (k != done) {
                fprintf(stderr, "vrm-rxe-retry: credit for message %u while %u was due\n", k, done);
                return 3;
            }
            done++;
            postRecv(c, (guint32)wc.wr_id);
        }
    }
    printf("vrm-rxe-retry client: %u messages of %u bytes in %u work request(s) each, all answered\n",
           o->count, o->size, pieces);
    /* the server waits until its last credit is acknowledged: stay long
     * enough for it to be sent again if that acknowledgement was lost
     * (our queue pair goes when we exit) */
    g_usleep(LINGER_S * G_USEC_PER_SEC);
    return 0;
}

int
main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "server", required_argument, NULL, 's' },
        { "client", required_argument, NULL, 'c' },
        { "port", required_argument, NULL, 'p' },
        { "count", required_argument, NULL, 'n' },
        { "size", required_argument, NULL, 'z' },
        { "depth", required_argument, NULL, 'd' },
        { "split", required_argument, NULL, 'S' },
        { NULL, 0, NULL, 0 },
    };
    Options o = { .port = "18800", .count = 200, .size = 1024 * 1024, .depth = 4 };
    Context c = { 0 };
    int opt;

    while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (opt) {
        case 's': o.server = true; o.addr = optarg; break;
        case 'c': o.server = false; o.addr = optarg; break;
        case 'p': o.port = optarg; break;
        case 'n': o.count = strtoul(optarg, NULL, 10); break;
        case 'z': o.size = strtoul(optarg, NULL, 10); break;
        case 'd': o.depth = strtoul(optarg, NULL, 10); break;
        case 'S':
            if (strcmp(optarg, "mtu") == 0)
                o.splitMtu = true;
            else
                o.split = strtoul(optarg, NULL, 10);
            break;
        default:
            fprintf(stderr, "usage: see the head of vrm-rxe-retry.c\n");
            return 2;
        }
    }
    if (!o.addr || !o.count || !o.size || o.depth < 1 || o.depth > 32) {
        fprintf(stderr, "vrm-rxe-retry: --server or --client ADDR, and sane sizes\n");
        return 2;
    }
    if (!(c.ec = rdma_create_event_channel())) {
        fprintf(stderr, "vrm-rxe-retry: no rdma_cm event channel: %s\n", g_strerror(errno));
        return 1;
    }
    /* the process ends with the test: the kernel frees what it holds */
    return o.server ? runServer(&c, &o) : runClient(&c, &o);
}
