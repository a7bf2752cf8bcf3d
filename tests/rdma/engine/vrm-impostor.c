/*
 * vrm-impostor: a hostile rdma_cm listener at the source engine's address
 *
 * It stands for whoever answers there (an ARP or IP spoofer on RoCE, a bad
 * host on the fabric): it does not hold the job's token. It accepts the
 * first connect request whatever it carries, answering with accept private
 * data of the layout of protocol version 2 (48 bytes, made-up nonce and
 * proof) and of version 1 alike (the first 32 bytes: version 1, the
 * channel, no token), then listens on the queue pair for a while.
 *
 * It reports what the destination released to it, one "key value" per line:
 *   request-bytes N        private data of the connect request
 *   token-in-request yes|no   the job's token (--token) appears in it
 *   messages N             control messages (SENDs) received
 *   ring-descriptions N    of which RAM_BLOCKS (type 4)
 *   nonzero-rkeys N        memory keys in those descriptions
 * Exit 0 when it got nothing (no token, no message), 1 when it got
 * something, 2 on a usage or set-up error.
 */
#include <config.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <glib.h>

#define IMP_BUFS 32
#define IMP_BUF_LEN 4096

static char *optListen;
static int optPort;
static char *optToken;
static int optSeconds = 10;

static int
impWaitEvent(struct rdma_event_channel *ec, enum rdma_cm_event_type want,
             struct rdma_cm_event **out, int seconds)
{
    struct pollfd pfd = { .fd = ec->fd, .events = POLLIN };

    if (poll(&pfd, 1, seconds * 1000) <= 0)
        return -1;
    if (rdma_get_cm_event(ec, out) < 0)
        return -1;
    if ((*out)->event != want) {
        fprintf(stderr, "vrm-impostor: got %s while waiting for %s\n",
                rdma_event_str((*out)->event), rdma_event_str(want));
        rdma_ack_cm_event(*out);
        return -1;
    }
    return 0;
}

int
main(int argc, char **argv)
{
    GOptionEntry entries[] = {
        { "listen", 0, 0, G_OPTION_ARG_STRING, &optListen, "address to listen on", "ADDR" },
        { "port", 0, 0, G_OPTION_ARG_INT, &optPort, "rdma_cm port", "PORT" },
        { "token", 0, 0, G_OPTION_ARG_STRING, &optToken, "the job's token, to look for", "HEX32" },
        { "seconds", 0, 0, G_OPTION_ARG_INT, &optSeconds, "how long to wait for messages", "SEC" },
        { NULL },
    };
    g_autoptr(GOptionContext) octx = g_option_context_new(NULL);
    g_autoptr(GError) err = NULL;
    struct rdma_event_channel *ec = NULL;
    struct rdma_cm_id *lid = NULL, *id = NULL;
    struct rdma_cm_event *ev = NULL;
    struct rdma_addrinfo hints = { .ai_flags = RAI_PASSIVE, .ai_port_space = RDMA_PS_TCP };
    struct rdma_addrinfo *ai = NULL;
    struct ibv_qp_init_attr qattr = { 0 };
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_mr *mr;
    g_autofree guint8 *bufs = g_malloc0((size_t)IMP_BUFS * IMP_BUF_LEN);
    guint8 token[16] = { 0 };
    guint8 rep[48] = { 0 };
    struct rdma_conn_param param = { 0 };
    guint32 reqLen, channel;
    bool tokenSeen = false;
    int messages = 0, rings = 0, rkeys = 0, i;
    gint64 until;
    g_autofree char *port = NULL;

    g_option_context_add_main_entries(octx, entries, NULL);
    if (!g_option_context_parse(octx, &argc, &argv, &err) || !optListen || !optPort ||
        !optToken || strlen(optToken) != 32) {
        fprintf(stderr, "vrm-impostor: --listen ADDR --port PORT --token HEX32 [--seconds N]\n");
        return 2;
    }
    for (i = 0; i < 16; i++)
        token[i] = g_ascii_xdigit_value(optToken[2 * i]) << 4 | g_ascii_xdigit_value(optToken[2 * i + 1]);

    port = g_strdup_printf("%d", optPort);
    if (!(ec = rdma_create_event_channel()) ||
        rdma_getaddrinfo(optListen, port, &hints, &ai) != 0 ||
        rdma_create_id(ec, &lid, NULL, RDMA_PS_TCP) < 0 ||
        rdma_bind_addr(lid, ai->ai_src_addr) < 0 || rdma_listen(lid, 4) < 0) {
        fprintf(stderr, "vrm-impostor: cannot listen: %s\n", g_strerror(errno));
        return 2;
    }
    printf("listening %s %d\n", optListen, optPort);
    fflush(stdout);

    if (impWaitEvent(ec, RDMA_CM_EVENT_CONNECT_REQUEST, &ev, 60) < 0) {
        fprintf(stderr, "vrm-impostor: no connect request came\n");
        return 2;
    }
    id = ev->id;
    reqLen = ev->param.conn.private_data_len;
    for (i = 0; reqLen >= 16 && i + 16 <= (int)reqLen; i++) {
        if (memcmp((const guint8 *)ev->param.conn.private_data + i, token, 16) == 0)
            tokenSeen = true;
    }
    channel = reqLen >= 10 ? ntohs(*(const guint16 *)((const guint8 *)ev->param.conn.private_data + 8)) : 0;
    printf("request-bytes %u\ntoken-in-request %s\n", reqLen, tokenSeen ? "yes" : "no");
    fflush(stdout);

    /* an accept that looks like a source's: version 2 layout, made up */
    *(guint32 *)rep = htonl(2);
    *(guint16 *)(rep + 8) = htons(channel);
    *(guint16 *)(rep + 10) = htons(1);
    for (i = 12; i < 44; i++)
        rep[i] = g_random_int() & 0xff;
    if (reqLen >= 4 && ntohl(*(const guint32 *)ev->param.conn.private_data) == 1) {
        /* a version 1 destination: its accept layout, without a token */
        memset(rep, 0, sizeof(rep));
        *(guint32 *)rep = htonl(1);
        *(guint32 *)(rep + 4) = ((const guint32 *)ev->param.conn.private_data)[1];
        *(guint16 *)(rep + 8) = htons(channel);
        memcpy(rep + 10, (const guint8 *)ev->param.conn.private_data + 10, 2);
    }
    pd = ibv_alloc_pd(id->verbs);
    cq = pd ? ibv_create_cq(id->verbs, 2 * IMP_BUFS + 8, NULL, NULL, 0) : NULL;
    mr = pd ? ibv_reg_mr(pd, bufs, (size_t)IMP_BUFS * IMP_BUF_LEN, IBV_ACCESS_LOCAL_WRITE) : NULL;
    qattr.send_cq = qattr.recv_cq = cq;
    qattr.cap.max_send_wr = 8;
    qattr.cap.max_recv_wr = IMP_BUFS;
    qattr.cap.max_send_sge = qattr.cap.max_recv_sge = 1;
    qattr.qp_type = IBV_QPT_RC;
    if (!cq || !mr || rdma_create_qp(id, pd, &qattr) < 0) {
        fprintf(stderr, "vrm-impostor: cannot set up a queue pair: %s\n", g_strerror(errno));
        return 2;
    }
    for (i = 0; i < IMP_BUFS; i++) {
        struct ibv_sge sge = { .addr = (uintptr_t)(bufs + (size_t)i * IMP_BUF_LEN),
                               .length = IMP_BUF_LEN, .lkey = mr->lkey };
        struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

        if (ibv_post_recv(id->qp, &wr, &bad) != 0) {
            fprintf(stderr, "vrm-impostor: cannot post receives\n");
            return 2;
        }
    }
    param.private_data = rep;
    param.private_data_len = sizeof(rep);
    param.responder_resources = param.initiator_depth = 1;
    param.rnr_retry_count = 7;
    rdma_ack_cm_event(ev);
    if (rdma_accept(id, &param) < 0) {
        fprintf(stderr, "vrm-impostor: rdma_accept: %s\n", g_strerror(errno));
        return 2;
    }

    /* whatever the destination sends now, it has released to us */
    until = g_get_monotonic_time() + (gint64)optSeconds * G_USEC_PER_SEC;
    while (g_get_monotonic_time() < until) {
        struct ibv_wc wc[8];
        int n = ibv_poll_cq(cq, 8, wc), j;

        for (j = 0; j < n; j++) {
            const guint8 *m = bufs + (size_t)wc[j].wr_id * IMP_BUF_LEN;

            if (wc[j].status != IBV_WC_SUCCESS || wc[j].opcode != IBV_WC_RECV)
                continue;
            messages++;
            if (wc[j].byte_len >= 16 && ntohl(*(const guint32 *)(m + 4)) == 4) {
                guint32 repeat = ntohl(*(const guint32 *)(m + 8)), k;

                rings++;
                for (k = 0; k < repeat && 16 + (k + 1) * 24 <= wc[j].byte_len; k++) {
                    if (*(const guint32 *)(m + 16 + k * 24 + 12))
                        rkeys++;
                }
            }
        }
        if (n == 0)
            g_usleep(10000);
    }
    printf("messages %d\nring-descriptions %d\nnonzero-rkeys %d\n", messages, rings, rkeys);
    rdma_disconnect(id);
    return tokenSeen || messages ? 1 : 0;
}
