/*
 * vrmlimits.h: the facts of the RDMA migration protocol that every layer
 * shares (one home): protocol versions, capability bits, value ranges and
 * defaults of the migration parameters, the token size, and the pinned
 * memory a job needs.
 *
 * The XML layer, its schemas (xml/schemas/basictypes.rng), the helper, the
 * engine and the tools all use these numbers; nothing else defines them.
 *
 * Public API summary
 * ------------------
 *   vrmPinnedBytes(channels, depth, chunk)   worst-case bytes one host
 *                                            registers for a job: both rings
 *                                            of every channel plus the
 *                                            control buffers of its queues
 *   vrmMemlockBytes(channels, depth, chunk, page)
 *                                            what the kernel counts against
 *                                            RLIMIT_MEMLOCK for those bytes:
 *                                            a region that does not start on
 *                                            a page boundary costs one page
 *                                            more (the engine's exact limit)
 *   VRM_SEND_SLOTS(depth) VRM_RECV_SLOTS(depth)
 *                                            control buffers per channel
 *   vrmRingDepthDefault(chunk)               the ring depth when none is asked
 *                                            for: deeper for small chunks
 */
#pragma once

/* Protocol versions this build can speak. */
#define VRM_PROTOCOL_VERSION 2
#define VRM_PROTOCOL_VERSION_MIN 2
#define VRM_PROTOCOL_VERSION_MAX 2

/* Capability bits (32-bit mask, docs/protocol.rst "Capabilities"). */
#define VRM_CAP_PIN_ALL 0x1u        /* rings registered up front, rkeys in the description */
#define VRM_CAP_WRITE_IMM 0x2u      /* data announced by RDMA WRITE_WITH_IMM */
#define VRM_CAP_DISKS 0x4u          /* disk channels: QEMU's NBD connections (--copy-storage-all) */
#define VRM_CAP_TCP 0x8u            /* channels opened by CHANNEL_OPEN_TCP: QEMU's TCP
                                     * connections, steered (docs/transparent.rst) */
/* what each bit means, and which are known: util/vrmcapability.c */

/* Chunk size: a power of two from 64 KiB to 64 MiB. */
#define VRM_CHUNK_SIZE_MIN (64u * 1024)
#define VRM_CHUNK_SIZE_MAX (64u * 1024 * 1024)
#define VRM_CHUNK_SIZE_DEFAULT (1024u * 1024)

/* Channels: the main channel plus multifd channels. */
#define VRM_CHANNELS_MIN 1
#define VRM_CHANNELS_MAX 64
#define VRM_CHANNELS_DEFAULT 1

/* Disk channels: one per NBD connection QEMU opens to copy a disk that is
 * not shared. On the wire they are numbered after every migration
 * channel a job can have, so the two ranges never meet whatever the
 * agreed number of migration channels. */
#define VRM_DISK_CHANNELS_MAX 16
#define VRM_DISK_CHANNEL_BASE VRM_CHANNELS_MAX
#define VRM_SLOTS_MAX (VRM_CHANNELS_MAX + VRM_DISK_CHANNELS_MAX)

/* Ring depth: chunks per channel and direction. */
#define VRM_RING_DEPTH_MIN 2
#define VRM_RING_DEPTH_MAX 1024
#define VRM_RING_DEPTH_DEFAULT 4
/* ... and at least this many bytes per ring when the depth is the
 * default: a ring of four small chunks starves the channel (one post,
 * completion and wake-up per chunk, a quarter of a socket buffer in
 * flight). bench-native, one channel of 64 KiB chunks: 0.37 GiB/s at
 * depth 4, 1.85 GiB/s at depth 16 (docs/performance.rst). */
#define VRM_RING_BYTES_DEFAULT (1024u * 1024)

/* RDMA device port numbers and rdma_cm ports. */
#define VRM_DEVICE_PORT_MIN 1
#define VRM_DEVICE_PORT_MAX 255
#define VRM_CM_PORT_MIN 1
#define VRM_CM_PORT_MAX 65535

/* Token: 128 bits, 32 lowercase hexadecimal characters in text. */
#define VRM_TOKEN_BYTES 16
#define VRM_TOKEN_HEX_LEN (VRM_TOKEN_BYTES * 2)

/* Longest device, group or domain name we accept. */
#define VRM_NAME_MAX 64

/* One control message (a SEND), header included. */
#define VRM_CONTROL_MESSAGE_MAX 4096

/* Control buffers of one channel: its send queue carries the WRITEs of a
 * ring plus control messages, its receive queue one buffer per message the
 * peer may have outstanding (docs/protocol.rst "Credits"). */
#define VRM_SEND_SLOTS(depth) (2u * (depth) + 32u)
#define VRM_RECV_SLOTS(depth) (4u * (depth) + 32u)

unsigned long long vrmPinnedBytes(unsigned int channels, unsigned int ringDepth,
                        unsigned int chunkSize);
unsigned int vrmRingDepthDefault(unsigned int chunkSize);

/* Memory regions an engine registers per channel: one per chunk of its two
 * rings (at most) and its two control buffers. */
#define VRM_REGIONS_PER_CHANNEL(depth) (2u * (depth) + 2u)

unsigned long long vrmMemlockBytes(unsigned int channels, unsigned int ringDepth,
                                   unsigned int chunkSize, unsigned long pageSize);
