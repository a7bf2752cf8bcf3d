/*
 * vrmlimits.h: value ranges of the RDMA migration parameters
 *
 * These are protocol facts shared with the transport engine: the XML
 * layer, the schemas (xml/schemas/basictypes.rng) and the engine all use
 * the same numbers.
 */
#pragma once

#ifndef VRM_PROTOCOL_VERSION
# define VRM_PROTOCOL_VERSION 1
#endif

/* Protocol versions this build can speak. */
#define VRM_PROTOCOL_VERSION_MIN 1
#define VRM_PROTOCOL_VERSION_MAX 1

/* Chunk size: a power of two from 64 KiB to 64 MiB. */
#define VRM_CHUNK_SIZE_MIN (64u * 1024)
#define VRM_CHUNK_SIZE_MAX (64u * 1024 * 1024)
#define VRM_CHUNK_SIZE_DEFAULT (1024u * 1024)

/* Channels: the main channel plus multifd channels. */
#define VRM_CHANNELS_MIN 1
#define VRM_CHANNELS_MAX 64
#define VRM_CHANNELS_DEFAULT 1

/* Ring depth: chunks per channel and direction. */
#define VRM_RING_DEPTH_MIN 2
#define VRM_RING_DEPTH_MAX 1024
#define VRM_RING_DEPTH_DEFAULT 4

/* RDMA device port numbers and rdma_cm ports. */
#define VRM_DEVICE_PORT_MIN 1
#define VRM_DEVICE_PORT_MAX 255
#define VRM_CM_PORT_MIN 1
#define VRM_CM_PORT_MAX 65535

/* Token: 128 bits, 32 lowercase hexadecimal characters in XML. */
#define VRM_TOKEN_BYTES 16
#define VRM_TOKEN_HEX_LEN (VRM_TOKEN_BYTES * 2)

/* Longest device, group or domain name we accept. */
#define VRM_NAME_MAX 64
